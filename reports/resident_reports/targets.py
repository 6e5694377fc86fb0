"""The issues' speed targets (``reports/targets.json``) checked against one run's medians.

A target is met when its median value is on the right side of the limit. Its margin (how far
the median is from the limit, as a fraction of the limit) is set against the run-to-run
spread of the benchmarks involved: a margin inside the spread is flagged, because another run
could land on the other side. A timed target also gets its value at the least favorable
repetitions (the slowest for a time; for a ratio, the slow benchmark's fastest repetition
against the fast one's slowest for a minimum, the other way round for a maximum): a target met
on the medians whose least favorable value misses is flagged too, since the repetitions alone
could tell the opposite story (a bimodal host-staged baseline does)."""

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .loader import InputError
from .stats import Summary
from .units import format_count, format_duration, format_percent

MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"
DEFAULT_TARGETS = Path(__file__).resolve().parent.parent / "targets.json"

_FIELDS = {
    "max_time": ("benchmark", "limit_s"),
    "min_ratio": ("slow", "fast", "limit"),
    "max_ratio": ("slow", "fast", "limit"),
    "min_counter": ("benchmark", "counter", "limit"),
}


@dataclass(frozen=True)
class Target:
    """One target: ``kind`` is a key of ``_FIELDS``; ``fields`` holds that kind's fields."""

    issue: int
    what: str
    kind: str
    fields: Mapping[str, object]

    @property
    def limit(self) -> float:
        return float(self.fields["limit_s" if self.kind == "max_time" else "limit"])

    def benchmarks(self) -> tuple[str, ...]:
        """The benchmark keys the target reads."""
        if self.kind in ("min_ratio", "max_ratio"):
            return (str(self.fields["slow"]), str(self.fields["fast"]))
        return (str(self.fields["benchmark"]),)


@dataclass(frozen=True)
class TargetResult:
    target: Target
    verdict: str                 # MET, MISSED or NOT_MEASURED
    value: float | None = None   # the median value compared with the limit
    margin: float | None = None  # (value - limit) / limit, positive when on the right side
    spread: float | None = None  # the larger spread of the benchmarks read
    missing: tuple[str, ...] = ()
    worst: float | None = None   # the value at the least favorable repetitions (timed targets)

    @property
    def within_spread(self) -> bool:
        return self.margin is not None and abs(self.margin) < (self.spread or 0.0)

    @property
    def worst_misses(self) -> bool:
        """Met on the medians, missed at the least favorable repetitions."""
        if self.verdict != MET or self.worst is None:
            return False
        if self.target.kind in ("max_time", "max_ratio"):
            return self.worst > self.target.limit
        return self.worst < self.target.limit


def load_targets(path: str | Path) -> list[Target]:
    """Read and check a targets file. Raises ``InputError`` naming the file, the entry and
    what is wrong (unknown kind, a missing field, a limit that is not a positive number)."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(source, "no such file") from None
    except json.JSONDecodeError as error:
        raise InputError(source, f"not JSON: {error}") from None
    entries = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(source, 'no "targets" array')
    return [_parse_target(entry, f"targets[{index}]", source) for index, entry in enumerate(entries)]


def _parse_target(entry: object, where: str, source: str) -> Target:
    if not isinstance(entry, dict):
        raise InputError(source, "not an object", where)
    kind = entry.get("kind")
    if kind not in _FIELDS:
        raise InputError(source, f"kind {kind!r} is not one of {', '.join(_FIELDS)}", where)
    for key in ("issue", "what", *_FIELDS[kind]):
        if key not in entry:
            raise InputError(source, f'no "{key}" (a {kind} target needs {", ".join(_FIELDS[kind])})',
                             where)
    limit_key = "limit_s" if kind == "max_time" else "limit"
    limit = entry[limit_key]
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) \
            or limit <= 0:
        raise InputError(source, f'"{limit_key}" = {limit!r}, allowed a finite number > 0', where)
    return Target(int(entry["issue"]), str(entry["what"]), kind,
                  {key: entry[key] for key in _FIELDS[kind]})


def evaluate(target: Target, measured: Mapping[str, Summary]) -> TargetResult:
    """The target against the run's medians."""
    missing = tuple(key for key in target.benchmarks() if key not in measured)
    if missing:
        return TargetResult(target, NOT_MEASURED, missing=missing)
    summaries = [measured[key] for key in target.benchmarks()]
    spread = max(summary.spread for summary in summaries)
    worst = None
    if target.kind == "max_time":
        value = summaries[0].median_s
        margin = (target.limit - value) / target.limit
        worst = summaries[0].max_s
    elif target.kind in ("min_ratio", "max_ratio"):
        slow, fast = summaries
        value = slow.median_s / fast.median_s
        margin = (value - target.limit) / target.limit
        if target.kind == "max_ratio":
            margin = -margin
            worst = slow.max_s / fast.min_s
        else:
            worst = slow.min_s / fast.max_s
    else:
        counter = str(target.fields["counter"])
        if counter not in summaries[0].counters:
            return TargetResult(target, NOT_MEASURED, missing=(f"{target.benchmarks()[0]} {counter}",))
        value = summaries[0].counters[counter]
        margin = (value - target.limit) / target.limit
    return TargetResult(target, MET if margin >= 0 else MISSED, value, margin, spread,
                        worst=worst)


def format_value(target: Target, value: float) -> str:
    """The value in the target's terms: a duration, a rate ('4.4k', '9.4M') or a ratio."""
    if target.kind == "max_time":
        return format_duration(value)
    if target.kind == "min_counter":
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= scale:
                return f"{value / scale:.3g}{suffix}"
        return format_count(value)
    return f"{value:.2f}x"


def format_limit(target: Target) -> str:
    signs = {"max_time": "<=", "max_ratio": "<=", "min_ratio": ">=", "min_counter": ">="}
    return f"{signs[target.kind]} {format_value(target, target.limit)}"


def targets_table(results: Sequence[TargetResult]) -> list[list[str]]:
    """Rows of the summary's targets table (without the header)."""
    rows = []
    for r in results:
        t = r.target
        if r.verdict == NOT_MEASURED:
            rows.append([str(t.issue), t.what, format_limit(t), "-", NOT_MEASURED,
                         "no " + ", ".join(f"`{m}`" for m in r.missing)])
            continue
        notes = []
        if r.within_spread:
            notes.append(f"margin {format_percent(r.margin)} is within the spread "
                         f"{format_percent(r.spread, signed=False)}")
        if r.worst_misses:
            notes.append(f"{format_value(t, r.worst)} at the least favorable repetitions")
        note = "; ".join(notes)
        rows.append([str(t.issue), t.what, format_limit(t), format_value(t, r.value), r.verdict, note])
    return rows
