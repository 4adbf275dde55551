"""Every code block on the pages names its source: vLLM's file at a commit (linked), or the lab's own code."""

from __future__ import annotations

import pytest

from synclab.lab.code_sources import code_blocks, unsourced_code_blocks
from tests.notebook_code import ROOT

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

PAGES = sorted((ROOT / "book").glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_code_block_names_its_source(page):
    assert unsourced_code_blocks(page.read_text()) == []


def test_the_chapters_show_vllms_code_at_its_commits():
    """The pattern chapters each show vLLM's code, before or after its PR, linked at a commit."""
    for chapter in ("01_slice_then_split", "02_lazy_streams", "03_pinned_transfers", "04_reverse_placeholder_scans",
                    "05_list_based_caches"):
        lines = [before for _, before in code_blocks((ROOT / "book" / f"{chapter}.md").read_text())]
        assert any(line.startswith("Source:") for line in lines), chapter


GOOD = "https://github.com/vllm-project/vllm/blob/bbee5329880bfe45a8b0cf7753d17501760e62c9/vllm/v1/sample/sampler.py"


@pytest.mark.parametrize("page, expected", [
    ("Before the PR:\n\n```python\nx = 1\n```\n", "line 3: no Source line before it"),
    ("Source: vLLM's sampler (`vllm/v1/sample/sampler.py`).\n\n```python\nx = 1\n```\n",
     "line 3: its Source line links no vLLM file or diff at a commit"),
    ("Source: [main](https://github.com/vllm-project/vllm/blob/main/vllm/v1/sample/sampler.py)\n\n```python\nx\n```",
     "line 3: its Source line links no vLLM file or diff at a commit"),  # a branch moves: not a commit
    ("````{dropdown} After\n```python\nx = 1\n```\n````\n", "line 2: no Source line before it"),
    ("Text.\n\n```{literalinclude} ../synclab/engine/sampler.py\n:pyobject: Sampler\n```\n",
     "line 3: no Source line before it"),
])
def test_a_block_without_its_source_is_caught(page, expected):
    assert [p for p in unsourced_code_blocks(page) if p.startswith(expected)], unsourced_code_blocks(page)


@pytest.mark.parametrize("page", [
    f"Source: [`vllm/v1/sample/sampler.py` at bbee53298]({GOOD}).\n\n```python\nx = 1\n```\n",
    "Source: [#39113's diff](https://github.com/vllm-project/vllm/commit/ed2f282bc) (its left side)\n\n```python\nx\n```",
    "````{dropdown} After\n" + f"Source: [sampler]({GOOD})\n\n```python\nx = 1\n```\n````\n",
    "The lab's own code (`synclab/primer/workloads.py`).\n\n```python\nx = 1\n```\n",
    "Commands are not code blocks of this rule:\n\n```bash\nmake test\n```\n",
])
def test_a_block_with_its_source_passes(page):
    assert unsourced_code_blocks(page) == []
