# A line through the shortest and the longest measurement, as a learner eyeballs a plot, not a least-squares fit.
# fails: fixed-tables
def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    lo, hi = min(costs_us), max(costs_us)
    slope = (costs_us[hi] - costs_us[lo]) / (hi - lo)
    intercept = costs_us[lo] - slope * lo
    if intercept >= device_step_us:
        return 0.0
    if slope <= 0:
        return None
    crossing = (device_step_us - intercept) / slope
    return crossing if crossing <= max_length else None
