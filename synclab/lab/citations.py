"""What the book cites: the vLLM and PyTorch PRs and issues listed in ``data/citations.yaml``.

Serves the appendix page ``book/appendix_citations.md`` (its ``{citations-table}`` directive,
``book/_ext/citations_table.py``, renders the file at build time) and ``tests/test_citations.py``,
which fails when a page or a solution notebook cites a number the file does not list, when a page
shows a PR's date other than the stored one (:func:`page_date_problems`), or when a text states an
interval between two merges ("three days after #39113") that the stored dates do not give
(:func:`interval_problems`). Every stored date is a day in UTC.

Where citations are looked for (:func:`cited_sources`): the pages ``book/*.md`` and the cell
sources (markdown and code, never outputs) of ``solutions/*.ipynb``. The labs are generated
from the solutions, so they cite nothing of their own.

The citation rule (:func:`iter_citations`):

* a citation is ``#`` followed by 3 to 6 digits, as in "PR #41163", "#41163", "vLLM issue
  #35631", "PyTorch issue #126946" or "pytorch#126946"; a full GitHub URL
  (``github.com/vllm-project/vllm/pull/41163``, ``.../issues/N``) counts too;
* the digits must end the token: ``#41163a``, ``#1234567`` or ``#333_x`` are not citations;
* the ``#`` must not follow a word character (other than the qualifiers ``pytorch``/``vllm``),
  a quote, ``=``, ``:``, ``&``, ``/`` or another ``#``: that leaves out colours and anchors in
  code and markup (``"#333"``, ``color:#333``, ``fill='#000000'``, ``&#123;``, ``page#123``);
  CSS and raw HTML (``<style>`` blocks, ``style="..."`` attributes, css/html/svg/``{raw}``
  fences) are not read at all, so ``color: #333;`` there is no citation either;
* the repository: a number is PyTorch's when "PyTorch"/"pytorch" (any case, optionally
  "pytorch/pytorch" or "PyTorch's") stands right before it, with at most "PR", "issue" or
  "pull request" (or their plurals) in between: "PyTorch issue #126946", "pytorch #126946",
  "pytorch#126946"; a number that continues such a list ("PyTorch issues #126946 and
  #130785", ", #N", " or #N", "/#N") is PyTorch's too. Every other number is vLLM's, even in a
  sentence that mentions PyTorch ("a PyTorch pitfall that #34662's review caught" cites vLLM
  #34662). A misread number shows up as an unknown citation in tests/test_citations.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
CITATIONS_PATH = ROOT / "data" / "citations.yaml"

VLLM = "vllm-project/vllm"
PYTORCH = "pytorch/pytorch"
REPO_LABELS = {VLLM: "vLLM", PYTORCH: "PyTorch"}
STATES = {"pr": ("merged", "open", "closed-unmerged"), "issue": ("open", "closed")}
DATE_KEYS = ("opened", "merged", "closed")
# A date: YYYY-MM-DD or YYYY-MM, optionally "by " (on or before) or "about ".
DATE_RE = re.compile(r"(?:by |about )?\d{4}-\d{2}(?:-\d{2})?")
REQUIRED = ("repo", "number", "kind", "used_for")
REQUIRED_IF_VERIFIED = ("title", "state")
FIELDS = set(REQUIRED) | set(REQUIRED_IF_VERIFIED) | {"date", "note", "verified"}

_HASH = re.compile(r"(?:(?<=pytorch)|(?<=vllm)|(?<![\w\"'=:&/#]))#(?P<number>\d{3,6})(?!\w)", re.I)
_URL = re.compile(r"github\.com/(?P<repo>vllm-project/vllm|pytorch/pytorch)/(?:pull|issues)/(?P<number>\d+)", re.I)
# "PyTorch" right before a number: "PyTorch issue ", "pytorch/pytorch#", "PyTorch's PR ".
_PYTORCH_LEAD = re.compile(r"\bpytorch(?:/pytorch)?(?:'s)?\s*(?:(?:pull\s+requests?|PRs?|issues?)\s*)?$", re.I)
# What joins the numbers of one list: "#1, #2", "#1 and #2", "#1, and #2", "#1 or #2", "#1/#2".
_LIST_JOIN = re.compile(r",\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+|\s*/\s*", re.I)
# A time of day in a note must say its offset from UTC: "06:12 UTC", "14:12 UTC+8" (every date is a day in UTC).
_TIME_WITHOUT_ZONE = re.compile(r"\b\d{1,2}:\d{2}\b(?! UTC)")
_NOT_PROSE = re.compile(
    r"<style\b.*?</style>"                                    # CSS blocks
    r"|\bstyle\s*=\s*(?P<q>[\"']).*?(?P=q)"                  # style="..." attributes
    r"|^(?P<fence>`{3,}|~{3,})[ \t]*(?:css|scss|html|svg|\{raw\})[^\n]*\n.*?^(?P=fence)",  # css/html/raw fences
    re.S | re.I | re.M)


@dataclass(frozen=True)
class Citation:
    """One PR or issue of ``data/citations.yaml``; ``title``/``state`` are None only when unverified."""

    repo: str
    number: int
    kind: str  # "pr" | "issue"
    used_for: str
    title: str | None = None
    state: str | None = None
    opened: str | None = None
    merged: str | None = None
    closed: str | None = None
    note: str | None = None
    verified: bool = True

    @property
    def key(self) -> tuple[str, int]:
        return (self.repo, self.number)

    @property
    def label(self) -> str:
        """``vLLM #41163``, ``PyTorch #126946``."""
        return f"{REPO_LABELS[self.repo]} #{self.number}"

    @property
    def url(self) -> str:
        """The thread on GitHub (a link on the page; the build fetches nothing)."""
        return f"https://github.com/{self.repo}/{'pull' if self.kind == 'pr' else 'issues'}/{self.number}"

    @property
    def dates(self) -> str:
        """``opened 2026-04-28, merged 2026-04-29``; empty when no date is known."""
        return ", ".join(f"{key} {value}" for key in DATE_KEYS if (value := getattr(self, key)))


def _date_text(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def problems(entries: Any) -> list[str]:
    """What is wrong with the YAML's entries (a list of mappings); empty when well-formed.

    Required fields, allowed repos/kinds/states, dates that fit the state, a note on every
    unverified entry, no duplicates, sorted by (repo, number).
    """
    if not isinstance(entries, list):
        return ["the file must be a YAML list of entries"]
    out: list[str] = []
    keys: list[tuple[str, int]] = []
    for i, entry in enumerate(entries):
        where = f"entry {i}"
        if not isinstance(entry, dict):
            out.append(f"{where}: not a mapping")
            continue
        where = f"entry {i} ({entry.get('repo')}#{entry.get('number')})"
        verified = entry.get("verified", True)
        required = REQUIRED + (REQUIRED_IF_VERIFIED if verified else ())
        out += [f"{where}: missing {field}" for field in required if entry.get(field) in (None, "")]
        out += [f"{where}: unknown field {field!r}" for field in sorted(set(entry) - FIELDS)]
        repo, number, kind, state = entry.get("repo"), entry.get("number"), entry.get("kind"), entry.get("state")
        if repo not in REPO_LABELS:
            out.append(f"{where}: repo must be one of {sorted(REPO_LABELS)}")
        if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
            out.append(f"{where}: number must be a positive integer")
        if kind not in STATES:
            out.append(f"{where}: kind must be one of {sorted(STATES)}")
        elif state is not None and state not in STATES[kind]:
            out.append(f"{where}: state {state!r} is not one of {STATES[kind]} (a {kind})")
        if not isinstance(verified, bool):
            out.append(f"{where}: verified must be true or false")
        elif not verified and not entry.get("note"):
            out.append(f"{where}: an unverified entry needs a note saying what is not known")
        date = entry.get("date") or {}
        if not isinstance(date, dict):
            out.append(f"{where}: date must be a mapping of {DATE_KEYS}")
            date = {}
        for key, value in date.items():
            if key not in DATE_KEYS:
                out.append(f"{where}: date key {key!r} is not one of {DATE_KEYS}")
            elif not DATE_RE.fullmatch(_date_text(value)):
                out.append(f"{where}: date {key}: {value!r} is not YYYY-MM[-DD] (optionally 'by '/'about ')")
        if "merged" in date and state != "merged":
            out.append(f"{where}: a merged date, but the state is {state}")
        if "closed" in date and state not in ("closed", "closed-unmerged"):
            out.append(f"{where}: a closed date, but the state is {state}")
        for field in ("title", "used_for", "note"):
            if entry.get(field) is not None and not isinstance(entry[field], str):
                out.append(f"{where}: {field} must be text")
        if isinstance(entry.get("note"), str):
            out += [f"{where}: the time {t!r} in its note names no offset from UTC (write '11:25 UTC+8, 03:25 UTC')"
                    for t in _TIME_WITHOUT_ZONE.findall(entry["note"])]
        if isinstance(repo, str) and isinstance(number, int):
            keys.append((repo, number))
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    out += [f"{repo}#{number} is listed more than once" for repo, number in duplicates]
    if keys != sorted(keys):
        first = next(b for a, b in zip(keys, keys[1:]) if b < a)
        out.append(f"entries are not sorted by (repo, number): {first[0]}#{first[1]} is out of order")
    return out


def load_citations(path: Path = CITATIONS_PATH) -> list[Citation]:
    """The entries of ``data/citations.yaml`` (sorted by repo, number); ValueError if malformed."""
    import yaml  # PyYAML: requirements.txt

    entries = yaml.safe_load(Path(path).read_text())
    found = problems(entries)
    if found:
        raise ValueError(f"{path}: " + "; ".join(found))
    out = []
    for entry in entries:
        date = entry.get("date") or {}
        out.append(Citation(
            repo=entry["repo"], number=entry["number"], kind=entry["kind"], used_for=entry["used_for"],
            title=entry.get("title"), state=entry.get("state"), note=entry.get("note"),
            verified=entry.get("verified", True),
            **{key: _date_text(date[key]) for key in DATE_KEYS if key in date}))
    return out


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))  # keep offsets and line breaks


def iter_citations(text: str) -> Iterator[tuple[str, int, int]]:
    """``(repo, number, offset)`` of every citation in ``text``, in order (the rule: module docstring)."""
    prose = _NOT_PROSE.sub(_blank, text)
    found = [(m.start(), m.group("repo").lower(), int(m.group("number"))) for m in _URL.finditer(prose)]
    previous: tuple[int, str] | None = None  # (end, repo) of the last '#' citation
    for m in _HASH.finditer(prose):
        if _PYTORCH_LEAD.search(prose, max(0, m.start() - 40), m.start()):
            repo = PYTORCH
        elif previous and _LIST_JOIN.fullmatch(prose, previous[0], m.start()):
            repo = previous[1]  # a list continues in its repository
        else:
            repo = VLLM
        found.append((m.start(), repo, int(m.group("number"))))
        previous = (m.end(), repo)
    for offset, repo, number in sorted(found):
        yield repo, number, offset


def cited_numbers(text: str) -> set[tuple[str, int]]:
    """``{(repo, number)}`` cited in ``text``: ``{("vllm-project/vllm", 41163), ("pytorch/pytorch", 126946)}``."""
    return {(repo, number) for repo, number, _ in iter_citations(text)}


# an appendix page's section for one chapter: a label line "(since-ch3)=", then its heading "## 3 · ..."
_CHAPTER_SECTION = re.compile(r"^\([\w-]+-ch(\d)\)=\n(?=## \1 · )", re.M)


def cited_sources(root: Path = ROOT) -> Iterator[tuple[str, str]]:
    """``(where, text)`` for every page ``book/*.md`` and every solution cell source (never outputs). An appendix
    page with a section per chapter (``(since-ch3)=`` over ``## 3 · ...``) is yielded a section at a time, as
    ``"book/appendix_since.md § chapter 3"``: what it cites, that chapter cites."""
    for page in sorted((root / "book").glob("*.md")):
        where, text = page.relative_to(root).as_posix(), page.read_text()
        parts = _CHAPTER_SECTION.split(text)  # [intro, chapter, section, chapter, section, ...]
        yield where, parts[0]
        for chapter, section in zip(parts[1::2], parts[2::2]):
            yield f"{where} § chapter {chapter}", section
    for notebook in sorted((root / "solutions").glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        for i, cell in enumerate(cells):
            if cell.get("cell_type") in ("markdown", "code"):
                source = cell.get("source", "")
                yield f"{notebook.relative_to(root).as_posix()} cell {i}", "".join(source) if isinstance(
                    source, list) else source


def cited_in(root: Path = ROOT) -> dict[tuple[str, int], list[str]]:
    """Where each number is cited: ``{(repo, number): ["book/01_slice_then_split.md", ...]}`` (files, in order)."""
    out: dict[tuple[str, int], list[str]] = {}
    for where, text in cited_sources(root):
        file = where.split(" cell ")[0]
        for key in sorted(cited_numbers(text)):
            if file not in out.setdefault(key, []):
                out[key].append(file)
    return out


def snippet(text: str, offset: int, width: int = 60) -> str:
    """The text around ``offset`` on one line."""
    return " ".join(text[max(0, offset - width):offset + width].split())


def unknown_citations(citations: list[Citation], root: Path = ROOT) -> list[str]:
    """One line per citation of a page or solution cell that ``citations`` does not list: file, number, context."""
    known = {c.key for c in citations}
    out = []
    for where, text in cited_sources(root):
        for repo, number, offset in iter_citations(text):
            if (repo, number) not in known:
                out.append(f"{where}: {REPO_LABELS[repo]} #{number} is not in data/citations.yaml: "
                           f"...{snippet(text, offset)}...")
    return out


_CHAPTERS_NAMED = re.compile(r"\bchapters? ((?:\d+(?:\s*(?:-|–|,|and)\s*)?)+)")


def chapters_named(used_for: str) -> set[int]:
    """The chapters an entry's ``used_for`` names: "chapters 2, 4 and 5" -> {2, 4, 5}; "chapters 1-2" -> {1, 2}."""
    found: set[int] = set()
    for match in _CHAPTERS_NAMED.finditer(used_for):
        for part in re.split(r"\s*(?:,|and)\s*", match[1].strip(" ,")):
            ends = [int(n) for n in re.split(r"\s*[-–]\s*", part) if n.strip().isdigit()]
            found.update(range(ends[0], ends[-1] + 1) if ends else ())
    return found


def chapters_citing(files: list[str]) -> set[int]:
    """The chapters among the files that cite a number: book/0N_... and solutions/0N_... are chapter N, and so is
    an appendix page's section for chapter N."""
    return {int(m[1] or m[2]) for f in files
            if (m := re.match(r"(?:book|solutions)/0(\d)_|book/appendix_\w+\.md § chapter (\d)$", f))}


def two_way_problems(citations: list[Citation], root: Path = ROOT) -> list[str]:
    """Entries that say what the pages do not: a chapter in ``used_for`` that does not cite the number, or a
    note saying "not cited" about a number a page or notebook cites."""
    cited = cited_in(root)
    out = []
    for c in citations:
        files = cited.get(c.key, [])
        missing = sorted(chapters_named(c.used_for) - chapters_citing(files))
        if missing:
            out.append(f"{c.label}: used_for names chapter(s) {missing}, which do not cite it (cited in: "
                       f"{', '.join(files) or 'nothing'})")
        if files and "not cited" in (c.note or ""):
            out.append(f"{c.label}: its note says it is not cited, but {', '.join(files)} cite(s) it")
    return out


# ----------------------------------------------------------------------------- dates stated in text

_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14}
# "four days before #41429", "a day after #39113", "two weeks after #N", "3 days before #N"
_INTERVAL = re.compile(r"\b(?P<n>\d+|" + "|".join(_NUMBER_WORDS) + r")\s+(?P<unit>days?|weeks?)\s+"
                       r"(?P<way>before|after)\s+#(?P<other>\d{3,6})\b", re.I)
_EXACT_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def stated_intervals(text: str, subject: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    """``(subject, days, other, offset)`` for each "N days before/after #other" in ``text``: ``subject`` was merged
    ``days`` after ``other`` (negative: before). The subject is ``subject`` when given (an entry's own text), else the
    last number cited before the phrase in the same paragraph ("#41434 (merged ..., four days before #41429)")."""
    for m in _INTERVAL.finditer(text):
        n = m["n"].lower()
        count = int(n) if n.isdigit() else _NUMBER_WORDS[n]
        days = count * (7 if m["unit"].lower().startswith("week") else 1)
        who = subject
        if who is None:
            paragraph = text[:m.start()].rsplit("\n\n", 1)[-1]
            before = [number for _, number, _ in iter_citations(paragraph) if number != int(m["other"])]
            if not before:
                continue
            who = before[-1]
        yield who, days if m["way"].lower() == "after" else -days, int(m["other"]), m.start()


def days_between(later: str, earlier: str) -> int:
    from datetime import date

    return (date.fromisoformat(later) - date.fromisoformat(earlier)).days


def interval_problems(citations: list[Citation], root: Path = ROOT) -> list[str]:
    """Each interval a page, a solution cell or an entry's ``used_for``/note states between two merges, against the
    merge dates the data file stores: "three days after #39113" must be the days between the two stored days."""
    merged = {c.number: c.merged for c in citations if c.repo == VLLM}
    texts: list[tuple[str, str, int | None]] = [(where, text, None) for where, text in cited_sources(root)]
    texts += [(f"data/citations.yaml {c.label} {field}", getattr(c, field), c.number)
              for c in citations if c.repo == VLLM for field in ("used_for", "note") if getattr(c, field)]
    out = []
    for where, text, subject in texts:
        for who, days, other, offset in stated_intervals(text, subject):
            said = f"{where}: ...{snippet(text, offset)}..."
            dates = (merged.get(who), merged.get(other))
            if not all(d and _EXACT_DAY.fullmatch(d) for d in dates):
                out.append(f"{said}: #{who} and #{other} need exact merge dates in data/citations.yaml, not {dates}")
            elif (stored := days_between(*dates)) != days:
                way = "after" if stored >= 0 else "before"
                out.append(f"{said}: the stored merge dates ({dates[0]}, {dates[1]}) put #{who} {abs(stored)} days "
                           f"{way} #{other}")
    return out


_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                "November", "December")
_SHOWN_DATE = (r"(?:by |about )?(?:\d{4}-\d{2}(?:-\d{2})?|(?:" + "|".join(_MONTH_NAMES) + r") \d{4})")
# prose: "#39592 (merged 2026-04-12", "#30495 (merged by January 2026", "#48901 (opened 2026-07-17", "#45424 (June 2026"
_PROSE_DATE = re.compile(r"#(?P<number>\d{3,6})\s+\((?:(?P<key>merged|opened)\s+)?(?P<date>" + _SHOWN_DATE + r")")
# a "Since this PR" table row: | #N (/ #M ...) | title | state | date(s) | what changed |
_TABLE_ROW = re.compile(r"^\|\s*(?P<numbers>#\d+(?:\s*/\s*#\d+)*)\s*\|[^|\n]*\|[^|\n]*\|\s*(?P<dates>[^|\n]*?)\s*\|",
                        re.M)


def _as_stored(shown: str) -> tuple[str, str]:
    """A date as a page shows it -> (bound, YYYY-MM[-DD]): "by January 2026" -> ("by ", "2026-01")."""
    bound = next((b for b in ("by ", "about ") if shown.startswith(b)), "")
    day = shown[len(bound):]
    if day.split()[0] in _MONTH_NAMES:
        month, year = day.split()
        day = f"{year}-{_MONTH_NAMES.index(month) + 1:02d}"
    return bound, day


def shown_date_problems(shown: str, stored: str | None) -> str | None:
    """Why a date a page shows disagrees with the stored one, or None: a month names the stored day's month, a day
    is the stored day, and "by"/"about" are the stored ones."""
    if stored is None:
        return "the data file has no such date"
    bound, day = _as_stored(shown)
    stored_bound, stored_day = _as_stored(stored)
    if len(day) == 7:  # a month only: the stored date falls in it, whatever its bound
        return None if stored_day.startswith(day) else f"the stored date is {stored}"
    return None if (bound, day) == (stored_bound, stored_day) else f"the stored date is {stored}"


def page_date_problems(citations: list[Citation], root: Path = ROOT) -> list[str]:
    """Every merge or opened date a page shows for a cited PR, in prose ("#39592 (merged 2026-04-12") or in a
    "Since this PR" table, is the date data/citations.yaml stores (days in UTC)."""
    stored = {c.number: c for c in citations if c.repo == VLLM}
    out = []
    for page in sorted((root / "book").glob("*.md")):
        text = page.read_text()
        shown: list[tuple[int, str, str, int]] = []  # (number, key, date, offset)
        for m in _PROSE_DATE.finditer(text):
            shown.append((int(m["number"]), m["key"] or "merged", m["date"], m.start()))
        for m in _TABLE_ROW.finditer(text):
            numbers = [int(n) for n in re.findall(r"#(\d+)", m["numbers"])]
            cell = m["dates"]
            key = "opened" if cell.startswith("opened ") else "merged"
            parts = [p.strip() for p in cell.removeprefix("opened ").split(" / ")]
            if len(parts) != len(numbers) or not all(re.fullmatch(_SHOWN_DATE, p) for p in parts):
                continue  # not a date column
            shown += [(n, key, p, m.start()) for n, p in zip(numbers, parts)]
        for number, key, date, offset in shown:
            entry = stored.get(number)
            if entry is not None and entry.state != "merged":
                key = "opened"  # an open or closed-unmerged PR's one date is its opening
            why = shown_date_problems(date, getattr(entry, key) if entry else None)
            if why:
                out.append(f"{page.relative_to(root).as_posix()}: #{number} {key} {date}: {why} "
                           f"(...{snippet(text, offset)}...)")
    return out
