# My own least-squares lines with math.fsum and statistics.fmean; the answer is a whole number of tokens (math.ceil).
import math
import statistics


def _fit(points):
    """(intercept, slope) of the least-squares line through ``points``."""
    xs, ys = zip(*points)
    x_bar, y_bar = statistics.fmean(xs), statistics.fmean(ys)
    sxy = math.fsum((x - x_bar) * (y - y_bar) for x, y in points)
    sxx = math.fsum((x - x_bar) ** 2 for x in xs)
    slope = sxy / sxx
    return y_bar - slope * x_bar, slope


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    a, b = _fit(list(costs_us.items()))
    print(f"host_us = {a:.1f} + {b:.5f} * length")
    if a >= device_step_us:
        return 0  # already the bottleneck at the shortest length
    if b <= 0:
        return None  # flat or falling: it never gets there
    tokens = math.ceil((device_step_us - a) / b)  # the first whole length at or above the device's step
    return tokens if tokens <= max_length else None
