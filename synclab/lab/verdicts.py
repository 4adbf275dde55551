"""One exercise's verdict, as a learner's check and the grader both report it (``check --json``, ``grade --json``).

The score is the checks' alone: the share of the exercise's points its checks earned. What the grader's reading of
an answer finds (a name it would look at twice, an event the answer's process's audit hook saw) goes to
:attr:`Verdict.review`, lines for an instructor to read, never to the score; a learner's check has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from synclab.checks import CheckReport, Outcome


@dataclass
class Verdict:
    """What a check run found for one exercise."""

    task: str
    report: CheckReport | None = None
    notes: list[str] = field(default_factory=list)  # what the reader should know about the run (a cell that raised)
    error: str = ""  # why its checks did not run (the answer does not parse, defines nothing, ...)
    review: list[str] = field(default_factory=list)  # the grader's: lines an instructor may read; never a score
    # the grader's: per check, a digest of what it found right (synclab.lab.witnesses), compared with a right answer's
    witnesses: dict[str, str] = field(default_factory=dict)

    @property
    def share(self) -> float:
        """The share of the exercise's points earned: the checks passed, weighted; 0 when they did not run."""
        if self.report is None or not self.report.points:
            return 0.0
        return self.report.earned / self.report.points

    def earned(self, points: float) -> float:
        return round(points * self.share, 2)

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed

    def status(self) -> str:
        return "not run" if self.report is None else "passed" if self.report.passed else "failed"

    def __str__(self) -> str:
        lines = []
        if self.error:
            lines.append(f"Exercise {self.task}: not checked: {self.error}")
        if self.report is not None:
            lines.append(self._in_the_exercises_points(str(self.report)))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)  # the review lines are the instructor's: ``grade`` prints them apart

    def _in_the_exercises_points(self, text: str) -> str:
        """The report with its summary's points (the checks' own weights) in the exercise's points, the scale the
        JSON and the grade give: one scale in a terminal."""
        from synclab.lab.exercises import EXERCISES

        assert self.report is not None
        weights = self.report.points_said()
        if self.task not in EXERCISES or weights not in text:
            return text
        worth = EXERCISES[self.task].points
        said = f"(worth {self.earned(worth):g} of the exercise's {worth} points, for the checks and clauses that held)"
        return text.replace(weights, said, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "status": self.status(), "share": round(self.share, 4), "notes": self.notes,
                "error": self.error, "review": self.review, "witnesses": self.witnesses,
                "report": self.report.to_dict() if self.report is not None else None}

    @classmethod
    def from_dict(cls, data: dict) -> "Verdict":
        return cls(data["task"], report_from_dict(data["report"]) if data["report"] else None, data["notes"],
                   data["error"], data["review"], data.get("witnesses", {}))


def from_worker(data: dict, review: list[str]) -> Verdict:
    """One exercise's verdict as the grader's worker sends it (``data``), after the grader's own ``review`` lines."""
    report = data["report"]
    return Verdict(data["task"], report_from_dict(report) if report else None, data["notes"], data["error"],
                   review + data["review"], data.get("witnesses", {}))


def report_from_dict(data: dict) -> CheckReport:
    """A :class:`CheckReport` read back from :meth:`CheckReport.to_dict` (a report log, a worker's pipe)."""
    return CheckReport(data["title"], [Outcome(**o) for o in data["outcomes"]], data["seed"],
                       data.get("check_function", ""))
