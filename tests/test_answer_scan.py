"""The grader's reading of answer cells: every way in that a reviewer found is named; honest answers are not.

The cheats below are red teams' submissions, as written; each earned points before :mod:`synclab.lab.answer_scan`.
The end-to-end tests judge them as ``grade --json`` does: each is named in the review lines, and the score is the
checks' alone. Every exercise is judged apart (the checks in the grader's process, the answer in its own), so a cheat
that reaches for the checks finds none; where one still earns what its honest version would not, the test pins it and
says ``GAP``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from synclab.lab import cli
from synclab.lab.answer_scan import package_names, suspicious
from synclab.lab.exercises import points_of
from synclab.lab.labgen import cell_roles
from synclab.primer import checks as primer_checks

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parent.parent

SETUP = "from synclab import primer\nm = primer\n"  # a setup cell names the chapter's package
WALKS_THE_STACK = '''import dataclasses, inspect

def _fix(impl, rng):
    f = inspect.currentframe()
    while f.f_code.co_name != "run_checks":
        f = f.f_back
    for o in f.f_locals["outcomes"]:
        o.status = "passed"

def decode_step(batch):
    raise NotImplementedError("not done yet")
'''
REWRITES_THE_CHECKS = '''import dataclasses

class _Config:
    """Looks like a harmless config class; its body runs when the grader loads the definitions."""
    primer.CHECKS_0_1[:] = [dataclasses.replace(c, run=lambda impl, rng: None) for c in primer.CHECKS_0_1]
    primer.SNIPPETS.clear()

def decode_step(batch):
    raise NotImplementedError("not done yet")
'''
EQUALS_ANYTHING = '''class _Yes(int):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = int.__hash__

def my_predictions() -> dict[str, int]:
    return {k: _Yes(0) for k in "abcdefgh"}
'''
DISGUISED_CALLER = '''import os, types, synclab
from synclab.primer import checks as _pc

def _trampoline():
    home = os.path.join(os.path.dirname(synclab.__file__), "util.py")
    code = compile("def call(f, *a):\\n    return f(*a)\\n", home, "exec")
    return types.FunctionType(next(c for c in code.co_consts if isinstance(c, types.CodeType)), {})

def decode_step(batch):
    return _trampoline()(_pc._decode_step_reference, batch)
'''
GUARD_OFF = '''import inspect
from synclab.primer import checks as _pc

def _unguarded(f, *a):
    running = getattr(inspect.getmodule(_pc.answer_key), "_RUN" + "NING")
    running.append("9.9")
    try:
        return f(*a)
    finally:
        running.pop()
'''
READS_THE_COURSE = '''import json

def _answer(pid):
    root = open("/pr" + f"oc/{pid}/stat").read()
    return json.loads(root)
'''

CHEATS = [  # (what it does, the cell, a phrase its finding must hold)
    ("walks up the stack to the checks' outcomes", WALKS_THE_STACK, "imports inspect"),
    ("walks up the stack to the checks' outcomes", WALKS_THE_STACK, "reads .f_back"),
    ("rewrites the checks from a class body", REWRITES_THE_CHECKS, "changes the package's primer.CHECKS_0_1[:]"),
    ("rewrites the checks from a class body", REWRITES_THE_CHECKS, "changes the package's primer.SNIPPETS (.clear())"),
    ("an int that equals anything", EQUALS_ANYTHING, "class _Yes defines __eq__"),
    ("code compiled under the package's file name", DISGUISED_CALLER, "uses compile"),
    ("code compiled under the package's file name", DISGUISED_CALLER, "imports types"),
    ("code compiled under the package's file name", DISGUISED_CALLER, "uses _pc._decode_step_reference"),
    ("turns the guard off by its state", GUARD_OFF, "uses getattr other than with a plain attribute name"),
    ("reads /proc and the course", READS_THE_COURSE, "uses open"),
    ("a class with its own attribute lookup", "class A:\n    def __getattribute__(self, n):\n        return 1\n",
     "defines __getattribute__"),
    ("the builtins through a dunder chain", "x = ().__class__.__base__.__subclasses__()\n", "uses .__class__"),
    ("sys through torch", "import torch\nf = torch.sys\n", "reaches .sys"),
    ("an alias of the chapter's package", "m.CHECKS_0_1.clear()\n", "changes the package's m.CHECKS_0_1"),
    ("getattr handed around", "import functools\ng = functools.partial(getattr, object())\n",
     "uses getattr other than"),
    ("attributes looked up from a string", "import re\nf = re.Pattern\nimport string\n"
     "g = string.Formatter().get_field('0.gi_frame', (f,), {})\n", "uses .get_field"),
    ("code in a string annotation, evaluated by typing",
     "import typing\ndef f(x: \"__import__('sys')\"):\n    pass\nh = typing.get_type_hints(f)\n",
     "annotates with code in a string"),
    ("torch's modes switched off, so nothing is counted",
     "import torch\ndef f(x):\n    with torch._C.DisableTorchFunction():\n        return x.tolist()\n",
     "uses .DisableTorchFunction"),
    ("torch's modes imported", "from torch.overrides import TorchFunctionMode\n", "imports torch.overrides"),
    ("a check's own run, reached for its exception (red team)",
     "def _grab():\n    try:\n        primer.CHECKS_0_1[1].run(None, None)\n    except Exception as e:\n"
     "        return type(e)\n", "reaches primer.CHECKS_0_1, the grader's own machinery"),
    ("TorchScript, whose tolist the counters never see (red team)",
     "import torch\ndef fetch(x):\n    return x.tolist()\nf = torch.jit.script(fetch)\n", "uses torch.jit"),
    ("torch.compile", "import torch\n@torch.compile\ndef f(x):\n    return x + 1\n", "uses torch.compile"),
    ("the counted history's items, read around the count",
     "def f(ids):\n    return ids._CountingList__items[:]\n", "(name-mangled) attribute"),
    ("a Tensor that dispatches its own way",
     "import torch\nclass T(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, *a, **k):\n"
     "        return True\n", "defines __torch_function__"),
    # below Python, where no audit event is raised (red team, second round, and the review after it): any byte of
    # the process read or written through an array's strides, any file mapped by torch
    ("any byte of the process, through numpy's strides",
     "import numpy as np\nfrom numpy.lib.stride_tricks import as_strided\n"
     "def peek(obj, n):\n    base = np.zeros(8, dtype=np.uint8)\n    low = np.lib.array_utils.byte_bounds(base)[0]\n"
     "    return as_strided(base, shape=(id(obj) - low + n,), strides=(1,))\n", "imports numpy.lib.stride_tricks"),
    ("any byte of the process, through numpy's strides", "import numpy as np\n"
     "v = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(10**6,), strides=(1,))\n", "uses .as_strided"),
    ("an array's address", "import numpy as np\nlow = np.lib.array_utils.byte_bounds(np.zeros(1))[0]\n",
     "uses .byte_bounds"),
    ("a course file mapped by torch", "import torch\nt = torch.from_file('/course/solutions/00.ipynb', size=64)\n",
     "uses .from_file"),
    # red team, fifth round: results that come back through torch's transforms or autograd carry no device mark
    ("a copy made by vmap, read uncounted", "import torch\ndef f(x):\n    return torch.vmap(lambda r: r * 1)(x).tolist()\n",
     "uses .vmap"),
    ("device values carried out by a gradient", "import torch\ndef f(x):\n    h = torch.zeros(x.shape)\n"
     "    (h * x).sum().backward()\n    return h.grad.tolist()\n", "uses .backward"),
    ("torch.func's transforms", "from torch.func import grad\n", "imports torch.func"),
    ("a course file mapped by torch's storage", "from torch import UntypedStorage\n"
     "s = UntypedStorage.from_file('/course/solutions/00.ipynb', False, 64)\n", "uses .from_file"),
]


@pytest.mark.parametrize("what, source, phrase", CHEATS, ids=[f"{c[0]}: {c[2]}" for c in CHEATS])
def test_each_way_into_the_grader_is_named(what, source, phrase):
    found = suspicious(source, package_names([SETUP, source]))
    assert any(phrase in line for line in found), (what, found)


def test_no_cell_of_the_lab_or_its_solutions_is_suspicious_but_the_setup_imports():
    """Every answer of the book, and every cell of the labs, reads as honest (setup cells import synclab.checks)."""
    for path in sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "labs").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%"))
            found = [f for f in suspicious(source) if ": imports " not in f]
            assert not found, (path.name, index, found)
    honest = ["import bisect\nfrom itertools import accumulate\n\ndef f(xs: 'list[int]') -> \"Foo | None\":\n"
              "    return list(accumulate(xs))\n",
              "class R:\n    def __init__(self):\n        self.cache = None\n        setattr(self, 'hits', 0)\n"
              "        getattr(self, 'cache')\n"]
    assert [suspicious(s) for s in honest] == [[], []]


@pytest.mark.slow
def test_a_class_body_that_rewrites_the_checks_scores_0_and_an_int_that_equals_anything_earns_its_values(tmp_path, capsys):
    """Class bodies run when the grader loads the definitions: the one that rewrote the checks got 20 of 20."""
    nb = nbformat.read(ROOT / "solutions" / "00_primer.ipynb", as_version=4)
    roles = cell_roles(nb)
    for cell in nb.cells:
        role, task = roles.get(cell.get("id", ""), ("other", ""))
        if role == "exercise":
            cell.source = {"0.1": REWRITES_THE_CHECKS, "0.2": EQUALS_ANYTHING}[task]
    path = tmp_path / "cheat.ipynb"
    nbformat.write(nb, path)
    cli.main(["grade", str(path), "--json"])
    summary = json.loads(capsys.readouterr().out)
    by_task = {e["task"]: e for e in summary["exercises"]}
    # 0.2's int that equals anything is read as its values (all 0): it earns what an honest "0 for every snippet"
    # earns, the snippets that make no sync, and no more
    zero_share = sum(n == 0 for n in primer_checks._measure_snippet_syncs().values()) / len(primer_checks.SNIPPETS)
    assert by_task["0.1"]["earned"] == 0
    assert by_task["0.2"]["earned"] == round(by_task["0.2"]["points"] * zero_share, 2), by_task
    assert any(re.search(r"changes the package's primer\.CHECKS_0_1", f) for f in by_task["0.1"]["review"])
    assert any("class _Yes defines __eq__" in f for f in by_task["0.2"]["review"])
    # 0.1 is judged apart: the class body rewrote a table in the answer's process, where no check runs


def _solution_source(stem: str, name: str) -> str:
    """The solution's cell that defines ``name`` at its top level."""
    nb = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    return next(c.source for c in nb.cells
                if c.cell_type == "code" and re.search(rf"^(class|def) {name}\b", c.source, re.M))


def _judged(tmp_path: Path, answers: dict[str, str], capsys: pytest.CaptureFixture,
            stem: str = "00_primer", task: str | None = None) -> dict[str, dict]:
    """``check --json`` on the solution ``stem`` with the answer cells of ``answers``' exercises replaced (of
    exercise ``task`` alone, where one is named)."""
    nb = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    roles = cell_roles(nb)
    for cell in nb.cells:
        role, tasks = roles.get(cell.get("id", ""), ("other", ""))
        task = tasks.split(",")[0]  # a cell of several solution blocks names its task for each
        if role == "exercise" and task in answers:
            cell.source = answers[task]
    path = tmp_path / f"cheat_{stem}.ipynb"
    nbformat.write(nb, path)
    cli.main(["grade", str(path), "--json", *(["--task", task] if task else [])])
    return {e["task"]: e for e in json.loads(capsys.readouterr().out)["exercises"]}


@pytest.mark.slow
def test_the_guard_turned_off_and_code_disguised_as_the_package_are_seen_when_they_run(tmp_path, capsys):
    """Judged apart, the guard turned off in the answer's process guards nothing: the reference is not there, so the
    answer earns 0 (0.1 earned the checks of results, 11.2 of 14, while judged beside its checks; 6.2 earned 3 of 3);
    the disguised caller earns 0."""
    by_task = _judged(tmp_path, {
        "0.1": GUARD_OFF + "\n\ndef decode_step(batch):\n    return _unguarded(_pc._decode_step_reference, batch)\n",
        "0.2": DISGUISED_CALLER + "\n\ndef my_predictions():\n    return _trampoline()(_pc._measure_snippet_syncs)\n",
    }, capsys)
    assert by_task["0.1"]["earned"] == 0 and by_task["0.2"]["earned"] == 0, by_task
    assert any("reaches _pc.answer_key, the grader's own machinery" in f for f in by_task["0.1"]["review"])
    row = _judged(tmp_path, {"6.2": GUARD_OFF + "\n\ndef ablation_row(config, workload, fixes):\n"
                                             "    from synclab.capstone import checks as _c6\n"
                                             "    return _unguarded(_c6._ablation_row_reference, config)\n"},
                  capsys, "06_capstone_engine_step", "6.2")["6.2"]
    assert row["earned"] == 0, row
    # the audit sees the disguise's compile
    assert any(f.startswith("the grader's sandbox") for f in by_task["0.2"]["review"]), by_task["0.2"]["review"]


ALL_PASS = WALKS_THE_STACK.replace("def decode_step(batch):", """def _all_pass():
    f = inspect.currentframe()
    while f is not None and f.f_code.co_name != "run_checks":
        f = f.f_back
    checks = f.f_locals["checks"]
    checks.append(dataclasses.replace(checks[0], run=_fix, points=0))


def decode_step(batch):
    _all_pass()""")


@pytest.mark.slow
def test_outcomes_and_the_checks_list_cannot_be_edited_from_the_answer(tmp_path, capsys):
    """The stack walk reaches run_checks, but its checks are a tuple and an outcome is frozen: 0, not 20."""
    by_task = _judged(tmp_path, {"0.1": ALL_PASS, "0.2": "def my_predictions():\n    _all_pass()\n    return {}\n"},
                      capsys)
    assert by_task["0.1"]["earned"] == by_task["0.2"]["earned"] == 0, by_task


# A second red team's, as they wrote them: each earned points past the grader above.
SHADOWS_THE_CHECK = '''import dataclasses
def decode_step(batch):
    raise NotImplementedError("Exercise 0.1")
class primer:
    def check_decode_step(impl, real=primer):
        r = real.check_decode_step(impl)
        return type(r)(r.title, [dataclasses.replace(o, status="passed") for o in r.outcomes], r.seed)
'''
THREAD_CALLS_THE_BASELINE = '''import torch.storage
def decode_step(batch):
    box = []
    t = torch.storage.threading.Thread(target=list.extend, args=(box, map(primer.decode_step_baseline, [batch])))
    t.start(); t.join()
    if not box:
        raise ValueError("NaN in logits")
    return box[0]
'''
# The same two at 6.2, whose checks asked the answer's own process until every exercise was judged apart.
SHADOWS_THE_CHECK_6_2 = '''import dataclasses
def ablation_row(config, workload, fixes):
    raise NotImplementedError("Exercise 6.2")
class ch6:
    def check_ablation_row(impl, real=ch6):
        r = real.check_ablation_row(impl)
        return type(r)(r.title, [dataclasses.replace(o, status="passed") for o in r.outcomes], r.seed)
'''
THREAD_RUNS_THE_ROW = '''from threading import Thread
def ablation_row(config, workload, fixes):
    box = []
    t = Thread(target=lambda: box.append(_right_row(config, workload, fixes)))
    t.start(); t.join()
    return box[0]
'''
A_HELPER_CALLS_THE_REFERENCE = '''from synclab.timing import benchmark
class Got(Exception):
    pass
def decode_step(batch):
    box = []
    def grab(result):
        box.append(result)
        raise Got()
    try:
        benchmark(primer.decode_step_baseline, batch, check=grab)
    except Got:
        pass
    return box[0]
'''


def test_a_comment_is_prose_not_a_flag():
    """An honest answer whose comment says "builtins" was flagged (0 on both exercises); comments and docstrings
    are not read for the grader's parts any more."""
    from synclab.lab.judge import _TAMPERING, review_lines

    cell = 'def f(xs):\n    """Sum of plain builtins ints."""\n    return sum(xs)  # builtins ints: no sync\n'
    assert review_lines([cell], _TAMPERING) == [] and suspicious(cell) == []
    assert review_lines(["import builtins\n"], _TAMPERING) == ["import builtins"]


def test_the_checks_machinery_by_another_name_is_named():
    found = suspicious("from synclab.primer.checks import Check, run_checks, _measure_snippet_syncs\n")
    assert any("imports synclab.primer.checks" in f for f in found)
    assert any("imports run_checks from synclab.primer.checks" in f for f in found)
    assert any("imports _measure_snippet_syncs from synclab.primer.checks, a private part" in f for f in found)
    assert any("reaches .threading" in f for f in suspicious(THREAD_CALLS_THE_BASELINE))


@pytest.mark.slow
def test_a_shadowed_check_a_thread_and_a_helper_calling_the_answer_are_named(tmp_path, capsys):
    """The check call reaches the chapter's own checks; a thread of the reader's is seen; a package helper that
    calls what it is handed cannot call an answer for the reader. Judged apart, the shadow never meets the checks (6.2
    and 0.1 earn 0); a right row run on a thread earns what the right row earns, no more; and the baseline the thread
    and the helper call is not in 0.1's answer's process: the step never sees a result of its own."""
    capstone = "06_capstone_engine_step"
    row = _judged(tmp_path, {"6.2": SHADOWS_THE_CHECK_6_2}, capsys, capstone, "6.2")["6.2"]
    assert row["earned"] == 0, row
    right = _solution_source(capstone, "ablation_row").replace("def ablation_row(", "def _right_row(")
    row = _judged(tmp_path, {"6.2": right + "\n\n" + THREAD_RUNS_THE_ROW}, capsys, capstone, "6.2")["6.2"]
    assert row["earned"] == points_of("6.2"), row
    none = "def my_predictions():\n    return {}\n"
    by_task = _judged(tmp_path, {"0.1": SHADOWS_THE_CHECK, "0.2": none}, capsys)
    assert by_task["0.1"]["earned"] == 0, by_task["0.1"]
    by_task = _judged(tmp_path, {"0.1": THREAD_CALLS_THE_BASELINE.replace("import torch.storage\n", "")
                                 .replace("torch.storage.threading.Thread", "Thread") + "\n\nfrom threading "
                                 "import Thread\n", "0.2": none}, capsys)
    # GAP: the step that only raises passes the NaN check (2.8 of 14), as it did beside the checks
    assert by_task["0.1"]["earned"] == 2.8 and any("imports threading" in f for f in by_task["0.1"]["review"])
    by_task = _judged(tmp_path, {"0.1": A_HELPER_CALLS_THE_REFERENCE, "0.2": none}, capsys)
    assert by_task["0.1"]["earned"] == 0, by_task["0.1"]


# A third red team's, as they wrote them: 20 of 20 past the grader above.
A_CHECKS_HELPER_CALLS_THE_BASELINE = '''import functools
import synclab.pinned_transfers
from synclab.device import unmark_device

def decode_step(batch):
    unmark_device(batch.logits)
    unmark_device(batch.seq_lens_gpu)
    return synclab.pinned_transfers.checks.common.counted(functools.partial(primer.decode_step_baseline, batch))[0]
'''
ASKS_THE_CHECKS = '''def my_predictions():
    preds = {k: 0 for k in "abcdefgh"}
    for k in preds:
        for guess in range(4):
            trial = dict(preds, **{k: guess})
            report = primer.check_predictions(lambda: trial)
            if report.outcomes[0].status == "passed":
                return trial
    return preds
'''


@pytest.mark.slow
def _all_zeros_earn() -> float:
    """What 0.2's predictions of no sync at all earn: the snippets that make none."""
    from synclab import primer

    report = primer.check_predictions(lambda: dict.fromkeys("abcdefgh", 0), seed=0)
    return round(points_of("0.2") * report.earned / report.points, 2)


def test_a_checks_helper_and_the_checks_as_an_oracle_earn_nothing(tmp_path, capsys):
    """The reader's code on the stack between the checks and an answer is the reader calling it. 0.2 is judged
    apart: the checks its answer asks in its own process have no measured counts to compare with (its install does
    not ship them), so the oracle says nothing and the answer earns what its fallback guess earns."""
    by_task = _judged(tmp_path, {"0.1": A_CHECKS_HELPER_CALLS_THE_BASELINE, "0.2": ASKS_THE_CHECKS}, capsys)
    assert by_task["0.1"]["earned"] == 0, by_task
    assert by_task["0.2"]["earned"] == _all_zeros_earn() < points_of("0.2"), by_task
    assert any("unmark_device" in f for f in by_task["0.1"]["review"]), by_task["0.1"]["review"]


def test_an_instance_whose_call_is_an_answer_is_an_answer_handed_in():
    from synclab.answer_keys import answer_in
    from synclab.primer import workloads

    class Calls:
        __call__ = staticmethod(workloads.decode_step_baseline)

    holder = Calls()
    assert answer_in(holder, "0.1") is not None and answer_in(holder, "0.2") is None


# A fourth red team's: the simulated device's mark, hidden on every tensor (20 of 20).
HIDES_THE_MARK = '''def my_predictions() -> dict[str, int]:
    T = torch.Tensor
    setattr(T, "_synclab_on_device", property(lambda s: False, lambda s, v: None, lambda s: None))
    return dict.fromkeys("abcdefgh", 0)
'''


def test_the_device_mark_by_any_route_is_named():
    for cell in (HIDES_THE_MARK, "def f(t):\n    t._synclab_on_device = False\n",
                 "def f(t):\n    delattr(t, '_synclab_on_device')\n"):
        assert any("the simulated device's own mark" in f for f in suspicious(cell)), cell


@pytest.mark.slow
def test_a_hidden_device_mark_is_named_and_an_honest_local_named_like_the_package_is_not(tmp_path, capsys):
    """An honest 0.1 whose local list is called ``finished`` (a name the setup imports from the package) was
    flagged. The property that hid the mark on every tensor made every snippet measure 0 syncs in the process that
    measured them, and earned 0.2's 6 points while the checks ran beside the answer; judged apart, the counts are
    measured in the grader's process, and the answer earns what its predictions earn."""
    honest = _honest("decode_step").replace("finished = [", "done = [").replace(
        "return primer.StepOutput(sampled, finished)", "finished = []\n    finished.extend(done)\n"
        "    return primer.StepOutput(sampled, finished)")
    assert "finished.extend(done)" in honest
    by_task = _judged(tmp_path, {"0.1": honest, "0.2": HIDES_THE_MARK}, capsys)
    assert by_task["0.1"]["earned"] == 14 and not by_task["0.1"]["review"], by_task["0.1"]
    assert by_task["0.2"]["earned"] == _all_zeros_earn() < points_of("0.2"), by_task["0.2"]


def _honest(name: str) -> str:
    nb = nbformat.read(ROOT / "solutions" / "00_primer.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code" and f"def {name}(" in c.source)


def test_device_data_written_into_host_memory_is_refused_as_cuda_refuses_it():
    """A fifth red team read every logit through memory a host tensor shared, uncounted (14 of 14): writing device
    data into a host tensor in place, which CUDA refuses, is refused; a copy is still one counted sync."""
    import numpy as np
    import torch

    from synclab.device import to_device
    from synclab.syncs import count_syncs

    device = to_device(torch.randn(4, 8))
    writes = {"add_": lambda host: host.add_(device), "+=": lambda host: host.__iadd__(device),
              "lerp_": lambda host: host.lerp_(device, 1.0), "out=": lambda host: torch.add(device, 0, out=host),
              "into numpy's memory": lambda host: torch.from_numpy(np.zeros((4, 8), np.float32)).add_(device)}
    for what, write in writes.items():
        with count_syncs(), pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            write(torch.zeros(4, 8))
        assert what  # each refused
    with count_syncs() as report:
        torch.zeros(4, 8).copy_(device)
        torch.zeros(4, 8).add_(torch.ones(4, 8))  # host to host: nothing to refuse
    assert len(report.events) == 1
    assert any("from_dlpack" in f for f in suspicious("def f(t):\n    return torch.from_dlpack(t)\n"))


# A sixth red team's, on chapters 4 and 5: 10 of 10, 6 of 6 and 7 of 14 for a method that does nothing.
LENDS_THE_REFERENCE = """from dataclasses import replace
from functools import partial

class EncoderScheduler(Scheduler):
    @property
    def _try_schedule_encoder_inputs(self, ref=ch5.scheduler_to_profile(Scheduler)):
        return partial(ref._try_schedule_encoder_inputs, self)
"""
SUBTRACTS_TO_ZERO = """class Near(float):
    def __sub__(self, other):
        return 0.0

def host_bottleneck_length(costs_us, device_step_us, max_length):
    return Near(0)
"""
DOES_NOTHING = """class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        pass
"""


@pytest.mark.slow
def test_a_lent_method_a_number_that_subtracts_to_zero_and_a_method_that_does_nothing_earn_nothing(tmp_path,
                                                                                                   capsys):
    # judged apart, the scheduler the profile lends is not in the answer's process: nothing to lend, nothing earned
    by_task = _judged(tmp_path, {"5.2": LENDS_THE_REFERENCE}, capsys, "05_list_based_caches")
    assert by_task["5.2"]["earned"] == 0 and by_task["5.2"]["status"] == "failed", by_task["5.2"]
    by_task = _judged(tmp_path, {"4.1": DOES_NOTHING, "4.2": SUBTRACTS_TO_ZERO}, capsys,
                      "04_reverse_placeholder_scans")
    assert by_task["4.2"]["earned"] == 0 and any("a number of its own kind" in f for f in by_task["4.2"]["review"])
    assert by_task["4.1"]["earned"] == 0 and not by_task["4.1"]["review"], by_task["4.1"]


def test_a_base_hook_called_by_its_class_name_passes_as_super_does():
    """6.1: ``PlantedRunner._stopped_on_device(self, ...)`` in an override of it means ``super()._stopped_on_device``."""
    setup = "from synclab.capstone import PlantedRunner\n"
    by_name = ("class Clean(PlantedRunner):\n    def _stopped_on_device(self, sampled, reqs):\n"
               "        return PlantedRunner._stopped_on_device(self, sampled, reqs)\n")
    assert suspicious(by_name, package_names([setup, by_name])) == []
    not_overridden = ("class Clean(PlantedRunner):\n    def other(self):\n"
                      "        return PlantedRunner._stopped_on_device(self, None, [])\n")
    assert any("private part of the package" in line
               for line in suspicious(not_overridden, package_names([setup, not_overridden])))


@pytest.mark.parametrize("source", [
    "import os\n\ndef decode_step(batch):\n    return None\n",
    "import os\nn = os.cpu_count()\nname = os.path.join('a', 'b')\n",
    "import os as o\nhere = o.getpid()\n",
    "from os import path\n",
])
def test_a_stray_import_os_and_its_harmless_parts_pass(source):
    """An honest answer with `import os` left in it scores its points (a correct chapter 0 scored 0 before)."""
    assert suspicious(source, package_names([SETUP, source])) == []


@pytest.mark.parametrize("source, phrase", [
    ("import os\nos.system('cat solutions/00_primer.ipynb')\n", "uses os other than"),
    ("import os\nf = os\nf.fork()\n", "uses os other than"),
    ("from os import fork\n", "imports fork from os"),
    ("import os as o\no.kill(1, 9)\n", "uses o other than"),
])
def test_os_used_for_anything_else_is_named(source, phrase):
    found = suspicious(source, package_names([SETUP, source]))
    assert any(phrase in line for line in found), found


@pytest.mark.parametrize("line", ["if hidden_states.is_cuda:", "if x.device.type == 'cuda':",
                                  "if not t.is_cpu:", "if t.get_device() >= 0:"])
def test_a_branch_on_the_kind_of_device_is_for_the_instructor_to_read(line):
    """The grader judges every answer on the simulated device: a sync kept for a real GPU behind such a test (the red
    team's second round: 14/14 on 2.1) is never judged, so the line is shown to the instructor, and costs nothing."""
    from synclab.lab.judge import review_lines

    cell = f"def _pool(self, hidden_states):\n    {line}\n        self._sync_device()\n    return hidden_states\n"
    assert review_lines([cell]) == [line]
    assert suspicious(cell) == []  # not a flag: an honest answer may ask, and the instructor reads why


def test_asking_torch_whether_cuda_is_available_is_no_review_line():
    """Inside the checks the simulated device answers torch.cuda.is_available() as a GPU machine does: the branch it
    guards is the one judged, so an honest 2.1 that asks it (tests/honest/right/2.1-cuda-is-available-platform.py)
    leaves the instructor nothing to read."""
    from synclab.lab.judge import review_lines

    cell = "def _pool(self, hidden_states):\n    if torch.cuda.is_available():\n        pass\n    return hidden_states\n"
    assert review_lines([cell]) == []
