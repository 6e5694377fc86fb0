"""The compact history of measured runs: one CSV row per (run, benchmark) with the date, the
commit, the GPU, the benchmark key, its median real time and its run-to-run spread. Raw run
folders are not kept in the tree; a run enters the history when it is measured, and the trend
of any benchmark across runs is plotted from this table alone."""

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .loader import InputError, Run
from .stats import summarize_run

FIELDS = ("date", "commit", "gpu", "benchmark", "median_s", "spread", "repetitions")
"""The columns of the history table, in file order."""


@dataclass(frozen=True)
class Entry:
    """One benchmark of one run: ``median_s`` in seconds, ``spread`` as (max - min) / median."""

    date: str
    commit: str
    gpu: str
    benchmark: str
    median_s: float
    spread: float
    repetitions: int

    def as_row(self) -> dict[str, str]:
        """The CSV row (times with 6 significant digits, enough for trends)."""
        return {"date": self.date, "commit": self.commit, "gpu": self.gpu,
                "benchmark": self.benchmark, "median_s": f"{self.median_s:.6g}",
                "spread": f"{self.spread:.4f}", "repetitions": str(self.repetitions)}


def entries_of_run(run: Run) -> list[Entry]:
    """The history entries of a loaded run, one per measured benchmark, in file order. The
    date is the context's date to the minute (YYYY-MM-DDTHH:MM), the commit its git_commit
    (at most 12 characters), the GPU its gpu_name."""
    date = str(run.context.get("date", "unknown"))[:16]
    commit = str(run.context.get("git_commit", "unknown"))[:12]
    summary = summarize_run(run)
    return [Entry(date, commit, run.gpu_name, key, s.median_s, s.spread, s.repetitions)
            for key, s in summary.measured.items()]


def read_history(path: Path) -> list[Entry]:
    """Read the table; a missing file is an empty history. Raises ``InputError`` naming the
    file and line for a malformed row."""
    if not path.exists():
        return []
    entries = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != FIELDS:
            raise InputError(str(path), f"header must be {','.join(FIELDS)}", "line 1")
        for line, row in enumerate(reader, start=2):
            try:
                entries.append(Entry(row["date"], row["commit"], row["gpu"], row["benchmark"],
                                     float(row["median_s"]), float(row["spread"]),
                                     int(row["repetitions"])))
            except (TypeError, ValueError) as error:
                raise InputError(str(path), f"malformed row ({error})", f"line {line}") from None
    return entries


def add_runs(path: Path, runs: Sequence[Run]) -> int:
    """Append the entries of each run not yet in the table (a run is identified by its commit,
    date and GPU, so adding the same run twice changes nothing); rows stay sorted by date.
    Returns the number of rows added."""
    entries = read_history(path)
    seen = {(e.commit, e.date, e.gpu, e.benchmark) for e in entries}
    added = [e for run in runs for e in entries_of_run(run)
             if (e.commit, e.date, e.gpu, e.benchmark) not in seen]
    write_history(path, sorted(entries + added, key=lambda e: e.date))
    return len(added)


def write_history(path: Path, entries: Iterable[Entry]) -> None:
    """Write the whole table (header first), replacing the file atomically."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for entry in entries:
            writer.writerow(entry.as_row())
    tmp.replace(path)


def plot_trends(entries: Sequence[Entry], benchmarks: Sequence[str], out: Path) -> list[Path]:
    """One PNG per benchmark: its median (with the spread as an error bar) per run in date
    order, runs labelled by commit. Benchmarks without entries are skipped. Returns the files
    written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for benchmark in benchmarks:
        rows = [e for e in entries if e.benchmark == benchmark]
        if not rows:
            continue
        figure, axes = plt.subplots(figsize=(7, 3.5))
        x = range(len(rows))
        medians = [e.median_s * 1e3 for e in rows]
        errors = [e.spread * e.median_s * 1e3 / 2 for e in rows]
        axes.errorbar(x, medians, yerr=errors, marker="o", capsize=3)
        axes.set_xticks(list(x), [f"{e.date}\n{e.commit[:7]}" for e in rows], fontsize=6,
                        rotation=60)
        axes.set_ylabel("median (ms)")
        axes.set_title(benchmark, fontsize=8)
        axes.grid(alpha=0.3)
        figure.tight_layout()
        file = out / (benchmark.replace("/", "_").replace(":", "-") + ".png")
        figure.savefig(file, dpi=110)
        plt.close(figure)
        written.append(file)
    return written
