"""The code each fix runs in chapter 6's engine: taken from the chapters' notebooks, never written twice.

Taught in chapter 6 (the capstone). ``load_fixes()`` runs the cells of chapters 1-5 that
define each fix (the book's solutions by default) and hands them to the engine as
:class:`~synclab.engine.engine_core.Components`. ``load_fixes("labs")`` takes yours
instead, from the labs you completed.
"""

from __future__ import annotations

from functools import lru_cache

from synclab.engine.engine_core import Components
from synclab.notebook_code import ROOT, load_function

NOTEBOOKS = {1: "01_slice_then_split", 2: "02_lazy_streams", 3: "03_pinned_transfers",
             4: "04_reverse_placeholder_scans", 5: "05_list_based_caches"}


@lru_cache(maxsize=2)
def load_fixes(source: str = "solutions") -> Components:
    """Every fix of chapters 1-5, from ``solutions/`` (default) or ``labs/`` (your own code)."""
    if source not in ("solutions", "labs"):
        raise ValueError(f"load_fixes takes 'solutions' or 'labs', not {source!r}")

    def load(chapter: int, name: str, namespace: dict | None = None):
        notebook = ROOT / source / f"{NOTEBOOKS[chapter]}.ipynb"
        if not notebook.exists():
            raise FileNotFoundError(f"{notebook} is missing: chapter 6 runs chapter {chapter}'s {name} from it")
        return load_function(str(notebook.relative_to(ROOT)), name, namespace)

    ch1: dict = {}
    load(1, "AllPool", ch1)
    ch3: dict = {}
    return Components(
        all_pool=load(1, "AllPoolNoSync", ch1),
        output_copy_stream=load(2, "AsyncOutputRunner")._get_or_create_async_output_copy_stream,
        async_tensor_h2d=load(3, "async_tensor_h2d", ch3),
        sampler=load(3, "PinnedSampler", ch3),
        bad_words_single_batch=load(3, "_apply_bad_words_single_batch", ch3),
        input_batch=load(4, "ReverseScanBatch"),
        placeholder_range=load(5, "ListCachedRange"),
        scheduler=load(5, "EncoderScheduler"),
    )
