"""Sync Lab's support package. A map of the house, from the bottom up:

* the base every chapter uses: :mod:`.device` (which device; CPU tensors standing for device
  memory), :mod:`.syncs` (``count_syncs``, ``gpu_sync_allowed``), :mod:`.dispatch` (torch calls
  and host work counted), :mod:`.provenance` and :mod:`.timing` (``benchmark``, ``sweep``), :mod:`.run_modes` (the
  run modes and the reader's environment, without torch),
  :mod:`.profiling` (``torch.profiler`` timelines), :mod:`.checks` (``run_checks``, what the reader
  finished), :mod:`.claims` (what a timing figure says), :mod:`.figures`, :mod:`.reference`
  (results stored by a GPU run), :mod:`.timeline_model` (chapter 0's host/device model), :mod:`.answer_keys`
  (the checks' answers, out of the reader's reach; in a students' install, stored for the public cases);
* :mod:`.sim` — the simulated device: CUDA streams and events, pinned memory;
* :mod:`.engine` — the parts of vLLM the chapters stand on, with vLLM's names, and their baselines;
* one package per chapter, each with the same rooms (``workloads``, ``checks``, ``profiling``), registered in
  :mod:`.lab.chapters` (whose registry is the list of them):
  :mod:`.primer`, :mod:`.slice_then_split`, :mod:`.lazy_streams`, :mod:`.pinned_transfers`,
  :mod:`.reverse_scan`, :mod:`.list_caches`, :mod:`.capstone`;
* :mod:`.lab` — the lab's machinery: the command line, lab generation, notebook runs, nbgrader.

The package's own digest and a private folder of this user's (:func:`package_digest`, :func:`private_folder`) serve
the counts chapter 6 keeps on disk and the warm check server's socket.

Imports go down this list, never up. Every notebook imports from here; nothing here is pasted
into a notebook.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import stat
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["count_syncs", "pick_device", "syncs_per_call", "to_device"]

PACKAGE = Path(__file__).resolve().parent  # synclab/


@lru_cache(maxsize=1)
def package_digest() -> str:
    """A digest of the package's code: every ``.py`` file under ``synclab/``, by path and content."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def private_folder(name: str) -> Path | None:
    """This user's folder ``<tmp>/<name>-<uid>``, made 0700; None where it cannot be made or is not this user's
    alone (another user could put files there)."""
    folder = Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder
__version__ = "0.1.0"

_EXPORTS = {"count_syncs": "synclab.syncs", "syncs_per_call": "synclab.syncs",
            "pick_device": "synclab.device", "to_device": "synclab.device"}

def __getattr__(name: str) -> Any:
    """Import torch only when a name needs it: ``python -m synclab check`` starts in a second, not three."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synclab' has no attribute {name!r}")
