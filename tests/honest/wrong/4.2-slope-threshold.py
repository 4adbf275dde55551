# Calls a slope under 0.001 us per token "flat" and answers None for it: the contract's only limit is the range, and
# a small slope that crosses within max_length is a bottleneck there.
# fails: fixed-tables
import statistics

FLAT_US_PER_TOKEN = 1e-3  # "noise"


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    slope, intercept = statistics.linear_regression(list(costs_us), list(costs_us.values()))
    if intercept >= device_step_us:
        return 0.0
    if slope < FLAT_US_PER_TOKEN:
        return None
    crossing = (device_step_us - intercept) / slope
    return crossing if crossing <= max_length else None
