"""Kernel times from an Nsight Compute CSV (``ncu --csv --metrics gpu__time_duration.sum``).

ncu prints one row per profiled kernel launch and metric; this module keeps the
``gpu__time_duration.sum`` rows, shortens the kernel names (template arguments and parameter
lists dropped), and sums them per kernel name, optionally over one segment of the launches:
from the first launch whose name matches ``start`` up to (not including) the next launch that
matches ``start`` again, e.g. one PPO minibatch between two ``gather_minibatch`` launches.
"""

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from .loader import InputError

METRIC = "gpu__time_duration.sum"
_UNIT_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


@dataclass(frozen=True)
class Launch:
    """One profiled launch: its short name and its duration in microseconds."""
    name: str
    microseconds: float


@dataclass(frozen=True)
class KernelTotal:
    """All launches of one kernel name in a segment."""
    name: str
    launches: int
    microseconds: float


def short_name(name: str) -> str:
    """``void ns::<unnamed>::kernel<float, 4>(float *, int)`` -> ``ns::kernel``."""
    name = re.sub(r"^void\s+", "", name.strip())
    depth, out = 0, []
    for ch in name:  # drop every <...> and (...) group, nested ones included
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    cleaned = "".join(out).replace("::::", "::").strip()
    return re.sub(r"::\s*$", "", cleaned) or name


def read_launches(path: Path) -> list[Launch]:
    """The launches of an ncu CSV in launch order. Lines before the CSV header (ncu's ==PROF==
    messages) are skipped. Raises InputError naming the file when there is no header, no
    duration row, or a value that is not a number."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as error:
        raise InputError(str(path), error.strerror or "cannot read") from error
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise InputError(str(path), "no ncu CSV header (a line starting with \"ID\")")
    launches = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") != METRIC:
            continue
        unit = row.get("Metric Unit", "")
        if unit not in _UNIT_TO_US:
            raise InputError(str(path), f"unknown unit {unit!r}", f"ID {row.get('ID')}")
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError) as error:
            raise InputError(str(path), "bad metric value", f"ID {row.get('ID')}") from error
        launches.append(Launch(short_name(row.get("Kernel Name", "?")), value * _UNIT_TO_US[unit]))
    if not launches:
        raise InputError(str(path), f"no {METRIC} rows")
    return launches


def segment(launches: list[Launch], start: str, occurrence: int = 1,
            source: str = "launches") -> list[Launch]:
    """The launches from the ``occurrence``-th (1-based) launch whose name contains ``start`` up
    to the next one. Raises InputError (naming ``source``) when there are not that many."""
    marks = [i for i, launch in enumerate(launches) if start in launch.name]
    if len(marks) < occurrence:
        raise InputError(source,
                         f"{len(marks)} launches match {start!r}, asked for number {occurrence}")
    first = marks[occurrence - 1]
    end = marks[occurrence] if len(marks) > occurrence else len(launches)
    return launches[first:end]


def totals(launches: list[Launch]) -> list[KernelTotal]:
    """Per kernel name: launches and summed time, largest first (ties by name)."""
    sums: dict[str, list[float]] = {}
    for launch in launches:
        entry = sums.setdefault(launch.name, [0, 0.0])
        entry[0] += 1
        entry[1] += launch.microseconds
    rows = [KernelTotal(name, int(n), us) for name, (n, us) in sums.items()]
    return sorted(rows, key=lambda r: (-r.microseconds, r.name))


def markdown(rows: list[KernelTotal]) -> str:
    """A markdown table of ``rows`` with each kernel's share of the total."""
    total = sum(r.microseconds for r in rows)
    lines = ["| kernel | launches | total µs | mean µs | share |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        share = r.microseconds / total if total > 0 else 0.0
        lines.append(f"| `{r.name}` | {r.launches} | {r.microseconds:.1f} | "
                     f"{r.microseconds / r.launches:.1f} | {100 * share:.1f}% |")
    lines.append(f"| total | {sum(r.launches for r in rows)} | {total:.1f} | | 100% |")
    return "\n".join(lines)
