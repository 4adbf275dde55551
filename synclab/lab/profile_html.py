"""A lab's profile as one offline HTML page: what a learner in a terminal sees of their run.

Used by ``python -m synclab check`` (every chapter): after running a lab, it writes the figures and
printed tables of the notebook's profiling sections to ``<lab>.profile.html`` beside the lab, with
plotly.js inlined (the page asks no outside host for anything), and prints the path.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _section_outputs(nb: Any) -> list[tuple[str, list[tuple[str, Any]]]]:
    """(heading, outputs) per ``##`` section, in order: each output a ("text", str) or ("figure", plotly dict), or
    the section's own words ("prose", markdown): what to expect of a figure, and why, read beside it."""
    sections: list[tuple[str, list[tuple[str, Any]]]] = [("", [])]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.splitlines()
            heading = next((line[3:].strip() for line in lines if line.startswith("## ")), None)
            if heading:
                sections.append((heading, []))
            prose = "\n".join(line for line in lines if not line.startswith("## ")).strip()
            if prose:
                sections[-1][1].append(("prose", prose))
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY_MIME in data:
                sections[-1][1].append(("figure", data[PLOTLY_MIME]))
            elif out.get("output_type") == "stream" and out.get("name") == "stdout" and out.get("text", "").strip():
                sections[-1][1].append(("text", out["text"]))
    return [(heading, outputs) for heading, outputs in sections if any(k == "figure" for k, _ in outputs)]


def write_profile_html(nb: Any, path: Path, title: str) -> int:
    """Write the executed notebook's figures (and the tables printed beside them) to ``path``; the figure count."""
    from plotly.offline import get_plotlyjs

    parts, figures = [], 0
    for heading, outputs in _section_outputs(nb):
        parts.append(f"<h2>{html.escape(heading)}</h2>" if heading else "")
        for kind, value in outputs:
            if kind == "text":
                parts.append(f"<pre>{html.escape(value)}</pre>")
                continue
            if kind == "prose":  # the notebook's markdown, rendered here (markdown-it ships with the book's tools)
                parts.append(MarkdownIt("commonmark").render(value))
                continue
            figures += 1
            # the mode bar at the right edge in a margin of its own, as the book draws it: over the title and the
            # data it hid labels (a learner's report)
            layout = {**value.get("layout", {}), "modebar": {"orientation": "v"}}
            layout["margin"] = {**layout.get("margin", {}), "r": max(layout.get("margin", {}).get("r", 0), 50)}
            spec = json.dumps({"data": value.get("data", []), "layout": layout, "config": {"displaylogo": False},
                               "frames": value.get("frames", [])}).replace("</", "<\\/")
            parts.append(f'<div class="figure" id="figure-{figures}"></div>'
                         f'<script>Plotly.newPlot("figure-{figures}", {spec});</script>')
    body = "\n".join(parts) if figures else "<p>This run drew no figure: finish an exercise, then run it again.</p>"
    path.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><script>{get_plotlyjs()}</script>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        # tables keep their columns at 13px up to about 130 characters; longer prose lines wrap, never cut off
        "pre{background:#f6f6f6;padding:.6em;font-size:13px;white-space:pre-wrap;overflow-wrap:anywhere}"
        ".figure{margin:1em 0}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>")
    return figures
