"""The grader's reading of an answer, in a lab's own check cells: a flagged answer is flagged before it is handed in.

Every lab's first cell imports this module. It registers :func:`synclab.lab.grading.flags_in_this_kernel` with the
checks (:data:`synclab.checks.ANSWER_REVIEWERS`): each check cell then also reads the exercise's answer as the kernel
last ran it, as the grader will, and its report names what the grader would flag (and says it would score 0). The
checks still run, so the report shows what the answer gets right. ``python -m synclab check`` and nbgrader's
Validate read answers the same way. Taught nowhere: the labs' introductions say what an answer may import and do.
"""

from __future__ import annotations

from synclab.checks import ANSWER_REVIEWERS
from synclab.lab.grading import flags_in_this_kernel

if flags_in_this_kernel not in ANSWER_REVIEWERS:
    ANSWER_REVIEWERS.append(flags_in_this_kernel)
