"""Render plotly figures stored in notebooks without any network access.

Why this exists: with plotly's default renderer a notebook stores only the figure JSON
(``application/vnd.plotly.v1+json``). myst-nb has no renderer for that mime type, so the
page silently gets no chart (and ``-W`` fails on "skipping unknown output mime type").
plotly's HTML renderers either load plotly.js from a CDN or embed ~5 MB per notebook.

This extension:

* registers a myst-nb mime render plugin that turns the figure JSON into
  ``<div class="synclab-plotly">`` holding the JSON; ``synclab-plotly.js`` draws it
  with ``Plotly.newPlot`` when the page loads;
* renders the same JSON when it is pasted from *another* document with glue
  (``{glue:any} key`` + ``:doc:``, ``{glue}`path::key```, and ``{glue:figure} path::key``,
  the last of which myst-nb 1.4 only supports within one document);
* copies the ``plotly.min.js`` shipped inside the installed plotly wheel into
  ``_static/synclab/`` and loads it only on pages that have a chart (with the small
  ``ipywidgets-offline.js`` shim that _config.yml loads on widget pages).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, ClassVar, Sequence

import plotly
from docutils import nodes
from myst_nb.core.render import MimeData, NbElementRenderer, load_mime_renders
from myst_nb.ext.glue.crossref import read_glue_cache
from myst_nb.ext.glue.directives import PasteFigureDirective
from myst_nb.ext.glue.utils import (
    PendingGlueReference,
    PendingGlueReferenceError,
    create_pending_glue_ref,
    glue_warning,
)
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

PLOTLY_MIME = "application/vnd.plotly.v1+json"
CSS_CLASS = "synclab-plotly"  # tests/test_book.py finds charts by this class
STATIC_DIR = "synclab"  # our files in _build/html/_static/
HTML_BUILDERS = ("html", "dirhtml", "singlehtml")
_HERE = Path(__file__).parent
_ASSETS = {
    "plotly.min.js": Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
    "synclab-plotly.js": _HERE / "static" / "synclab-plotly.js",
    "synclab-plotly.css": _HERE / "static" / "synclab-plotly.css",
    "synclab-book.css": _HERE / "static" / "synclab-book.css",  # not plotly: the book's own styles, every page
    # Not plotly: fixes for the offline widget manager; _config.yml loads it via
    # nb_ipywidgets_js on widget pages. Shipped here so all our files live in one place.
    "ipywidgets-offline.js": _HERE / "static" / "ipywidgets-offline.js",
}
# Folders of book/_vendor/dist (see _config.yml html_static_path); loaded per page only.
_VENDOR_DIRS = ("requirejs/", "jupyter-widgets/", "mathjax/")

logger = logging.getLogger(__name__)


def plotly_node(figure: dict[str, Any]) -> nodes.raw:
    """A raw HTML node holding the figure JSON; the page script draws it."""
    # "</" would end the <script> element early; "<\/" is the same JSON string.
    payload = json.dumps(figure, separators=(",", ":")).replace("</", "<\\/")
    markup = (
        f'<div class="{CSS_CLASS}">'
        f'<script type="application/json">{payload}</script></div>'
    )
    node = nodes.raw("", markup, format="html")
    # Marker for page_has_plotly(). Not `classes`: the HTML writer would wrap the raw
    # markup in one more <div class=...>, i.e. a second, empty .synclab-plotly div.
    node[CSS_CLASS] = True
    return node


def _as_figure(content: Any) -> dict[str, Any]:
    """Notebook JSON outputs are dicts; tolerate a string from older writers."""
    return json.loads(content) if isinstance(content, str) else dict(content)


class PlotlyMimeRenderPlugin:
    """myst-nb ``MimeRenderPlugin`` for plotly's figure JSON (HTML builders only)."""

    # Above widget views (10) and text/html (30): prefer the JSON whenever it is there.
    mime_priority_overrides: ClassVar[Sequence[tuple[str, str, int | None]]] = [
        (builder, PLOTLY_MIME, 5) for builder in HTML_BUILDERS
    ]

    @staticmethod
    def handle_mime(
        renderer: NbElementRenderer, data: MimeData, inline: bool
    ) -> list[nodes.Element] | None:
        if data.mime_type != PLOTLY_MIME:
            return None
        return [plotly_node(_as_figure(data.content))]


def register_mime_plugin() -> None:
    """Add the plugin to myst-nb's plugin list.

    myst-nb discovers plugins only through the ``myst_nb.mime_renderers`` entry point,
    which needs an installed distribution; a book-local extension has none.
    ``load_mime_renders`` is cached, so the list it returns is the registry itself.
    """
    plugins = load_mime_renders()
    if PlotlyMimeRenderPlugin not in plugins:
        plugins.append(PlotlyMimeRenderPlugin)


class ReplacePendingPlotlyGlue(SphinxPostTransform):
    """Paste plotly figures glued in another document.

    myst-nb's own ReplacePendingGlueReferences (priority 5) knows only text, HTML and
    images; it would warn, or paste the figure's ``text/plain`` repr. Run first.
    """

    default_priority = 4
    formats = ("html",)

    def run(self, **kwargs: Any) -> None:
        cache_folder = self.env.mystnb_config.output_folder  # type: ignore[attr-defined]
        for node in list(self.document.findall(PendingGlueReference)):
            output = read_glue_cache(cache_folder, node.refdoc).get(node.key)
            if output is None or node.gtype == "text":
                continue  # myst-nb reports a missing key
            if not output["data"]:
                # glue(name, fig) on a plotly Figure: IPython lets the figure display
                # itself (_ipython_display_) and glue stores nothing (jupyter-book#1815).
                logger.warning(
                    f"glue record {node.key!r} of {node.refdoc!r} is empty: a plotly "
                    "figure glued directly displays itself instead; glue its mime bundle "
                    "(synclab.figures.glue_figure)", location=node,
                    type="synclab", subtype="empty_glue")
                node.parent.remove(node)
            elif PLOTLY_MIME in output["data"]:
                node.replace_self(plotly_node(_as_figure(output["data"][PLOTLY_MIME])))


class NoteGlueDependencies(SphinxTransform):
    """Rebuild a page when a notebook it pastes from changes (myst-nb does not track it)."""

    default_priority = 900

    def apply(self, **kwargs: Any) -> None:
        for node in self.document.findall(PendingGlueReference):
            self.env.note_dependency(str(self.env.doc2path(node.refdoc)))


class PasteFigureAnyDocDirective(PasteFigureDirective):
    """``{glue:figure}`` that also accepts ``path/to/notebook.ipynb::key``."""

    def run(self) -> list[nodes.Node]:
        if "::" not in self.arguments[0]:
            return super().run()
        path, key = self.arguments[0].split("::", 1)
        try:
            ref = create_pending_glue_ref(
                self.document, self.source, self.line, path.strip(), key.strip()
            )
        except PendingGlueReferenceError as exc:
            return [glue_warning(str(exc), self.document, self.line)]
        return self._build_figure(ref)

    def _build_figure(self, content: nodes.Node) -> list[nodes.Node]:
        # Same figure as myst-nb's PasteFigureDirective.run() builds around local pastes.
        figure = nodes.figure("", content)
        self.set_source_info(figure)
        if "figwidth" in self.options:
            figure["width"] = self.options["figwidth"]
        figure["classes"] += self.options.get("figclass", [])
        if "align" in self.options:
            figure["align"] = self.options["align"]
        self.add_name(figure)
        if not self.content:
            return [figure]
        parsed = nodes.Element()
        self.state.nested_parse(self.content, self.content_offset, parsed)
        first = parsed[0]
        if isinstance(first, nodes.paragraph):
            caption = nodes.caption(first.rawsource, "", *first.children)
            caption.source, caption.line = first.source, first.line
            figure += caption
        elif not (isinstance(first, nodes.comment) and len(first) == 0):
            return [figure, glue_warning(
                "Figure caption must be a paragraph or empty comment.",
                self.document, self.lineno,
            )]
        if len(parsed) > 1:
            figure += nodes.legend("", *parsed[1:])
        return [figure]


def page_has_plotly(doctree: nodes.document | None) -> bool:
    if doctree is None:
        return False
    return any(n.get(CSS_CLASS) for n in doctree.findall(nodes.raw))


def add_page_assets(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
    doctree: nodes.document | None,
) -> None:
    """The book's styles on every page; plotly.js (4.8 MB) only on pages that draw a chart."""
    app.add_css_file(f"{STATIC_DIR}/synclab-book.css")
    if not page_has_plotly(doctree):
        return
    # defer keeps order (plotly.min.js, then the drawing script) without blocking the page.
    app.add_js_file(f"{STATIC_DIR}/plotly.min.js", loading_method="defer")
    app.add_js_file(f"{STATIC_DIR}/synclab-plotly.js", loading_method="defer")
    app.add_css_file(f"{STATIC_DIR}/synclab-plotly.css")


def copy_assets(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.builder.outdir) / "_static" / STATIC_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name, source in _ASSETS.items():
        dest = target / name
        # Copy only when changed: plotly.min.js is 4.8 MB and warm builds should be quick.
        if not dest.exists() or dest.stat().st_size != source.stat().st_size \
                or dest.read_bytes() != source.read_bytes():
            shutil.copyfile(source, dest)


def drop_global_vendor_js(app: Sphinx, config: Config) -> None:
    """Keep vendored JS page-specific.

    Jupyter Book adds every .js/.css found in *any* html_static_path folder to every
    page as soon as a root ``_static/`` folder exists; require.js + MathJax + the
    widget manager on every page would break pages and slow them down.
    """
    for key in ("html_js_files", "html_css_files"):
        entries = getattr(config, key)
        kept = [e for e in entries if not str(e[0] if isinstance(e, tuple) else e)
                .startswith(_VENDOR_DIRS)]
        if len(kept) != len(entries):
            logger.info("plotly_offline: not loading vendored files on every page")
            setattr(config, key, kept)


def setup(app: Sphinx) -> dict[str, Any]:
    register_mime_plugin()
    app.connect("config-inited", drop_global_vendor_js)
    app.add_post_transform(ReplacePendingPlotlyGlue)
    app.add_transform(NoteGlueDependencies)
    app.add_directive_to_domain("glue", "figure", PasteFigureAnyDocDirective, override=True)
    app.connect("html-page-context", add_page_assets)
    app.connect("build-finished", copy_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
