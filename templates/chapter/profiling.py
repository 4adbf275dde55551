"""Chapter N (<pattern>): the chapter's measurements: counts, timings (each with its declared claim) and traces.

A room of :mod:`synclab.CHAPTER`. It may import the workloads and the checks; nothing imports it but the
package. A timing figure declares its claim here (``synclab.claims.declare``) and is measured through
``claims.validated``; variants pass through ``synclab.checks.finished`` in the notebook.
"""

from __future__ import annotations

from typing import Callable

from synclab.CHAPTER.workloads import make_inputs
from synclab.reference import record
from synclab.syncs import count_syncs


def sync_counts(impls: dict[str, Callable], sizes: tuple[int, ...] = (1, 8, 64)) -> dict[str, list[int]]:
    """Syncs per call of each version per size (counted: the same on any machine)."""
    counts = {}
    for name, impl in impls.items():
        counts[name] = []
        for n in sizes:
            with count_syncs() as report:
                impl(make_inputs(n))
            counts[name].append(report.count)
    record("chN", "sync_counts", {"sizes": list(sizes), "counts": counts})
    return counts
