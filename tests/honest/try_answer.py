"""Try one corpus answer on the learner's path: ``python -m tests.honest.try_answer tests/honest/right/4.1-x.py``."""

import sys
from pathlib import Path

from synclab.lab.learner_check import run_here
from tests.honest.corpus import answers, notebook_with

if __name__ == "__main__":
    path = Path(sys.argv[1]).resolve()
    kind = path.parent.name
    answer = next(a for a in answers(kind) if a.path == path)
    run = run_here(notebook_with(answer), [answer.task])
    report = run.reports.get(answer.task)
    print(report if report is not None else f"no report: {run.errors}")
    if run.errors:
        print("cells that raised:", run.errors)
    print(f"{run.checks_seconds:.2f} s of checks, {run.seconds:.2f} s in all")
