"""Tests load solution code through the package's loader (``synclab.notebook_code``)."""

from synclab.notebook_code import ROOT, load_function

__all__ = ["ROOT", "load_function"]
