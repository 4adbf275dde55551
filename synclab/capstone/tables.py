"""Chapter 6's rows as text: what the lab prints under each count, measurement and MODEL.

Taught in chapter 6 (the capstone), in its profiling cells. The figures draw the same rows
(:mod:`synclab.capstone.profiling`); the text is for the reader who wants the numbers, and for a terminal.
"""

from __future__ import annotations

from typing import Any, Sequence

from synclab.capstone.profiling import HOST_WORK_POINTS


def events_text(rows: dict[str, list[Any]]) -> str:
    """One line per row of :func:`~synclab.capstone.profiling.step_host_events`: its torch calls, stray syncs and
    planned waits."""
    lines = []
    for label, events in rows.items():
        kinds = [event.kind for event in events]
        lines.append(f"{label:>24}: {kinds.count('call'):3} torch calls, {kinds.count('stray'):2} stray syncs, "
                     f"{kinds.count('planned')} planned wait")
    return "\n".join(lines)


def counts_text(counts: dict[str, dict[str, list[int]]]) -> str:
    """One line per configuration of :func:`~synclab.capstone.profiling.ablation_counts`: each measure's range over
    the decode steps."""
    return "\n".join(f"{label:>16}: " + ", ".join(f"{measure} {min(v)}-{max(v)}" for measure, v in row.items())
                     for label, row in counts.items())


def host_work_text(table: dict[str, list[int]], points: Sequence[tuple[int, int]] = HOST_WORK_POINTS) -> str:
    """:func:`~synclab.capstone.profiling.host_work_table` with a header of its points (tokens out / images)."""
    header = f"{'tokens out/images':>16}: " + "  ".join(f"{f'{n}/{m}':>7}" for n, m in points)
    return "\n".join([header] + [f"{label:>16}: " + "  ".join(f"{n:>7}" for n in row) for label, row in table.items()])


def busy_shares_text(shares: dict[str, list[float]], device_steps_us: Sequence[float]) -> str:
    """One line per configuration of the MODEL's busy shares, one value per device step."""
    return "\n".join(f"{label:>16}: " + ", ".join(f"{s:.0%} at {d / 1000:g} ms" for s, d in zip(row, device_steps_us))
                     for label, row in shares.items())
