"""Every code block on a book page says whose code it is: vLLM's, at a commit, or the lab's own.

Serves ``tests/test_code_sources.py``. The rule, for each ```` ```python ```` fence and each
``{literalinclude}`` of ``book/*.md``: the last non-blank line before it (inside a dropdown, the
first line of the dropdown) is either

* ``Source: ...`` with a link to vLLM's code at a commit, a file
  (``https://github.com/vllm-project/vllm/blob/<commit>/vllm/...``) or a merge commit's diff
  (``.../commit/<commit>``, whose left side is the code before the PR), a commit being 7 to 40
  hexadecimal digits; or
* ``The lab's own code...``: code the lab wrote, not vLLM's.

A literalinclude shows the lab's copy of vLLM's code, so its Source line names the vLLM file the
copy follows.
"""

from __future__ import annotations

import re

VLLM_AT_COMMIT = re.compile(
    r"https://github\.com/vllm-project/vllm/(?:blob/[0-9a-f]{7,40}/vllm/[\w/]+\.py|commit/[0-9a-f]{7,40})\b")
_OPENER = re.compile(r"^\s*(```python\s*$|```\{literalinclude\})")
LAB_OWN = "The lab's own code"


def code_blocks(text: str) -> list[tuple[int, str]]:
    """``(line number, the line before it that must say whose code it is)`` for each block of ``text``."""
    lines = text.split("\n")
    found = []
    for i, line in enumerate(lines):
        if _OPENER.match(line):
            before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            found.append((i + 1, before))
    return found


def unsourced_code_blocks(text: str) -> list[str]:
    """The blocks of a page that do not say whose code they are, each as ``line N: what is there instead``."""
    problems = []
    for number, before in code_blocks(text):
        if before.startswith(LAB_OWN):
            continue
        if not before.startswith("Source:"):
            problems.append(f"line {number}: no Source line before it (found {before[:60]!r})")
        elif not VLLM_AT_COMMIT.search(before):
            problems.append(f"line {number}: its Source line links no vLLM file or diff at a commit")
    return problems
