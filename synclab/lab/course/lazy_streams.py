"""Chapter 2's exercises and hints (lazy streams): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

EXERCISES: list[Exercise] = [
    Exercise("2.1", "ch2", 14, ("AsyncPoolingOutput", "AsyncOutputRunner"),
             "ch2.check_runner(AsyncOutputRunner)"),  # cuda_path_outcomes, ...: on the simulated device
    # an answer may read the runners' evidence itself (ch2.inspect_runner, whose "outputs right" runs 2.1's reference)
    Exercise("2.2", "ch2", 6, ("my_diagnosis",), "ch2.check_diagnosis(my_diagnosis)", stretch=True,  # diagnosis:
             #   the pattern's failures read from evidence; learners put the core at 85-97 minutes with it
             answer_process_keeps=("synclab.lazy_streams.checks:_pool_reference", "synclab.lazy_streams.spot_the_bug")),
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "2.1": (
        Hint("where the wait should go",
             "On a CUDA-like platform `_pool` should only queue work and return. The one wait per step belongs in "
             "`get_output()`, and it should wait for this step's copies alone, not the whole device: an event "
             "recorded right after them."),
        Hint("which calls, in which order",
             "Inside `with torch.cuda.stream(side):` make the side stream `wait_stream` the compute stream, queue "
             "the non-blocking copies into pinned host buffers, and record the event **inside** the block. Keep "
             "the device tensors referenced until `get_output()` has synchronized on the event, then drop them "
             "(or mark them with `record_stream` on the side stream). "
             "Create the side stream the first time it is needed, and never on a CPU platform."),
    ),
    "2.2": (
        Hint("start from the outputs",
             "Are the outputs right? Wrong outputs mean the host read them before the copy landed: no wait, or "
             "an event that does not cover the copies. A copy not ordered after the forward shows in the stream "
             "log, not in the outputs: on a CPU the forward has finished before the copy starts (on a GPU the copy "
             "could read half-written rows). A device tensor freed too early corrupts outputs on a GPU only when its "
             "memory is reused in time; the simulation never reuses it, so it shows only in the tensors still "
             "alive."),
        Hint("then the waits and the log",
             "Where does the host wait, and for what: the whole device, or an event after the copies? Does the "
             "stream log order the copies after the forward? Does the device tensor live until the wait? Each label "
             "of `ch2.BUG_LABELS` leaves its own trace; name the mistake whose fix would make the other symptoms go "
             "away."),
    ),
}
