# A generator-based context manager (contextlib) adding into a collections.Counter; steps from engine.steps; vars(config).
from collections import Counter
from contextlib import contextmanager


def ablation_row(config: EngineConfig, workload, fixes: Components) -> dict[str, float]:
    """One configuration's run with ``fixes``: {"steps", "tokens", "stray_per_step", "planned_per_step"}."""
    totals = Counter()
    engines = []

    @contextmanager
    def one_step(engine):
        with count_syncs() as report:
            yield
        for event in report.events:
            totals["planned" if ch6.is_planned(event) else "stray"] += 1
        if not engines:
            engines.append(engine)

    results = ch6.run_engine(workload, config, fixes, each_step=one_step)
    steps = engines[0].steps
    switched_on = [name for name, on in vars(config).items() if on]
    print(f"{', '.join(switched_on) or 'baseline'}: {steps} steps, {totals['stray']} stray syncs, {totals['planned']} planned waits")
    return {"steps": steps, "tokens": sum(map(len, (r.token_ids for r in results.values()))),
            "stray_per_step": totals["stray"] / steps, "planned_per_step": totals["planned"] / steps}
