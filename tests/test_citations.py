"""One list of what the book cites: data/citations.yaml against the pages and the solution notebooks.

Every vLLM/PyTorch PR or issue number that a page (book/*.md) or a solution notebook's cell source
(markdown and code, never outputs) cites must be listed in data/citations.yaml; the file's entries
must be well-formed, sorted and unique, and an entry no page cites must say why it is kept (a note).
Where a number is cited is computed here (synclab.lab.citations.cited_in), never kept by hand. The
checker is shown to report an unknown number on a synthetic page, and the citation rule (hex
colours are not citations; PyTorch's numbers are told from vLLM's) is pinned case by case. The dates
the pages show and the intervals any text states between two merges are computed from the stored
dates (days in UTC), each shown to fail on a planted page or entry.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from synclab.lab.citations import (CITATIONS_PATH, PYTORCH, VLLM, Citation, cited_in, cited_numbers, load_citations,
                               problems, unknown_citations)

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def _raw() -> list[dict]:
    return yaml.safe_load(CITATIONS_PATH.read_text())


# ----------------------------------------------------------------------------- the data file


def test_the_file_is_well_formed() -> None:
    found = problems(_raw())
    assert not found, "data/citations.yaml:\n" + "\n".join(found)


def test_every_cited_number_is_listed() -> None:
    unknown = unknown_citations(load_citations(), ROOT)
    assert not unknown, (f"{len(unknown)} citation(s) not in data/citations.yaml (add an entry, sorted by repo and "
                         "number):\n" + "\n".join(unknown))


def test_an_entry_no_page_cites_says_why() -> None:
    cited = cited_in(ROOT)
    silent = [c.label for c in load_citations() if c.key not in cited and not c.note]
    assert not silent, f"listed but cited nowhere, and no note says why: {silent}"


def test_the_file_keeps_no_hand_made_cited_in() -> None:
    """Where a number is cited is computed from the pages; a hand-kept list would go stale."""
    assert all("cited_in" not in entry for entry in _raw())


def test_the_loader_gives_frozen_citations_with_their_links() -> None:
    citations = load_citations()
    first = next(c for c in citations if c.key == (VLLM, 41163))
    assert first.label == "vLLM #41163" and first.url == "https://github.com/vllm-project/vllm/pull/41163"
    assert first.kind == "pr" and first.state == "merged" and first.dates.startswith("opened 2026-04-28")
    issue = next(c for c in citations if c.key == (VLLM, 35631))
    assert issue.url.endswith("/issues/35631") and issue.state == "open"  # still open, whatever its comments said
    with pytest.raises(AttributeError):
        first.number = 1  # type: ignore[misc]


@pytest.mark.parametrize("edit, expected", [
    (lambda e: e[0].pop("used_for"), "missing used_for"),
    (lambda e: e[0].pop("title"), "missing title"),
    (lambda e: e[0].update(state="landed"), "state 'landed'"),
    (lambda e: e[1].update(state="merged"), "state 'merged' is not one of"),  # an issue cannot be merged
    (lambda e: e[0].update(repo="pytorch/vision"), "repo must be one of"),
    (lambda e: e[0].update(cited_in=["book/x.md"]), "unknown field 'cited_in'"),
    (lambda e: e[0].update(date={"opened": "28 April"}), "is not YYYY-MM"),
    (lambda e: e[2].update(date={"merged": "2026-09-01"}), "a merged date, but the state is open"),
    (lambda e: e.append(dict(e[0])), "listed more than once"),
    (lambda e: e.reverse(), "not sorted"),
    (lambda e: e[0].update(verified=False, note=None), "needs a note"),
    (lambda e: e[0].update(note="merged at 14:12 per a summary"), "names no offset from UTC"),
])
def test_malformed_entries_are_reported(edit, expected) -> None:
    entries = [
        {"repo": VLLM, "number": 100, "kind": "pr", "title": "a", "state": "merged", "used_for": "x",
         "date": {"opened": "2026-04-28", "merged": "by 2026-05-01"}},
        {"repo": VLLM, "number": 200, "kind": "issue", "title": "b", "state": "closed", "used_for": "y"},
        {"repo": VLLM, "number": 300, "kind": "pr", "title": "c", "state": "open", "used_for": "z"},
    ]
    assert problems(entries) == []
    edit(entries)
    assert any(expected in line for line in problems(entries)), problems(entries)


# ----------------------------------------------------------------------------- the checker can fail


def test_an_unknown_number_on_a_page_or_in_a_notebook_is_reported(tmp_path: Path) -> None:
    (tmp_path / "book").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "book" / "99_made_up.md").write_text(
        "# A made-up chapter\n\nBefore vLLM PR #41163 the method sliced once per request. A later fix, #99999, "
        "changed it again.\n\nPyTorch issue #123456 explains why.\n")
    notebook = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["Since #41163 vLLM splits once.\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": ['impls = {"after #88888": 1}\n'],
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["see #77777\n"]}]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "solutions" / "99_made_up.ipynb").write_text(json.dumps(notebook))
    known = [Citation(VLLM, 41163, "pr", "used", title="t", state="merged")]

    reported = unknown_citations(known, tmp_path)

    assert len(reported) == 3, reported
    page_99999, page_pytorch, notebook_88888 = reported
    assert page_99999.startswith("book/99_made_up.md: vLLM #99999 is not in data/citations.yaml")
    assert "A later fix, #99999, changed it again" in page_99999  # the context
    assert page_pytorch.startswith("book/99_made_up.md: PyTorch #123456")
    assert notebook_88888.startswith("solutions/99_made_up.ipynb cell 1: vLLM #88888")
    assert not any("77777" in line for line in reported), "a cell's output is not a citation"
    assert cited_in(tmp_path)[(VLLM, 41163)] == ["book/99_made_up.md", "solutions/99_made_up.ipynb"]


# ----------------------------------------------------------------------------- the citation rule


@pytest.mark.parametrize("text, expected", [
    ("as PR #41163 left it", {(VLLM, 41163)}),
    ("#41163 did more", {(VLLM, 41163)}),
    ("(vLLM PR #36614)", {(VLLM, 36614)}),
    ("vLLM issue #35631", {(VLLM, 35631)}),
    ("`#41163`", {(VLLM, 41163)}),
    ('impls = {"AllPool (1.1, #41163)": AllPool}', {(VLLM, 41163)}),
    ("PyTorch issue #126946", {(PYTORCH, 126946)}),
    ("pytorch #126946", {(PYTORCH, 126946)}),
    ("(PyTorch maintainers, pytorch#126946)", {(PYTORCH, 126946)}),
    ("PyTorch issues #126946 and #130785", {(PYTORCH, 126946), (PYTORCH, 130785)}),
    ("a PyTorch footgun (vLLM PR #41429)", {(VLLM, 41429)}),
    ("PyTorch pins it. See #41429 for vLLM's use.", {(VLLM, 41429)}),
    ("a PyTorch pitfall that #34662's review caught", {(VLLM, 34662)}),
    ("PyTorch's issue #126946, #130785, or #159868", {(PYTORCH, 126946), (PYTORCH, 130785), (PYTORCH, 159868)}),
    ("pytorch/pytorch#130785 then #45424", {(PYTORCH, 130785), (VLLM, 45424)}),
    ("| pytorch #159868 | error message | #45424 |", {(PYTORCH, 159868), (VLLM, 45424)}),
    ("https://github.com/vllm-project/vllm/pull/41163", {(VLLM, 41163)}),
    ("https://github.com/pytorch/pytorch/issues/130785", {(PYTORCH, 130785)}),
    ("vLLM #312, 2023", {(VLLM, 312)}),
    # not citations: colours, entities, anchors, headings, short or long numbers
    ('fig.update_traces(marker_color="#333")', set()),
    ("colors = ['#000000', '#111111', \"#d62728\"]", set()),
    ("<span style=\"color: #333; background: #444444\">x</span>", set()),
    ("<style>\np { color: #333; }\n</style>", set()),
    ("```css\n.a { color: #333 }\n```", set()),
    ("```{raw} html\n<b style=x>#333</b> fill: #555\n```", set()),
    ("color:#333", set()),
    ("&#123; and page.html#456", set()),
    ("## 123 heading ### and ##4567", set()),
    ("exercise #12, step #7", set()),
    ("#1234567 and #41163a and #333_x and #fff", set()),
])
def test_the_citation_rule(text: str, expected: set) -> None:
    assert cited_numbers(text) == expected


def test_no_page_or_notebook_source_holds_a_colour_that_reads_as_a_citation() -> None:
    """Every '#digits' the rule takes from the real sources is a listed PR or issue (an unlisted 3-digit one
    would most likely be a colour: the rule would need tightening, not the data file)."""
    known = {c.key for c in load_citations()}
    short = [n for (repo, n) in cited_in(ROOT) if n < 1000 and (repo, n) not in known]
    assert not short, f"3-digit numbers cited but not listed (colours?): {short}"


# ----------------------------------------------------------------------------- the appendix page


def test_the_appendix_renders_the_data_file_and_is_in_the_toc() -> None:
    page = (ROOT / "book" / "appendix_citations.md").read_text()
    assert "```{citations-table}" in page
    assert not cited_numbers(page), "the appendix cites nothing by hand: its table comes from the data file"
    assert page.count("UTC") == 1 and "is a day in UTC" in page  # said once: every date is a day in UTC
    assert "book/appendix_citations" in (ROOT / "_toc.yml").read_text()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert "citations_table" in config["local_extensions"] and "citations_table" in config["config"]["extensions"]


def test_the_table_has_one_row_per_entry_with_a_link(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sphinx", reason="the book's stack is not installed (a GPU machine given the lab's wheels only)")
    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))
    sys.modules.pop("citations_table", None)
    from citations_table import HEADER, citation_rows

    citations = load_citations()
    rows = citation_rows(citations, cited_in(ROOT))
    assert len(rows) == len(citations) and all(len(row) == len(HEADER) for row in rows)
    labels = [row[0][0] for row in rows]
    assert labels.index("vLLM #41163") < labels.index("PyTorch #126946")  # vLLM first
    row = rows[labels.index("vLLM #41163")]
    assert row[0][1] == "https://github.com/vllm-project/vllm/pull/41163"
    assert row[2] == "merged" and "book/01_slice_then_split.md" in row[5]
    assert rows[labels.index("vLLM #35631")][2] == "open issue"
    assert rows[labels.index("PyTorch #126946")][1:3] == [
        "[async H2D] memory ordering issue for async H2D with pin memory on CUDA device", "closed issue"]


def test_every_entry_says_what_the_pages_do_both_ways() -> None:
    """A chapter named in used_for cites the number, and no note calls a cited number uncited."""
    from synclab.lab.citations import two_way_problems

    found = two_way_problems(load_citations(), ROOT)
    assert not found, "data/citations.yaml:\n" + "\n".join(found)


def test_the_two_way_check_fails_on_planted_entries(tmp_path: Path) -> None:
    from synclab.lab.citations import chapters_named, two_way_problems

    assert chapters_named("chapters 2, 4 and 5: x") == {2, 4, 5} and chapters_named("chapters 1-2 since") == {1, 2}
    (tmp_path / "book").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "book" / "03_pinned_transfers.md").write_text("vLLM #41429 changed it.\n")
    planted = [Citation(VLLM, 41429, "pr", "chapters 3 and 5: the PR", note=None),
               Citation(VLLM, 41429, "pr", "chapter 3: the PR", note="not cited by a page yet")]
    found = two_way_problems(planted, tmp_path)
    assert any("names chapter(s) [5]" in line for line in found)
    assert any("note says it is not cited" in line for line in found)


def test_an_appendix_section_cites_for_its_chapter_and_only_its_own(tmp_path: Path) -> None:
    """The appendix pages keep a section per chapter (what vLLM changed after its PR; how the lab measures it): a
    number cited in chapter 3's section counts as chapter 3's, not chapter 5's, and the intro counts for none."""
    from synclab.lab.citations import two_way_problems

    (tmp_path / "book").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "book" / "appendix_since.md").write_text(
        "# Appendix\n\nIntro naming #40143.\n\n(since-ch3)=\n## 3 · Pinned\n\n| #41429 | t | merged | 2026-05-11 | x |\n\n"
        "(since-ch5)=\n## 5 · Caches\n\nNothing cited.\n")
    assert cited_in(tmp_path)[(VLLM, 41429)] == ["book/appendix_since.md § chapter 3"]
    assert cited_in(tmp_path)[(VLLM, 40143)] == ["book/appendix_since.md"]
    planted = [Citation(VLLM, 41429, "pr", "chapter 3: the PR", note=None),
               Citation(VLLM, 41429, "pr", "chapter 5: the PR", note=None),
               Citation(VLLM, 40143, "pr", "chapter 5: the PR", note=None)]
    assert [line.split(":")[0] for line in two_way_problems(planted, tmp_path)] == ["vLLM #41429", "vLLM #40143"]


# ----------------------------------------------------------------------------- dates and intervals in text


def test_every_interval_stated_in_text_is_computed_from_the_stored_dates() -> None:
    """"Four days before #41429" on a page, "three days after #39113" in an entry: the days between the merge dates
    the data file stores, never a count kept by hand."""
    from synclab.lab.citations import interval_problems

    citations = load_citations()
    assert interval_problems(citations, ROOT) == []
    stated = [(c.number, c.used_for) for c in citations if "days after" in c.used_for or "days before" in c.used_for]
    assert (39592, "chapter 2: async scheduling off by default for pooling models, three days after #39113") in stated


def test_an_interval_the_stored_dates_contradict_is_caught(tmp_path: Path) -> None:
    from dataclasses import replace

    from synclab.lab.citations import days_between, interval_problems, stated_intervals

    citations = load_citations()
    merged = {c.number: c.merged for c in citations}
    assert days_between(merged[39592], merged[39113]) == 3 and days_between(merged[41429], merged[41434]) == 4
    (tmp_path / "book").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "book" / "03_x.md").write_text("#41434 (merged 2026-05-07, five days before #41429) edited it.\n")
    found = interval_problems(citations, tmp_path)
    assert any("03_x.md" in line and "put #41434 4 days before #41429" in line for line in found), found
    # the entry's own text, as it read before: "four days after #39113"
    wrong = [replace(c, used_for=c.used_for.replace("three days", "four days")) if c.number == 39592 else c
             for c in citations]
    found = interval_problems(wrong, tmp_path)
    assert any("#39592 used_for" in line and "put #39592 3 days after #39113" in line for line in found), found
    # an interval needs exact days: a bound ("by") or an estimate cannot give one
    vague = [replace(c, merged="about 2026-04-09") if c.number == 39113 else c for c in citations]
    assert any("need exact merge dates" in line for line in interval_problems(vague, tmp_path))
    # the subject is the number cited last before the phrase, in its paragraph
    said = "#1000 landed a day after #2000. Then #4000, two weeks before #3000.\n\nA week after #5000."
    assert [found[:3] for found in stated_intervals(said)] == [(1000, 1, 2000), (4000, -14, 3000)]


def test_every_date_a_page_shows_for_a_pr_is_the_stored_one() -> None:
    """The pages' merge and opened dates (prose "#39592 (merged 2026-04-12", the "Since this PR" tables) are the
    data file's, so a page shows the same UTC day the appendix does."""
    from synclab.lab.citations import page_date_problems

    found = page_date_problems(load_citations(), ROOT)
    assert not found, "\n".join(found)


def test_a_page_date_the_data_file_contradicts_is_caught(tmp_path: Path) -> None:
    from synclab.lab.citations import page_date_problems

    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "03_x.md").write_text(
        "Since #41429 (merged 2026-05-12, the day prhub.com.cn gives in UTC+8) it is gone.\n\n"
        "| PR | title | state | date | what changed |\n|---|---|---|---|---|\n"
        "| #45424 | Ensure memory is pinned | merged | 2026-06-20 | pins by itself |\n"
        "| #49081 | bounds check | open | opened 2026-07-19 | the guard |\n"
        "| #47140 / #47668 | a lint, and its revert | merged, reverted | 2026-06-30 / 2026-07-07 | none |\n")
    found = page_date_problems(load_citations(), tmp_path)
    assert len(found) == 3, found
    assert "#41429 merged 2026-05-12: the stored date is 2026-05-11" in found[0]
    assert "#45424 merged 2026-06-20: the stored date is by 2026-06-21" in found[1]
    assert "#47668 merged 2026-07-07: the stored date is 2026-07-06" in found[2]
