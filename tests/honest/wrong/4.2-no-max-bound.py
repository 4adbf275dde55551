# Returns the line's crossing wherever it lies: a nearly flat line's noise puts it millions of tokens out, far past
# the lengths it was fitted to.
# fails: fixed-tables
import statistics


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    slope, intercept = statistics.linear_regression(list(costs_us), list(costs_us.values()))
    if intercept >= device_step_us:
        return 0.0
    if slope <= 0:
        return None
    return (device_step_us - intercept) / slope
