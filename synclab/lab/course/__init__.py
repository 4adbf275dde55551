"""Each chapter's exercises and hints, one module per chapter, named by its slug (``synclab.capstone`` ->
:mod:`.capstone`): the part of a chapter's registry entry (:mod:`synclab.lab.chapters`) that is long to write.

:mod:`synclab.lab.exercises` and :mod:`synclab.lab.hints` gather them in the registry's order; ``python -m synclab
new-chapter`` writes a new chapter's module from ``templates/course.py``.
"""
