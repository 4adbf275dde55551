"""Repository-wide pytest setup: a plain ``pytest --nbval`` runs the way ``make test`` does.

nbval options cannot live in ``addopts`` (``-p no:nbval`` would then break), so the
sanitizer and the kernel choice are set here when ``--nbval`` is on.
"""

from pathlib import Path

SANITIZER = Path(__file__).parent / "tests" / "sanitize.cfg"


def pytest_configure(config):
    option = config.option
    if getattr(option, "nbval", False) or getattr(option, "nbval_lax", False):
        if not option.nbval_sanitize_with:
            option.nbval_sanitize_with = str(SANITIZER)
        if not option.nbval_kernel_name:
            option.nbval_current_env = True  # the notebooks run in the interpreter running pytest
