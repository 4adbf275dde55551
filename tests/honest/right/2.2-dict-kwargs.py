# dict() with keyword arguments, one comment of evidence per runner.
def my_diagnosis() -> dict[str, str]:
    """Your label (a key of ch2.BUG_LABELS) for each runner, A to F."""
    return dict(
        A="unordered",    # no wait_stream in the log: the copy may run before the forward
        B="pageable",     # a sync inside _pool, a non_blocking copy into pageable memory
        C="early read",   # the outputs are garbage and get_output() never waits
        D="freed early",  # 0 device tensors alive before get_output()
        E="over-wait",    # get_output() calls torch.cuda.synchronize
        F="early read",   # waits on its event, yet the outputs are garbage: the event was recorded before the copy
    )
