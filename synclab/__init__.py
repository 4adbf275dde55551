"""Sync Lab's support package: count syncs, time, profile, check, and generate labs.

Every notebook imports from here; nothing here is pasted into a notebook.
Modules: device, syncs, timing, profiling, checks, figures, provenance,
reference, timeline_model, labgen; one module per chapter (primer, ...);
engine/ holds the parts of vLLM the chapters stand on.
"""

from synclab.device import pick_device, to_device
from synclab.syncs import count_syncs, syncs_per_call

__all__ = ["count_syncs", "pick_device", "syncs_per_call", "to_device"]
__version__ = "0.1.0"
