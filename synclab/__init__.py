"""Sync Lab's support package. A map of the house, from the bottom up:

* the base every chapter uses: :mod:`.device` (which device; CPU tensors standing for device
  memory), :mod:`.syncs` (``count_syncs``, ``gpu_sync_allowed``), :mod:`.dispatch` (torch calls
  and host work counted), :mod:`.provenance` and :mod:`.timing` (``benchmark``, ``sweep``, the run modes),
  :mod:`.profiling` (``torch.profiler`` timelines), :mod:`.checks` (``run_checks``, what the reader
  finished), :mod:`.claims` (what a timing figure says), :mod:`.figures`, :mod:`.reference`
  (results stored by a GPU run), :mod:`.timeline_model` (chapter 0's host/device model), :mod:`.answer_keys`
  (the checks' answers, out of the reader's reach; in a students' install, stored for the public cases);
* :mod:`.sim` — the simulated device: CUDA streams and events, pinned memory;
* :mod:`.engine` — the parts of vLLM the chapters stand on, with vLLM's names, and their baselines;
* one package per chapter, each with the same rooms (``workloads``, ``checks``, ``profiling``):
  :mod:`.primer`, :mod:`.slice_then_split`, :mod:`.lazy_streams`, :mod:`.pinned_transfers`,
  :mod:`.reverse_scan`, :mod:`.list_caches`, :mod:`.capstone`;
* :mod:`.lab` — the lab's machinery: the command line, lab generation, notebook runs, nbgrader.

The package's own digest and a private folder of this user's (:func:`package_digest`, :func:`private_folder`) serve
the counts chapter 6 keeps on disk and the warm check server's socket.

Imports go down this list, never up. Every notebook imports from here; nothing here is pasted
into a notebook. A module that moved keeps answering to its old name (:data:`MOVED`), with a
warning that names the new one, so a lab a reader edited before the move still runs.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.util
import os
import stat
import sys
import tempfile
import warnings
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

MOVED = {  # old module -> where it lives now
    "synclab.engine.sim_cuda": "synclab.sim.cuda",
    "synclab.lab.answer_keys": "synclab.answer_keys",
    "synclab.engine.sim_pinning": "synclab.sim.pinning",
    "synclab.labgen": "synclab.lab.labgen",
    "synclab.notebook_runner": "synclab.lab.notebook_runner",
    "synclab.notebook_code": "synclab.lab.notebook_code",
    "synclab.nbgrader_source": "synclab.lab.nbgrader_source",
    "synclab.nbgrader_run": "synclab.lab.nbgrader_run",
    "synclab.grading": "synclab.lab.grading",
    "synclab.citations": "synclab.lab.citations",
    "synclab.distributed": "synclab.pinned_transfers.ranks",
    "synclab.capstone.fixes": "synclab.capstone.workloads",
    "synclab.capstone.timeline": "synclab.capstone.profiling",
    **{f"synclab.pinned_transfers.{m}": f"synclab.pinned_transfers.checks.{m}"
       for m in ("uploads", "penalties", "data_parallel", "ngram", "snippets", "common")},
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module name with the module at its new place (and says where that is)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    _KEPT = ("__name__", "__spec__", "__loader__", "__package__", "__file__", "__path__")

    def __init__(self) -> None:
        self._own: dict[str, dict[str, Any]] = {}  # new name -> the module's own identity

    def create_module(self, spec: Any) -> Any:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}: this import still works, but update it", FutureWarning,
                      stacklevel=2)
        module = importlib.import_module(new)
        self._own[spec.name] = {k: module.__dict__[k] for k in self._KEPT if k in module.__dict__}
        return module

    def exec_module(self, module: Any) -> None:
        # the import system stamped the old name on the module: put its own back
        module.__dict__.update(self._own.pop(module.__spec__.name))


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.insert(0, _Moved())


def __getattr__(name: str) -> Any:
    """Import torch only when a name needs it: ``python -m synclab check`` starts in a second, not three."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synclab' has no attribute {name!r}")
