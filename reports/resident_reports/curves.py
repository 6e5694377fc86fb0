"""Learning curves from ``resident-train --log`` files (JSON lines).

A log is a ``header`` record (kind ``rl`` or ``supervised``, task, seed, commit, gpu, config),
then ``progress`` records (RL: env_steps, episodes, mean_return_100, wall_s, losses) or
``epoch`` records (supervised: epoch, train_loss, validation_loss, windows_per_second, wall_s),
and an ``end`` record. A supervised run resumed with ``--resume`` appends a second header for the
same task and seed; its epochs continue the first run's, and an epoch logged twice (a run killed
after its epoch's record but before its checkpoint) keeps the later record. In an RL file every
header starts a new run. Records of other kinds are skipped, so newer writers stay readable.

A run killed while writing can leave its last line unterminated; such a line, when it does not
parse, is dropped with a warning. Any other malformed line is an ``InputError`` naming the file
and the line number.

Charts: RL return against env steps and against wall-clock seconds, one thin line per seed and,
where several seeds share a task, their mean with the min-max band over the env steps (or
seconds) that every seed reached; supervised train and validation loss against epoch, one
colour per seed.
"""

import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

from .loader import InputError  # noqa: E402

RL = "rl"
SUPERVISED = "supervised"
SUMMARY = "curves.md"


@dataclass
class CurveRun:
    """One run of one log: its header's identity and its points in file order.

    RL runs fill ``env_steps``, ``wall_s`` and ``returns`` (NaN before the first episode);
    supervised runs fill ``epochs``, ``train_loss`` and ``validation_loss``, one entry per
    epoch in increasing order. ``end`` is the end record, when the run wrote one."""

    source: str
    kind: str
    task: str
    seed: int
    commit: str = "unknown"
    gpu: str = "unknown"
    env_steps: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    validation_loss: list[float] = field(default_factory=list)
    end: dict | None = None

    @property
    def label(self) -> str:
        """The legend label: the seed and the file it came from."""
        return f"seed {self.seed} ({Path(self.source).name})"


def _number(record: dict, key: str, source: str, where: str, nullable: bool = False) -> float:
    """``record[key]`` as a float; null only when ``nullable`` (read as NaN). Booleans are not
    numbers here, although Python counts them as ints."""
    if key not in record:
        raise InputError(source, f"'{record.get('record')}' record without \"{key}\"", where)
    value = record[key]
    if value is None and nullable:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(source, f"\"{key}\" is {json.dumps(value)}, expected a number", where)
    return float(value)


def _count(record: dict, key: str, source: str, where: str) -> int:
    """``record[key]`` as a whole number >= 0."""
    value = _number(record, key, source, where)
    if value < 0 or value != math.floor(value):
        raise InputError(source, f"\"{key}\" is {record[key]}, expected a whole number >= 0",
                         where)
    return int(value)


def _text(record: dict, key: str, source: str, where: str) -> str:
    """``record[key]``, a non-empty string."""
    value = record.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(source, f"header without a string \"{key}\"", where)
    return value


def _records(path: Path) -> list[tuple[int, dict]]:
    """The (line number, object) pairs of ``path``, blank lines skipped."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(source, "no such file") from None
    except UnicodeDecodeError as error:
        raise InputError(source, f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    lines = text.split("\n")
    unterminated = not text.endswith("\n")
    out = []
    for index, line in enumerate(lines):
        number = index + 1
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if unterminated and index == len(lines) - 1:
                print(f"reports/curves: {source}: line {number}: skipped an unterminated last "
                      f"line (a run killed while writing)", file=sys.stderr)
                continue
            raise InputError(source, f"not JSON ({error.msg} at column {error.colno})",
                             f"line {number}") from None
        if not isinstance(record, dict):
            raise InputError(source, f"a JSON {type(record).__name__}, expected an object",
                             f"line {number}")
        if not isinstance(record.get("record"), str):
            raise InputError(source, "an object without a string \"record\"", f"line {number}")
        out.append((number, record))
    return out


def load_log(path: str | Path) -> list[CurveRun]:
    """The runs of one log file, in file order."""
    path = Path(path)
    source = str(path)
    runs: list[CurveRun] = []
    epochs: dict[int, tuple[float, float]] = {}
    for number, record in _records(path):
        where = f"line {number}"
        kind = record["record"]
        if kind == "header":
            header_kind = _text(record, "kind", source, where)
            if header_kind not in (RL, SUPERVISED):
                raise InputError(source, f"header kind \"{header_kind}\", expected \"{RL}\" or "
                                 f"\"{SUPERVISED}\"", where)
            task = _text(record, "task", source, where)
            seed = _count(record, "seed", source, where)
            previous = runs[-1] if runs else None
            if (header_kind == SUPERVISED and previous is not None
                    and previous.kind == SUPERVISED):
                if (previous.task, previous.seed) != (task, seed):
                    raise InputError(source, f"a second header for {task} seed {seed} after "
                                     f"{previous.task} seed {previous.seed}; a resumed run "
                                     "appends to its own log only", where)
                previous.end = None
                continue
            _finish(runs, epochs)
            epochs = {}
            runs.append(CurveRun(source, header_kind, task, seed,
                                 str(record.get("commit", "unknown")),
                                 str(record.get("gpu", "unknown"))))
            continue
        if kind not in ("progress", "epoch", "end"):
            continue
        if not runs:
            raise InputError(source, f"a '{kind}' record before any header record", where)
        run = runs[-1]
        if kind == "end":
            run.end = record
        elif kind == "progress":
            if run.kind != RL:
                raise InputError(source, "a 'progress' record in a supervised log", where)
            run.env_steps.append(_count(record, "env_steps", source, where))
            run.wall_s.append(_number(record, "wall_s", source, where))
            run.returns.append(_number(record, "mean_return_100", source, where, nullable=True))
        else:
            if run.kind != SUPERVISED:
                raise InputError(source, "an 'epoch' record in an RL log", where)
            epoch = _count(record, "epoch", source, where)
            epochs[epoch] = (_number(record, "train_loss", source, where, nullable=True),
                             _number(record, "validation_loss", source, where, nullable=True))
    _finish(runs, epochs)
    if not runs:
        raise InputError(source, "no header record (an empty log, or not a resident-train log)")
    return runs


def _finish(runs: list[CurveRun], epochs: dict[int, tuple[float, float]]) -> None:
    """Store the collected epochs, in epoch order, in the last (supervised) run."""
    if runs and runs[-1].kind == SUPERVISED:
        run = runs[-1]
        run.epochs = sorted(epochs)
        run.train_loss = [epochs[e][0] for e in run.epochs]
        run.validation_loss = [epochs[e][1] for e in run.epochs]


@dataclass(frozen=True)
class Band:
    """The mean and the min-max of several curves on a common grid ``xs``."""

    xs: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def seed_band(curves: Sequence[tuple[Sequence[float], Sequence[float]]]) -> Band | None:
    """Mean, min and max over ``curves`` (each ``(xs, ys)``, xs increasing) at every x of any
    curve inside the range that all curves cover, each curve linearly interpolated; points with
    a NaN y are left out first. None with fewer than two curves or no common range."""
    clean = []
    for xs, ys in curves:
        x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        keep = ~np.isnan(y)
        if keep.any():
            clean.append((x[keep], y[keep]))
    if len(clean) < 2:
        return None
    start = max(x[0] for x, _ in clean)
    stop = min(x[-1] for x, _ in clean)
    if start > stop:
        return None
    grid = np.unique(np.concatenate([x[(x >= start) & (x <= stop)] for x, _ in clean]))
    values = np.stack([np.interp(grid, x, y) for x, y in clean])
    return Band(grid, values.mean(axis=0), values.min(axis=0), values.max(axis=0))


def _gpus(runs: Sequence[CurveRun]) -> str:
    """The GPUs the runs name, joined."""
    return ", ".join(sorted({run.gpu for run in runs}))


def _rl_chart(path: Path, task: str, runs: Sequence[CurveRun], x_of: str, x_label: str) -> None:
    """Return against ``x_of`` ('env_steps' or 'wall_s'): one thin line per run, the mean and
    min-max band of several."""
    figure, axis = plt.subplots(figsize=(9, 5), layout="constrained")
    curves = [(getattr(run, x_of), run.returns) for run in runs]
    band = seed_band(curves)
    for run, (xs, ys) in zip(runs, curves):
        axis.plot(xs, ys, linewidth=1.0, alpha=0.45 if band else 1.0, label=run.label)
    if band is not None:
        axis.fill_between(band.xs, band.low, band.high, alpha=0.2, color="black",
                          label=f"min–max over {len(runs)} seeds (where all have data)")
        axis.plot(band.xs, band.mean, color="black", linewidth=2.0,
                  label=f"mean over {len(runs)} seeds")
    targets = {run.end.get("target") for run in runs if run.end}
    for target in sorted(t for t in targets if isinstance(t, (int, float))):
        axis.axhline(target, color="tab:red", linestyle=":", linewidth=1.0,
                     label=f"target {target:g}")
    axis.set_xlabel(x_label)
    axis.set_ylabel("mean return of the last 100 episodes")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    figure.suptitle(f"{task}: return vs {x_label}\nGPU: {_gpus(runs)}")
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _loss_chart(path: Path, task: str, runs: Sequence[CurveRun]) -> None:
    """Train (dashed) and validation (solid) loss per epoch, one colour per run; a logarithmic
    loss axis when every loss is positive."""
    figure, axis = plt.subplots(figsize=(9, 5), layout="constrained")
    values = []
    for index, run in enumerate(runs):
        color = f"C{index % 10}"
        axis.plot(run.epochs, run.validation_loss, color=color, marker="o",
                  label=f"{run.label}: validation")
        axis.plot(run.epochs, run.train_loss, color=color, linestyle="--",
                  label=f"{run.label}: train")
        values += [v for v in run.validation_loss + run.train_loss if not math.isnan(v)]
    if values and min(values) > 0:
        axis.set_yscale("log")
    axis.set_xlabel("epoch")
    axis.set_ylabel("loss (normalized units)")
    axis.grid(which="both", alpha=0.3)
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    figure.suptitle(f"{task}: loss vs epoch\nGPU: {_gpus(runs)}")
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _last(values: Sequence[float]) -> str:
    """The last non-NaN value, or '-'."""
    finite = [v for v in values if not math.isnan(v)]
    return f"{finite[-1]:.4g}" if finite else "-"


def write_curves(runs: Sequence[CurveRun], out: Path) -> list[Path]:
    """Write the charts and ``curves.md`` (a table per task and the chart links) under ``out``;
    return the chart paths."""
    out.mkdir(parents=True, exist_ok=True)
    tasks: dict[tuple[str, str], list[CurveRun]] = {}
    for run in runs:
        tasks.setdefault((run.kind, run.task), []).append(run)
    charts: list[Path] = []
    lines = ["# Learning curves", ""]
    for (kind, task), group in sorted(tasks.items()):
        group.sort(key=lambda r: (r.seed, r.source))
        lines += [f"## {task}", ""]
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", task)  # a task name never leaves ``out``
        if kind == RL:
            names = [f"{stem}_return_vs_env_steps.png", f"{stem}_return_vs_wall_s.png"]
            _rl_chart(out / names[0], task, group, "env_steps", "env steps")
            _rl_chart(out / names[1], task, group, "wall_s", "wall-clock seconds")
            lines += ["| seed | log | commit | env steps | last-100 mean | wall s | target |",
                      "|---:|---|---|---:|---:|---:|---|"]
            for run in group:
                steps = f"{run.env_steps[-1]:.0f}" if run.env_steps else "-"
                wall = f"{run.wall_s[-1]:.1f}" if run.wall_s else "-"
                verdict = ("not ended" if run.end is None
                           else "reached" if run.end.get("reached") else "not reached")
                lines.append(f"| {run.seed} | {Path(run.source).name} | {run.commit} | {steps} "
                             f"| {_last(run.returns)} | {wall} | {verdict} |")
        else:
            names = [f"{stem}_loss_vs_epoch.png"]
            _loss_chart(out / names[0], task, group)
            lines += ["| seed | log | commit | epochs | last train loss | best validation loss |",
                      "|---:|---|---|---:|---:|---:|"]
            for run in group:
                valid = [v for v in run.validation_loss if not math.isnan(v)]
                best = f"{min(valid):.4g}" if valid else "-"
                lines.append(f"| {run.seed} | {Path(run.source).name} | {run.commit} | "
                             f"{len(run.epochs)} | {_last(run.train_loss)} | {best} |")
        lines.append("")
        lines += [f"![{name}]({name})" for name in names] + [""]
        charts += [out / name for name in names]
    (out / SUMMARY).write_text("\n".join(lines), encoding="utf-8")
    return charts
