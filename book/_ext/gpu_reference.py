"""``{gpu-reference}``: a chapter's headline figure from ``data/reference/``, or one line saying how to record it.

The book measures nothing (see _config.yml): a GPU figure is what ``python -m synclab bench chN``
stored on a real GPU, drawn here from that file (``synclab.reference.headline_figures``, which
refuses a stored measurement whose claim does not hold). Usage in a page::

    ```{gpu-reference} ch1 timing
    :title: AllPool.forward on a GPU
    ```
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from plotly_offline import plotly_node


class GpuReferenceDirective(SphinxDirective):
    required_arguments = 2  # chapter ("ch1"), measurement name ("timing")
    option_spec = {"title": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        from synclab.lab.chapters import import_all
        from synclab.reference import REFERENCE_DIR, headline_figures

        import_all()  # a stored figure is checked against its chapter's claim

        chapter, name = self.arguments
        for path in REFERENCE_DIR.glob(f"*/{chapter}.json"):
            self.env.note_dependency(str(path))  # a new reference file rebuilds the page
        try:
            drawn = headline_figures(chapter, name, self.options.get("title", f"{chapter} {name}"))
        except ValueError as exc:
            return [self.state.document.reporter.warning(str(exc), line=self.lineno)]
        if drawn:
            return [plotly_node(figure) for figure in drawn]
        line = nodes.paragraph(classes=["synclab-no-reference"])
        line += nodes.strong(text="No GPU run is recorded for this figure yet. ")
        line += nodes.Text("On a machine with a GPU, ")
        line += nodes.literal(text=f"python -m synclab bench {chapter}")
        line += nodes.Text(" records it in ")
        line += nodes.literal(text=f"data/reference/<device>/{chapter}.json")
        line += nodes.Text("; commit that file and this page draws it here.")
        return [line]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("gpu-reference", GpuReferenceDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
