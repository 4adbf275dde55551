"""Chapter N (<pattern>): <the vLLM component>, what the reader writes, and what the checks ask.

Copy this folder to ``synclab/<chapter_name>/`` (see CONTRIBUTING, "Adding a chapter"). This module
says what the notebook imports; the rooms below hold the code. Every chapter has the same rooms
(``tests/test_layout.py`` checks it).
"""

from synclab.CHAPTER.checks import check_example
from synclab.CHAPTER.profiling import sync_counts
from synclab.CHAPTER.workloads import make_inputs

__all__ = ["check_example", "make_inputs", "sync_counts"]
