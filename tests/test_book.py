"""The HTML book builds with warnings as errors and every page renders offline.

One real build per test session, the same as ``make book``: ``_build/html`` removed,
then ``jupyter-book build . -W -n --keep-going --all`` (every page re-read; notebooks are
re-executed only when their code changed, through the cache in ``_build/.jupyter_cache``). Then
every page is opened in headless Debian Chromium, served from 127.0.0.1, and must: load,
log no console error, request nothing from another host, draw every plotly chart, typeset
every formula and render every widget.

Needs ``apt-get install -y chromium`` (never ``playwright install``: no downloads here).
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import os
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

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
BUILD_CMD = [str(JUPYTER_BOOK), "build", ".", "-W", "-n", "--keep-going", "--all"]
BUILD_TIMEOUT_S = int(os.environ.get("SYNCLAB_BOOK_TIMEOUT", "3600"))

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # playwright gives every launch a fresh temporary profile (user data dir)
RENDER_TIMEOUT_MS = 30_000

# Content that must not silently vanish. Page -> minimum number of plotly charts.
EXPECTED_CHARTS: dict[str, int] = {"book/00_primer.html": 1}
# Pages that must show typeset math, and pages that must show an ipywidgets slider.
EXPECTED_MATH: set[str] = {"book/00_primer.html"}
EXPECTED_SLIDERS: set[str] = {"book/00_primer.html"}
# Pages Sphinx writes besides the toc entries (index.html redirects to the root page).
EXTRA_PAGES = ["index.html", "genindex.html", "search.html"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

pytestmark = pytest.mark.book


def toc_pages() -> list[str]:
    """HTML page of every document listed in _toc.yml."""
    docs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    docs.append(str(node[key]))
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    return [f"{Path(doc).with_suffix('')}.html" for doc in docs]


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
            BUILD_CMD, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
        )
        if proc.returncode != 0:
            log = (proc.stdout + proc.stderr)[-8000:]
            pytest.fail(f"`{' '.join(BUILD_CMD)}` failed (rc={proc.returncode}):\n{log}")
        stamp.write_text(run_id)
        print(f"book built in {time.monotonic() - start:.1f} s")


@pytest.fixture(scope="session")
def built_book() -> Path:
    _build_book()
    return HTML


@pytest.fixture(scope="session")
def base_url(built_book: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(built_book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: run `apt-get install -y chromium` (Debian's build; "
            "`playwright install` cannot download a browser here)."
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "file"):
        return True
    return parts.scheme in ("http", "https") and parts.hostname in LOCAL_HOSTS


def test_expectations_name_real_pages() -> None:
    """A renamed page must not silently drop its checks."""
    expected = set(EXPECTED_CHARTS) | EXPECTED_MATH | EXPECTED_SLIDERS
    assert expected <= set(PAGES), f"not in _toc.yml: {sorted(expected - set(PAGES))}"


def test_built_pages_match_toc(built_book: Path) -> None:
    built = {
        p.relative_to(built_book).as_posix()
        for p in built_book.rglob("*.html")
        if p.relative_to(built_book).parts[0] not in ("_static", "_sources", "_images")
    }
    assert set(PAGES) == built, "pages built vs _toc.yml (+ index/genindex/search) differ"


def _wait(page: Any, condition_js: str, what: str, problems: list[str]) -> None:
    """Wait for a JS condition; a timeout becomes a reported problem, not an exception,
    so the failure also lists the requests and console errors that explain it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(condition_js, timeout=RENDER_TIMEOUT_MS)
    except PlaywrightTimeout:
        problems.append(f"not rendered within {RENDER_TIMEOUT_MS} ms: {what}")


@pytest.mark.parametrize("page_path", PAGES)
def test_page_renders_offline(page_path: str, base_url: str, browser: Any) -> None:
    page = browser.new_page()
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: m.type == "error" and problems.append(
        f"console error: {m.text} ({m.location.get('url', '')})"))
    page.on("pageerror", lambda e: problems.append(f"uncaught exception: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status} {r.url}"))
    try:
        response = page.goto(f"{base_url}/{page_path}", wait_until="load")
        assert response is not None and response.status == 200, f"{page_path} did not load"

        charts = page.locator("div.synclab-plotly").count()
        if charts < EXPECTED_CHARTS.get(page_path, 0):
            problems.append(f"{charts} plotly chart(s), expected at least "
                            f"{EXPECTED_CHARTS[page_path]}")
        if charts:
            _wait(page, """() => [...document.querySelectorAll('div.synclab-plotly')]
                                .every(div => div.querySelector('svg.main-svg'))""",
                  f"{charts} plotly chart(s) (div.synclab-plotly svg)", problems)

        formulas = page.locator(".math").count()  # Sphinx's MathJax markup
        if not formulas and page_path in EXPECTED_MATH:
            problems.append("no math on a page that must have some")
        if formulas:
            _wait(page, f"() => document.querySelectorAll('mjx-container').length >= {formulas}",
                  f"{formulas} formula(s) (mjx-container)", problems)

        views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        if not views and page_path in EXPECTED_SLIDERS:
            problems.append("no widget on a page that must have a slider")
        if views:
            # The widget manager inserts a .widget-subarea holding the view before each.
            _wait(page, """() => [...document.querySelectorAll(
                               'script[type="application/vnd.jupyter.widget-view+json"]')]
                           .every(s => s.previousElementSibling?.classList.contains('widget-subarea')
                                       && s.previousElementSibling.querySelector('.jupyter-widgets'))""",
                  f"{views} widget(s) (.widget-subarea .jupyter-widgets)", problems)
        if page_path in EXPECTED_SLIDERS and not page.locator(
                ".widget-slider .noUi-target").first.is_visible():
            problems.append("no visible ipywidgets slider (.widget-slider .noUi-target)")

        page.wait_for_load_state("networkidle")  # late fonts and lazily loaded scripts
    finally:
        page.close()

    outside = sorted({url for url in requests if not is_local(url)})
    problems += [f"request to an outside host: {url}" for url in outside]
    assert not problems, f"{page_path}:\n" + "\n".join(problems)
