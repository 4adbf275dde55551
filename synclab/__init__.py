"""Sync Lab's support package: count syncs, time, profile, check, and generate labs.

Every notebook imports from here; nothing here is pasted into a notebook.
Modules: device, syncs, timing, profiling, checks, figures, provenance,
reference, timeline_model, labgen; one module per chapter (primer, ...);
engine/ holds the parts of vLLM the chapters stand on.
"""

from __future__ import annotations

from typing import Any

__all__ = ["count_syncs", "pick_device", "syncs_per_call", "to_device"]
__version__ = "0.1.0"

_EXPORTS = {"count_syncs": "synclab.syncs", "syncs_per_call": "synclab.syncs",
            "pick_device": "synclab.device", "to_device": "synclab.device"}


def __getattr__(name: str) -> Any:
    """Import torch only when a name needs it: ``python -m synclab check`` starts in a second, not three."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synclab' has no attribute {name!r}")
