"""Per-benchmark medians and run-to-run spread, and before/after changes judged against
that spread."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from .loader import KEPT_AGGREGATES, InputError, Row, Run
from .naming import BenchName

REGRESSION = "regression"
IMPROVEMENT = "improvement"
SAME = "same"


@dataclass(frozen=True)
class Summary:
    """One benchmark's real time over its repetitions, in seconds, and the median of each
    user counter."""

    name: BenchName
    median_s: float
    min_s: float
    max_s: float
    repetitions: int
    counters: Mapping[str, float]

    @property
    def spread(self) -> float:
        """Run-to-run spread, ``(max - min) / median``; 0 for a single repetition."""
        return (self.max_s - self.min_s) / self.median_s


@dataclass(frozen=True)
class RunSummary:
    """A run reduced to benchmarks: ``measured`` has a ``Summary`` per benchmark key with
    at least one timed repetition; ``errors`` the first error message per benchmark key
    with an errored repetition. A key can be in both."""

    measured: Mapping[str, Summary]
    errors: Mapping[str, str]


def summarize_run(run: Run) -> RunSummary:
    """Summarize every benchmark of ``run``, in file order."""
    measured, errors = {}, {}
    for key, rows in run.by_benchmark().items():
        failed = [row.error for row in rows if row.error is not None]
        if failed:
            errors[key] = failed[0]
        summary = summarize(rows, run.source)
        if summary is not None:
            measured[key] = summary
    return RunSummary(MappingProxyType(measured), MappingProxyType(errors))


def summarize(rows: Sequence[Row], source: str) -> Summary | None:
    """Summarize the rows of one benchmark: from its iteration rows without error when it
    has some, else from its ``median``, ``min`` and ``max`` aggregates (a file written with
    ``--benchmark_report_aggregates_only``). ``None`` when every repetition errored.
    Raises ``InputError`` when only some of those aggregates are there."""
    timed = [row for row in rows if row.aggregate is None and row.error is None]
    if timed:
        return _from_repetitions(timed)
    aggregates = {row.aggregate: row for row in rows if row.aggregate is not None}
    if not aggregates:
        return None
    missing = sorted(KEPT_AGGREGATES - aggregates.keys())
    if missing:
        raise InputError(source, f'no iteration rows and no "{missing[0]}" aggregate, '
                                 "so the spread is unknown", f'benchmark "{rows[0].name.key}"')
    median = aggregates["median"]
    return Summary(median.name, median.real_time_s, aggregates["min"].real_time_s,
                   aggregates["max"].real_time_s, median.repetitions, median.counters)


def _from_repetitions(rows: Sequence[Row]) -> Summary:
    """Median, min and max over repetitions; each counter's median over the repetitions
    that report it."""
    times = np.array([row.real_time_s for row in rows])
    counter_names = dict.fromkeys(name for row in rows for name in row.counters)
    counters = {name: float(np.median([row.counters[name] for row in rows
                                       if name in row.counters]))
                for name in counter_names}
    return Summary(rows[0].name, float(np.median(times)), float(times.min()),
                   float(times.max()), len(rows), MappingProxyType(counters))


@dataclass(frozen=True)
class Change:
    """One benchmark measured in two runs."""

    before: Summary
    after: Summary

    @property
    def key(self) -> str:
        """The benchmark key."""
        return self.before.name.key

    @property
    def ratio(self) -> float:
        """``after / before`` of the median real times; above 1 is slower."""
        return self.after.median_s / self.before.median_s

    @property
    def spread(self) -> float:
        """The larger of the two runs' spreads."""
        return max(self.before.spread, self.after.spread)

    def verdict(self, min_change: float = 0.0) -> str:
        """``REGRESSION`` when the median got slower by a larger fraction of the before
        median than both ``min_change`` and ``spread``; ``IMPROVEMENT`` when it got faster
        by more than both; ``SAME`` otherwise."""
        bound = max(min_change, self.spread)
        change = self.ratio - 1.0
        if change > bound:
            return REGRESSION
        if -change > bound:
            return IMPROVEMENT
        return SAME


@dataclass(frozen=True)
class Pairing:
    """Two runs matched by benchmark key. ``changes``: measured in both, in the before
    file's order. ``only_before`` / ``only_after``: measured in one run and neither
    measured nor errored in the other. ``errors_before`` / ``errors_after``: each run's
    errored benchmarks with their messages."""

    changes: tuple[Change, ...]
    only_before: tuple[str, ...]
    only_after: tuple[str, ...]
    errors_before: Mapping[str, str]
    errors_after: Mapping[str, str]


def pair_runs(before: RunSummary, after: RunSummary) -> Pairing:
    """Match the benchmarks of two summarized runs."""
    changes = tuple(Change(summary, after.measured[key])
                    for key, summary in before.measured.items() if key in after.measured)
    return Pairing(changes, _unmatched(before, after), _unmatched(after, before),
                   before.errors, after.errors)


def _unmatched(run: RunSummary, other: RunSummary) -> tuple[str, ...]:
    """Keys measured in ``run`` that ``other`` neither measured nor errored on."""
    return tuple(key for key in run.measured
                 if key not in other.measured and key not in other.errors)
