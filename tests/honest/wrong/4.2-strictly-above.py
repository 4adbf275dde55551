# The least-squares line, but "at or above" read as "above": a line that starts exactly at the device step, and never
# rises past it, is answered None where the host is the bottleneck from length 0.
# fails: fixed-tables
def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    n = len(costs_us)
    mx, my = sum(costs_us) / n, sum(costs_us.values()) / n
    slope = sum((x - mx) * (y - my) for x, y in costs_us.items()) / sum((x - mx) ** 2 for x in costs_us)
    intercept = my - slope * mx
    if intercept > device_step_us:
        return 0.0
    if slope <= 0:
        return None
    crossing = (device_step_us - intercept) / slope
    return crossing if crossing <= max_length else None
