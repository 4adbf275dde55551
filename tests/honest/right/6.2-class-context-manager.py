# A small context-manager class (__enter__/__exit__) per step; statistics.fmean for the averages.
import statistics


class StepCounter:
    """Counts one engine step's syncs; each finished step appends (stray, planned) to ``rows``."""

    def __init__(self, rows: list):
        self.rows = rows
        self.block = None

    def __enter__(self):
        self.block = count_syncs()
        self.report = self.block.__enter__()
        return self

    def __exit__(self, *exc):
        self.block.__exit__(*exc)
        planned = [event for event in self.report.events if ch6.is_planned(event)]
        self.rows.append((len(self.report.events) - len(planned), len(planned)))
        return False


def ablation_row(config: EngineConfig, workload, fixes: Components) -> dict[str, float]:
    """One configuration's run with ``fixes``: {"steps", "tokens", "stray_per_step", "planned_per_step"}."""
    rows: list[tuple[int, int]] = []
    results = ch6.run_engine(workload, config, fixes, each_step=lambda engine: StepCounter(rows))
    stray, planned = zip(*rows)
    return {
        "steps": len(rows),
        "tokens": sum(len(result.token_ids) for result in results.values()),
        "stray_per_step": statistics.fmean(stray),
        "planned_per_step": statistics.fmean(planned),
    }
