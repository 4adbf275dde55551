"""Chapter 6 — the capstone: one engine step with all five patterns, a sync hunt and an ablation.

What the notebook imports. The rooms, as in every chapter:

* :mod:`.workloads` — request mixes, the chapters' fixes loaded from their notebooks, running the
  engine, and what a run counts (syncs per step, host work per decode step);
* :mod:`.checks` — the checks of 6.1, 6.2 and 6.3, and their clause table;
* :mod:`.planted` — the runner Exercise 6.1 starts from, with three features and their syncs (what the
  reader hunts, as the engine is what the other chapters' readers fix);
* :mod:`.chapter_fixes` — the book's fixes of chapters 1-5, which the engine runs where a lab has none;
* :mod:`.profiling` — the ablation's measurements, the device's busy share, one step's timeline;
* :mod:`.host_time` — a decode step's host time split into the parts of the step;
* :mod:`.counted_cache` — the book rows' counts, kept on disk per version of the package's code;
* :mod:`.tables` — the same rows as text, printed under the figures.

The engine itself is :mod:`synclab.engine.engine_core` (and :mod:`synclab.engine.tiny_llm`, its model).
"""

from synclab.capstone.checks import ALONE_REASONS, GRADER_WARM_UP, READING_QUESTIONS, check_ablation_reading, check_ablation_row, check_sync_hunt
from synclab.capstone.planted import PlantedRunner
from synclab.capstone.profiling import (HOST_WORK_POINTS, HostTime, ablation_counts, ablation_counts_figure, ablation_order_problems,
                                        book_ablation_counts, book_host_work, counted_busy_share_model,
                                        busy_share, busy_share_model, gpu_ablation, host_phases_figure, host_time_by_phase, host_work_figure,
                                        host_work_table, modelled_busy_share, step_host_events, sync_table,
                                        trace_lanes)
from synclab.capstone.workloads import (ablation_configs, ablation_workload, book_fixes, capstone_workload, comparable,
                                        decode_workload, first_difference, host_work_in_decode_step,
                                        host_work_per_decode_step, is_planned, load_fixes, random_mix, run_engine,
                                        step_syncs, stray_lines, stray_sources)
from synclab.capstone.tables import busy_shares_text, counts_text, events_text, host_work_text

__all__ = ["ALONE_REASONS", "GRADER_WARM_UP", "HOST_WORK_POINTS", "PlantedRunner", "READING_QUESTIONS", "ablation_counts", "ablation_counts_figure",
           "ablation_order_problems", "book_ablation_counts", "book_host_work",
           "capstone_workload", "counted_busy_share_model", "ablation_configs", "ablation_workload", "book_fixes", "busy_share",
           "busy_share_model", "busy_shares_text", "counts_text", "events_text", "host_work_text", "check_ablation_reading", "check_ablation_row", "check_sync_hunt", "comparable", "decode_workload",
           "first_difference", "gpu_ablation", "HostTime", "host_phases_figure", "host_time_by_phase", "host_work_figure", "host_work_in_decode_step",
           "host_work_per_decode_step", "host_work_table", "is_planned", "load_fixes", "modelled_busy_share", "random_mix",
           "run_engine", "step_host_events", "step_syncs", "stray_lines", "stray_sources", "sync_table", "trace_lanes"]
