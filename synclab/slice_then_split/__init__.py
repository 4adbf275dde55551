"""Chapter 1 (slice-then-split): the pooling workloads, the checks of Exercises 1.1 / 1.2, the profiling helpers.

The reader writes vLLM's ``AllPool`` (token-wise ALL pooling): for every request of
the batch, the hidden states of its scheduled tokens, accumulated across steps
under chunked prefill. Exercise 1.1 is the method as vLLM PR #41163 left it: one
slice of the whole sub-group (2 device reads) and one ``split`` by host-side
sizes. Exercise 1.2 (stretch) is later vLLM: the caller slices, the method splits
by host sizes alone, 0 device reads.

The clone rule of chunked prefill, which is not the chapter's pattern, is scaffolding the
lab hands the reader (:func:`.workloads.kept_chunk`).

The workload is a small engine loop (:class:`PoolingRun`): requests with prompts
of known hidden states, a scheduler that cuts them into chunks under a token
budget, and a persistent hidden-states buffer that every step overwrites, as a
real runner's output buffer is.

The package's rooms, as in every chapter: :mod:`.workloads` (what the chapter runs),
:mod:`.checks` (the exercises' checks) and :mod:`.profiling` (the measurements). This module
says what the notebook imports.
"""

from synclab.slice_then_split.workloads import (AllPoolClass, HOST_WORK_RATIO, POISON, PR_GROUP_OFFSET, PR_GROUP_SIZE,
                                                PR_HIDDEN, PR_NUM_REQS, PR_TOKENS, PoolingRequest, PoolingRun,
                                                PoolingStep, SEQ_TASK, TOKEN_TASKS, benchmark_dtype, build_metadata,
                                                describe_step, handed_to, kept_chunk, make_dispatcher, make_requests,
                                                pr_benchmark_batch, random_requests)
from synclab.slice_then_split.checks import (CHECKS_1_1, CHECKS_1_2, check_all_pool, check_all_pool_no_sync,
                                             host_calls_per_call, run_workload)
from synclab.slice_then_split.profiling import (GROUP_SIZES, IteratesDeviceIndices, PR_MEDIAN_AFTER_US,
                                                PR_MEDIAN_BEFORE_US, compare_with_pr, profile_calls, speedup_figure,
                                                sync_counts, timing_sweep, torch_call_counts, counts_table)

__all__ = ['AllPoolClass', 'CHECKS_1_1', 'CHECKS_1_2', 'GROUP_SIZES', 'HOST_WORK_RATIO', 'IteratesDeviceIndices',
           'POISON', 'PR_GROUP_OFFSET', 'PR_GROUP_SIZE', 'PR_HIDDEN', 'PR_MEDIAN_AFTER_US', 'PR_MEDIAN_BEFORE_US',
           'PR_NUM_REQS', 'PR_TOKENS', 'PoolingRequest', 'PoolingRun', 'PoolingStep', 'SEQ_TASK', 'TOKEN_TASKS',
           'benchmark_dtype', 'build_metadata', 'check_all_pool', 'check_all_pool_no_sync', 'compare_with_pr',
           'describe_step', 'handed_to', 'host_calls_per_call', 'kept_chunk', 'make_dispatcher', 'make_requests',
           'pr_benchmark_batch', 'profile_calls', 'random_requests', 'run_workload', 'speedup_figure', 'sync_counts',
           'timing_sweep', 'torch_call_counts', 'counts_table']
