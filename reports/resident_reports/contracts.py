"""Transfer contracts: the ``audit.*`` counters of each repetition against the
``contract.*`` counters the bench wrote next to them.

Checked per iteration row: ``audit.d2h_scalar``, ``audit.d2h_bulk``, ``audit.h2d`` and
``audit.syncs`` against ``contract.max_d2h_scalar``, ``contract.max_d2h_bulk``,
``contract.max_h2d`` and ``contract.max_syncs`` (a negative limit means no limit), and
``audit.mapped_allocs`` must be 0 when ``contract.allow_mapped`` is 0.
"""

import math
from collections import Counter
from dataclasses import dataclass

from .loader import InputError, Row, Run

LIMITS = (
    ("audit.d2h_scalar", "contract.max_d2h_scalar"),
    ("audit.d2h_bulk", "contract.max_d2h_bulk"),
    ("audit.h2d", "contract.max_h2d"),
    ("audit.syncs", "contract.max_syncs"),
)
MAPPED_ALLOCS, ALLOW_MAPPED = "audit.mapped_allocs", "contract.allow_mapped"
CONTRACT_FIELDS = tuple(limit for _, limit in LIMITS) + (ALLOW_MAPPED,)

# Counters are per-iteration averages: let a limit absorb float rounding of the division.
_RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Violation:
    """A benchmark's counter over its contract: ``worst`` is the largest value over its
    repetitions, ``limit`` the contract value, ``rows_over`` of ``rows`` repetitions
    exceeded it."""

    benchmark: str
    counter: str
    worst: float
    limit: float
    rows_over: int
    rows: int


@dataclass(frozen=True)
class GateResult:
    """The outcome of checking a run. ``checked_rows``: iteration rows with a contract and
    no error. ``uncontracted``: rows without any ``contract.*`` field, counted per
    benchmark. ``errors``: first error message per benchmark with an errored row."""

    checked_rows: int
    violations: tuple[Violation, ...]
    uncontracted: dict[str, int]
    errors: dict[str, str]

    @property
    def passed(self) -> bool:
        """No violation and no errored row."""
        return not self.violations and not self.errors


def check_run(run: Run) -> GateResult:
    """Check every iteration row of ``run``. Raises ``InputError`` when the run has no
    iteration row, or when a row has some ``contract.*`` fields but not all, or lacks (or
    has a non-finite) counter that one of its limits needs."""
    iterations = [row for row in run.rows if row.aggregate is None]
    if not iterations:
        raise InputError(run.source, "no iteration rows to check (written with "
                                     "--benchmark_report_aggregates_only?)", "benchmarks")
    contracted, uncontracted, errors = Counter(), Counter(), {}
    excess: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for row in iterations:
        key = row.name.key
        if row.error is not None:
            errors.setdefault(key, row.error)
        elif not any(field in row.counters for field in CONTRACT_FIELDS):
            uncontracted[key] += 1
        else:
            contracted[key] += 1
            for counter, measured, limit in _exceeded(row, run.source):
                excess.setdefault((key, counter), []).append((measured, limit))
    violations = tuple(Violation(key, counter, *max(found), len(found), contracted[key])
                       for (key, counter), found in excess.items())
    return GateResult(contracted.total(), violations, dict(uncontracted), errors)


def _exceeded(row: Row, source: str) -> list[tuple[str, float, float]]:
    """``(counter, measured, limit)`` for each limit of ``row`` that its counters exceed."""
    limits = {field: _finite(row, field, source) for field in CONTRACT_FIELDS}
    if limits[ALLOW_MAPPED] not in (0.0, 1.0):
        raise InputError(source, f'field "{ALLOW_MAPPED}" must be 0 or 1, got '
                                 f'{limits[ALLOW_MAPPED]:g}', row.where)
    checks = [(counter, limits[limit]) for counter, limit in LIMITS if limits[limit] >= 0]
    if limits[ALLOW_MAPPED] == 0:
        checks.append((MAPPED_ALLOCS, 0.0))
    exceeded = []
    for counter, limit in checks:
        measured = _finite(row, counter, source)
        if measured > limit + _RELATIVE_TOLERANCE * max(1.0, limit):
            exceeded.append((counter, measured, limit))
    return exceeded


def _finite(row: Row, counter: str, source: str) -> float:
    """``row.counters[counter]``, which must be present and finite."""
    value = row.counters.get(counter)
    if value is None:
        raise InputError(source, f'missing field "{counter}" (the row has a contract)', row.where)
    if not math.isfinite(value):
        raise InputError(source, f'field "{counter}" must be finite, got {value}', row.where)
    return value
