"""Chapter 6's exercises and hints (the capstone): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

_BOOK_FIXES = "synclab.capstone.chapter_fixes"  # chapter 6's engine runs them: 6.1's and 6.2's checks, 6.3's counts

EXERCISES: list[Exercise] = [
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
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "6.1": (
        Hint("read what the count names",
             "The hunt's table (`ch6.stray_lines`) names each line that made a stray sync, and its kind. Before you "
             "change anything, say for each line which feature it serves and which side holds the data it needs: "
             "the host (send it without a wait) or the device (read it where the host already has a copy: which "
             "hook receives the step's tokens on the host?). Count again after each change: the cell under your answer counts your runner with the same two calls "
             "(`ch6.step_syncs`, then `ch6.stray_lines`)."),
        Hint("three kinds, three remedies",
             "The syncs are of three kinds, each with its remedy:\n\n"
             "- **an upload that blocks** (a Python list, or a Python number written through indices, `x[i, j] = v`): "
             "send the data with `self.upload`, chapter 3's helper; through one uploaded boolean mask, "
             "`x.masked_fill_(mask, v)` takes a Python number and uploads nothing (`x[mask] = v` with a Python number "
             "goes to the same masked_fill_);\n"
             "- **a result sized by device data** (`nonzero` of a mask already uploaded): the host made the mask, so "
             "use its own copy: upload the mask and `masked_fill_` with it, or upload its `nonzero` and write device "
             "values through those indices (`index_put_` with an uploaded tensor, not a Python number);\n"
             "- **a device value read back per request**: a hook that receives the step's host copy can read it "
             "there instead.\n\n"
             "Keep each piece of data on the side that uses it."),
    ),
    "6.2": (
        Hint("one count per step",
             "`each_step(engine)` returns the context manager the engine wraps around one step. `count_syncs()` is "
             "a context manager too, and its report is what a `with` statement binds with `as`; the engine's `with` "
             "binds nothing, so handing it count_syncs() counts the step and keeps no report. Write your own "
             "context manager "
             "(`contextlib.contextmanager`) that opens the count around its `yield`; after the `yield` the step is "
             "over, and the report's events can be split into planned and stray with `ch6.is_planned`."),
        Hint("the averages",
             "Per step means the run's total over its number of steps. Run with the `fixes` you are handed, never "
             "a set of your own: the check holds one back on purpose."),
    ),
    "6.3": (
        Hint("read the rows",
             "Compare each fix's row with the baseline's, one measure at a time: which numbers moved, and which "
             "stayed where they were?"),
        Hint("what grows with what",
             "In the host-work table, read each fix's gap to the baseline across the four columns: one pair of "
             "columns differs only in the tokens already out, the other only in the images per request. For the "
             "last question, use the MODEL figure of the device's busy share (in the lab, just before Exercise 6.3; on "
             "the page, under What the profile shows): how long does a step wait while any stray sync remains?"),
    ),
}
