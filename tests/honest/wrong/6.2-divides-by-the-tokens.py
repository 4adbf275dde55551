# Counts each step right, but divides the run's totals by the tokens it produced, not by its steps (a step samples
# one token per decoding request): every per-step figure comes out several times too low.
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
    tokens = sum(len(r.token_ids) for r in results.values())
    return {"steps": len(stray), "tokens": tokens,
            "stray_per_step": sum(stray) / tokens, "planned_per_step": sum(planned) / tokens}
