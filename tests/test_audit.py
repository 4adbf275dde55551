"""The grader's audit hook sees, on its own, every kind of attempt that needs the interpreter's insides.

Each attempt is a correct Exercise 0.1 that first tries one thing inside ``try/except``, graded with the syntax
scan turned off. The hook refuses what a sandbox refuses (the course's files, ``/proc``, processes) and only records
the rest; either way the verdict's review lines name it for the instructor, and the score is the checks' alone: each
of these answers still earns full marks, since what it tried changed no result. Honest answers that use ordinary
modules (``os`` to read a path, a dataclass, ``warnings``, ``numpy``) leave no review line. All run in one worker,
each in its own process, as the grader runs a notebook's exercises.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

from synclab.lab.audit import _Policy
from synclab.lab.judge import jobs_for, run_worker

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parent.parent
PRIMER = ROOT / "solutions" / "00_primer.ipynb"

# (what, the statements tried first, a phrase of the review line)
CHEATS = [
    ("a frame by sys._getframe", "sys._getframe(1).f_back.f_locals", "sys._getframe"),
    ("a frame by inspect", "import inspect\ninspect.currentframe().f_back", "sys._getframe"),
    ("a frame from a traceback", "try:\n    raise ValueError\nexcept ValueError as e:\n    e.__traceback__.tb_frame",
     "tb_frame"),
    ("a frame from a generator", "def g():\n    yield 1\ng().gi_frame", "gi_frame"),
    ("every object, by gc", "import gc\ngc.get_objects()", "gc.get_objects"),
    ("a forked process", "pid = os.fork()\nif pid == 0:\n    os._exit(0)", "os.fork"),
    ("a subprocess", "import subprocess\nsubprocess.run(['true'])", "subprocess.Popen"),
    ("the solution notebook, read", f"open({str(PRIMER)!r}).read()", "the course's file solutions/00_primer.ipynb"),
    ("the checkout's notebook, by its full path", "from synclab.capstone.workloads import load_function\n"
     f"load_function({str(PRIMER)!r}, 'decode_step', {{}})", "the course's file solutions/00_primer.ipynb"),
    ("a file written", "open('/tmp/synclab-cheat', 'w')", "open: writing"),
    ("/proc read", "open('/proc/self/maps').read()", "open: /proc"),
    ("a pickled exec", "import pickle\npickle.loads(pickle.dumps(exec))", "pickle.find_class: builtins.exec"),
    ("ctypes", "import ctypes\nctypes.CDLL(None)", "ctypes"),
    ("a tracer set", "sys.settrace(None)", "sys.settrace"),
    ("code compiled at run time", "exec('x = 1')", "code it did not hand in"),
    ("code run by timeit", "import timeit\ntimeit.timeit('pass', number=1)", "code it did not hand in"),
    ("a check's code swapped", "from synclab import primer\nprimer.check_decode_step.__code__ = (lambda r: r).__code__",
     "object.__setattr__: __code__ of check_decode_step"),
    ("a new audit hook", "sys.addaudithook(lambda *a: None)", "sys.addaudithook"),
    ("the device switched by the environment", "os.environ['SYNCLAB_DEVICE'] = 'cuda'", "os.putenv"),
    ("a variable of the environment removed", "os.environ.pop('SYNCLAB_DEVICE')", "os.unsetenv"),
]

HONEST = [
    ("os for a path", "os.path.join('a', 'b')"),
    ("a dataclass", "import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int = 0\nP()"),
    ("a namedtuple", "import collections\ncollections.namedtuple('T', 'a b')(1, 2)"),
    ("a warning", "import warnings\nwarnings.warn('slow', stacklevel=1)"),
    ("numpy", "import numpy\nnumpy.zeros(3).sum()"),
]


def _answer(statements: str) -> str:
    """The solution's decode_step, which first runs ``statements`` once, in a try block."""
    nb = nbformat.read(PRIMER, as_version=4)
    source = next(c.source for c in nb.cells if c.cell_type == "code" and "def decode_step(" in c.source)
    tried = "\n".join("        " + line for line in statements.splitlines())
    helper = f"import os\nimport sys\n\n_TRIED = []\n\n\ndef _try_once():\n    if _TRIED:\n        return\n" \
             f"    _TRIED.append(1)\n    try:\n{tried}\n    except Exception:\n        pass\n\n\n"
    body = source.index(":\n", source.index("def decode_step(")) + 2
    return helper + source[:body] + "    _try_once()\n" + source[body:]


@pytest.fixture(scope="module")
def verdicts() -> dict[str, dict]:
    """Every cheat and honest answer above, judged by one worker with the scan off: the verdict per name."""
    nb = nbformat.read(PRIMER, as_version=4)
    chapter, exercises, setup, _ = jobs_for(nb, ["0.1"])
    (template,) = exercises
    jobs, names = [], []
    for name, statements, *_ in CHEATS + HONEST:
        cells = [dict(c) for c in template["cells"]]
        own = next(c for c in cells if "0.1" in c["answers"])
        own["source"] = _answer(statements)
        jobs.append({**template, "cells": cells})
        names.append(name)
    lines, stderr, token = run_worker(chapter, jobs, setup, False, 240.0)
    mine = [json.loads(line[len(token):]) for line in lines if line.startswith(token)]
    assert len(mine) == len(names), stderr
    return dict(zip(names, mine))


# What a sandbox refuses: the rest is recorded only, and the code goes on as it would anywhere.
REFUSED = {"a forked process", "a subprocess", "the solution notebook, read", "the checkout's notebook, by its full path",
           "/proc read"}


@pytest.mark.parametrize("what, statements, phrase", CHEATS, ids=[c[0] for c in CHEATS])
def test_the_audit_alone_names_each_attempt_and_the_score_stays_the_checks(verdicts, what, statements, phrase):
    verdict = verdicts[what]
    verb = "refused" if what in REFUSED else "saw"
    assert any(line.startswith(f"the grader's sandbox {verb}") and phrase in line for line in verdict["review"]), \
        verdict
    assert verdict["report"]["passed"], verdict  # the answer caught what it tried: its results are right


@pytest.mark.parametrize("what, statements", HONEST, ids=[h[0] for h in HONEST])
def test_ordinary_modules_leave_no_review_line(verdicts, what, statements):
    verdict = verdicts[what]
    assert verdict["review"] == [] and verdict["report"]["passed"], verdict


def test_the_policy_lets_the_package_and_imports_do_their_work(tmp_path):
    """Without the reader on the stack nothing is refused; imports read the install, never the course."""
    policy = _Policy((str(ROOT), str(tmp_path / "course")), (str(ROOT / "synclab"), sys.prefix))

    def frame_of(filename: str, module: str):
        namespace = {"__name__": module}
        exec(compile("import sys\ndef f():\n    return sys._getframe()\n", filename, "exec"), namespace)
        return namespace["f"]()

    machinery = frame_of(str(ROOT / "synclab" / "checks.py"), "synclab.checks")
    reader = frame_of("<Exercise 0.1, cell 1>", "__main__")
    assert policy.refuses("os.fork", (), machinery) == "os.fork: a process of its own"  # a planted builtin method
    assert policy.refuses("subprocess.Popen", (), frame_of(sys.modules["subprocess"].__file__, "subprocess")) is None
    assert policy.refuses("open", (str(ROOT / "solutions" / "x.ipynb"), "r", 0), machinery) is None
    assert policy.refuses("open", (str(ROOT / "solutions" / "x.ipynb"), "r", 0), reader) == \
        "open: the course's file solutions/x.ipynb"
    assert policy.refuses("open", (os.path.join(sys.prefix, "lib", "x.py"), "r", 0), reader) is None
    assert policy.refuses("open", (str(tmp_path / "course" / "source" / "ch0" / "x.ipynb"), "r", 0), reader) == \
        "open: the course's file source/ch0/x.ipynb"
    assert policy.refuses("open", (str(tmp_path / "x"), None, os.O_WRONLY | os.O_CREAT), reader) == \
        f"open: writing {tmp_path / 'x'}"
    assert policy.refuses("open", (str(ROOT / "tests" / "x"), "w", 0), reader).startswith("open: writing the course's")
    assert policy.refuses("pickle.find_class", ("torch._utils", "_rebuild_tensor_v2"), reader) is None
    assert policy.refuses("exec", (None,), machinery) is None


PINNED = ROOT / "solutions" / "03_pinned_transfers.ipynb"
# (what, the statements a 3.7 answer tries on a rank, a phrase of the review line)
RANK_CHEATS = [  # the hook armed on a rank refuses as it does in the exercise's own process (test above, each kind)
    ("a forked process, on a rank", "pid = os.fork()\nif pid == 0:\n    os._exit(0)", "os.fork: a process of its own"),
]


def _rank_answer(statements: str) -> str:
    """The solution's 3.7 cell, whose ``_run_ar`` (it runs on the ranks) first runs ``statements``, in a try block."""
    nb = nbformat.read(PINNED, as_version=4)
    source = next(c.source for c in nb.cells if c.cell_type == "code" and "def _run_ar(" in c.source)
    tried = "\n".join("        " + line for line in statements.splitlines())
    body = source.index(":\n", source.index("def _run_ar(")) + 2
    return (source[:body] + f"    import os\n    try:\n{tried}\n    except Exception:\n        pass\n"
            + source[body:])


def test_the_ranks_run_the_readers_code_under_the_same_audit():
    """Chapter 3's checks run the reader's 3.7 on ranks, processes of their own (started by the answer's process, where
    the grader runs 3.7's runner): the hook is armed there too, before any of the reader's code runs, and what it
    refuses on a rank is a review line of the exercise (scan off), even when the answer catches the refusal. (An honest 3.7 passes under the same hook: the solutions' checks in the grader,
    tests/test_cli_solutions.py.)"""
    nb = nbformat.read(PINNED, as_version=4)
    chapter, exercises, setup, _ = jobs_for(nb, ["3.7"])
    (template,) = [e for e in exercises if e["task"] == "3.7"]
    jobs = []
    for _, statements, _ in RANK_CHEATS:
        cells = [dict(c) for c in template["cells"]]
        own = next(c for c in cells if "def _run_ar(" in c["source"])
        own["source"] = _rank_answer(statements)
        jobs.append({**template, "cells": cells})
    lines, stderr, token = run_worker(chapter, jobs, setup, False, 240.0)
    mine = [json.loads(line[len(token):]) for line in lines if line.startswith(token)]
    assert len(mine) == len(jobs), stderr
    for (what, _, flag), verdict in zip(RANK_CHEATS, mine):
        refused = [f for f in verdict["review"] if f.startswith("the grader's sandbox refused")]
        assert any(flag in f and "on rank" in f for f in refused), (what, verdict)
        assert verdict["report"]["passed"], verdict
