# Runs every configuration with the book's fixes, not the ones it is handed: right in the profile, where the two
# are the same, wrong wherever a fix handed in is held back.
# fails: counts
from contextlib import contextmanager


def ablation_row(config: EngineConfig, workload, fixes: Components) -> dict[str, float]:
    """One configuration's run with ``fixes``: {"steps", "tokens", "stray_per_step", "planned_per_step"}."""
    stray, planned = [], []

    @contextmanager
    def counted(engine):
        with count_syncs() as report:
            yield
        planned.append(sum(map(ch6.is_planned, report.events)))
        stray.append(len(report.events) - planned[-1])

    results = ch6.run_engine(workload, config, ch6.book_fixes(), each_step=counted)
    steps = len(stray)
    return {"steps": steps, "tokens": sum(len(r.token_ids) for r in results.values()),
            "stray_per_step": sum(stray) / steps, "planned_per_step": sum(planned) / steps}
