# Counts everything count_syncs reports, staging copies included, and the planned waits as stray too.
# fails: counts
from contextlib import contextmanager


def ablation_row(config: EngineConfig, workload, fixes: Components) -> dict[str, float]:
    """One configuration's run with ``fixes``: {"steps", "tokens", "stray_per_step", "planned_per_step"}."""
    per_step = []

    @contextmanager
    def counted(engine):
        with count_syncs() as report:
            yield
        per_step.append(report.count)

    results = ch6.run_engine(workload, config, fixes, each_step=counted)
    steps = len(per_step)
    return {"steps": steps, "tokens": sum(len(r.token_ids) for r in results.values()),
            "stray_per_step": sum(per_step) / steps, "planned_per_step": 0.0}
