"""Chapter 5 — list-based caches: workloads, checks and profiling helpers.

* 5.1 ``PlaceholderRange`` (``engine/mm_inputs.py``): cache the cumsum of the
  ``is_embed`` mask as a Python ``list[int]`` (PR #40143), and answer
  ``get_num_embeds`` / ``get_embeds_indices_in_range`` from it, with the two edge
  cases its review caught (an empty mask, ``end_idx == 0``);
* 5.2 ``Scheduler._try_schedule_encoder_inputs`` (``engine/scheduler.py``): the
  per-request loop over multimodal items that asks those questions every step.

The per-query cost is checked twice: as a count of torch calls (the same on any
machine) and as a time ratio against the tensor cache measured in one run, with
a bound far below what any machine shows (see ``QUERY_RATIO_BOUND``).

The package's rooms, as in every chapter: :mod:`.workloads` (what the chapter runs),
:mod:`.checks` (the exercises' checks) and :mod:`.profiling` (the measurements). This module
says what the notebook imports.
"""

from synclab.list_caches.workloads import (RangeClass, SchedulerClass, framed, image_mask)
from synclab.list_caches.checks import (CHECKS_5_1, CHECKS_5_2, FIXED_QUERIES, FIXED_SCHEDULES, FRAMED, FeatureSpec,
                                        WORKED_CASES, worked_case_figure, worked_cases_markdown,
                                        IMG, QUERY_RATIO_BOUND, build_mix, check_encoder_scheduler,
                                        check_placeholder_range, make_request, query_ratio, query_workload,
                                        random_features, random_mix, run_mix)
from synclab.list_caches.profiling import (GRID, IMAGE_TOKENS, PR_FIGURES, QUESTIONS, busy_fraction, calls_per_step,
                                           decode_step, disagreeing_forwards, gpu_loop, gpu_loops, op_breakdown,
                                           per_call_costs, scheduler_to_profile, step_sweep)

__all__ = ['WORKED_CASES', 'worked_case_figure', 'worked_cases_markdown', 'CHECKS_5_1', 'CHECKS_5_2', 'FIXED_QUERIES', 'FIXED_SCHEDULES', 'FRAMED', 'FeatureSpec', 'GRID',
           'IMAGE_TOKENS', 'IMG', 'PR_FIGURES', 'QUERY_RATIO_BOUND', 'QUESTIONS', 'RangeClass', 'SchedulerClass',
           'build_mix', 'busy_fraction', 'calls_per_step', 'check_encoder_scheduler', 'check_placeholder_range',
           'decode_step', 'disagreeing_forwards', 'framed', 'gpu_loop', 'gpu_loops', 'image_mask', 'make_request',
           'op_breakdown',
           'per_call_costs', 'query_ratio', 'query_workload', 'random_features', 'random_mix', 'run_mix',
           'scheduler_to_profile', 'step_sweep']
