"""``python -m synclab new-chapter <slug> --title "..."``: a new chapter's skeleton, written from ``templates/`` and
registered (CONTRIBUTING, "Adding a chapter").

The chapter takes the next number *N* and, with it, every file of its own: its package ``synclab/<slug>/`` (the
rooms of ``templates/chapter/``), its exercises and hints (``synclab/lab/course/<slug>.py``), its page
(``book/NN_<slug>.md``), its solution (``solutions/NN_<slug>.ipynb``), and a right and an honest wrong answer of its
example exercise (``tests/honest/``). It is registered by one line in :data:`synclab.lab.chapters.REGISTRY`, and the
table of contents is written again from the registry. The command then stores the solution's outputs (``python -m
synclab measure chN``), its lab (``python -m synclab labs``), the public cases' answers (``python -m synclab
expected N.1``) and its clause's failure text (``tests/snapshots/clauses/N.1-no-sync.txt``, by ``pytest
--refresh-snapshots``), so that the suite passes on the skeleton before a line of the chapter is written. The example
exercise, ``N.1`` (a sum left on the device, with one clause, one check of each kind and one figure), is there to be
replaced.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from synclab.lab.chapters import REGISTRY, Chapter

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
_SLUG = re.compile(r"[a-z][a-z0-9_]*")
_REGISTRY_END = re.compile(r"^REGISTRY: tuple\[Chapter, \.\.\.\] = \(\n(?:.*\n)*?\)\n", re.MULTILINE)


class NewChapterError(ValueError):
    """A slug the command cannot take, said with what to do instead."""


def planned_chapter(slug: str, registry: tuple[Chapter, ...] = REGISTRY) -> Chapter:
    """The registry entry of a chapter ``slug`` added after the last one."""
    if not _SLUG.fullmatch(slug):
        raise NewChapterError(f"{slug!r}: a slug is a Python name in lower case (it names the package): say "
                              "'paged_attention', not 'Paged attention'")
    taken = {c.slug for c in registry}
    if slug in taken:
        raise NewChapterError(f"{slug!r} is chapter {next(c.number for c in registry if c.slug == slug)} already")
    if (ROOT / "synclab" / slug).exists() or (ROOT / "synclab" / f"{slug}.py").exists():
        raise NewChapterError(f"synclab/{slug} exists and is no chapter: choose another slug")
    number = len(registry)
    return Chapter(f"ch{number}", f"{number:02d}_{slug}", f"synclab.{slug}", 120, 2, 1)


def _filled(template: str, chapter: Chapter, title: str) -> str:
    values = {"n": str(chapter.number), "key": chapter.key, "slug": chapter.slug, "stem": chapter.stem, "title": title}
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], template)


def _registered(source: str, chapter: Chapter) -> str:
    """``synclab/lab/chapters.py``'s source with ``chapter`` as the registry's last entry."""
    block = _REGISTRY_END.search(source)
    if block is None:
        raise NewChapterError("synclab/lab/chapters.py: no 'REGISTRY: tuple[Chapter, ...] = (' block found")
    entry = (f'    Chapter("{chapter.key}", "{chapter.stem}", "{chapter.package}", {chapter.bench_limit_s}, '
             f"{chapter.page_charts}, {chapter.solution_charts}),\n")
    end = block.end() - len(")\n")
    return source[:end] + entry + source[end:]


def write_skeleton(slug: str, title: str, root: Path = ROOT) -> list[Path]:
    """Write chapter ``slug``'s files under ``root`` from the templates and register it; the files written."""
    chapter = planned_chapter(slug)
    targets = {TEMPLATES / "chapter" / name: root / "synclab" / slug / name
               for name in ("__init__.py", "workloads.py", "checks.py", "profiling.py")}
    targets |= {
        TEMPLATES / "course.py": root / "synclab" / "lab" / "course" / f"{slug}.py",
        TEMPLATES / "page.md": root / "book" / f"{chapter.stem}.md",
        TEMPLATES / "solution.ipynb": root / "solutions" / f"{chapter.stem}.ipynb",
        TEMPLATES / "right.py": root / "tests" / "honest" / "right" / f"{chapter.number}.1-example.py",
        TEMPLATES / "wrong.py": root / "tests" / "honest" / "wrong" / f"{chapter.number}.1-reads-the-sum-back.py",
    }
    if existing := [str(t.relative_to(root)) for t in targets.values() if t.exists()]:
        raise NewChapterError(f"these files exist already: {', '.join(existing)}")
    for template, target in targets.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_filled(template.read_text(), chapter, title))
    registry_file = root / "synclab" / "lab" / "chapters.py"
    registry_file.write_text(_registered(registry_file.read_text(), chapter))  # _toc.yml globs the new page
    return [*targets.values(), registry_file]


def new_chapter(slug: str, title: str, root: Path = ROOT) -> int:
    """The command: the skeleton written, then its solution run and stored, its lab and its expected answers."""
    try:
        number = planned_chapter(slug).number
        written = write_skeleton(slug, title, root)
    except NewChapterError as exc:
        print(f"new-chapter: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(root)}")
    snapshot = ["pytest", "-q", "-p", "no:cacheprovider", "tests/test_clauses.py", "-k", f"every_seed and {number}.1",
                "--refresh-snapshots"]  # the clause's failure text, stored for review (tests/snapshots.py)
    for step in (["synclab", "measure", f"ch{number}"], ["synclab", "labs"], ["synclab", "expected", f"{number}.1"],
                 snapshot):
        print(f"python -m {' '.join(step)}", flush=True)
        if subprocess.run([sys.executable, "-m", *step], cwd=root).returncode != 0:
            print(f"new-chapter: `python -m {' '.join(step)}` failed: fix what it says, then run it again",
                  file=sys.stderr)
            return 1
    print(f"Chapter {number} is registered and passes its checks: replace its example exercise, {number}.1 "
          "(CONTRIBUTING, 'Adding a chapter')")
    return 0
