"""The chapters by name: their notebooks and their packages, and the one place that imports them all.

A chapter's claims (:mod:`synclab.claims`) are declared when its package is imported. Nothing
below the chapters imports one; whoever checks stored figures against their claims (the claims
test, the book's GPU figures, ``python -m synclab bench``) calls :func:`import_all` first.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# bench name -> notebook stem; each chapter adds itself here and in PACKAGES
CHAPTERS = {"ch0": "00_primer", "ch1": "01_slice_then_split", "ch2": "02_lazy_streams",
            "ch3": "03_pinned_transfers", "ch4": "04_reverse_placeholder_scans", "ch5": "05_list_based_caches",
            "ch6": "06_capstone_engine_step"}
PACKAGES = {"ch0": "synclab.primer", "ch1": "synclab.slice_then_split", "ch2": "synclab.lazy_streams",
            "ch3": "synclab.pinned_transfers", "ch4": "synclab.reverse_scan", "ch5": "synclab.list_caches",
            "ch6": "synclab.capstone"}


def import_all() -> list[ModuleType]:
    """Import every chapter's package: each declares its claims (and nothing else happens)."""
    return [importlib.import_module(name) for name in PACKAGES.values()]
