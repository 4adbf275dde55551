# Clamps the crossing to the range [0, max_length] from below: a falling line that starts under the device step has
# its crossing behind length 0, and the clamp makes it 0, as if the host were the bottleneck from the start.
# fails: fixed-tables
import statistics


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    slope, intercept = statistics.linear_regression(list(costs_us), list(costs_us.values()))
    if intercept >= device_step_us:
        return 0.0
    if slope == 0:
        return None
    crossing = max(0.0, (device_step_us - intercept) / slope)
    return crossing if crossing <= max_length else None
