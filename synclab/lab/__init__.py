"""The lab's machinery: labs generated from solutions, notebooks run and checked, classes graded.

* :mod:`.cli` — ``python -m synclab``: check, labs, measure, bench, autograde-times;
* :mod:`.chapters` — the chapters by name, and the one place that imports them all;
* :mod:`.labgen` — labs generated from the solution notebooks;
* :mod:`.notebook_runner` — a notebook run in a fresh kernel, within time limits that hold;
* :mod:`.notebook_code` — a function loaded from a notebook (chapter 6 loads the chapters' fixes);
* :mod:`.nbgrader_source`, :mod:`.nbgrader_run`, :mod:`.grading` — a class with nbgrader;
* :mod:`.citations` — the pull requests and issues the book cites (the appendix);
* :mod:`.answer_keys` — the references the checks compare against, kept from the reader's code.

Nothing in a chapter or below imports this package, except :mod:`.notebook_code`
(chapter 6), :mod:`.citations` (the book's appendix) and :mod:`.answer_keys` (every checks room,
and :mod:`synclab.checks`), which import no chapter.
"""
