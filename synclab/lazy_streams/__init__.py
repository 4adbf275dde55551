"""Chapter 2 (lazy streams): the checks of Exercises 2.1 / 2.2 and the helpers the chapter's profile calls.

The reader writes the output path of vLLM's runner after PR #39113: a side stream
created on first use, ``_pool`` with a CPU path (copy, no stream) and a CUDA path
(copy on the side stream, return at once), and ``AsyncPoolingOutput.get_output()``
(wait on the copy's event, drop the device tensors). ``AsyncPoolingOutput`` is the
lab's name for V1's ``AsyncGPUPoolingModelRunnerOutput`` (since #31584; Model Runner
V2's own class, since #35120, is ``AsyncPoolingOutput``). Its event is blocking, as
in vLLM since #47081 (``torch.cuda.Event(blocking=True)``; at #39113 a plain ``torch.Event()``).
Exercise 2.2 diagnoses broken versions of it.

The CUDA path is checked on every machine under :func:`synclab.sim.cuda.simulated_cuda`
with tensors on the simulated device: its log shows the order of stream operations,
a copy read too early shows garbage, and every wait is counted.

The package's rooms, as in every chapter: :mod:`.workloads` (what the chapter runs),
:mod:`.checks` (the exercises' checks) and :mod:`.profiling` (the measurements); and one of its own,
:mod:`.spot_the_bug` (Exercise 2.2's broken runners). This module says what the notebook imports.
"""

from synclab.lazy_streams.workloads import (RunnerClass, cpu_platform, resolve, watch_pooler_outputs)
from synclab.lazy_streams.spot_the_bug import (BUG_LABELS, SPOT_THE_BUG, RunnerA, RunnerB, RunnerC, RunnerD, RunnerE,
                                              RunnerF)
from synclab.lazy_streams.checks import CHECKS_2_1, check_diagnosis, check_runner, evidence_text, inspect_runner
from synclab.lazy_streams.profiling import (BATCH_SIZES, LOOP_STEPS, PR_THROUGHPUT_GAIN, host_blocked, host_blocked_note, loop_sweep,
                                            model_run, opening_model_figure, output_copy_model, profile_loop, profile_model, step_loop,
                                            where_the_host_waits)

__all__ = ['BATCH_SIZES', 'BUG_LABELS', 'CHECKS_2_1', 'LOOP_STEPS', 'PR_THROUGHPUT_GAIN',
           'RunnerA', 'RunnerB', 'RunnerC', 'RunnerClass', 'RunnerD', 'RunnerE', 'RunnerF', 'SPOT_THE_BUG', 'check_diagnosis',
           'check_runner', 'cpu_platform', 'evidence_text', 'host_blocked', 'host_blocked_note', 'inspect_runner', 'loop_sweep', 'model_run', 'opening_model_figure', 'output_copy_model',
           'profile_loop', 'profile_model', 'resolve', 'step_loop', 'watch_pooler_outputs', 'where_the_host_waits']
