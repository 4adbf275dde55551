"""One corpus answer judged on several seeds, its lab set up once: the learner's path, check cell by check cell.

:func:`synclab.lab.learner_check.run_here` runs the cells a task's check needs (the setup, the answer cells, the check
cell) as a kernel would. Here the same cells run once, except the check cell, whose call (``EXERCISES[task].check``)
is then made with each seed given: the cells' imports and the answer's definitions are paid for once, and the check
runs on the cases each seed draws. ``python -m tests.honest.on_seeds tests/honest/wrong/4.1-x.py`` prints the reports.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Callable, Iterator

from synclab.checks import CheckReport
from synclab.lab.exercises import EXERCISES
from synclab.lab.learner_check import _remember, cell_filename, plan
from tests.honest.corpus import Answer, answers, notebook_with

SEEDS = (0, 1, 2)


def reports_on_seeds(answer: Answer, seeds: tuple[int, ...] = SEEDS,
                     only: tuple[str, ...] = ()) -> dict[int, CheckReport]:
    """``answer``'s exercise checked on each of ``seeds``: its report per seed (the answer's cells run once).

    ``only``: after the first seed, which runs every check, run only the checks of these ids that draw random cases
    (one that draws none gives the first seed's verdict on every seed).
    """
    chosen = plan(notebook_with(answer), [answer.task])
    namespace: dict = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for index, source in chosen.cells:
            if index in chosen.checks:
                continue
            filename = cell_filename(index, source, chosen.chapter)
            _remember(filename, source)
            exec(compile(source, filename, "exec", dont_inherit=True), namespace)  # as a kernel: no __future__ of ours
        call = EXERCISES[answer.task].check
        assert call.endswith(")"), call
        reports = {}
        for n, seed in enumerate(seeds):
            with _only(eval(call.split("(")[0], namespace), only if n else ()):
                reports[seed] = eval(f"{call[:-1]}, seed={seed})", namespace)
        return reports


@contextlib.contextmanager
def _only(check_function: Callable, ids: tuple[str, ...]) -> Iterator[None]:
    """While open, ``check_function`` runs only its checks of these ids that draw random cases (all of them when
    ``ids`` is empty)."""
    home = check_function.__globals__
    run_all = home["run_checks"]
    if ids:
        home["run_checks"] = lambda title, checks, *args, **kwargs: run_all(
            title, [c for c in checks if c.id in ids and c.random], *args, **kwargs)
    try:
        yield
    finally:
        home["run_checks"] = run_all


if __name__ == "__main__":
    path = Path(sys.argv[1]).resolve()
    answer = next(a for a in answers(path.parent.name) if a.path == path)
    for seed, report in reports_on_seeds(answer).items():
        print(f"--- seed {seed}\n{report}")
