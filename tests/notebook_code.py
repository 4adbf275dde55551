"""Tests load solution code through the package's loader (``synclab.lab.notebook_code``)."""

from synclab.lab.notebook_code import ROOT, load_function

__all__ = ["ROOT", "load_function"]
