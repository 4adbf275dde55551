# numpy.polyfit for the line, numpy floats returned as they come; a module-level sentinel computed by a call.
import numpy as np

NEVER = float("inf")  # where a flat or falling line meets the device's step


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    lengths = np.array(sorted(costs_us), dtype=float)
    costs = np.array([costs_us[n] for n in sorted(costs_us)], dtype=float)
    slope, intercept = np.polyfit(lengths, costs, deg=1)
    if intercept >= device_step_us:
        return 0.0
    crossing = (device_step_us - intercept) / slope if slope > 0 else NEVER
    return crossing if crossing <= max_length else None
