"""Loading and validating a Google Benchmark JSON file (``--benchmark_format=json``).

Every row is checked for the fields Google Benchmark always writes. Kept are the
iteration rows (one per repetition) and the ``median``, ``min`` and ``max`` aggregates;
other aggregates (mean, stddev, cv, custom statistics) are checked, then dropped. Times
are converted to seconds.
"""

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from .naming import BenchName, parse_name
from .units import SECONDS_PER_UNIT

KEPT_AGGREGATES = frozenset({"median", "min", "max"})

CONTEXT_LABELS = {
    "gpu_name": "GPU", "sm_clock_mhz": "SM clock (MHz)", "driver_cuda_version": "driver CUDA",
    "runtime_cuda_version": "runtime CUDA", "git_commit": "git commit",
    "resident_build_type": "build type", "date": "date", "host_name": "host",
}
"""The context fields a report shows, with their labels."""

# Numeric keys Google Benchmark writes itself; every other numeric key is a user counter.
_STANDARD_NUMERIC_KEYS = frozenset({
    "family_index", "per_family_instance_index", "repetitions", "repetition_index",
    "threads", "iterations", "real_time", "cpu_time",
})

_KIND_NAMES = {str: "a string", float: "a number", int: "an integer",
               dict: "an object", list: "an array"}


class InputError(Exception):
    """A file named by the user is missing or malformed. ``str()`` is
    ``'<file>: <where>: <what>'``; ``<where>`` (e.g. ``benchmarks[3]``) may be absent."""

    def __init__(self, source: str, what: str, where: str | None = None):
        super().__init__(": ".join([source, *([where] if where else []), what]))


@dataclass(frozen=True)
class Row:
    """One kept entry of the ``benchmarks`` array.

    ``index`` is its position in the array; ``aggregate`` is ``None`` for an iteration
    row, else one of ``KEPT_AGGREGATES``. ``real_time_s`` is positive and finite, or
    ``None`` when ``error`` (Google Benchmark's ``error_message``) is set. ``counters``
    holds the user counters, every numeric key Google Benchmark does not write itself;
    they may be NaN."""

    index: int
    run_name: str
    name: BenchName
    aggregate: str | None
    repetitions: int
    real_time_s: float | None
    counters: Mapping[str, float]
    error: str | None = None

    @property
    def where(self) -> str:
        """The row's position for error messages: ``'benchmarks[3]'``."""
        return f"benchmarks[{self.index}]"


@dataclass(frozen=True)
class Run:
    """A loaded file: ``source`` is the path as the user gave it, ``context`` the JSON
    ``context`` object, ``rows`` the kept rows in file order."""

    source: str
    context: Mapping[str, object]
    rows: tuple[Row, ...]

    @property
    def gpu_name(self) -> str:
        """The context's ``gpu_name``, or ``'unknown GPU'`` when the bench did not add it."""
        return str(self.context.get("gpu_name", "unknown GPU"))

    def by_benchmark(self) -> dict[str, list[Row]]:
        """The rows grouped by benchmark key (``BenchName.key``), keys in file order."""
        grouped: dict[str, list[Row]] = {}
        for row in self.rows:
            grouped.setdefault(row.name.key, []).append(row)
        return grouped


def load_run(path: str | Path) -> Run:
    """Read and validate one Google Benchmark JSON file. Raises ``InputError`` naming the
    file and the offending field when it is unreadable or malformed, when ``benchmarks``
    is empty, or when two run names differ only by Google Benchmark suffixes."""
    source = str(path)
    document = _read_json(Path(path), source)
    if not isinstance(document, dict):
        raise InputError(source, "expected a JSON object at the top level")
    context = _field(document, "context", dict, source)
    entries = _field(document, "benchmarks", list, source)
    if not entries:
        raise InputError(source, "no rows", "benchmarks")
    rows = [row for index, entry in enumerate(entries)
            if (row := _parse_row(entry, index, source)) is not None]
    _check_keys_unique(rows, source)
    return Run(source, MappingProxyType(dict(context)), tuple(rows))


def _read_json(path: Path, source: str) -> object:
    """The parsed JSON of ``path`` (NaN allowed: Google Benchmark writes it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InputError(source, error.strerror or str(error)) from None
    except UnicodeDecodeError:
        raise InputError(source, "not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(source, f"invalid JSON at line {error.lineno} column "
                                 f"{error.colno}: {error.msg}") from None


def _parse_row(entry: object, index: int, source: str) -> Row | None:
    """Validate one ``benchmarks`` entry; return it as a ``Row``, or ``None`` for a
    dropped aggregate."""
    where = f"benchmarks[{index}]"
    if not isinstance(entry, dict):
        raise InputError(source, "expected an object", where)
    _field(entry, "name", str, source, where)
    run_name = _field(entry, "run_name", str, source, where)
    run_type = _one_of(entry, "run_type", ("iteration", "aggregate"), source, where)
    repetitions = _field(entry, "repetitions", int, source, where)
    real_time = _field(entry, "real_time", float, source, where)
    unit = _one_of(entry, "time_unit", tuple(SECONDS_PER_UNIT), source, where)
    try:
        name = parse_name(run_name)
    except ValueError as error:
        raise InputError(source, f'field "run_name": {error}', where) from None
    aggregate = None
    if run_type == "aggregate":
        aggregate = _field(entry, "aggregate_name", str, source, where)
        if aggregate not in KEPT_AGGREGATES:
            return None
    counters = MappingProxyType({key: float(value) for key, value in entry.items()
                                 if key not in _STANDARD_NUMERIC_KEYS and _is_number(value)})
    if entry.get("error_occurred"):
        error = str(entry.get("error_message", "error_occurred without a message"))
        return Row(index, run_name, name, aggregate, repetitions, None, counters, error)
    if not (math.isfinite(real_time) and real_time > 0):
        raise InputError(source, f'field "real_time" must be positive, got {real_time}', where)
    return Row(index, run_name, name, aggregate, repetitions,
               real_time * SECONDS_PER_UNIT[unit], counters)


def _field(obj: dict, key: str, kind: type, source: str, where: str | None = None):
    """``obj[key]``, which must exist and be of ``kind`` (``float`` accepts any number,
    ``int`` a whole number; booleans are neither)."""
    if key not in obj:
        raise InputError(source, f'missing field "{key}"', where)
    value = obj[key]
    if not _has_kind(value, kind):
        raise InputError(source, f'field "{key}" must be {_KIND_NAMES[kind]}, got '
                                 f'{json.dumps(value)[:40]}', where)
    return value


def _has_kind(value: object, kind: type) -> bool:
    """Whether a JSON value is of ``kind``, with ``_field``'s meaning of float and int."""
    if kind is float:
        return _is_number(value)
    if kind is int:
        return _is_number(value) and float(value).is_integer()
    return isinstance(value, kind)


def _one_of(obj: dict, key: str, allowed: tuple[str, ...], source: str, where: str) -> str:
    """``obj[key]``, which must be one of the strings ``allowed``."""
    value = _field(obj, key, str, source, where)
    if value not in allowed:
        choices = ", ".join(f'"{choice}"' for choice in allowed)
        raise InputError(source, f'field "{key}" must be one of {choices}, got "{value}"', where)
    return value


def _is_number(value: object) -> bool:
    """Whether a JSON value is a number (JSON booleans load as ``bool``, not numbers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_keys_unique(rows: list[Row], source: str) -> None:
    """Reject two run names that differ only by Google Benchmark suffixes (for example
    ``threads:1`` and ``threads:2``): they would be merged into one benchmark."""
    first_run_name: dict[str, str] = {}
    for row in rows:
        other = first_run_name.setdefault(row.name.key, row.run_name)
        if other != row.run_name:
            raise InputError(source, f'"{row.run_name}" and "{other}" both name benchmark '
                                     f'"{row.name.key}" once Google Benchmark suffixes are dropped',
                             row.where)
