"""The chapters' registry: one record per chapter, and the one place that imports them all.

Everything that lists the chapters derives from :data:`REGISTRY` or is tested against it
(``tests/test_registry.py``): the CLI's chapter names, the bench list of ``make gpu-check``
(``python -m synclab.lab.chapters bench``), the book's table of contents, the labs, the
expected charts of the book test, the exercises' chapters. A chapter's claims
(:mod:`synclab.claims`) are declared when its package is imported. Nothing below the chapters
imports one; whoever checks stored figures against their claims (the claims test, the book's
GPU figures, ``python -m synclab bench``) calls :func:`import_all` first.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple


class Hint(NamedTuple):
    """One rung of an exercise's ladder of hints (:mod:`synclab.lab.hints` shows them)."""

    title: str  # what the hint is about, shown on the closed fold
    text: str  # markdown


@dataclass(frozen=True)
class Exercise:
    """One exercise: what grading needs and the notebook does not say (:mod:`synclab.lab.exercises`)."""

    task: str  # "1.2"
    chapter: str  # "ch1"
    points: int
    defines: tuple[str, ...]
    check: str  # the check cell's call, e.g. "ch1.check_all_pool_no_sync(AllPoolNoSync)"
    stretch: bool = False
    # Exercises whose definitions this one's code uses (1.2's class inherits 1.1's): the grader loads them
    # as written when they pass their own checks, else the package's stand-in (``stand_in``), so a bug in
    # 1.1 costs 1.1's points only.
    builds_on: tuple[str, ...] = ()
    stand_in: tuple[tuple[str, str], ...] = ()  # (name, "module:attribute") bound when a builds_on exercise fails
    # What its answer's process keeps of the package's answers, because its runners (or an honest answer) run them
    # (``module`` or ``module:name``): chapter 6's engine runs the book's fixes of chapters 1-5, and 6.1's hunt counts
    # each step with ch6.step_syncs (which answers 6.2). Every other answer is left out of it.
    answer_process_keeps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chapter:
    key: str  # "ch3": the bench's name, a reference file's stem (data/reference/<device>/ch3.json)
    stem: str  # "03_pinned_transfers": book/<stem>.md, labs/ and solutions/<stem>.ipynb
    package: str  # "synclab.pinned_transfers": its rooms (workloads, checks, profiling)
    bench_limit_s: int  # make gpu-check's time limit for ``python -m synclab bench <key>``
    page_charts: int  # plotly charts its built page shows at least (tests/test_book.py)
    solution_charts: int  # ... and its built solution page

    @property
    def number(self) -> int:
        return int(self.stem[:2])

    @property
    def slug(self) -> str:
        """``"pinned_transfers"``: its package's name, and its module's in ``synclab/lab/course/``."""
        return self.package.rsplit(".", 1)[-1]

    @property
    def course(self) -> ModuleType:
        """Its exercises and hints (``synclab/lab/course/<slug>.py``), imported when first asked for."""
        return importlib.import_module(f"synclab.lab.course.{self.slug}")

    @property
    def exercises(self) -> list[Exercise]:
        """Its exercises, in the notebook's order."""
        return list(self.course.EXERCISES)

    @property
    def hints(self) -> dict[str, tuple[Hint, Hint]]:
        """Its ladders of hints, by task."""
        return dict(self.course.HINTS)


REGISTRY: tuple[Chapter, ...] = (
    Chapter("ch0", "00_primer", "synclab.primer", 120, 5, 3),
    Chapter("ch1", "01_slice_then_split", "synclab.slice_then_split", 120, 5, 5),
    Chapter("ch2", "02_lazy_streams", "synclab.lazy_streams", 120, 2, 2),
    Chapter("ch3", "03_pinned_transfers", "synclab.pinned_transfers", 120, 11, 3),
    Chapter("ch4", "04_reverse_placeholder_scans", "synclab.reverse_scan", 120, 2, 2),
    Chapter("ch5", "05_list_based_caches", "synclab.list_caches", 120, 10, 8),
    # the ablation decodes 35 runs of 210 steps and profiles seven more: it gets longer
    Chapter("ch6", "06_capstone_engine_step", "synclab.capstone", 300, 4, 8),
)
BY_KEY: dict[str, Chapter] = {c.key: c for c in REGISTRY}
CHAPTERS: dict[str, str] = {c.key: c.stem for c in REGISTRY}  # bench name -> notebook stem
PACKAGES: dict[str, str] = {c.key: c.package for c in REGISTRY}


def import_all() -> list[ModuleType]:
    """Import every chapter's package: each declares its claims (and nothing else happens)."""
    return [importlib.import_module(c.package) for c in REGISTRY]


def main(argv: list[str]) -> int:
    """``python -m synclab.lab.chapters bench``: a line ``<key> <limit_s>`` per chapter, for tools/gpu-check.sh;
    ``... packages``: the packages, one per line (the Makefile's warm-up imports)."""
    if argv == ["bench"]:
        print("\n".join(f"{c.key} {c.bench_limit_s}" for c in REGISTRY))
    elif argv == ["packages"]:
        print("\n".join(c.package for c in REGISTRY))
    else:
        print("usage: python -m synclab.lab.chapters bench|packages", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
