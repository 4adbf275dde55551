"""Chapter 6's rows as text: what the lab prints under each count, measurement and MODEL.

Taught in chapter 6 (the capstone), in its profiling cells. The figures draw the same rows
(:mod:`synclab.capstone.profiling`); the text is for the reader who wants the numbers, and for a terminal.
"""

from __future__ import annotations

from typing import Any, Sequence

from synclab.capstone.profiling import HOST_WORK_POINTS
from synclab.figures import fix_label, unwritten_note


def _short(labels: Sequence[str], least: int = 16) -> tuple[dict[str, str], int, list[str]]:
    """Each label as a row names it (a fix not written yet: "all fixes (3 not written)", as the figures do), the
    width that aligns them, and the note that says what "not written" means (no line when every fix is written)."""
    short = {label: fix_label(label) for label in labels}
    note = unwritten_note(list(labels))
    return short, max([least, *map(len, short.values())]), [note] if note else []


def events_text(rows: dict[str, list[Any]]) -> str:
    """One line per row of :func:`~synclab.capstone.profiling.step_host_events`: its torch calls, stray syncs and
    planned waits."""
    short, width, note = _short(list(rows), 24)
    lines = []
    for label, events in rows.items():
        kinds = [event.kind for event in events]
        lines.append(f"{short[label]:>{width}}: {kinds.count('call'):3} torch calls, {kinds.count('stray'):2} stray "
                     f"syncs, {kinds.count('planned')} planned wait")
    return "\n".join(lines + note)


def counts_text(counts: dict[str, dict[str, list[int]]]) -> str:
    """One line per configuration of :func:`~synclab.capstone.profiling.ablation_counts`: each measure's range over
    the decode steps."""
    short, width, note = _short(list(counts))
    return "\n".join([f"{short[label]:>{width}}: " + ", ".join(f"{measure} {min(v)}-{max(v)}"
                                                              for measure, v in row.items())
                      for label, row in counts.items()] + note)


def host_work_text(table: dict[str, list[int]], points: Sequence[tuple[int, int]] = HOST_WORK_POINTS) -> str:
    """:func:`~synclab.capstone.profiling.host_work_table` with a header of its points (tokens out / images)."""
    short, width, note = _short(list(table), len("tokens out/images"))
    header = f"{'tokens out/images':>{width}}: " + "  ".join(f"{f'{n}/{m}':>7}" for n, m in points)
    return "\n".join([header] + [f"{short[label]:>{width}}: " + "  ".join(f"{n:>7}" for n in row)
                                  for label, row in table.items()] + note)


def busy_shares_text(shares: dict[str, list[float]], device_steps_us: Sequence[float],
                     host_us: dict[str, float] | None = None) -> str:
    """One line per configuration of the MODEL's busy shares, one value per device step; with ``host_us`` (each
    configuration's host time per step, what the MODEL was fed), that time too, and a line on why a share near a
    step that long moves from run to run."""
    short, width, note = _short(list(shares))
    host = {label: f" (host {host_us[label] / 1000:.1f} ms)" for label in shares if label in (host_us or {})}
    width += max(map(len, host.values()), default=0)
    lines = [f"{short[label] + host.get(label, ''):>{width}}: " + ", ".join(f"{s:.0%} at {d / 1000:g} ms"
                                                                        for s, d in zip(row, device_steps_us))
             for label, row in shares.items()]
    if host:  # where the host's step and the device's are close, the machine's noise decides which is longer
        lines.append("(host: the configuration's host time per step, the network's compute left out; a share where "
                     "the host's time is close to the device's moves with the machine's noise: a host time measured "
                     "on a busy machine is longer, and its shares lower)")
    return "\n".join(lines + note)
