"""Chapter {{n}} ({{title}}): the chapter's measurements: counts, timings (each with its declared claim) and traces.

A room of :mod:`synclab.{{slug}}`. It may import the workloads and the checks; nothing imports it but the
package. A timing figure declares its claim here (``synclab.claims.declare``) and is measured through
``claims.validated``; variants pass through ``synclab.checks.finished`` in the notebook.
"""

from __future__ import annotations

from typing import Callable

from synclab.reference import record
from synclab.{{slug}}.workloads import make_inputs
from synclab.syncs import count_syncs

SIZES = (1, 8, 64)  # values per call


def sync_counts(impls: dict[str, Callable], sizes: tuple[int, ...] = SIZES) -> dict[str, list[int]]:
    """Syncs per call of each version per size (counted: the same on any machine)."""
    counts = {}
    for name, impl in impls.items():
        counts[name] = []
        for n in sizes:
            values = make_inputs(n)  # uploaded before the count
            with count_syncs() as report:
                impl(values)
            counts[name].append(report.count)
    record("{{key}}", "sync_counts", {"sizes": list(sizes), "counts": counts})
    return counts
