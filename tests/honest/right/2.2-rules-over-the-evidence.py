# Reads each runner's evidence with ch2.inspect_runner and labels it by the causes the page teaches, the one that
# explains the other symptoms first.
def my_diagnosis() -> dict[str, str]:
    """Your label (a key of ch2.BUG_LABELS) for each runner, A to F."""
    labels = {}
    for name, runner in ch2.SPOT_THE_BUG.items():
        evidence = ch2.inspect_runner(runner)
        ops = list(evidence["stream ops"])
        if any("pageable" in str(sync) for sync in evidence["syncs in _pool"]):
            labels[name] = "pageable"
        elif "wait_stream" not in ops:
            labels[name] = "unordered"
        elif "torch.cuda.synchronize" in evidence["waits in get_output"]:
            labels[name] = "over-wait"
        elif not evidence["outputs right"]:
            labels[name] = "early read"  # no wait at all, or an event recorded before the copy
        else:
            labels[name] = "freed early"
    return labels
