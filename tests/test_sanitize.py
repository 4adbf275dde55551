"""nbval's sanitizer (tests/sanitize.cfg): every section reaches nbval, and the GPU's words become the CPU's.

nbval reads each section as ``regex: ...`` then ``replace: ...`` (a space after the colon, even when the
replacement is empty); a section it cannot read is dropped without a word, and a GPU run then compares
"CUDA debug mode: 1" against a stored output that never had it.
"""

import re
from pathlib import Path

import pytest
from nbval.plugin import get_sanitize_patterns

pytestmark = pytest.mark.sim  # no device at all: text only

SANITIZE = Path(__file__).with_name("sanitize.cfg")


def sanitized(text: str) -> str:
    for regex, replace in get_sanitize_patterns(SANITIZE.read_text()):
        text = re.sub(regex, replace, text)
    return text


def test_every_section_reaches_nbval():
    sections = re.findall(r"^\[[\w-]+\]$", SANITIZE.read_text(), flags=re.MULTILINE)
    assert len(get_sanitize_patterns(SANITIZE.read_text())) == len(sections)


@pytest.mark.parametrize("gpu,cpu", [
    ("<div><b>1 host-device sync(s)</b> [CUDA] &middot; CUDA debug mode: 1<table>",
     "<div><b>1 host-device sync(s)</b> [simulated GPU on the CPU]<table>"),
    ("2 host-device sync(s) [CUDA]\n  torch.cuda.set_sync_debug_mode reported 2\n- item",
     "2 host-device sync(s) [simulated GPU]\n- item"),
    ("NVIDIA H200 · torch 2.11.0+cu130", "NVIDIA H200 · torch 2.13.0+cpu"),
])
def test_a_gpu_report_reads_as_the_stored_cpu_report(gpu, cpu):
    assert sanitized(gpu) == sanitized(cpu)
