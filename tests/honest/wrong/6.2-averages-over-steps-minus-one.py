# Counts each step right, but averages over one step fewer than the run made (the last step "only collects"): every
# per-step figure comes out a little high.
# fails: counts
from contextlib import contextmanager


def ablation_row(config: EngineConfig, workload, fixes: Components) -> dict[str, float]:
    """One configuration's run with ``fixes``: {"steps", "tokens", "stray_per_step", "planned_per_step"}."""
    stray, planned = [], []

    @contextmanager
    def counted(engine):
        with count_syncs() as report:
            yield
        mine = [ch6.is_planned(event) for event in report.events]
        planned.append(sum(mine))
        stray.append(len(mine) - sum(mine))

    results = ch6.run_engine(workload, config, fixes, each_step=counted)
    steps = len(stray)
    return {"steps": steps, "tokens": sum(len(r.token_ids) for r in results.values()),
            "stray_per_step": sum(stray) / (steps - 1), "planned_per_step": sum(planned) / (steps - 1)}
