"""What a timing figure says, in code: the page's sentence and the rules that make it true.

Introduced in chapter 0 (the primer); every timing figure of the book declares one.

A measurement published as a figure is a finding only if it says what the text beside it
says. So each measurement that feeds a figure declares a :class:`Claim`: the sentence
the book page prints (verbatim) and the rules it stands for, checked on the measured
:class:`~synclab.timing.Sweep` itself. :func:`validated` runs a measurement and checks
its claim:

* in a run that stores figures (``python -m synclab measure``, ``python -m synclab bench``),
  a contradicted claim is measured again, a few times; if it still fails the run stops
  with :class:`ClaimContradicted` and stores nothing;
* anywhere else (a reader's lab, ``pytest --nbval``) the result is kept and a note says
  that this run contradicts the page: a busy machine must never fail a test run.

``tests/test_claims.py`` re-checks every stored figure against its claim from the stored
numbers alone, and checks that every claim's sentence is on its chapter's page.
Variants are named by their position in the sweep (0 is the baseline, -1 the last
version), because the notebooks name them.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence, Union

from synclab.timing import Sweep
from synclab.run_modes import deliberate_run

Variant = Union[int, str]
ATTEMPTS = 3  # measurements a storing run makes before it refuses a figure
# A CPU figure is stored only when it holds its claim with room to spare: a ratio the sentence promises, 1.2 times
# over; a spread it allows, used at most half. A learner's loaded 2-core machine then still sees the sentence hold.
HEADROOM = 1.2


def _name(sweep: Sweep, variant: Variant) -> str:
    return sweep.variants[variant] if isinstance(variant, int) else variant


def _index(sweep: Sweep, value: Any) -> int:
    if value is None:
        return 0
    try:
        return sweep.values.index(value)
    except ValueError:
        raise ValueError(f"{value!r} is not one of the swept values {sweep.values}") from None


@dataclass(frozen=True)
class Faster:
    """``fast`` is at least ``by`` times faster than ``slow`` at every value from ``from_value`` on."""

    fast: Variant
    slow: Variant
    by: float
    from_value: Any = None

    def problems(self, sweep: Sweep) -> list[str]:
        return [self.said(miss, [self.by]) for miss in self.misses(sweep)]

    def misses(self, sweep: Sweep) -> list[tuple[str, Any, str, str, float]]:
        """Each point where ``fast`` is not ``by`` times faster: (parameter, value, fast, slow, ratio)."""
        fast, slow = _name(sweep, self.fast), _name(sweep, self.slow)
        return [(sweep.parameter, value, fast, slow, ratio)
                for value, ratio in list(zip(sweep.values, sweep.ratio(slow, fast)))[_index(sweep, self.from_value):]
                if ratio < self.by]

    @staticmethod
    def said(miss: tuple[str, Any, str, str, float], thresholds: list[float]) -> str:
        """A point's miss in words; several thresholds missed there (1.5x from 16 up, 2x from 64 up), said once."""
        parameter, value, fast, slow, ratio = miss
        pace = f"{ratio:.2f}x as fast as" if ratio >= 1 else f"{1 / ratio:.2f}x slower than"
        nor = f" (nor {' nor '.join(f'{by:g}x' for by in thresholds[1:])})" if len(thresholds) > 1 else ""
        return f"at {parameter}={value}, {fast!r} is {pace} {slow!r}, not at least {thresholds[0]:g}x faster{nor}"

    def strict(self) -> Faster:
        return Faster(self.fast, self.slow, self.by * HEADROOM, self.from_value)


@dataclass(frozen=True)
class Within:
    """``a`` and ``b`` agree within a factor ``factor`` at every value (1.25: within 25%)."""

    a: Variant
    b: Variant
    factor: float

    def problems(self, sweep: Sweep) -> list[str]:
        a, b = _name(sweep, self.a), _name(sweep, self.b)
        out = []
        for value, ratio in zip(sweep.values, sweep.ratio(a, b)):
            apart = max(ratio, 1 / ratio)
            if apart > self.factor:
                out.append(f"at {sweep.parameter}={value}, {a!r} and {b!r} are {apart:.2f}x apart, "
                           f"not within {self.factor:g}x")
        return out

    def strict(self) -> Within:
        return Within(self.a, self.b, 1 + (self.factor - 1) / 2)


@dataclass(frozen=True)
class Grows:
    """``variant``'s time at ``to_value`` (default: the last) is at least ``by`` times its time at ``from_value``."""

    variant: Variant
    by: float
    from_value: Any = None
    to_value: Any = None

    def problems(self, sweep: Sweep) -> list[str]:
        name = _name(sweep, self.variant)
        medians = sweep.medians_us(name)
        first = _index(sweep, self.from_value)
        last = len(medians) - 1 if self.to_value is None else _index(sweep, self.to_value)
        growth = medians[last] / medians[first]
        if growth >= self.by:
            return []
        return [f"{name!r} grows {growth:.1f}x from {sweep.parameter}={sweep.values[first]} to "
                f"{sweep.values[last]}, not at least {self.by:g}x"]

    def strict(self) -> Grows:
        return Grows(self.variant, self.by * HEADROOM, self.from_value, self.to_value)


@dataclass(frozen=True)
class Flat:
    """``variant``'s slowest value is at most ``within`` times its fastest, over the whole sweep."""

    variant: Variant
    within: float

    def problems(self, sweep: Sweep) -> list[str]:
        name = _name(sweep, self.variant)
        medians = sweep.medians_us(name)
        spread = max(medians) / min(medians)
        if spread <= self.within:
            return []
        return [f"{name!r} varies {spread:.2f}x over the sweep, not within {self.within:g}x"]

    def strict(self) -> Flat:
        return Flat(self.variant, 1 + (self.within - 1) / 2)


Rule = Union[Faster, Within, Grows, Flat]
RULES: dict[str, type] = {cls.__name__: cls for cls in (Faster, Within, Grows, Flat)}


@dataclass(frozen=True)
class Claim:
    """The sentence a page prints about one measurement on one kind of device, and its rules."""

    id: str  # "<chapter>.<measurement>", the name under which the measurement is recorded
    device: str  # "cpu" or "gpu": what the sentence speaks of
    text: str  # printed verbatim on the chapter's page
    rules: tuple[Rule, ...]
    shows: str = ""  # what this kind of device can and cannot show of the pattern (said when a run disagrees)

    def missing(self, sweep: Sweep) -> list[str]:
        """The variants its rules name that ``sweep`` lacks (a lab whose exercise is not done yet).

        A rule that compares two variants lacks one when both resolve to the same variant: with only the
        baseline measured, "the last version" (-1) is the baseline itself, and comparing it with itself says nothing.
        """
        def absent(v: Variant) -> bool:
            return ((isinstance(v, int) and not -len(sweep.variants) <= v < len(sweep.variants))
                    or (isinstance(v, str) and v not in sweep.variants))

        out: list[str] = []
        for rule in self.rules:
            pair = [getattr(rule, f) for f in ("fast", "slow", "a", "b") if hasattr(rule, f)]
            named = pair + [getattr(rule, f) for f in ("variant",) if hasattr(rule, f)]
            out += [str(v) for v in named if absent(v)]
            if len(pair) == 2 and not any(absent(v) for v in pair) and _name(sweep, pair[0]) == _name(sweep, pair[1]):
                out.append(str(pair[0]))  # one variant compared with itself: the other is not measured
        return list(dict.fromkeys(out))

    def problems(self, sweep: Sweep) -> list[str]:
        missing = self.missing(sweep)
        if missing:
            return [f"the measurement lacks variant(s) {', '.join(missing)} that the claim speaks of"]
        lines: list[Any] = []  # words, or a Faster rule's miss whose thresholds are gathered first
        thresholds: dict[tuple, list[float]] = {}
        for rule in self.rules:
            if not isinstance(rule, Faster):
                lines += rule.problems(sweep)
                continue
            for miss in rule.misses(sweep):  # a point two rules miss (1.5x from 16, 2x from 64) is said once
                if miss not in thresholds:
                    thresholds[miss] = []
                    lines.append(miss)
                thresholds[miss].append(rule.by)
        return [Faster.said(line, thresholds[line]) if isinstance(line, tuple) else line for line in lines]

    def problems_with_headroom(self, sweep: Sweep) -> list[str]:
        """What a storing run refuses: on a CPU, the rules made stricter by :data:`HEADROOM` (see there)."""
        if self.device != "cpu":
            return self.problems(sweep)
        return [f"{p} (with headroom: a CPU figure must hold its sentence with room to spare)"
                for rule in self.rules for p in rule.strict().problems(sweep)] or self.problems(sweep)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "device": self.device, "text": self.text,
                "rules": [{"rule": type(r).__name__, **asdict(r)} for r in self.rules]}


REGISTRY: dict[tuple[str, str], Claim] = {}


def declare(id: str, *, cpu: tuple[str, Sequence[Rule]] | None = None,
            gpu: tuple[str, Sequence[Rule]] | None = None, cpu_shows: str = "") -> None:
    """Declare what the page says of measurement ``id`` on a CPU and on a GPU: ``(sentence, rules)``.

    ``cpu_shows`` says plainly what a CPU can and cannot show of the pattern: a reader whose run
    disagrees with the page reads it beside the numbers.
    """
    for device, said in (("cpu", cpu), ("gpu", gpu)):
        if said is not None:
            text, rules = said
            shows = " ".join(cpu_shows.split()) if device == "cpu" else ""
            REGISTRY[(id, device)] = Claim(id, device, " ".join(text.split()), tuple(rules), shows)


def claim_for(id: str, is_gpu: bool) -> Claim | None:
    """The claim declared for ``id`` on this kind of device, if its chapter's package was imported."""
    return REGISTRY.get((id, "gpu" if is_gpu else "cpu"))


def all_claims() -> list[Claim]:
    """The claims declared so far: a chapter declares its own when its package is imported.

    This module imports no chapter (it sits below them). To have every claim, import every
    chapter first: ``synclab.lab.chapters.import_all()``.
    """
    return list(REGISTRY.values())


class ClaimContradicted(RuntimeError):
    """A storing run measured a figure that contradicts its page, several times: nothing is stored."""


def check_stored(sweep: Sweep) -> list[str]:
    """Everything wrong with a stored measurement's claim (empty: it holds), from the stored numbers alone."""
    stored = sweep.claim
    if stored is None:
        return ["no claim is stored with this measurement"]
    claim = claim_for(stored["id"], sweep.provenance.is_gpu)
    if claim is None:
        return [f"no claim is declared for {stored['id']!r} on a {'GPU' if sweep.provenance.is_gpu else 'CPU'} "
                "(a chapter declares its claims when its package is imported: synclab.lab.chapters.import_all())"]
    if stored.get("claim") != claim.to_dict():
        return [f"{stored['id']}: stored against another claim than the one declared now; re-measure"]
    return claim.problems(sweep)


def claimed_nothing(id: str, sweep: Sweep) -> Sweep:
    """``sweep`` marked as measuring what ``id``'s sentence does not speak of (an exercise not done yet, whose rows run
    the code before its PR): the figure shows what there is, and nothing is compared or said of it."""
    claim = claim_for(id, sweep.provenance.is_gpu)
    sweep.claim = {"id": id, "claim": claim.to_dict() if claim else None, "holds": None, "problems": [],
                   "partial": True}
    return sweep


def validated(id: str, measure: Callable[[], Sweep], attempts: int = ATTEMPTS) -> Sweep:
    """Run ``measure`` and check the claim declared for ``id`` on this device (see the module docstring)."""
    for attempt in range(1, attempts + 1):
        sweep = measure()
        claim = claim_for(id, sweep.provenance.is_gpu)
        if claim is None:
            raise KeyError(f"no claim is declared for {id!r} on this device (synclab.claims.declare)")
        if claim.missing(sweep):  # an exercise not done yet: the figure shows what there is, and claims nothing
            if deliberate_run():
                raise ClaimContradicted(f"figure {id}: {claim.problems(sweep)[0]}; a storing run needs them all")
            return claimed_nothing(id, sweep)
        problems = claim.problems(sweep)
        sweep.claim = {"id": id, "claim": claim.to_dict(), "holds": not problems, "problems": problems}
        if deliberate_run() and not problems:
            problems = claim.problems_with_headroom(sweep)  # stored only with room to spare
        if not problems or not deliberate_run():
            break
        print(f"{id}: this measurement contradicts its claim ({'; '.join(problems)}); "
              f"measuring again ({attempt}/{attempts})", file=sys.stderr)
    else:
        raise ClaimContradicted(
            f"figure {id} contradicts its claim after {attempts} measurements: {'; '.join(problems)}. "
            f"The claim: \"{claim.text}\". The machine looks busy: re-run on an idle machine. Nothing was stored.")
    if problems:  # one short line each: read beside a figure, in a notebook or the profile page
        lines = [f"Note: this run's timings differ from the page's sentence (\"{claim.text}\"):",
                 *(f"  - {problem}" for problem in problems)]
        if claim.shows:
            lines.append(f"What a CPU can and cannot show here: {claim.shows.rstrip('.')}.")
        lines.append("Timings move with whatever else the machine is doing, and the page's figure was measured on an "
                     "idle machine: run the cell again when this one is quiet; only a difference that stays then says "
                     "something about your version. The lab's counts (syncs, torch calls, elements read) do not move "
                     "with the machine: read those first.")
        print("\n".join(lines))
    elif (note := spread_note(sweep)) and not deliberate_run():
        print(note)
    elif not deliberate_run():  # a verdict either way: silence read as "nothing to compare" (a learner's report)
        print(f"This run agrees with the page's sentence: \"{claim.text}\"")
    return sweep


SPREAD_NOTED = 2.0  # rounds of one point this many times apart: the machine was busy while they ran


def spread_note(sweep: Sweep) -> str | None:
    """A note where one point's rounds lie :data:`SPREAD_NOTED` times or more apart: a claim can then hold by chance,
    its ratios off in either direction (a learner's busy machine printed 6.6x where the page says 1.5x)."""
    spread, where = max(((t.high_us / t.low_us, f"{variant} at {sweep.parameter}={value}")
                         for variant, timings in sweep.timings.items() for value, t in zip(sweep.values, timings)
                         if t.low_us > 0), default=(0.0, ""))
    if spread < SPREAD_NOTED:
        return None
    return (f"Note: this run's rounds spread {spread:.1f}x apart ({where}): the machine was busy while they ran, so "
            "its ratios may be off either way, too high as well as too low. The lab's counts (syncs, torch calls, "
            "elements read) do not move with the machine: read those first; run this cell again when it is quiet "
            "before reading a ratio into it.")


def stored_figures(notebook: Any) -> dict[str, tuple[dict[str, Any], Sweep | None]]:
    """The figures a notebook's stored outputs glue: ``{name: (plotly figure, the measurement it draws)}``."""
    import json
    from pathlib import Path

    from synclab.figures import EVIDENCE_KEY

    nb = json.loads(Path(notebook).read_text()) if not isinstance(notebook, dict) else notebook
    found: dict[str, tuple[dict[str, Any], Sweep | None]] = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {})
            name = meta.get("scrapbook", {}).get("name")
            figure = next((v for k, v in out.get("data", {}).items() if k.endswith("application/vnd.plotly.v1+json")),
                          None)
            if name and figure is not None:
                evidence = meta.get(EVIDENCE_KEY)
                found[name] = (figure, Sweep.from_dict(evidence) if evidence else None)
    return found


def stored_problems(notebook: Any) -> dict[str, list[str]]:
    """Per glued figure of a stored notebook: what contradicts its claim, or makes it an unclaimed timing figure."""
    problems: dict[str, list[str]] = {}
    for name, (figure, measured) in stored_figures(notebook).items():
        title = str(figure.get("layout", {}).get("title", {}).get("text", ""))
        if measured is None:
            if "measured on" in title:
                problems[name] = ["a measured figure stored without its measurement and claim"]
            continue
        found = check_stored(measured)
        if found:
            problems[name] = found
    return problems
