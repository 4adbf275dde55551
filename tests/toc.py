"""The book's table of contents as Sphinx reads it: ``_toc.yml``'s entries in order, its globs expanded.

The chapters are globbed (``book/[0-9][0-9]_*``, ``solutions/[0-9][0-9]_*``): Sphinx lists the matching documents in
name order, so a new chapter's page is listed by its number without an edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
_SOURCES = (".md", ".ipynb")


def entry_files(entry: dict[str, Any], root: Path = ROOT) -> list[str]:
    """The documents one entry names: its ``file``, or its ``glob``'s matches in name order; then its sections."""
    if "glob" in entry:
        files = [p.relative_to(root).with_suffix("").as_posix() for p in sorted(root.glob(entry["glob"] + ".*"))
                 if p.suffix in _SOURCES]
    else:
        files = [entry["file"]]
    for section in entry.get("sections", []):
        files += entry_files(section, root)
    return files


def toc_files(toc: dict[str, Any], root: Path = ROOT) -> list[str]:
    """Every document of a jb-book table of contents, in reading order, the root first."""
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for entry in part.get("chapters", []):
            files += entry_files(entry, root)
    return files


def part_files(root: Path, caption: str) -> list[str]:
    """The documents of the part of ``root``'s ``_toc.yml`` whose caption starts with ``caption``."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    (part,) = [p for p in toc["parts"] if p["caption"].startswith(caption)]
    return [f for entry in part["chapters"] for f in entry_files(entry, root)]


def read_toc(root: Path = ROOT) -> list[str]:
    return toc_files(yaml.safe_load((root / "_toc.yml").read_text()), root)
