"""Chapter 6 — the capstone: one engine step with all five patterns, a sync hunt and an ablation.

* :mod:`synclab.engine.engine_core` — the engine (and :mod:`synclab.engine.tiny_llm`, its model);
* :mod:`.fixes` — the chapters' fixes, loaded from their notebooks;
* :mod:`.workloads` — request mixes, running the engine;
* :mod:`.planted` — the runner of Exercise 6.1, with three features and their syncs;
* :mod:`.checks` — 6.1 and 6.2's checks, the step's sync and host-work counts;
* :mod:`.profiling` — the ablation's measurements and the device's busy share;
* :mod:`.timeline` — one step's host events in order (counted), the busy-share MODEL, a trace's lanes.
"""

from synclab.capstone.checks import (ablation_row_reference, check_ablation_row, check_sync_hunt, decode_workload, host_work_in_decode_step,
                                     host_work_per_decode_step, is_planned, step_syncs)
from synclab.capstone.fixes import load_fixes
from synclab.capstone.planted import PlantedRunner
from synclab.capstone.profiling import (ablation_configs, ablation_workload, busy_share, gpu_ablation, host_time_sweep,
                                        sync_table)
from synclab.capstone.timeline import busy_share_model, modelled_busy_share, step_host_events, trace_lanes
from synclab.capstone.workloads import comparable, first_difference, random_mix, run_engine

__all__ = ["PlantedRunner", "ablation_configs", "ablation_row_reference", "ablation_workload", "busy_share", "check_ablation_row",
           "check_sync_hunt", "comparable", "decode_workload", "first_difference", "gpu_ablation",
           "host_time_sweep", "host_work_in_decode_step", "host_work_per_decode_step", "is_planned", "load_fixes", "random_mix", "run_engine",
           "step_syncs", "sync_table", "busy_share_model", "modelled_busy_share", "step_host_events", "trace_lanes"]
