"""``{citations-table}``: the appendix's table of cited PRs and issues, read from ``data/citations.yaml``.

Nothing is typed into the page and nothing is fetched: each row is an entry of the data file
(``synclab.lab.citations.load_citations``) with a plain link to its GitHub thread, and "cited in"
is computed from the pages and the solution notebooks' cell sources, the same way
``tests/test_citations.py`` finds citations. Usage in a page::

    ```{citations-table}
    ```
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

HEADER = ["PR / issue", "title", "state", "date", "used for", "cited in"]


def citation_rows(citations: list[Any], cited: dict[tuple[str, int], list[str]]) -> list[list[Any]]:
    """One row per entry, vLLM first, then PyTorch: ``[(label, url), title, state, date, used for, cited in]``."""
    from synclab.lab.citations import VLLM

    rows = []
    for c in sorted(citations, key=lambda c: (c.repo != VLLM, c.number)):
        where = cited.get(c.key, [])
        rows.append([(c.label, c.url),
                     c.title or "(title not verified)",
                     (f"{c.state} issue" if c.kind == "issue" else c.state) if c.state else "not verified",
                     c.dates or "not known",
                     c.used_for + (f" Note: {c.note}" if not c.verified and c.note else ""),
                     ", ".join(where) if where else "not cited yet"])
    return rows


def _cell(value: Any) -> nodes.entry:
    entry = nodes.entry()
    para = nodes.paragraph()
    if isinstance(value, tuple):  # (text, url): a plain link, never requested by the page
        text, url = value
        para += nodes.reference(text, text, refuri=url)
    else:  # GitHub titles mark code with backticks: show it as code
        parts = str(value).split("`") if str(value).count("`") % 2 == 0 else [str(value)]
        for i, part in enumerate(parts):
            if part:
                para += nodes.literal(part, part) if i % 2 else nodes.Text(part)
    entry += para
    return entry


class CitationsTableDirective(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        from synclab.lab.citations import CITATIONS_PATH, ROOT, cited_in, load_citations

        self.env.note_dependency(str(CITATIONS_PATH))
        for path in sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "solutions").glob("*.ipynb")):
            self.env.note_dependency(str(path))  # "cited in" follows the pages
        try:
            citations = load_citations()
        except (OSError, ValueError) as exc:
            return [self.state.document.reporter.warning(str(exc), line=self.lineno)]
        rows = citation_rows(citations, cited_in(ROOT))
        table = nodes.table(classes=["synclab-citations"])
        group = nodes.tgroup(cols=len(HEADER))
        table += group
        group += [nodes.colspec(colwidth=width) for width in (2, 5, 2, 3, 6, 4)]
        head, body = nodes.thead(), nodes.tbody()
        group += [head, body]
        for container, cells in [(head, HEADER)] + [(body, row) for row in rows]:
            row_node = nodes.row()
            row_node += [_cell(value) for value in cells]
            container += row_node
        return [table]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("citations-table", CitationsTableDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
