# Solves a + b * L = device_step_us straight away: a flat line (b == 0) divides by zero.
# fails: fixed-tables
import statistics


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    slope, intercept = statistics.linear_regression(list(costs_us), list(costs_us.values()))
    crossing = max(0.0, (device_step_us - intercept) / slope)
    return crossing if crossing <= max_length else None
