"""A chapter page is a lesson: its main flow within budget, its solution out of the reading path.

The main flow (synclab.lab.main_flow) is what a reader meets without opening a fold. Each
chapter page holds it to MAX_WORDS words and MAX_PR_MENTIONS mentions of a PR, with no commit hash,
no date, and no PR in its exercise spec; history and sources live in the chapter's closing fold. The table of contents keeps the solutions in a part of
their own, after every chapter, so that "Next" at a chapter's end opens the next chapter.
Each rule is shown to fail on a planted page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from synclab.lab.main_flow import MAX_PR_MENTIONS, MAX_WORDS, main_flow, pr_mentions, pr_numbers, problems, words
from tests.toc import read_toc, toc_files

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parents[1]
CHAPTER_PAGES = sorted((ROOT / "book").glob("0*.md"))


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=lambda p: p.stem)
def test_every_chapter_page_teaches_within_its_budget(page: Path) -> None:
    found = problems(page)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=lambda p: p.stem)
def test_every_chapter_page_ends_with_its_history_folded(page: Path) -> None:
    text = page.read_text()
    # the primer follows no PR: its closing fold is named for what it holds, not for a history it does not have
    fold = "How the lab measures, and sources" if page.stem == "00_primer" else "History and sources"
    assert fold in text, f"{page.name}: no '{fold}' section"
    assert fold not in main_flow(text), f"{page.name}: '{fold}' is not folded"


def test_the_counter_skips_folds_code_math_and_figures_and_counts_admonitions() -> None:
    page = "\n".join([
        "---", "kernelspec: {name: python3}", "---",
        "# Title", "one two three",
        "```{admonition} In this chapter", ":class: tip", "four five", "```",
        "````{dropdown} History and sources", "#11111 #22222 many words here", "```python", "x = 1", "```", "````",
        "```{admonition} Folded", ":class: dropdown", "#33333 hidden", "```",
        "<details><summary>x</summary>", "#44444 hidden", "</details>",
        "```python", "code words not counted #55555", "```",
        "$$", "T = a + b", "$$",
        "```{glue:figure} ../solutions/x.ipynb::fig", ":name: fig-x", "caption words", "```",
        "See [the docs](https://example.com/a/b) and PR #66666.",
    ])
    assert words(page) == 1 + 3 + 2 + 6  # the title, the prose, the admonition, the last sentence (not its URL)
    assert pr_numbers(page) == {66666}


def test_a_page_over_budget_is_named_with_what_to_do(tmp_path: Path) -> None:
    long_page = tmp_path / "09_long.md"
    long_page.write_text("# Long\n" + "word " * MAX_WORDS + "\n" + "#40000 " * (MAX_PR_MENTIONS + 1) + "\n")
    found = problems(long_page)
    assert any("words in the main flow" in p and "History and sources" in p for p in found)
    assert any(f"{MAX_PR_MENTIONS + 1} PR mentions" in p and "#40000 ×9" in p for p in found), found
    folded = tmp_path / "09_folded.md"
    folded.write_text("# Short\n````{dropdown} History and sources\n" + "word " * MAX_WORDS + "\n" +
                      "#40000 " * (MAX_PR_MENTIONS + 1) + "merged 2026-05-11 at 53181384e\n````\n")
    assert problems(folded) == []


def test_one_pr_named_often_is_counted_by_its_mentions() -> None:
    page = "# T\n" + "PR #41163 did it. " * 3
    assert pr_numbers(page) == {41163} and pr_mentions(page) == [41163] * 3


@pytest.mark.parametrize("line, expected", [
    ("PR #41429 (merged 2026-05-11) removed them.", "dates in the main flow (2026-05-11)"),
    ("on main by August 2026, it changed.", "dates in the main flow (August 2026)"),
    ("The code at 53181384e shows it.", "commit hashes in the main flow (53181384e)"),
    ("## The lab\n\nWrite it as PR #41163 left it.\n\n## Pitfalls\n", "the exercise spec names PRs (#41163)"),
    ("**Tasks:** 1.1 as vLLM has done since #41433 ·\n**Check:** x", "the exercise spec names PRs (#41433)"),
])
def test_history_in_the_main_flow_is_named(tmp_path: Path, line: str, expected: str) -> None:
    page = tmp_path / "09_history.md"
    page.write_text("# H\n\n" + line + "\n")
    assert any(expected in p for p in problems(page)), problems(page)


def test_a_hash_in_a_links_address_or_a_word_like_added_is_not_history(tmp_path: Path) -> None:
    page = tmp_path / "09_clean.md"
    page.write_text("# C\n\nSource: [the file at the PR's parent](https://github.com/vllm-project/vllm/blob/"
                    "53181384e036cc660ff6754c8a94a8e6d0b60562/vllm/x.py). It was added, then defaced.\n\n"
                    "## The lab\n\nWrite the contract.\n\n## Pitfalls\n\nSee #41163.\n")
    assert problems(page) == []


# ----------------------------------------------------------------------------- the table of contents


def solutions_in_the_reading_path(files: list[str]) -> list[str]:
    """Solutions listed before the last chapter page: "Next" would open them in the middle of the book."""
    chapters = [i for i, f in enumerate(files) if f.startswith("book/0")]
    return [f for f in files[:max(chapters, default=0)] if f.startswith("solutions/")]


def test_no_solution_sits_between_two_chapters() -> None:
    files = read_toc()
    assert solutions_in_the_reading_path(files) == []
    assert sum(f.startswith("solutions/") for f in files) == len(CHAPTER_PAGES)  # each still in the book


def test_a_solution_between_two_chapters_is_caught() -> None:
    planted = {"root": "book/intro", "parts": [{"chapters": [
        {"file": "book/00_primer"}, {"file": "solutions/00_primer"}, {"file": "book/01_slice_then_split"},
        {"file": "solutions/01_slice_then_split"}]}]}
    assert solutions_in_the_reading_path(toc_files(planted)) == ["solutions/00_primer"]


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=lambda p: p.stem)
def test_a_chapters_first_box_points_to_its_lab(page: Path) -> None:
    flow = main_flow(page.read_text())
    first_box = page.read_text().split("```{admonition}", 1)[1].split("```", 1)[0]
    assert f"labs/{page.stem}.ipynb" in first_box, page.name
    assert "solutions/" not in flow.split("\n## ", 1)[0], f"{page.name}: the opening links to the solution"


def test_no_directive_fence_holds_a_backtick_in_its_title() -> None:
    """CommonMark: the info string of a backtick fence may not hold a backtick, so such a fence is no fence at all.
    Chapter 3's table of sync kinds, titled with `count_syncs` in backticks, rendered as a raw paragraph, and the
    3.6 hints after it as a code block (a learner's screenshot)."""
    import re

    fence = re.compile(r"^(`{3,})\{[a-z-]+\}(.*)$")
    found = [f"{page.name}:{n}: {line}" for page in sorted((ROOT / "book").glob("*.md"))
             for n, line in enumerate(page.read_text().splitlines(), 1)
             if (m := fence.match(line)) and "`" in m.group(2)]
    assert not found, "a directive fence whose title holds a backtick renders as text: " + "; ".join(found)


def _wrapped_into_a_list(text: str) -> list[str]:
    """Prose lines that Markdown reads as a list item: a wrapped sum ("2 × (100/3\\n+ 5)") starts one with "+ "; the
    book writes its lists with "-" and "1.", never "+"."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~", "$$")):  # code and display math are not prose
            fenced = not fenced
        elif not fenced and line.lstrip().startswith("+ "):
            found.append(f"line {number}: {line.strip()[:60]}")
    return found


@pytest.mark.parametrize("page", sorted((ROOT / "book").glob("*.md")), ids=lambda p: p.stem)
def test_no_wrapped_line_of_prose_becomes_a_list_item(page: Path) -> None:
    assert _wrapped_into_a_list(page.read_text()) == []


def test_a_sum_wrapped_onto_a_plus_is_caught() -> None:
    assert _wrapped_into_a_list("gives 2 × (100/3\n+ 5) + 60/3.\n\n```python\n+ 1\n```\n$$\na\n+ b\n$$\n") == [
        "line 2: + 5) + 60/3."]
