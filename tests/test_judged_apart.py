"""Judged apart: an answer's process holds the answer and the arguments it is sent, and no reference or expected result.

The exercises whose answers are data or functions of data (predictions, diagnoses, readings, a cost model) are judged
with the checks in the grader's process and the answer in its own (synclab.lab.judged_apart). These tests drive that
boundary directly: what crosses it, that the verdicts are the notebook's, and what an answer finds when it looks.
"""

from __future__ import annotations

import atexit
import enum
import json
import linecache
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from synclab.lab import answer_server, judge
from synclab.lab.exercises import EXERCISES
from synclab.lab.judged_apart import AnswerProcess, RemoteFunction, answer_environment, start
from synclab.answer_keys.plain_data import Opaque, decode, encode
from synclab.syncs import SyncKind
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim
ROOT = Path(__file__).resolve().parent.parent


class _Label(str):
    pass


class _Colour(enum.Enum):  # an enum outside the package: it crosses as what it is not, an opaque value
    RED = 1


@pytest.mark.parametrize("value", [None, True, 0, -3, 2.5, "b", [1, [2, "x"]], (1, 2), {1, 2}, frozenset({"a"}),
                                   {"a": 1, (1, 2): [3.0]}, Fraction(1, 3), np.float64(1.5), np.int64(7),
                                   SyncKind.H2D_COPY, {"k": SyncKind.ITEM}])
def test_plain_values_cross_as_themselves(value):
    back = decode(encode(value))
    assert back == value and type(back) is type(value)


def test_a_set_is_written_in_one_order_whatever_its_own():
    """A set's iteration order follows the process's hash seed: written as it iterates, a stored answer (and the
    digest it is looked up by) would change from run to run. Two sets equal but built in two orders write one way."""
    many = [f"fix_{i}" for i in range(40)]
    one, other = frozenset(many), frozenset(reversed(many))
    assert encode(one) == encode(other) == {"frozenset": sorted(encode(one)["frozenset"], key=lambda e: e["v"])}
    assert encode(set(many)) == {"set": [{"v": v} for v in sorted(many)]}


def test_what_is_not_plain_crosses_as_its_name():
    nan, label, colour = decode(encode(float("nan"))), decode(encode(_Label("b"))), decode(encode(_Colour.RED))
    assert math.isnan(nan)
    assert label == "b" and type(label).__name__ == "_Label" and type(label) is not _Label  # its value, not its class
    assert isinstance(colour, Opaque) and type(colour).__name__ == "_Colour" and colour != colour.text
    assert isinstance(decode(encode(object())), Opaque)
    with pytest.raises(ValueError):
        decode({"enum": "os:path", "name": "sep"})  # nothing outside the package is looked up



# An answer that also looks through its own process for what the checks keep: the answers of the exercises judged
# apart (whose raw functions sit in their guards' closures) and the 4.2 reference's crossings, anywhere in memory.
PROBE = '''
import gc, sys

def host_bottleneck_length(costs_us, device_step_us, max_length):
    xs, ys = list(costs_us), [y - list(costs_us.values())[0] for y in costs_us.values()]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    start = list(costs_us.values())[0] + my - slope * mx
    if start >= device_step_us:
        return 0.0
    if slope <= 0:
        return None
    crossing = (device_step_us - start) / slope
    return crossing if crossing <= max_length else None

def probe(apart, crossings):
    shipped = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("synclab") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            key = getattr(value, "__answer_key__", None)
            if key is None or not set(key.tasks) <= set(apart) or key.role.startswith("vLLM's code before"):
                continue  # vLLM's code before a PR stays (a runner times it): refused to the answer, not an answer
            members = [value] + [m for m in vars(value).values() if callable(m)] if isinstance(value, type) else [value]
            for member in members:  # a function, or each method of a class (chapter 6's stand-in for 4.1)
                for cell in getattr(member, "__closure__", None) or ():
                    raw = cell.cell_contents
                    code = getattr(raw, "__code__", None)
                    # a body that does anything but look up a stored result is the answer itself
                    if code is not None and set(code.co_names) != {"__import__", "stored_answer", "locals"}:
                        shipped.append(f"{name}.{attr}")
    seen = []
    for obj in gc.get_objects():
        if obj is crossings or obj is seen:
            continue
        values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
        for v in list(values):
            if type(v) is float and any(abs(v - c) < 1e-6 for c in crossings):
                seen.append(v)
    return {"shipped": sorted(set(shipped)), "crossings seen": sorted(set(seen)),
            "seed": "SYNCLAB_CHECK_SEED" in __import__("os").environ}
'''


def _env() -> dict[str, str]:
    return answer_environment(judge._worker_env(), str(judge.grading_install()), str(judge.answer_install()))


_CONNECTION: list = []  # this test process's connection to its answers' server, as a grading job holds one
atexit.register(lambda: [connection.close() for connection in _CONNECTION])


def _job(fresh: bool = False) -> dict:
    """A job as the grader's worker sees it: answers' processes forked by the warm server, or started afresh."""
    job = {"course_roots": [str(ROOT)], "readable": judge._readable(), "imports": []}
    if not fresh:
        if not _CONNECTION:
            _CONNECTION.append(answer_server.connect(_env()))
        job["answer_server_fd"] = _CONNECTION[0].fileno()
    return job


def _started(source: str, names: list[str], fresh: bool = False) -> tuple[AnswerProcess, dict]:
    exercise = {"task": "4.2", "cells": [{"source": source, "answers": ["4.2"]}], "defines": names}
    job = _job(fresh)
    verdict: dict = {"notes": [], "error": ""}
    process, bound = start(exercise, job, ["import synclab.reverse_scan as ch4", "import synclab.capstone"], set(),
                           _env(), verdict)
    assert process is not None, verdict
    return process, bound


def test_an_answers_process_holds_no_reference_and_no_expected_result():
    """The checks run here, on an answer in its own process; then the answer looks through that process for any
    answer the checks keep and for the crossings the reference gave the checks here. It finds neither."""
    import synclab.reverse_scan as ch4
    from synclab.reverse_scan.checks import _MODEL_CASES, _bottleneck_reference

    process, bound = _started(PROBE, ["host_bottleneck_length", "probe"])
    try:
        report = ch4.check_bottleneck_model(bound["host_bottleneck_length"], seed=3)
        assert report.passed, str(report)
        inputs = {v for _, costs, d, m, _ in _MODEL_CASES for v in (*costs, *costs.values(), d, m)}
        crossings = [c for c in (_bottleneck_reference(costs, d, m) for _, costs, d, m, _ in _MODEL_CASES)
                     if c and c not in inputs]  # what only the reference (or a right answer) computes
        found = bound["probe"](sorted(EXERCISES), crossings)
    finally:
        process.end()
    assert found == {"shipped": [], "crossings seen": [], "seed": False}, found


def test_chapter_6s_answer_processes_hold_none_of_chapter_6s_answers():
    """Chapter 6's engine runs the book's fixes of chapters 1-5, so the answers' processes of 6.1, 6.2 and 6.3 keep
    those (and 6.1's and 6.3's the step counter that answers 6.2); none holds an answer of its own exercise, and the
    6.2 row's answer cannot call the lab's counter."""
    import synclab.capstone as ch6

    row_source = (ROOT / "tests" / "honest" / "right" / "6.2-counter-generator.py").read_text()
    for task, own in (("6.1", ["6.1", "6.3"]), ("6.2", ["6.2", "6.3"]), ("6.3", ["6.3"])):
        keeps = EXERCISES[task].answer_process_keeps
        env = answer_environment(judge._worker_env(), str(judge.grading_install()), str(judge.answer_install(keeps)))
        exercise = {"task": task, "cells": [{"source": row_source + PROBE.replace("def host_bottleneck_length",
                                                                                   "def _unused"),
                                             "answers": [task]}], "defines": ["ablation_row", "probe"]}
        verdict: dict = {"notes": [], "error": ""}
        process, bound = start(exercise, {"course_roots": [str(ROOT)], "readable": judge._readable(), "imports": []},
                               ["from synclab import capstone as ch6", "from synclab.syncs import count_syncs",
                                "from synclab.engine.engine_core import Components, EngineConfig"], set(), env, verdict)
        assert process is not None, verdict
        try:
            if task == "6.2":
                report = ch6.check_ablation_row(bound["ablation_row"], seed=3)
                assert report.passed, str(report)
            found = bound["probe"](own, [])
            step_syncs = bound["probe"](["6.2"], [])["shipped"]
        finally:
            process.end()
        assert found == {"shipped": [], "crossings seen": [], "seed": False}, (task, found)
        assert (step_syncs == []) == (task == "6.2"), (task, step_syncs)  # 6.1's hunt counts with it; 6.2's has none


WRONG_4_2 = {
    "two points": "def host_bottleneck_length(costs_us, device_step_us, max_length):\n"
                  "    (x0, y0), (x1, y1) = list(costs_us.items())[0], list(costs_us.items())[-1]\n"
                  "    slope = (y1 - y0) / (x1 - x0)\n"
                  "    if y0 >= device_step_us:\n        return 0.0\n"
                  "    if slope <= 0:\n        return None\n"
                  "    c = x0 + (device_step_us - y0) / slope\n"
                  "    return c if c <= max_length else None\n",
    "raises": "def host_bottleneck_length(costs_us, device_step_us, max_length):\n    return costs_us[0] / 0\n",
    "a string": "def host_bottleneck_length(costs_us, device_step_us, max_length):\n    return 'never'\n",
}


def test_wrong_answers_judged_apart_get_the_notebooks_reports():
    """The same checks, the same seed: each answer called here (the notebook) and in its own process (the grader);
    one process holds the three, each under a name of its own."""
    import synclab.reverse_scan as ch4

    sources = {name: source.replace("def host_bottleneck_length(", f"def wrong_{n}(")
               for n, (name, source) in enumerate(sorted(WRONG_4_2.items()))}
    process, bound = _started("\n\n".join(sources.values()), [f"wrong_{n}" for n in range(len(sources))])
    try:
        for n, (name, source) in enumerate(sources.items()):
            filename = f"<Exercise 4.2, cell {n + 10}>"  # not the process's cell 1
            namespace: dict = {}
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            exec(compile(source, filename, "exec"), namespace)  # as a kernel runs a cell
            here = ch4.check_bottleneck_model(namespace[f"wrong_{n}"], seed=11)
            apart = ch4.check_bottleneck_model(bound[f"wrong_{n}"], seed=11)
            assert not here.passed, name
            said = [(o.status, o.message, o.expected, o.got, o.hint, o.case) for o in apart.outcomes]
            # the lines a crash names are the process's cell (all three in one): the same line, its own number
            assert [s[:1] + s[2:] for s in said] == [(o.status, o.expected, o.got, o.hint, o.case)
                                                      for o in here.outcomes], name
            assert [re.sub(r"line \d+", "line", s[1]) for s in said] == \
                   [re.sub(r"line \d+", "line", o.message) for o in here.outcomes], name
    finally:
        process.end()


@pytest.mark.parametrize("fresh", [False, True], ids=["forked by the answers' server", "a fresh Python"])
def test_a_function_judged_apart_is_called_there_not_here(fresh):
    process, bound = _started("import os\n\ndef host_bottleneck_length(*args):\n    return os.getpid()\n",
                              ["host_bottleneck_length"], fresh)
    try:
        assert isinstance(bound["host_bottleneck_length"], RemoteFunction)
        assert bound["host_bottleneck_length"]({1: 2.0}, 3.0, 4) != os.getpid()
    finally:
        process.end()


def _same_but_rounding(written: object, stored: object) -> bool:
    """The same plain data (as JSON), floats equal to a rounding: a log-softmax's last bit differs from CPU to CPU
    (the checks compare such values with a tolerance; these files are written on one CPU and read on others)."""
    if isinstance(written, dict) and isinstance(stored, dict):
        if written.keys() != stored.keys():
            return False
        if written.keys() == {"f"} and not isinstance(written["f"], str) and not isinstance(stored["f"], str):
            return math.isclose(written["f"], stored["f"], rel_tol=1e-12, abs_tol=1e-15)
        return all(_same_but_rounding(written[k], stored[k]) for k in written)
    if isinstance(written, list) and isinstance(stored, list):
        return len(written) == len(stored) and all(map(_same_but_rounding, written, stored))
    return written == stored


def test_stored_answers_are_compared_to_a_rounding_and_no_further():
    assert _same_but_rounding({"f": -0.4375529974762047}, {"f": -0.4375529974762045})
    assert not _same_but_rounding({"f": -0.43755299747}, {"f": -0.43755299748})
    assert not _same_but_rounding({"list": [{"f": 1.0}]}, {"list": [{"f": 1.0}, {"f": 1.0}]})
    assert not _same_but_rounding({"f": "nan"}, {"f": "inf"}) and _same_but_rounding({"f": "-inf"}, {"f": "-inf"})


@pytest.mark.parametrize("task", ["0.1", "0.2", "2.2", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "4.1",
                                  "4.2"])
def test_the_stored_answers_are_the_answers_written_again(task):
    """data/expected/ is what `python -m synclab expected` writes from the real answers (6.3's: test_capstone.py).
    4.1's 200 random steps take half a minute, 3.7's ranks two seconds a seed: their first seed is written again, and
    must be stored as it is."""
    from synclab.lab.expected_results import expected_results

    stored = json.loads((ROOT / "data" / "expected" / f"{task}.json").read_text())
    stale = f"data/expected/{task}.json is stale: run python -m synclab expected"
    if task not in ("4.1", "3.7"):
        assert _same_but_rounding(expected_results(task), stored), stale
        return
    again = expected_results(task, seeds=(0,))
    assert stored["seeds"] == list(range(8)) and again["answers"].keys() == stored["answers"].keys(), stale
    for name, found in again["answers"].items():
        assert found.items() <= stored["answers"][name].items(), stale
        assert len(stored["answers"][name]) > (6 if task == "4.1" else 1) * len(found)  # the other seeds' too


def _wrong_versions(prefix: str) -> dict[str, str]:
    """The honest wrong versions of tests/honest/wrong/ whose names start with ``prefix``, by name."""
    return {path.stem: path.read_text() for path in sorted((ROOT / "tests" / "honest" / "wrong").glob(f"{prefix}*.py"))}


# The exercises judged apart whose answer runs by runners (a class, an upload): its name, the check, a right answer
# of the corpus, the setup.
CLASSES_APART = {
    "0.1": ("decode_step", "check_decode_step", "0.1-numpy-and-logger",
            ["import synclab.primer as ch", "import torch", "from synclab import primer"]),
    "3.1": ("async_tensor_h2d", "check_async_tensor_h2d", "3.1-helper-class-dunders",
            ["import synclab.pinned_transfers as ch", "import numpy as np", "import torch",
             "from synclab.device import DeviceLike, is_pin_memory_available, pick_device, to_device",
             "from synclab.engine.torch_utils import HostData"]),
    "3.2": ("PinnedSampler", "check_gather_specific_token_logprobs", "3.2-heapq-vars-sys",
            ["import synclab.pinned_transfers as ch", "import numpy as np", "import torch",
             "from synclab.device import DeviceLike, is_pin_memory_available, pick_device, to_device",
             "from synclab.engine.sampler import LogprobsTensors, Sampler, compute_token_logprobs"]),
    "3.3": ("PinnedInputsRunner", "check_init_model_kwargs", "3.3-python-lists",
            ["import synclab.pinned_transfers as ch", "from typing import Any", "import numpy as np", "import torch",
             "from synclab.engine.model_inputs import GPUModelRunner"]),
    "3.4": ("PinnedInputsRunner", "check_fast_prefill", "3.4-broadcast-tail-value-error",
            ["import synclab.pinned_transfers as ch", "from typing import Any", "import torch",
             "from synclab.engine.model_inputs import GPUModelRunner"]),
    "3.5": ("bincount", "check_bincount", "3.5-dump-column-accumulate", ["import synclab.pinned_transfers as ch",
                                                                         "import torch"]),
    "4.1": ("ReverseScanBatch", "check_update_async_output_token_ids", "4.1-lt-helper-class",
            ["import synclab.reverse_scan as ch", "from synclab.engine.input_batch import InputBatch, PLACEHOLDER"]),
    "5.1": ("ListCachedRange", "check_placeholder_range", "5.1-getattr-type-self",
            ["import synclab.list_caches as ch", "from functools import cached_property", "import torch",
             "from synclab.engine.mm_inputs import PlaceholderRange, make_mask"]),
    "5.2": ("EncoderScheduler", "check_encoder_scheduler", "5.2-nested-helpers",
            ["import synclab.list_caches as ch", "from synclab.engine.scheduler import Request, Scheduler"]),
}


# The wrong version a task's test compares, where not its first: 5.2's unclamped window fails inside the package's
# collaborator (a range that holds the caller to vLLM's contract), whose failure crosses with its hint
WRONG_SHOWN = {"5.2": "5.2-window-not-clamped"}


@pytest.mark.parametrize("task", sorted(CLASSES_APART))
def test_a_class_judged_apart_is_run_there_and_gets_the_notebooks_reports(task):
    """The checks reach the reader's class only through runners (4.1's step_outcome, 5.1's range_answers, ...):
    handed the class's stand-in here, each runner runs in the answer's process, and each honest mistake gets the
    report the notebook gives it, seed for seed (a timed check's measured ratio aside)."""
    name, check, right, setup = CLASSES_APART[task]
    wrong = _wrong_versions(f"{task}-")
    assert len(wrong) >= 3, sorted(wrong)
    # one of them beside the right answer (each wrong version's failure on the grader's path is
    # tests/test_honest_corpus.py's): the checks run twice per version, here and there, several seconds for a 4.1
    shown = WRONG_SHOWN.get(task, sorted(wrong)[0])
    wrong = {shown: wrong[shown]}
    right_source = (ROOT / "tests" / "honest" / "right" / f"{right}.py").read_text()
    for label, source in [*wrong.items(), ("right", right_source)]:
        exercise = {"task": task, "cells": [{"source": source, "answers": [task]}], "defines": [name]}
        job = _job()
        verdict: dict = {"notes": [], "error": ""}
        process, bound = start(exercise, job, setup, set(), _env(), verdict)
        assert process is not None, (label, verdict)
        try:
            namespace: dict = {}
            for line in setup:
                exec(line, namespace)
            filename = f"<Exercise {task}, cell 1>"  # the name the answer's process runs it by
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            exec(compile(source, filename, "exec"), namespace)  # as a kernel runs a cell
            here = getattr(namespace["ch"], check)(namespace[name], seed=5)
            apart = getattr(namespace["ch"], check)(bound[name], seed=5)
        finally:
            process.end()
        assert here.passed == (label == "right") and apart.passed == here.passed, (label, str(here), str(apart))

        def said(report):
            return [(o.name, o.status, o.message, o.expected, "timed" if "faster" in o.name else o.got, o.hint,
                     o.case) for o in report.outcomes]

        assert said(apart) == said(here), label


def test_an_image_stores_the_answers_it_does_not_ship(tmp_path):
    """In the students' install each answer of an exercise judged apart is a look-up of its stored public cases: the
    same result for a stored case, a clear refusal for any other; the install's checks draw the stored seeds."""
    from synclab.lab.student_image import strip_answers_judged_apart

    package = tmp_path / "synclab"
    shutil.copytree(ROOT / "synclab", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "data" / "expected", tmp_path / "data" / "expected")
    stripped = strip_answers_judged_apart(package)
    assert "synclab.reverse_scan.checks:_bottleneck_reference" in stripped
    for name in stripped:  # every other line keeps its number
        module = name.split(":")[0].replace(".", "/") + ".py"
        assert len((package.parent / module).read_text().splitlines()) == len((ROOT / module).read_text().splitlines())
    script = textwrap.dedent(f"""
        import json, synclab.reverse_scan as ch4
        from synclab.answer_keys.stored import NOT_SHIPPED, public_seeds

        def never(costs_us, device_step_us, max_length):
            return None

        namespace = {{}}
        exec({RIGHT_4_2!r}, namespace)
        right = ch4.check_bottleneck_model(namespace["host_bottleneck_length"])
        wrong = ch4.check_bottleneck_model(never)
        own_seed = ch4.check_bottleneck_model(namespace["host_bottleneck_length"], seed=999_999)
        print(json.dumps({{"not shipped": sorted(NOT_SHIPPED), "seeds": public_seeds("4.2"),
                          "right": [right.passed, right.seed], "wrong": [o.status for o in wrong.outcomes],
                          "own seed": [(o.status, o.message) for o in own_seed.outcomes]}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNCLAB_", "PYTEST_"))}
    env["PYTHONPATH"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    # 1.1's, 1.2's, 5.1's and 5.2's references are classes that chapter 5's profile and chapter 6 run, and 2.1's
    # are chapter 6's and the pooled values (scope="checks"): the students' install ships them (the answer's process
    # does not: test_an_answers_process_holds_no_reference_and_no_expected_result); chapters 1's and 2's checks need
    # no stored answer (a pooler's expected rows are its requests' prompts; a runner's, the model's last tokens)
    # 6.1 has no answer in the package at all (its checks compare with the planted runner's outputs)
    classes = ("1.1", "1.2", "2.1", "5.1", "5.2", "6.1")
    assert said["not shipped"] == sorted(t for t in EXERCISES if t not in classes)
    assert said["seeds"] == list(range(8)) and said["right"] == [True, said["right"][1]], said
    assert said["right"][1] in said["seeds"]  # the install's check drew a stored seed
    assert said["wrong"] == ["failed", "failed"], said  # a wrong answer fails on its merits
    fixed, drawn = said["own seed"]  # a seed of one's own: the fixed cases still judged, the random ones refused
    assert fixed[0] == "passed" and drawn[0] == "crashed" and "stored seeds: 0, 1" in drawn[1], said


RIGHT_4_2 = PROBE.split("def probe")[0]  # a least-squares answer written out


def test_vllms_code_before_the_pr_is_refused_to_an_answer_judged_apart_as_in_the_notebook():
    """The answer's process holds vLLM's code before the PR (a runner may time it), and refuses it to the answer while
    a runner of the checks runs, as the notebook's checks do: handing it in earns nothing on either path."""
    import synclab.reverse_scan as ch4
    from synclab.engine.input_batch_baseline import InputBatchBaseline

    source = "class ReverseScanBatch(InputBatchBaseline):\n    pass  # vLLM's forward scan, handed in as it is\n"
    exercise = {"task": "4.1", "cells": [{"source": source, "answers": ["4.1"]}], "defines": ["ReverseScanBatch"]}
    job = _job()
    verdict: dict = {"notes": [], "error": ""}
    setup = ["import synclab.reverse_scan as ch4",
             "from synclab.engine.input_batch_baseline import InputBatchBaseline"]
    process, bound = start(exercise, job, setup, set(), _env(), verdict)
    assert process is not None, verdict
    try:
        apart = ch4.check_update_async_output_token_ids(bound["ReverseScanBatch"], seed=1)
    finally:
        process.end()
    here = ch4.check_update_async_output_token_ids(type("ReverseScanBatch", (InputBatchBaseline,), {}), seed=1)
    for part, report in (("here", here), ("apart", apart)):
        assert not any(o.ok for o in report.outcomes if o.status != "skipped"), str(report)
        matches_report_snapshot(report, part)  # names InputBatchBaseline.update_async_output_token_ids


def _sockets_of(pid: int) -> list[str]:
    """The sockets process ``pid`` holds open."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:  # closed meanwhile
            pass
    return [link for link in links if link.startswith("socket:")]


def test_each_answer_is_forked_afresh_and_holds_nothing_of_the_server():
    """The answers' server (synclab.lab.answer_server) forks each answer's process from a Python that ran no cell: an
    answer that changes the chapter's module leaves the next answer's as the package wrote it, and neither holds a
    socket (the server's connections are the server's, not the answer's)."""
    changes = "import synclab.reverse_scan as ch4\nch4.CHANGED = True\n\ndef host_bottleneck_length(*args):\n" \
              "    return 1.0\n"
    looks = "import synclab.reverse_scan as ch4\n\ndef host_bottleneck_length(*args):\n" \
            "    return hasattr(ch4, 'CHANGED')\n"
    first, _ = _started(changes, ["host_bottleneck_length"])
    second, bound = _started(looks, ["host_bottleneck_length"])
    try:
        assert bound["host_bottleneck_length"]() is False
        assert _sockets_of(first._pid) == [] and _sockets_of(second._pid) == []
    finally:
        first.end()
        second.end()


def test_a_jobs_answers_end_with_its_connection():
    """A job that ends (or is killed) without ending its answers' processes takes them with it: the server stops every
    process it forked on a connection that closed."""
    connection = answer_server.connect(_env())
    exercise = {"task": "4.2", "cells": [{"source": "def host_bottleneck_length(*args):\n    return 1.0\n",
                                          "answers": ["4.2"]}], "defines": ["host_bottleneck_length"]}
    verdict: dict = {"notes": [], "error": ""}
    process, _ = start(exercise, {**_job(), "answer_server_fd": connection.fileno()}, [], set(), _env(), verdict)
    assert process is not None, verdict
    pid = process._pid
    os.kill(pid, 0)  # it runs
    process._server.close()  # the job's copies of the connection go, as when the judge kills the job's session
    connection.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the answer's process {pid} outlived its job's connection")
    process._server = None
    process.kill()
