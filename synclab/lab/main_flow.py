"""The main flow of a chapter page: what a reader meets without opening a fold.

A chapter page teaches its pattern in its main flow; history, sources and how the lab measures
sit in folds (``{dropdown}`` directives, admonitions with ``:class: dropdown``, ``<details>``).
This module measures that flow, so that a test can hold every page to the budget CONTRIBUTING.md
states: prose and tables outside folds, code blocks, math and figure directives aside.

``python -m synclab.lab.main_flow book/0*.md`` prints each page's words and PR numbers.
"""

from __future__ import annotations

import re
import sys
from itertools import takewhile
from pathlib import Path

MAX_WORDS = 1800  # words of prose and tables outside folds, per chapter page
MAX_PR_MENTIONS = 8  # times a reader meets a PR number outside folds, per chapter page (mentions, not distinct)
EXERCISE_SPEC = "## The lab"  # the section that states the exercises' contracts: it names no PR

_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\s*(?P<info>.*)$")
_FOLD_DIRECTIVES = {"dropdown", "toggle", "hints"}  # {hints}: folds only
_PR = re.compile(r"#(\d{3,6})\b")
_URL = re.compile(r"\]\([^)]*\)")
# a commit as a reader sees it: 7 to 40 hex digits with at least one digit and one letter (not "deadbeef" prose)
_HASH = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"\b20\d\d-\d\d(?:-\d\d)?\b|\b(?:{_MONTHS})(?: \d{{1,2}},)? 20\d\d\b")


def _is_fold(info: str, options: list[str]) -> bool:
    name = re.match(r"\{([\w:-]+)\}", info)
    if name is None:
        return False
    if name.group(1) in _FOLD_DIRECTIVES:
        return True
    return any(re.match(r":class:.*\bdropdown\b", o.strip()) for o in options)


def _is_prose_directive(info: str) -> bool:
    """Admonitions (not folded) are prose the reader sees: their body counts."""
    name = re.match(r"\{([\w:-]+)\}", info)
    return name is not None and name.group(1) in {"admonition", "note", "tip", "important", "warning", "seealso",
                                                  "attention", "caution", "hint"}


def main_flow(text: str) -> str:
    """The lines of a MyST page a reader sees without opening a fold, code and figures left out."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # front matter
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
        lines = lines[end + 1:]
    out: list[str] = []
    i = 0
    in_details = 0
    in_math = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("<details"):
            in_details += 1
        if in_details:
            if "</details>" in stripped:
                in_details -= 1
            i += 1
            continue
        if stripped == "$$" or (stripped.startswith("$$") and not (stripped.endswith("$$") and len(stripped) > 2)):
            in_math = not in_math
            i += 1
            continue
        if in_math or stripped.startswith("%"):
            i += 1
            continue
        match = _FENCE.match(stripped)
        if match is None:
            out.append(line)
            i += 1
            continue
        fence, info = match.group("fence"), match.group("info")
        body_end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), len(lines))
        body = lines[i + 1:body_end]
        options = [b for b in body if b.strip().startswith(":")]
        if _is_prose_directive(info) and not _is_fold(info, options):
            prose = [b for b in body if not b.strip().startswith(":")]
            out.extend(main_flow("\n".join(prose)).splitlines())  # folds and code inside count as anywhere
        i = body_end + 1  # a fold, a code block, math or a figure: none of it is the main flow's prose
    return "\n".join(out)


def words(text: str) -> int:
    """Words of the main flow: a link counts by its text, not its address."""
    flow = visible(text)
    return len([w for w in re.split(r"\s+", flow) if re.search(r"\w", w)])


def visible(text: str) -> str:
    """The main flow as a reader sees it: links by their text, not their addresses."""
    return _URL.sub("]", main_flow(text))


def pr_numbers(text: str) -> set[int]:
    """Distinct ``#N`` numbers (PRs and issues) a reader meets in the main flow."""
    return set(pr_mentions(text))


def pr_mentions(text: str) -> list[int]:
    """Every ``#N`` (a PR or an issue) a reader meets in the main flow, as often as it is met."""
    return [int(n) for n in _PR.findall(visible(text))]


def commit_hashes(text: str) -> list[str]:
    """Commit hashes a reader sees in the main flow (a link's address is not seen)."""
    return _HASH.findall(visible(text))


def dates(text: str) -> list[str]:
    """Dates a reader meets in the main flow (merge dates belong in the History fold)."""
    return _DATE.findall(visible(text))


def exercise_spec(text: str) -> str:
    """The page's exercise contracts: its ``## The lab`` section and the opening box's task list."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == EXERCISE_SPEC), None)
    section = []
    if start is not None:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
        section = lines[start:end]
    box = next((i for i, line in enumerate(lines) if line.startswith("**Tasks:**")), None)
    tasks = []
    if box is not None:  # the task list runs to the box's next bold label
        tasks = [lines[box], *takewhile(lambda l: not l.startswith(("**", "```")), lines[box + 1:])]
    return "\n".join(tasks + section)


def problems(path: Path) -> list[str]:
    """What puts a chapter page over its budget, in words a writer can act on."""
    text = path.read_text()
    found = []
    n_words, mentions = words(text), pr_mentions(text)
    if n_words > MAX_WORDS:
        found.append(f"{path.name}: {n_words} words in the main flow, more than {MAX_WORDS}: fold history and "
                     "sources into the chapter's closing 'History and sources' dropdown")
    if len(mentions) > MAX_PR_MENTIONS:
        counts = {n: mentions.count(n) for n in sorted(set(mentions))}
        listed = ", ".join(f"#{n} ×{c}" for n, c in counts.items())
        found.append(f"{path.name}: {len(mentions)} PR mentions in the main flow ({listed}), more than "
                     f"{MAX_PR_MENTIONS}: name a PR once where the reader needs its source, say 'the PR' after, "
                     "and move the rest to 'History and sources'")
    if hashes := commit_hashes(text):
        found.append(f"{path.name}: commit hashes in the main flow ({', '.join(hashes)}): keep them in links' "
                     "addresses or in 'History and sources'")
    if when := dates(text):
        found.append(f"{path.name}: dates in the main flow ({', '.join(when)}): move them to 'History and sources'")
    if in_spec := sorted(set(_PR.findall(_URL.sub("]", main_flow(exercise_spec(text)))))):
        found.append(f"{path.name}: the exercise spec names PRs ({', '.join('#' + n for n in in_spec)}): state "
                     "the contract alone; the PR belongs in 'The vLLM code'")
    return found


def main(argv: list[str]) -> int:
    failed = 0
    for name in argv:
        text = Path(name).read_text()
        print(f"{name}: {words(text)} words, {len(pr_mentions(text))} PR mentions {sorted(pr_numbers(text))}")
        failed += bool(problems(Path(name)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
