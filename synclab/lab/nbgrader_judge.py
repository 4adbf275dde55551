"""nbgrader's autograding with the grader's verdicts: the check cells' scores come from :mod:`synclab.lab.judge`.

Used by the nbgrader course (``nbgrader_config.py`` as ``python -m synclab labs --nbgrader`` writes it; the
instructors' page). nbgrader runs a submission in one kernel and reads each grade cell's value as its score,
so anything the student's cells did before a check cell could set it. Two preprocessors change that:

* :class:`JudgeChecks`, in place of nbgrader's ``Execute`` (or after it): each check cell's outputs are the grader's
  verdict on that exercise, judged from the submission's definitions in a fresh process, and its value by
  the points earned: the cell's points (which nbgrader restores from the source) times the checks' share;
* :class:`SaveStretchCredit`, after ``SaveAutoGrades``: a stretch exercise is worth 0 points in the total and
  its points go to the gradebook as extra credit, as ``check --json`` reports them apart.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool, List, Unicode

from synclab.lab.exercises import lab_version


def autograde_preprocessors(run_kernel: bool = False) -> list[Any]:
    """nbgrader's autograde preprocessors with the grader's two inserted (what the course's config sets).

    Without ``run_kernel`` nbgrader's ``Execute`` is left out: no kernel runs the submission, so the student's
    code runs only where the grader runs it (each exercise's definitions and what its checks call, under
    :attr:`JudgeChecks.sandbox` when one is set). The grade is the same either way; with the kernel, the
    feedback also shows every other cell's run, and the student's code runs in that kernel as nbgrader's own
    user (give the kernel a sandbox of your own then).
    """
    from nbgrader.converters.autograde import Autograde
    from nbgrader.preprocessors import Execute, SaveAutoGrades

    chain = list(Autograde.class_traits()["autograde_preprocessors"].default())
    chain.insert(chain.index(Execute) + 1, JudgeChecks)
    if not run_kernel:
        chain.remove(Execute)
    chain.insert(chain.index(SaveAutoGrades) + 1, SaveStretchCredit)
    return chain


def _source_notebook(resources: dict) -> NotebookNode | None:
    info = resources["nbgrader"]
    path = Path(os.getcwd()) / "source" / info["assignment"] / f"{info['notebook']}.ipynb"
    return nbformat.read(path, as_version=4) if path.exists() else None


def _synclab_meta(cell: NotebookNode) -> dict:
    return cell.get("metadata", {}).get("synclab", {})


class JudgeChecks(Preprocessor):
    """Replace every check cell's outputs by the grader's verdict (see the module docstring)."""

    enabled = Bool(True)  # nbconvert's preprocessors are off unless enabled
    sandbox = List(Unicode(), default_value=[], help=(
        "A command the grader's worker runs under, which runs the rest of its command line as a user who can "
        "read neither source/ nor the gradebook, e.g. ['setpriv', '--reuid=synclab-judge', "
        "'--regid=synclab-judge', '--clear-groups', '--']. The worker gets its job on stdin and hands its "
        "verdicts back on a pipe: it needs no file of the course.")).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        from synclab.lab.judge import judge_notebook

        source = _source_notebook(resources)
        if source is None:
            raise RuntimeError("the grader reads each exercise's points from source/<assignment>/<notebook>.ipynb: "
                               "run nbgrader from the course directory")
        released = {_synclab_meta(c).get("lab_version") for c in source.cells} - {None}
        if released and released != {lab_version()}:
            raise RuntimeError(f"this assignment was generated with lab version {released.pop()}, but the grader runs "
                               f"{lab_version()}: install the version the students have (or regenerate and re-release)")
        stretch = {c.metadata["nbgrader"]["grade_id"]: _synclab_meta(c) for c in source.cells
                   if _synclab_meta(c).get("stretch")}
        # the course folder (source/ holds the solutions, the gradebook the grades) is closed to every answer
        # the source's own answers are right: judged once per grading process on the same seed, they verify what
        # every submission's passed checks saw (synclab.lab.judge.verify)
        verdicts = judge_notebook(nb, trusted=source, sandbox=list(self.sandbox), closed=[os.getcwd()],
                                  reference=source)
        resources["synclab_extra_credit"] = {}
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if not grade_id.startswith("check-"):
                continue
            task = grade_id[len("check-"):].replace("_", ".")
            verdict = verdicts.get(task)
            if verdict is None:
                continue
            if grade_id in stretch:
                points, value = float(stretch[grade_id]["stretch_points"]), 0.0
                resources["synclab_extra_credit"][grade_id] = verdict.earned(points)
                heading = f"stretch (extra credit): {verdict.earned(points):g} of {points:g} points"
            else:
                points = float(cell.metadata["nbgrader"]["points"])
                value = verdict.earned(points)
                heading = f"{value:g} of {points:g} points"
            text = f"Graded by the grader from your saved notebook: {heading}\n{verdict}"
            for line in verdict.review:  # the instructor's, in the autograde log: never in the student's feedback
                self.log.warning("Exercise %s, for the instructor to read: %s", task, line)
            cell.outputs = [
                nbformat.v4.new_output("display_data", data={"text/plain": text, "text/html": _html(heading, verdict)}),
                nbformat.v4.new_output("execute_result", data={"text/plain": repr(value)},
                                       execution_count=cell.get("execution_count")),
            ]
        return nb, resources


def _html(heading: str, verdict: Any) -> str:
    parts = [f"<div><b>Graded by the grader from your saved notebook: {html.escape(heading)}</b></div>"]
    if verdict.error:
        parts.append(f"<div>not checked: {html.escape(verdict.error)}</div>")
    if verdict.report is not None:
        parts.append(verdict.report._repr_html_())
    parts += [f"<div><small>note: {html.escape(n)}</small></div>" for n in verdict.notes]
    return "".join(parts)


class SaveStretchCredit(Preprocessor):
    """Store each stretch exercise's points as extra credit in nbgrader's gradebook."""

    enabled = Bool(True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        from nbgrader.api import Gradebook

        credit = resources.get("synclab_extra_credit", {})
        if not credit:
            return nb, resources
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            for grade_id, points in credit.items():
                grade = gradebook.find_grade(grade_id, info["notebook"], info["assignment"], info["student"])
                grade.extra_credit = points
            gradebook.db.commit()
        return nb, resources
