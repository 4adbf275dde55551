# numpy.linalg.lstsq on the design matrix [1, L], a module constant for the fit's rcond: a fit whose rounding leaves a
# flat line at the device step a hair below it (9999.999999999998 against 10,000) and rising by 1e-16 us a token.
import numpy as np

RCOND = None  # numpy's default cut-off for small singular values


def host_bottleneck_length(costs_us: dict[int, float], device_step_us: float, max_length: int) -> float | None:
    """The smallest output length in [0, max_length] at which the host's fitted cost reaches the device's step."""
    lengths = np.array(list(costs_us), dtype=float)
    design = np.column_stack([np.ones_like(lengths), lengths])  # [points, 2]: intercept, slope
    (start, slope), *_ = np.linalg.lstsq(design, np.array(list(costs_us.values())), rcond=RCOND)
    if start >= device_step_us:
        return 0.0
    if slope <= 0:
        return None
    crossing = (device_step_us - start) / slope
    return float(crossing) if crossing <= max_length else None
