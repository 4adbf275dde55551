"""Figure numbers per chapter: "Fig. 4.1" is chapter 4's first figure, wherever the chapter sits in the book.

Sphinx numbers figures across the whole book (chapter 4 started at Fig. 15). After it has assigned
its numbers, each page's figures are renumbered from 1, prefixed with the page's chapter number
(``book/04_…`` and ``solutions/04_…`` are chapter 4); a page outside the chapters counts from 1.

A figure inside a fold (a dropdown) is numbered under the main flow's figure before it: Fig. 6.3.1 is the first
folded figure after Fig. 6.3, so that the main flow's numbers run 6.1, 6.2, 6.3 without gaps (learners read a gap as
a missing figure). A fold before the page's first figure numbers its figures under 0 (Fig. 6.0.1).
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

CHAPTER_PAGE = re.compile(r"(?:book|solutions)/(\d\d)_")


def _folded(node: nodes.Node) -> bool:
    """Whether ``node`` sits inside a dropdown (sphinx-design's fold) on its page."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.Element) and parent.get("design_component") == "dropdown":
            return True
        parent = parent.parent
    return False


def renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    for docname, kinds in env.toc_fignumbers.items():
        match = CHAPTER_PAGE.match(docname)
        prefix = (int(match.group(1)),) if match else ()
        for kind, numbers in kinds.items():
            in_order = sorted(numbers, key=lambda figure_id: numbers[figure_id])
            folded: set[str] = set()
            if kind == "figure" and in_order:
                doctree = env.get_doctree(docname)
                folded = {figure_id for figure in doctree.findall(nodes.figure) if _folded(figure)
                          for figure_id in figure["ids"]}
            renumbered, main, sub = {}, 0, 0
            for figure_id in in_order:
                if figure_id in folded:
                    sub += 1
                    renumbered[figure_id] = prefix + (main, sub)
                else:
                    main, sub = main + 1, 0
                    renumbered[figure_id] = prefix + (main,)
            kinds[kind] = renumbered
    return []


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-get-updated", renumber, priority=900)  # after Sphinx's own numbering (priority 500)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
