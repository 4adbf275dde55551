"""Chapter 0 (the primer): a small decode step, its syncs, and the checks for Exercise 0.1 / 0.2.

The workload is the bookkeeping an LLM engine does after every forward pass:
pick each request's next token (greedy), append it to the request's output
list, and decide which requests are finished (end-of-sequence token, or the
length limit). :func:`decode_step_baseline` does it the obvious way, one request
at a time, reading values back from the device as it goes: about two syncs per
request. The reader's :func:`decode_step` (Exercise 0.1) must return the same
thing with at most one sync per step, whatever the batch size.

The package's rooms, as in every chapter: :mod:`.workloads` (what the chapter runs),
:mod:`.checks` (the exercises' checks) and :mod:`.profiling` (the measurements). This module
says what the notebook imports.
"""

from synclab.primer.workloads import DecodeBatch, StepOutput, copy_batch, decode_step_baseline, make_batch
from synclab.primer.checks import CHECKS_0_1, DecodeStep, SNIPPETS, check_decode_step, check_predictions
from synclab.primer.profiling import (BATCH_SIZES, PROFILE_VOCAB, profile_steps, sync_counts, timing_sweep)

__all__ = ['BATCH_SIZES', 'CHECKS_0_1', 'DecodeBatch', 'DecodeStep', 'PROFILE_VOCAB', 'SNIPPETS', 'StepOutput',
           'check_decode_step', 'check_predictions', 'copy_batch', 'decode_step_baseline',
           'make_batch', 'profile_steps', 'sync_counts', 'timing_sweep']
