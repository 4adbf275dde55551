"""Chapter {{n}} ({{title}}): <the vLLM component>, what the reader writes, and what the checks ask.

Written by ``python -m synclab new-chapter {{slug}}`` from ``templates/chapter/`` (CONTRIBUTING, "Adding a
chapter"): replace its example exercise, {{n}}.1 (a sum left on the device), with the chapter's own. This module says
what the notebook imports; its rooms hold the code: :mod:`.workloads` (what the chapter runs), :mod:`.checks` (the
exercises' checks) and :mod:`.profiling` (the measurements). Every chapter has the same rooms
(``tests/test_layout.py`` checks them).
"""

from synclab.{{slug}}.checks import check_sum_on_device
from synclab.{{slug}}.profiling import SIZES, sync_counts
from synclab.{{slug}}.workloads import make_inputs, sum_read_back

__all__ = ["SIZES", "check_sum_on_device", "make_inputs", "sum_read_back", "sync_counts"]
