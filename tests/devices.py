"""Device marks for tests that run on both devices (conftest.py: every test names the device it tests).

``@EACH_DEVICE`` runs a test twice: on the simulated device (every machine) and on CUDA (skipped without a
GPU). The test takes a ``device`` argument, ``"sim"`` or ``"cuda"``; the lab's own defaults (``pick_device()``,
``count_syncs()``) already follow it.
"""

import pytest

EACH_DEVICE = pytest.mark.parametrize("device", [pytest.param("sim", marks=pytest.mark.sim),
                                                 pytest.param("cuda", marks=pytest.mark.cuda)])
