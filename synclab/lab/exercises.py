"""Every exercise of the lab, declared once: its chapter, whether it is core or a stretch, its points, what it defines.

Used by the grader (:mod:`synclab.lab.judge`), ``python -m synclab check`` and the nbgrader course
(the instructors' page). The lab's notebooks name each exercise by its task ID (``1.2``): the book's
heading, the lab's stub, its check and its solution. This table adds what grading needs and the
notebooks do not say:

* **points**: what the exercise is worth; each of its checks earns a share, in proportion to the
  check's weight (:attr:`synclab.checks.Check.points`), so a failed check costs its share of this
  exercise and nothing else;
* **stretch**: a stretch exercise is extra credit, graded apart from the core and worth less than
  every core exercise of its chapter (an instructor may reweight either, see the instructors' page);
* **defines**: the top-level names its answer cells define, which the check call is handed (the grader's stand-ins
  for them, the answer itself running in a process of its own);
* **check**: the call its check cell makes, the one expression the grader evaluates.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    task: str  # "1.2"
    chapter: str  # "ch1"
    points: int
    defines: tuple[str, ...]
    check: str  # the check cell's call, e.g. "ch1.check_all_pool_no_sync(AllPoolNoSync)"
    stretch: bool = False
    # Exercises whose definitions this one's code uses (1.2's class inherits 1.1's): the grader loads them
    # as written when they pass their own checks, else the package's stand-in (``stand_in``), so a bug in
    # 1.1 costs 1.1's points only.
    builds_on: tuple[str, ...] = ()
    stand_in: tuple[tuple[str, str], ...] = ()  # (name, "module:attribute") bound when a builds_on exercise fails
    # What its answer's process keeps of the package's answers, because its runners (or an honest answer) run them
    # (``module`` or ``module:name``): chapter 6's engine runs the book's fixes of chapters 1-5, and 6.1's hunt counts
    # each step with ch6.step_syncs (which answers 6.2). Every other answer is left out of it.
    answer_process_keeps: tuple[str, ...] = ()


_BOOK_FIXES = "synclab.capstone.chapter_fixes"  # chapter 6's engine runs them: 6.1's and 6.2's checks, 6.3's counts


EXERCISES: dict[str, Exercise] = {e.task: e for e in [
    # Every answer runs in a process of its own (synclab.lab.judged_apart). An answer that is code the checks run
    # (a step, a pooler, a class) is reached through the chapter's runners, named here.
    Exercise("0.1", "ch0", 14, ("decode_step",), "primer.check_decode_step(decode_step)"),  # step_outcome, ...
    Exercise("0.2", "ch0", 6, ("my_predictions",), "primer.check_predictions(my_predictions)"),
    Exercise("1.1", "ch1", 20, ("AllPool",), "ch1.check_all_pool(AllPool)"),  # pooling_outcomes, ...
    Exercise("1.2", "ch1", 5, ("AllPoolNoSync",), "ch1.check_all_pool_no_sync(AllPoolNoSync)", stretch=True,
             builds_on=("1.1",), stand_in=(("AllPool", "synclab.capstone.chapter_fixes:_AllPoolReference"),)),
    #      with 1.1 failed, its answer's process is sent the package's 1.1 as source
    Exercise("2.1", "ch2", 14, ("AsyncPoolingOutput", "AsyncOutputRunner"),
             "ch2.check_runner(AsyncOutputRunner)"),  # cuda_path_outcomes, ...: on the simulated device
    # an answer may read the runners' evidence itself (ch2.inspect_runner, whose "outputs right" runs 2.1's reference)
    Exercise("2.2", "ch2", 6, ("my_diagnosis",), "ch2.check_diagnosis(my_diagnosis)", stretch=True,  # diagnosis:
             #   the pattern's failures read from evidence; learners put the core at 85-97 minutes with it
             answer_process_keeps=("synclab.lazy_streams.checks:_pool_reference", "synclab.lazy_streams.spot_the_bug")),
    Exercise("3.1", "ch3", 4, ("async_tensor_h2d",), "ch3.check_async_tensor_h2d(async_tensor_h2d)"),  # upload_outcome
    Exercise("3.2", "ch3", 6, ("PinnedSampler",),
             "ch3.check_gather_specific_token_logprobs(PinnedSampler)"),  # gather_outcomes
    Exercise("3.3", "ch3", 3, ("PinnedInputsRunner",), "ch3.check_init_model_kwargs(PinnedInputsRunner)",
             stretch=True),  # the pattern of 3.1-3.2 at a third site: the core fits 75 minutes without it
    Exercise("3.4", "ch3", 2, ("PinnedInputsRunner",), "ch3.check_fast_prefill(PinnedInputsRunner)",
             stretch=True),  # 3.3 and 3.4: kwargs_outcomes, prefill_outcomes
    Exercise("3.5", "ch3", 3, ("bincount",), "ch3.check_bincount(bincount)", stretch=True),  # run_bincount
    Exercise("3.6", "ch3", 3, ("my_predictions",), "ch3.check_sync_predictions(my_predictions)",
             stretch=True),  # a self-test of the kinds: learners put the core at 85 minutes with it
    Exercise("3.7", "ch3", 3, ("_run_ar", "_synchronize_dp_ranks"),
             "ch3.check_dp_sync(_run_ar, _synchronize_dp_ranks)", stretch=True),  # rank_replies: the ranks start there
    Exercise("3.8", "ch3", 3, ("update_ngram_gpu_tensors_incremental", "_apply_bad_words_single_batch"),
             "ch3.check_ngram_and_bad_words(update_ngram_gpu_tensors_incremental, _apply_bad_words_single_batch)",
             stretch=True),  # ngram_steps (the truth replayed here), banned_outcome
    Exercise("4.1", "ch4", 14, ("ReverseScanBatch",),
             "ch4.check_update_async_output_token_ids(ReverseScanBatch)"),  # step_outcome
    Exercise("4.2", "ch4", 6, ("host_bottleneck_length",), "ch4.check_bottleneck_model(host_bottleneck_length)",
             stretch=True),  # the payoff's arithmetic (a fitted line's crossing), not the pattern: learners put the
    #      core at 85 to 90 minutes with it
    Exercise("5.1", "ch5", 10, ("ListCachedRange",), "ch5.check_placeholder_range(ListCachedRange)"),  # range_answers
    Exercise("5.2", "ch5", 5, ("EncoderScheduler",), "ch5.check_encoder_scheduler(EncoderScheduler)",
             stretch=True),  # scheduled_call, mix_steps. The loop around 5.1's question: its eight rules are the
    #      scheduler's policy, not the pattern, and learners put the core at 110 minutes with it
    Exercise("6.1", "ch6", 12, ("clean_runner",), "ch6.check_sync_hunt(clean_runner)",
             answer_process_keeps=(_BOOK_FIXES, "synclab.capstone.workloads:step_syncs")),  # hunt_outcome,
    #      host_work_outcome: the answer's process runs the engine with the reader's runner and counts (its word)
    Exercise("6.2", "ch6", 3, ("ablation_row",), "ch6.check_ablation_row(ablation_row)", stretch=True,
             answer_process_keeps=(_BOOK_FIXES,)),  # row_outcome hands it its inputs there. 6.3 reads the counts
    #      the lab prints: the core fits a learner's 75 minutes without 6.2
    Exercise("6.3", "ch6", 4, ("my_reading",), "ch6.check_ablation_reading(my_reading)", stretch=True,
             answer_process_keeps=(_BOOK_FIXES, "synclab.capstone.workloads:step_syncs")),  # a reading may count
    #      the ablation afresh (ch6.book_ablation_counts), as the profile printed it. A self-test of what the page's
    #      profile says in words: learners put the core at 92 to 110 minutes with it
]}


def of_chapter(chapter: str) -> list[Exercise]:
    """The chapter's exercises, in the notebook's order."""
    return [e for e in EXERCISES.values() if e.chapter == chapter]


def chapter_of_task(task: str) -> str:
    return EXERCISES[task].chapter


def stretch_tasks() -> set[str]:
    return {t for t, e in EXERCISES.items() if e.stretch}


def points_of(task: str, overrides: dict[str, int] | None = None) -> int:
    """The exercise's points, or the instructor's (``overrides``: task -> points)."""
    return (overrides or {}).get(task, EXERCISES[task].points)


def lab_version() -> str:
    """A digest of the package's code: the version the students' image and the grader must share.

    The instructors' page says to pin one version on both sides; an assignment records the version it was
    generated with, and the grader refuses to grade one generated with another.
    """
    import hashlib
    from pathlib import Path

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]
