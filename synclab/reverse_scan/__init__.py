"""Chapter 4 — reverse placeholder scans: workloads, checks and profiling helpers.

* 4.1 ``InputBatch.update_async_output_token_ids`` (``engine/input_batch.py``):
  replace the trailing ``-1`` placeholders with last step's sampled ids, finding
  them from the end of the list (PR #42938), not with ``list.index(-1)``;
* 4.2 the async decode loop's cost model: at which output length does the host's
  per-step bookkeeping outgrow the device's step?

The complexity check counts list elements touched (:class:`CountingList`), not
time: the PR's own timing test was dropped in review as flaky, and a count is the
same on every machine.

The package's rooms, as in every chapter: :mod:`.workloads` (what the chapter runs),
:mod:`.checks` (the exercises' checks) and :mod:`.profiling` (the measurements). This module
says what the notebook imports.
"""

from synclab.reverse_scan.workloads import (BatchClass, ReadyEvent, build_step, random_step, speculative_example)
from synclab.reverse_scan.checks import (CHECKS_4_1, CHECKS_4_2, FIXED_CASES, NOISY_FLAT_US, WORK_RATIO_BOUND,
                                         check_bottleneck_model, check_update_async_output_token_ids,
                                         elements_touched, touched_by_operation)
from synclab.reverse_scan.profiling import (OUTPUT_LENGTHS, PROFILE_REQS, PR_TOKENS_PER_S, PR_TPOT_MS, cost_sweep,
                                            decode_step, gpu_loop, gpu_loop_sweep, loop_model)

__all__ = ['BatchClass', 'CHECKS_4_1', 'CHECKS_4_2', 'FIXED_CASES', 'NOISY_FLAT_US', 'OUTPUT_LENGTHS', 'PROFILE_REQS',
           'PR_TOKENS_PER_S', 'PR_TPOT_MS', 'ReadyEvent', 'WORK_RATIO_BOUND', 'build_step',
           'check_bottleneck_model', 'check_update_async_output_token_ids', 'cost_sweep', 'decode_step',
           'elements_touched', 'gpu_loop', 'gpu_loop_sweep', 'loop_model', 'random_step', 'speculative_example', 'touched_by_operation']
