"""The simulated device: what lets a CPU-only machine show what a GPU would do.

* :mod:`.cuda` — simulated CUDA streams and events, with the order of their operations
  (chapters 2, 3 and 4 check stream code with it on any machine);
* :mod:`.stream_log` — the log of what the host asked of the streams, in the words both simulated devices speak
  (chapter 2);
* :mod:`.pinning` — simulated pinned memory, on a GPU machine or on WSL (chapter 3);
* :mod:`.device_process` — the next simulated device, being built: its data in a process of its own, reached only
  by transfers that process counts (chapter 2's checks read it through :func:`.cuda.simulated_cuda` inside
  ``running_on``; the lab does not use it yet: CONTRIBUTING, "The device process").

:mod:`synclab.device` marks the CPU tensors that stand for device memory; these
modules add the streams and the pinned allocator. vLLM has neither: its parts live in
:mod:`synclab.engine`.
"""
