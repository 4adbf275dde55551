# Clamps the crossing to the measured range: a line that crosses past max_length answers max_length, where the host
# is still under the device's step, instead of None.
# fails: fixed-tables
import statistics


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    slope, intercept = statistics.linear_regression(list(costs_us), list(costs_us.values()))
    if intercept >= device_step_us:
        return 0.0
    if slope <= 0:
        return None
    return min((device_step_us - intercept) / slope, max_length)
