"""The run modes and the reader's environment: which machine the lab plays, and what kind of run this is.

Used everywhere a run is told apart (:mod:`synclab.timing`, :mod:`synclab.device`, the grader's processes in
:mod:`synclab.lab`); the lab's own machinery, which no chapter teaches. It imports only the standard library, so that
a process that only sets up another (nbgrader's autograde, the judge) never imports torch to read a variable's name.
"""

from __future__ import annotations

import os
import sys

# The three ways a run is told apart, each by an environment variable:
# * a deliberate run stores figures (`python -m synclab measure` / `bench`): it measures longer, and a
#   figure that contradicts its claim is refused (synclab.claims);
# * the book build measures nothing: it shows what a deliberate run stored;
# * a smoke run is the test suite's (set in conftest.py): every timing runs its whole path (the check
#   before timing, the interleaving, the figure) with one call per block and two rounds. Its numbers mean
#   nothing and are never stored; the tests assert counts, never times.
DELIBERATE_ENV = "SYNCLAB_DELIBERATE"
BOOK_BUILD_ENV = "SYNCLAB_BOOK_BUILD"
SMOKE_ENV = "SYNCLAB_SMOKE"


def deliberate_run() -> bool:
    """True in a run that stores figures (``python -m synclab measure`` / ``bench``)."""
    return bool(os.environ.get(DELIBERATE_ENV))


def smoke_run() -> bool:
    """True under the test suite (and never in a deliberate run): timings run as briefly as they can."""
    return bool(os.environ.get(SMOKE_ENV)) and not deliberate_run()


def refuse_in_book_build(what: str) -> None:
    """Raise if the book is being built: a figure there comes from a stored run, never from the build."""
    if os.environ.get(BOOK_BUILD_ENV):
        raise RuntimeError(f"the book build measures nothing, but a page asked to {what}: show a stored "
                           "measurement instead (`make solutions` stores them)")


CHECK_SERVER_ENV = "SYNCLAB_CHECK_SERVER"  # the reader's choice of a warm check server (synclab.lab.check_server)

# Under `pytest --nbval` (the repository's conftest.py sets it) a check cell whose checks fail raises after its report,
# so that nbval fails that cell, as a learner running it on their lab expects; an exercise not written yet does not.
NBVAL_ENV = "SYNCLAB_NBVAL"


def failing_checks_raise() -> bool:
    """True in a notebook kernel that ``pytest --nbval`` started (:data:`NBVAL_ENV`); never in pytest's own process,
    which imports ipykernel too, without running a kernel."""
    app = sys.modules.get("ipykernel.kernelapp")
    return os.environ.get(NBVAL_ENV) == "1" and app is not None and app.IPKernelApp.initialized()


# ``SYNCLAB_DEVICE=sim`` runs the lab on the simulated device even where a GPU is present: the counts a
# CPU-only machine reports, on any machine. The test suite sets it for every test not marked ``cuda``
# (tests/conftest.py), so that no test's outcome depends on whether the machine has a GPU.
DEVICE_ENV = "SYNCLAB_DEVICE"
SIMULATED = "sim"


def reader_environment() -> dict[str, str]:
    """This process's environment as a reader's fresh run sees it: no mode of ours, except a smoke run's, whether
    checks may run warm, and the device the person chose (``SYNCLAB_DEVICE=sim`` hides a GPU: a test of the
    simulated device stays on it)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SYNCLAB_") or k in (SMOKE_ENV, DEVICE_ENV,
                                                                                          CHECK_SERVER_ENV)}
