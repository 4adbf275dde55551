# Exact arithmetic with fractions.Fraction, a top-level lambda for the line, and bisect (with key=) over the lengths.
from bisect import bisect_left
from fractions import Fraction

line_at = lambda a, b, length: a + b * length


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    n = len(costs_us)
    xs = [Fraction(x) for x in costs_us]
    ys = [Fraction(y) for y in costs_us.values()]
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    a = mean_y - b * mean_x
    target = Fraction(device_step_us)
    if line_at(a, b, 0) >= target:
        return 0
    if b <= 0:
        return None
    lengths = range(max_length + 1)  # the line rises: the lengths at or above the step are a suffix of this range
    first = bisect_left(lengths, True, key=lambda length: line_at(a, b, length) >= target)
    return first if first < len(lengths) else None
