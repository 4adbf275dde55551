"""The simulated device in a process of its own: the host reaches its data only by a transfer the device counts.

Being built (CONTRIBUTING, "The device process"); the in-process simulation (:mod:`synclab.device`,
:mod:`synclab.syncs`, :mod:`synclab.sim.cuda`) is still the one the lab uses. The sync table's rows and the
capstone's engine already count the same on both (tests/test_device_process.py). On a GPU the host cannot read device
memory without a copy, and the driver, not the program, performs the copy. Here the same holds by construction:

* :mod:`.handle` — the reader's side: :class:`~.handle.DeviceTensor`, a tensor that holds only its metadata (shape,
  dtype, strides, device ``simgpu``) and sends every op on it to the device process, which runs it on the data;
  :func:`~.handle.start_device` starts that process and hands out its two ends apart, the reader's connection and
  the :class:`~.handle.Watcher` (the counts); :class:`~.handle.SimulatedGPU` is what the reader's code holds: a
  device it started itself (both ends), or the reader's end alone, as a grader's answer process will get it;
* :mod:`.server` — the device process: the data, each stream's queue run in order when the host waits on it (the
  latest a GPU could: a model of ordering, not of time), and every transfer to the host performed and counted there;
* :mod:`.streams` — streams and events as the host holds them (``torch.cuda.Stream``'s and ``Event``'s API): handles
  whose order lives in the device process;
* :mod:`.machine` — ``running_on(gpu)``: the reader's process as a GPU machine whose GPU is the device process
  (``pick_device()``, ``torch.cuda``'s streams and events, pinned memory), so the lab's code runs on it unchanged;
* :mod:`.factories` — ``torch.empty(..., device="simgpu")``, ``t.to("simgpu")`` and the like: the device's kernels
  for torch's factories and uploads (PrivateUse1's, renamed);
* :mod:`.host_pool` — pinned host memory as a caching host allocator keeps it: blocks of segments both processes map
  once, reused once the device process has released them;
* :mod:`.streams_seen` — what a check reads of the streams (their log, the waits between them, races, copies still
  queued, what memory a stream keeps), asked of the device process by the watcher; chapter 2's checks read it as
  they read the in-process device;
* :mod:`.ledger` — the transfers the device process counted, by kind, with the reader's line; read by a watcher
  over a connection of its own, which the reader's code does not hold;
* :mod:`.wire` — what crosses between the two: host tensors as bytes, ops by name, device tensors by id.
"""
