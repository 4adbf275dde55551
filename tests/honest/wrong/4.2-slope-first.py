# Solves the line for its crossing before asking where it starts: a host slower from the start gets a crossing
# behind length 0, a negative length.
# fails: fixed-tables
import statistics


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    slope, intercept = statistics.linear_regression(list(costs_us), list(costs_us.values()))
    if slope <= 0:
        return 0.0 if intercept >= device_step_us else None
    crossing = (device_step_us - intercept) / slope
    return crossing if crossing <= max_length else None
