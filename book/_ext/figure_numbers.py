"""Figure numbers per chapter: "Fig. 4.1" is chapter 4's first figure, wherever the chapter sits in the book.

Sphinx numbers figures across the whole book (chapter 4 started at Fig. 15). After it has assigned
its numbers, each page's figures are renumbered from 1, prefixed with the page's chapter number
(``book/04_…`` and ``solutions/04_…`` are chapter 4); a page outside the chapters counts from 1.
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

CHAPTER_PAGE = re.compile(r"(?:book|solutions)/(\d\d)_")


def renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    for docname, kinds in env.toc_fignumbers.items():
        match = CHAPTER_PAGE.match(docname)
        prefix = (int(match.group(1)),) if match else ()
        for kind, numbers in kinds.items():
            in_order = sorted(numbers, key=lambda figure_id: numbers[figure_id])
            kinds[kind] = {figure_id: prefix + (i,) for i, figure_id in enumerate(in_order, 1)}
    return []


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-get-updated", renumber, priority=900)  # after Sphinx's own numbering (priority 500)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
