"""The HTML book builds with warnings as errors and every page renders offline.

One real build per test session, the same as ``make book``: ``_build/html`` removed,
then ``jupyter-book build . -W -n --keep-going --all`` (every page re-read; notebooks
are re-executed only when their code changed, through ``_build/.jupyter_cache``).
Then every page is opened in headless Debian Chromium, served from 127.0.0.1 (one browser for the session,
a few pages at once, each in a tab of its own), and must:
load, log no console error, request nothing from another host, draw every plotly chart,
typeset every formula and render every ipywidgets view.

Needs ``apt-get install -y chromium`` (never ``playwright install``: no downloads here).
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
import yaml

from synclab.lab.chapters import REGISTRY
from synclab.run_modes import BOOK_BUILD_ENV
from tests.toc import read_toc

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
BUILD_CMD = [str(JUPYTER_BOOK), "build", ".", "-W", "-n", "--keep-going", "--all"]
BUILD_TIMEOUT_S = int(os.environ.get("SYNCLAB_BOOK_TIMEOUT", "3600"))

# Debian's chromium by default; SYNCLAB_CHROMIUM names another Chromium/Chrome binary (e.g. on GitHub runners).
CHROMIUM = Path(os.environ.get("SYNCLAB_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # playwright gives every launch a fresh temporary profile (user data dir)
RENDER_TIMEOUT_MS = 30_000
# Pages checked at once, each in a tab of its own: a page mostly waits (on its charts, its slider steps, the network
# going idle), so two tabs share the time one page spent alone; on two busy cores more tabs only slowed each other,
# and page loads then ran into their time limit.
TABS = 2

# Content that must not silently vanish; update these with the pages.
# Page -> minimum number of plotly charts, from the chapters' registry (synclab/lab/chapters.py).
EXPECTED_CHARTS: dict[str, int] = {**{f"book/{c.stem}.html": c.page_charts for c in REGISTRY},
                                   **{f"solutions/{c.stem}.html": c.solution_charts for c in REGISTRY}}
# Pages that must show typeset math.
EXPECTED_MATH: set[str] = {"book/00_primer.html"}
# Pages that must show an ipywidgets slider. None today: the primer's slider is a plotly
# slider; test_widget_stack_offline checks the widget machinery on a synthetic page.
EXPECTED_WIDGET_SLIDERS: set[str] = set()
# Pages Sphinx writes besides the toc entries (index.html redirects to the root page).
EXTRA_PAGES = ["index.html", "genindex.html", "search.html"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# Chrome asks for /favicon.ico on pages without an icon link (the redirecting index.html).
IGNORED_URL_PATHS = {"/favicon.ico"}
WIDGET_SMOKE_PATH = "/_test/widgets.html"  # served from memory, see widget_smoke_page()

pytestmark = [pytest.mark.slow, pytest.mark.sim]  # registered in pyproject.toml and conftest.py


def toc_pages() -> list[str]:
    """HTML page of every document listed in _toc.yml, the root first."""
    return [f"{doc}.html" for doc in read_toc()]


PAGES = toc_pages() + EXTRA_PAGES


def _build_book() -> None:
    """Build once per session, also under pytest-xdist (workers share one build)."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    BUILD.mkdir(exist_ok=True)
    stamp = BUILD / ".test_book.run"
    with open(BUILD / ".test_book.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # other workers wait for the build
        if stamp.exists() and stamp.read_text() == run_id:
            return
        stamp.unlink(missing_ok=True)
        shutil.rmtree(HTML, ignore_errors=True)  # no stale pages from an earlier build
        start = time.monotonic()
        proc = subprocess.run(
            BUILD_CMD, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
            env={**os.environ, BOOK_BUILD_ENV: "1"},  # as make book: synclab refuses to measure
        )
        if proc.returncode != 0:
            log = proc.stdout + proc.stderr
            flagged = [line for line in log.splitlines()
                       if "WARNING" in line or "ERROR" in line or "Error" in line]
            pytest.fail(f"`{' '.join(BUILD_CMD)}` failed (rc={proc.returncode}).\n"
                        "Warnings and errors:\n" + "\n".join(flagged[:60])
                        + f"\n\nEnd of the log:\n{log[-4000:]}")
        stamp.write_text(run_id)
        print(f"book built in {time.monotonic() - start:.1f} s")


def widget_smoke_page() -> str:
    """An IntSlider with math in its label and a Button with an icon (Font Awesome files of
    the widget manager), embedded the way myst-nb does it with the scripts _config.yml
    configures: the widget stack stays tested while no book page has a widget."""
    from ipywidgets import Button, IntSlider
    from ipywidgets.embed import embed_data

    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    # \( \) are the delimiters MathJax 3 knows by default (Sphinx writes $ math so).
    slider = IntSlider(value=3, max=10, description=r"\(x^2\)")
    data = embed_data(views=[slider, Button(description="run", icon="check")])
    widget_js = "".join(f'<script src="/_static/{src}"></script>'
                        for src in config["nb_ipywidgets_js"])
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>widgets</title>'
        '<script>window.MathJax = {"options": {"processHtmlClass": "math"}}</script>'
        f'<script defer src="/_static/{config["mathjax_path"]}"></script>{widget_js}'
        '<script type="application/vnd.jupyter.widget-state+json">'
        f'{json.dumps(data["manager_state"])}</script></head><body>'
        '<p><span class="math">\\(y = x^2\\)</span></p>'
        + "".join('<script type="application/vnd.jupyter.widget-view+json">'
                  f"{json.dumps(view)}</script>" for view in data["view_specs"])
        + "</body></html>"
    )


@pytest.fixture(scope="session")
def built_book() -> Path:
    _build_book()
    return HTML


@pytest.fixture(scope="session")
def base_url(built_book: Path) -> Iterator[str]:
    smoke = widget_smoke_page().encode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != WIDGET_SMOKE_PATH:
                return super().do_GET()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(smoke)))
            self.end_headers()
            self.wfile.write(smoke)

        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Handler, directory=str(built_book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def is_ignored(url: str) -> bool:
    return urlsplit(url).path in IGNORED_URL_PATHS


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "file"):
        return True
    return parts.scheme in ("http", "https") and parts.hostname in LOCAL_HOSTS


async def _wait(page: Any, condition_js: str, what: str, problems: list[str]) -> None:
    """Wait for a JS condition; a timeout becomes a reported problem, not an exception,
    so the failure also lists the requests and console errors that explain it."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    try:
        await page.wait_for_function(condition_js, timeout=RENDER_TIMEOUT_MS)
    except PlaywrightTimeout:
        problems.append(f"not rendered within {RENDER_TIMEOUT_MS} ms: {what}")


# Each table of the page's text that is wider than its container: (its first heading, its width, the room).
WIDE_TABLES_JS = """() => [...document.querySelectorAll('article table')]
    .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1)
    .map(t => [(t.querySelector('th')?.textContent || '').trim().slice(0, 40), t.scrollWidth,
               t.parentElement.clientWidth])"""


# Each word of a table's prose that the layout broke across two lines: a column squeezed below its longest
# word. Only plain words count ("then", "Scans"): a code span, a file path or a long identifier may break.
SPLIT_WORDS_JS = """() => {
    const split = [];
    for (const cell of document.querySelectorAll('article table td, article table th')) {
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (node.parentElement.closest('code')) continue;
            for (const token of node.textContent.matchAll(/\\S+/g)) {
                const word = token[0].match(/^[("'\u201c]*([A-Za-z][a-z]+)[)"'\u201d,.;:!?]*$/);
                if (!word) continue;
                const start = token.index + token[0].indexOf(word[1]);
                const range = document.createRange();
                range.setStart(node, start);
                range.setEnd(node, start + word[1].length);
                const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                if (lines.size > 1) split.push(word[1]);
            }
        }
    }
    return split;
}"""


# What a plotly chart draws, to tell whether a slider step changed it: its traces' values and its title.
CHART_STATE_JS = """(div) => JSON.stringify([div.data.map(t => [t.x, t.base, t.y, t.visible]), div.layout.title?.text])"""


# What is cut off or covered on a page: a chart's title past its edge or under its mode bar, a log axis labelled
# at every digit, a listing scrolled sideways, a sidebar entry running out of the sidebar.
LAYOUT_PROBLEMS_JS = r"""() => {
    const out = [];
    const overlap = (a, b) => !(a.right <= b.left || a.left >= b.right || a.bottom <= b.top || a.top >= b.bottom);
    document.querySelectorAll('div.synclab-plotly').forEach((div, i) => {
        const box = div.getBoundingClientRect();
        const title = div.querySelector('g.g-gtitle text');
        if (title) {
            const t = title.getBoundingClientRect();
            if (t.right > box.right + 1 || t.left < box.left - 1) out.push(`chart ${i + 1}: its title runs past the figure's edge`);
            const bar = div.querySelector('.modebar');
            if (bar && bar.getBoundingClientRect().width && overlap(bar.getBoundingClientRect(), t))
                out.push(`chart ${i + 1}: the mode bar covers its title`);
        }
        const full = div._fullLayout || {};
        const legend = div.querySelector('g.legend');
        if (legend && full._size) {  // a legend under the plot: the figure ends with it, no blank band below
            const l = legend.getBoundingClientRect(), plotBottom = box.top + full._size.t + full._size.h;
            const last = Math.max(l.bottom, ...[...div.querySelectorAll('g.slider-container')]
                .map(e => e.getBoundingClientRect().bottom));  // a slider may sit under the legend
            if (l.top > plotBottom && box.bottom - last > 48)
                out.push(`chart ${i + 1}: a blank band of ${Math.round(box.bottom - last)} px under its legend`);
        }
        for (const key of Object.keys(full).filter(k => /^[xy]axis\d*$/.test(k))) {
            const axis = full[key];
            if (axis.type !== 'log' || !axis.range || Math.abs(axis.range[1] - axis.range[0]) < 2) continue;
            if (axis.tickmode === 'array') continue;  // the figure's own ticks, at the values it measured
            const labels = [...div.querySelectorAll(`g.${key.replace('axis', '')}tick text`)].map(e => e.textContent);
            if (labels.some(l => /^[2-9]$/.test(l.trim()))) out.push(`chart ${i + 1}: its ${key} labels every digit (${labels.join(' ')})`);
        }
    });
    document.querySelectorAll('article div.highlight pre').forEach(pre => {
        if (pre.scrollWidth > pre.clientWidth + 1) out.push(`a listing scrolls sideways: ${pre.textContent.slice(0, 40)}`);
    });
    document.querySelectorAll('.bd-sidebar-primary nav a').forEach(a => {
        const nav = a.closest('nav').getBoundingClientRect();
        const parts = [a, ...a.querySelectorAll('code, span')].map(e => e.getBoundingClientRect().right);
        if (Math.max(...parts) > nav.right + 1) out.push(`a sidebar entry runs out of the sidebar: ${a.textContent.trim()}`);
    });
    return out;
}"""


async def drive_sliders(page: Any) -> list[str]:
    """Click every step of every plotly slider on the page: each must change its chart and raise no error."""
    problems: list[str] = []
    charts = page.locator("div.synclab-plotly")
    for index in range(await charts.count()):
        chart = charts.nth(index)
        steps = chart.locator("g.slider-group g.slider-label-group")  # nothing in a chart without a slider
        rail = chart.locator("g.slider-group rect.slider-rail-touch-rect").first
        if not await steps.count() or not await rail.count():
            continue
        await chart.scroll_into_view_if_needed()  # a click lands only inside the window
        rail_box = await rail.bounding_box()
        drawn: dict[str, str] = {}  # each step's label -> what the chart drew after a click on it
        for step in range(await steps.count() - 1, -1, -1):  # every step, the last first: each must draw its own figure
            label_box = await steps.nth(step).bounding_box()  # a reader clicks the rail above the step's label
            await page.mouse.click(label_box["x"] + label_box["width"] / 2, rail_box["y"] + rail_box["height"] / 2)
            await page.wait_for_timeout(150)
            drawn[await steps.nth(step).text_content() or str(step)] = await chart.evaluate(CHART_STATE_JS)
        for label, state in drawn.items():
            same = [other for other, s in drawn.items() if s == state and other != label]
            if same:
                problems.append(f"chart {index + 1}: the slider's step {label!r} draws what step {same[0]!r} draws")
    return problems


async def check_page(browser: Any, url: str, *, lands_on: str | None = None, min_charts: int = 0,
               needs_math: bool = False, needs_slider: bool = False,
               needs_label_math: bool = False) -> list[str]:
    """Open ``url`` and return everything wrong with it (empty: the page is fine)."""
    page = await browser.new_page()
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: m.type == "error" and not is_ignored(
        m.location.get("url", "")) and problems.append(
        f"console error: {m.text} ({m.location.get('url', '')})"))
    page.on("pageerror", lambda e: problems.append(f"uncaught exception: {e}"))
    page.on("requestfailed", lambda r: not is_ignored(r.url) and problems.append(
        f"request failed: {r.url} {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and not is_ignored(r.url) and problems.append(
        f"HTTP {r.status} {r.url}"))
    try:
        response = await page.goto(url, wait_until="load")
        if response is None or response.status != 200:
            return problems + [f"did not load: {response and response.status}"]
        if lands_on:  # a redirect page: check the page it lands on
            await page.wait_for_url(lands_on, timeout=RENDER_TIMEOUT_MS)
            await page.wait_for_load_state("load")

        charts = await page.locator("div.synclab-plotly").count()
        if charts < min_charts:
            problems.append(f"{charts} plotly chart(s), expected at least {min_charts}")
        if charts:
            await _wait(page, """() => [...document.querySelectorAll('div.synclab-plotly')]
                                .every(div => div.querySelector('svg.main-svg'))""",
                  f"{charts} plotly chart(s) (div.synclab-plotly svg)", problems)

        problems += await drive_sliders(page)
        await page.wait_for_timeout(300)  # a log axis is tidied just after its chart is drawn
        problems += await page.evaluate(LAYOUT_PROBLEMS_JS)

        formulas = await page.locator(".math").count()  # Sphinx's MathJax markup
        if needs_math and not formulas:
            problems.append("no math on a page that must have some")
        if formulas:
            await _wait(page, f"() => document.querySelectorAll('mjx-container').length >= {formulas}",
                  f"{formulas} formula(s) (mjx-container)", problems)

        views = await page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        if views:
            # The widget manager inserts a .widget-subarea holding the view before each.
            await _wait(page, """() => [...document.querySelectorAll(
                               'script[type="application/vnd.jupyter.widget-view+json"]')]
                           .every(s => s.previousElementSibling?.classList.contains('widget-subarea')
                                       && s.previousElementSibling.querySelector('.jupyter-widgets'))""",
                  f"{views} widget(s) (.widget-subarea .jupyter-widgets)", problems)
        if needs_slider and not await page.locator(".widget-slider .noUi-target").first.is_visible():
            problems.append("no visible ipywidgets slider (.widget-slider .noUi-target)")
        if needs_label_math:  # ipywidgets typesets labels with the MathJax 2 API: our shim
            await _wait(page, "() => document.querySelector('.widget-label mjx-container')",
                  "math in a widget label", problems)

        await page.wait_for_load_state("networkidle")  # late fonts and lazily loaded scripts
        problems += [f"a table runs past the text's width ({width} px in {room} px), cut off or scrolled "
                     f"sideways: the one headed {head!r}" for head, width, room in await page.evaluate(WIDE_TABLES_JS)]
        split = await page.evaluate(SPLIT_WORDS_JS)
        if split:
            problems.append(f"{len(split)} word(s) of a table broken across two lines: {', '.join(split[:8])}")
        problems += [f"request to an outside host: {u}"
                     for u in sorted({u for u in requests if not is_local(u)})]
        return problems
    finally:
        await page.close()


async def _render_all(jobs: dict[str, dict[str, Any]]) -> dict[str, list[str] | BaseException]:
    """:func:`check_page` for each of ``jobs`` (url -> its keyword arguments) in one headless Chromium, :data:`TABS`
    pages at a time, each in a tab of its own: every page's problems, or what the check raised there."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        tabs = asyncio.Semaphore(TABS)

        async def one(url: str) -> list[str]:
            async with tabs:
                return await check_page(chromium, url, **jobs[url])

        try:
            found = await asyncio.gather(*(one(url) for url in jobs), return_exceptions=True)
        finally:
            await chromium.close()
    return dict(zip(jobs, found))


@pytest.fixture(scope="session")
def rendered(base_url: str) -> dict[str, list[str] | BaseException]:
    """Every page of the book and the widget page, checked once (:func:`check_page`): url -> its problems."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: run `apt-get install -y chromium` (Debian's build; "
            "`playwright install` cannot download a browser here)."
        )
    jobs = {f"{base_url}/{page_path}": dict(
        lands_on=f"{base_url}/{toc_pages()[0]}" if page_path == "index.html" else None,
        min_charts=EXPECTED_CHARTS.get(page_path, 0),
        needs_math=page_path in EXPECTED_MATH,
        needs_slider=page_path in EXPECTED_WIDGET_SLIDERS,
    ) for page_path in PAGES}
    jobs[base_url + WIDGET_SMOKE_PATH] = dict(needs_math=True, needs_slider=True, needs_label_math=True)
    return asyncio.run(_render_all(jobs))


def _problems_of(rendered: dict[str, list[str] | BaseException], url: str) -> list[str]:
    found = rendered[url]
    if isinstance(found, BaseException):
        raise found
    return found


def test_expectations_name_real_pages() -> None:
    """A renamed page must not silently drop its checks."""
    expected = set(EXPECTED_CHARTS) | EXPECTED_MATH | EXPECTED_WIDGET_SLIDERS
    assert expected <= set(PAGES), f"not in _toc.yml: {sorted(expected - set(PAGES))}"


def test_built_pages_match_toc(built_book: Path) -> None:
    built = {
        p.relative_to(built_book).as_posix()
        for p in built_book.rglob("*.html")
        if p.relative_to(built_book).parts[0] not in ("_static", "_sources", "_images")
    }
    assert set(PAGES) == built, "pages built vs _toc.yml (+ index/genindex/search) differ"


@pytest.mark.parametrize("page_path", PAGES)
def test_page_renders_offline(page_path: str, base_url: str, rendered: dict) -> None:
    problems = _problems_of(rendered, f"{base_url}/{page_path}")
    assert not problems, f"{page_path}:\n" + "\n".join(problems)


def test_widget_stack_offline(base_url: str, rendered: dict) -> None:
    """Vendored require.js + widget manager + MathJax draw a slider, with no outside request."""
    problems = _problems_of(rendered, base_url + WIDGET_SMOKE_PATH)
    assert not problems, "synthetic widget page:\n" + "\n".join(problems)


# ----------------------------------------------------------------------------- the book measures nothing


def test_the_build_executes_no_solution_notebook() -> None:
    """The solution notebooks are shown as the deliberate run stored them; only the pages' model cells run."""
    execute = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]
    assert "solutions/*" in execute["exclude_patterns"]
    for page in sorted((ROOT / "book").glob("*.md")):
        for cell in re.findall(r"```\{code-cell\}.*?```", page.read_text(), flags=re.S):
            assert not re.search(r"benchmark|sweep|profile|timing", cell), f"{page.name} measures in a code cell"


def _page_charts(page: Path) -> list[Any]:
    return [json.loads(m.replace("<\\/", "</")) for m in
            re.findall(r'<div class="synclab-plotly"><script type="application/json">(.*?)</script>', page.read_text())]


def test_pages_draw_exactly_what_the_solutions_stored(built_book: Path) -> None:
    """Every glued figure on a page is the stored notebook output, byte for byte: two builds draw the same data."""
    from synclab.claims import stored_figures

    compared = 0
    for page in sorted((ROOT / "book").glob("*.md")):
        charts = _page_charts(built_book / "book" / f"{page.stem}.html")
        for notebook, name in re.findall(r"\{glue:figure\} \.\./(solutions/\S+\.ipynb)::(\w+)", page.read_text()):
            stored, _ = stored_figures(ROOT / notebook)[name]
            assert stored in charts, f"{page.name}: {name} is not the figure {notebook} stored"
            compared += 1
    assert compared >= 15


def test_every_gpu_figure_shows_its_prs_own_numbers_never_an_empty_placeholder(built_book: Path) -> None:
    """Each {gpu-reference} shows what its PR measured (or why none did) and what a GPU run adds: never a blank."""
    from bs4 import BeautifulSoup

    from synclab.reference import REFERENCE_DIR, pr_reports

    reports, shown = pr_reports(), 0
    for page in sorted((ROOT / "book").glob("0*.md")):
        directives = re.findall(r"\{gpu-reference\} (ch\d) ([\w ]+)", page.read_text())
        wanted = [chapter for chapter, _ in directives]
        html = (built_book / "book" / f"{page.stem}.html").read_text()
        assert "No GPU run is recorded for this figure" not in html, page.name
        boxes = BeautifulSoup(html, "html.parser").select("div.synclab-pr-report")
        assert len(boxes) == len(wanted), page.name
        said: set[str] = set()  # a chapter no PR measured says why once per page, in its first box
        for (chapter, names), box in zip(directives, boxes):
            report = reports[chapter]
            text = " ".join(box.get_text(" ").split())
            if report.pr is None:
                assert ("No PR measured this." in text) == (chapter not in said), (page.name, text)
                said.add(chapter)
            else:
                assert f"Reported by PR #{report.pr}" in text, (page.name, text)
                assert all(value in text for row in report.rows for value in row), (page.name, text)
            recorded = [json.loads(p.read_text())["results"] for p in REFERENCE_DIR.glob(f"*/{chapter}.json")]
            if not any(name in results for results in recorded for name in names.split()):  # not this figure's
                assert f"python -m synclab bench {chapter}" in text and "No GPU run of this lab" in text
            else:  # a recorded GPU run: its figures or tables, never the placeholder, and how to read the figures
                assert "No GPU run of this lab" not in text and "on a GPU:" in text, (page.name, text)
                # each GPU figure's caption: its title, then how to read it
                gpu_figures = [f for f in BeautifulSoup(html, "html.parser").select("figure")
                               if str(f.get("id", "")).startswith("fig-gpu")]
                captions = [" ".join(f.select_one("figcaption").get_text(" ").split()) for f in gpu_figures]
                assert captions and all(re.search(r"[\w)]\. [A-Z]", c) for c in captions), (page.name, captions)  # not "Fig. 1.3"
            shown += 1
    assert shown >= 7


def test_every_gpu_figure_says_how_to_read_it() -> None:
    """A {gpu-reference} has one caption per measurement (split at "|"), and one for each that draws a figure."""
    from synclab.reference import REFERENCE_DIR

    for page in sorted((ROOT / "book").glob("0*.md")):
        for names, options in re.findall(r"```\{gpu-reference\} ch\d ([\w ]+)\n((?::\w+:.*\n)*)```", page.read_text()):
            captions = re.search(r"^:caption:(.*)$", options, re.M)
            assert captions, (page.name, names)
            parts = [c.strip() for c in captions.group(1).split("|")]
            assert len(parts) == len(names.split()), (page.name, names)
            chapter = re.search(r"```\{gpu-reference\} (ch\d) " + names, page.read_text()).group(1)
            recorded = [json.loads(p.read_text())["results"] for p in REFERENCE_DIR.glob(f"*/{chapter}.json")]
            for name, caption in zip(names.split(), parts):
                tables_only = name in ("host_blocked",)  # drawn as a table, not a figure
                if any(name in results for results in recorded) and not tables_only:
                    assert caption, (page.name, name)


def test_every_pr_report_names_a_cited_pr_and_says_what_each_figure_adds() -> None:
    from synclab.lab.citations import VLLM, load_citations
    from synclab.reference import pr_reports

    cited = {c.key for c in load_citations()}
    for chapter, report in pr_reports().items():
        assert report.bench and all(text.strip() for text in report.bench.values()), chapter
        if report.pr is None:
            assert report.why and not report.rows, chapter
        else:
            assert (VLLM, report.pr) in cited and report.source and report.measured and report.rows, chapter
    pages = " ".join(p.read_text() for p in (ROOT / "book").glob("0*.md"))
    used = set(re.findall(r"\{gpu-reference\} (ch\d(?: \w+)+)", pages))
    assert {f"{c} {n}" for c, r in pr_reports().items() for n in r.bench} == \
        {f"{u.split()[0]} {n}" for u in used for n in u.split()[1:]}  # every figure reported, no entry unused


def _code_lines(text: str) -> set[str]:
    return {line.split("  #")[0].strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")}


@pytest.mark.parametrize("page", sorted((Path(__file__).resolve().parent.parent / "book").glob("0*.md")),
                         ids=lambda p: p.stem)
def test_after_code_on_a_page_is_the_solutions_own(page):
    """"After" snippets in "The vLLM code" are excerpts of the solution: they cannot drift from it."""
    import nbformat

    root = Path(__file__).resolve().parent.parent
    blocks = re.findall(r"```python\n(# After \(Exercise[^\n]*\n.*?)```", page.read_text(), flags=re.S)
    if not blocks:
        return
    solution = nbformat.read(root / "solutions" / f"{page.stem}.ipynb", as_version=4)
    solution_lines = _code_lines("\n".join(c.source for c in solution.cells if c.cell_type == "code"))
    for block in blocks:
        missing = [line for line in _code_lines(block) if line not in solution_lines and not line.startswith("...")]
        assert not missing, f"{page.name}: not in the solution: {missing}"


def _folded(html: str) -> tuple[list[str], list[str]]:
    """The code blocks of a built page that show an exercise's answer: those folded shut, those shown open."""
    from bs4 import BeautifulSoup

    folded, shown = [], []
    for pre in BeautifulSoup(html, "html.parser").find_all("pre"):
        text = pre.get_text()
        if not re.search(r"# After \(Exercise \d\.\d", text):
            continue
        details = pre.find_parent("details")
        (folded if details is not None and not details.has_attr("open") else shown).append(text.splitlines()[0])
    return folded, shown


def test_no_chapter_page_shows_an_exercises_answer_unfolded(built_book: Path) -> None:
    """Each "after" block that answers an exercise sits in a dropdown, closed until the reader opens it."""
    counted = 0
    for page in sorted((ROOT / "book").glob("0*.md")):
        folded, shown = _folded((built_book / "book" / f"{page.stem}.html").read_text())
        assert shown == [], f"{page.name} shows an answer unfolded: {shown}"
        assert all("(Exercise" in line for line in folded)
        counted += len(folded)
    assert counted >= 11  # 2.1, 3.1-3.5, 3.7, 3.8 twice, 4.1, 5.1
    html = '<details class="sd-dropdown"><pre># After (Exercise 9.9)\nx</pre></details><pre># After (Exercise 9.8)</pre>'
    assert _folded(html) == (["# After (Exercise 9.9)"], ["# After (Exercise 9.8)"])  # the test can fail


def test_chapters_2_and_3_show_the_vllm_code_before_and_after():
    """Before in "The vLLM code" (the stretch sites with their exercises); after only once the exercise is stated."""
    root = Path(__file__).resolve().parent.parent
    for page, core, wanted in (("02_lazy_streams", 1, 1), ("03_pinned_transfers", 3, 8)):
        text = (root / "book" / f"{page}.md").read_text()
        section = text.split("## The vLLM code")[1].split("\n## ")[0]
        assert section.count("{literalinclude} ../synclab/engine/") >= core, page
        assert text.count("{literalinclude} ../synclab/engine/") >= wanted, page
        assert "# After (Exercise" not in text.split("\n## The lab")[0], page
        assert text.count("# After (Exercise") == wanted, page


def test_instructors_page_lists_each_chapters_points_and_the_stored_times(built_book: Path) -> None:
    import json

    from synclab.lab.cli import CHAPTERS
    from synclab.lab.nbgrader_run import GRADING_DIR
    from synclab.lab.nbgrader_source import points_by_chapter

    html = (built_book / "book" / "instructors.html").read_text()
    stored = GRADING_DIR / "autograde.json"
    times = json.loads(stored.read_text())["chapters"] if stored.exists() else {}
    from synclab.lab.exercises import EXERCISES

    for chapter, tasks in points_by_chapter(CHAPTERS).items():
        core = {t: n for t, n in tasks.items() if not EXERCISES[t].stretch}
        stretch = ", ".join(f"{t}: {n}" for t, n in tasks.items() if EXERCISES[t].stretch) or "none"
        detail = ", ".join(f"{task}: {n}" for task, n in core.items())
        timed = f"{times[chapter]['seconds']:.0f} s" if chapter in times else "not recorded"
        assert re.search(rf"<p>{chapter}</p>.*?<p>{re.escape(detail)}</p>.*?<p>{sum(core.values())}</p>.*?"
                         rf"<p>{re.escape(stretch)}</p>.*?<p>{re.escape(timed)}</p>", html, re.DOTALL), chapter
    if stored.exists() and "parallel" in json.loads(stored.read_text()):  # the class's hours, from the same file
        data = json.loads(stored.read_text())
        one_student = sum(row["seconds"] for row in data["chapters"].values())
        hours = 200 * one_student / 3600
        assert f"200 × {one_student:.0f} s = {hours:.1f} hours" in html
        assert f"= {hours / data['parallel']['speedup']:.1f} hours on that machine" in html


def test_listings_show_vllms_code_without_the_labs_scaffolding(built_book: Path) -> None:
    """A literalinclude of the lab's copy of vLLM's code starts at its ``def``: no ``@answer_key`` decorator shown."""
    shown = 0
    for page in sorted((ROOT / "book").glob("0*.md")):
        text = page.read_text()
        shown += text.count(":pyobject:")
        assert text.count(":pyobject:") == text.count(":start-at: def"), f"{page.name}: a listing without :start-at: def"
        html = (built_book / "book" / f"{page.stem}.html").read_text()
        assert "answer_key" not in html, f"{page.name} shows the lab's @answer_key scaffolding"
    assert shown >= 9  # chapters 2 and 3 show the code before their PRs


def test_figures_are_numbered_per_chapter(built_book: Path) -> None:
    """Chapter 4's first figure is Fig. 4.1, not the book's 15th: a figure number tells its chapter. A folded figure is
    numbered under the main flow's figure before it (Fig. 6.3.1), so that the main flow's numbers have no gap."""
    for page in sorted((ROOT / "book").glob("0*.md")):
        chapter = int(page.stem[:2])
        html = (built_book / "book" / f"{page.stem}.html").read_text()
        numbers = re.findall(r'<span class="caption-number">Fig\. ([\d.]+) </span>', html)
        main = [n for n in numbers if n.count(".") == 1]  # the main flow's: 6.1, 6.2, ... with no gap
        assert main == [f"{chapter}.{i}" for i in range(1, len(main) + 1)], (page.name, numbers)
        for n in set(numbers) - set(main):  # a folded figure: under the main flow's figure before it
            parent, sub = n.rsplit(".", 1)
            assert numbers.index(n) > numbers.index(parent) if parent in main else parent == f"{chapter}.0", numbers
            assert sub == "1" or f"{parent}.{int(sub) - 1}" in numbers, (page.name, numbers)


def test_a_gpu_figure_is_numbered_as_the_pages_others(built_book: Path) -> None:
    """A learner could not name the GPU figures ("the H200 one, under Fig. 1.2"): each stored GPU figure is a numbered
    figure of its page, its caption its own title (the provenance stays on the figure)."""
    html = (built_book / "book" / "01_slice_then_split.html").read_text()
    captions = re.findall(r'<span class="caption-number">Fig\. ([\d.]+) </span><span class="caption-text">([^<]*)',
                          html)
    gpu = [(number, text) for number, text in captions if "on a GPU" in text]
    assert len(gpu) == len(list((ROOT / "data" / "reference").glob("*/ch1.json"))) > 0, captions
    assert all("measured on" not in text for _, text in gpu), gpu
