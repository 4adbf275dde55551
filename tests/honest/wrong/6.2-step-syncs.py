# Uses the chapter's own step_syncs (it wraps each step in a count_syncs() block), with the fixes handed in: the
# package's count of this kind, which the exercise's text says the check does not take in place of the reader's.
# fails: counts
def ablation_row(config: EngineConfig, workload, fixes: Components) -> dict[str, float]:
    """One configuration's run with ``fixes``: {"steps", "tokens", "stray_per_step", "planned_per_step"}."""
    syncs, results = ch6.step_syncs(workload, config, components=fixes)
    steps = len(syncs.planned)
    stray = sum(len(events) for events in syncs.stray)
    return dict(steps=steps, tokens=sum(len(r.token_ids) for r in results.values()),
                stray_per_step=stray / steps, planned_per_step=sum(syncs.planned) / steps)
