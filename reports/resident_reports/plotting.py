"""Charts written as PNG files with matplotlib's Agg backend. Every chart has a title that
names the GPU, axis labels with units and a legend."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.patches import Patch  # noqa: E402
import numpy as np  # noqa: E402

from .stats import IMPROVEMENT, REGRESSION, SAME, Summary  # noqa: E402
from .units import display_unit  # noqa: E402

WIDE_RANGE = 20.0
"""Values spanning more than this factor get a logarithmic axis."""

_VERDICT_COLORS = {REGRESSION: "tab:red", IMPROVEMENT: "tab:green", SAME: "tab:gray"}
_INCHES_PER_BAR = 0.3

Points = Mapping[str, tuple[Sequence[float], Sequence[float]]]
"""Lines of a line chart: legend label -> (xs, ys)."""


@dataclass(frozen=True)
class BarPanel:
    """Horizontal grouped bars: one group per category, one bar per series.

    ``series`` maps a legend label to one value per category. ``value_label`` names the
    value axis, unit included; ``category_label`` names the category axis. ``ranges`` may
    map a series to ``(lows, highs)`` per category, drawn as error bars; ``notes`` may map
    a series to a text per category, written at the end of its bars."""

    categories: Sequence[str]
    series: Mapping[str, Sequence[float]]
    value_label: str
    category_label: str
    ranges: Mapping[str, tuple[Sequence[float], Sequence[float]]] = field(default_factory=dict)
    notes: Mapping[str, Sequence[str]] = field(default_factory=dict)


def timing_panel(categories: Sequence[str], category_label: str,
                 series: Mapping[str, Sequence[Summary]], quantity: str,
                 notes: Mapping[str, Sequence[str]] | None = None) -> BarPanel:
    """A ``BarPanel`` of median real times, one series per legend label, with min-max
    whiskers, in the display unit of the smallest time. ``quantity`` names what is timed
    (e.g. 'epoch time')."""
    unit, scale = display_unit(s.min_s for summaries in series.values() for s in summaries)
    return BarPanel(
        categories=categories,
        series={label: [s.median_s / scale for s in summaries]
                for label, summaries in series.items()},
        value_label=f"{quantity} ({unit}): median of repetitions, whiskers min–max",
        category_label=category_label,
        ranges={label: ([s.min_s / scale for s in summaries], [s.max_s / scale for s in summaries])
                for label, summaries in series.items()},
        notes=notes or {})


def axis_scale(values: Sequence[float]) -> str:
    """``'linear'`` unless the positive values span more than ``WIDE_RANGE``; then
    ``'log'``, or ``'symlog'`` when some values are 0."""
    positive = [value for value in values if value > 0]
    if len(positive) < 2 or max(positive) / min(positive) <= WIDE_RANGE:
        return "linear"
    return "log" if len(positive) == len(values) else "symlog"


def bar_chart(path: Path, title: str, gpu: str, panels: Sequence[BarPanel]) -> None:
    """Write the panels side by side as one PNG."""
    bars = max(len(panel.categories) * len(panel.series) for panel in panels)
    figure, axes = plt.subplots(1, len(panels), squeeze=False, layout="constrained",
                                figsize=(9 * len(panels), 1.8 + _INCHES_PER_BAR * bars))
    for axis, panel in zip(axes[0], panels):
        _draw_bars(axis, panel)
    _save(figure, path, title, gpu)


def _draw_bars(axis, panel: BarPanel) -> None:
    """Draw one ``BarPanel`` on ``axis``."""
    positions = np.arange(len(panel.categories))
    height = 0.8 / len(panel.series)
    for index, (label, values) in enumerate(panel.series.items()):
        offsets = positions + (index - (len(panel.series) - 1) / 2) * height
        errors = None
        if label in panel.ranges:
            lows, highs = panel.ranges[label]
            errors = [np.subtract(values, lows), np.subtract(highs, values)]
        bars = axis.barh(offsets, values, height, xerr=errors, capsize=3, label=label)
        if label in panel.notes:
            axis.bar_label(bars, labels=list(panel.notes[label]), padding=4, fontsize=8)
    axis.set_yticks(positions, list(panel.categories))
    axis.invert_yaxis()
    all_values = [value for values in panel.series.values() for value in values]
    scale = axis_scale(all_values)
    axis.set_xscale(scale, **({"linthresh": 1.0} if scale == "symlog" else {}))
    axis.margins(x=0.2)
    axis.set_xlabel(panel.value_label)
    axis.set_ylabel(panel.category_label)
    axis.grid(axis="x", alpha=0.3)
    _legend(axis)


def change_chart(path: Path, title: str, gpu: str, names: Sequence[str],
                 changes: Sequence[float], spreads: Sequence[float],
                 verdicts: Sequence[str]) -> None:
    """Write one horizontal bar per benchmark: its relative change of median time (a
    fraction, drawn in percent) colored by verdict, over a band of +-spread."""
    figure, axis = plt.subplots(figsize=(10, 1.8 + _INCHES_PER_BAR * len(names)),
                                layout="constrained")
    positions = np.arange(len(names))
    spreads_pct = 100 * np.asarray(spreads)
    changes_pct = 100 * np.asarray(changes)
    band = axis.barh(positions, 2 * spreads_pct, 0.8, left=-spreads_pct, color="0.88")
    bars = axis.barh(positions, changes_pct, 0.5,
                     color=[_VERDICT_COLORS[verdict] for verdict in verdicts])
    axis.bar_label(bars, labels=[f"{change:+.1f}%" for change in changes_pct],
                   padding=4, fontsize=8)
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(positions, list(names))
    axis.set_ylabel("benchmark")
    axis.invert_yaxis()
    axis.margins(x=0.15)
    axis.set_xlabel("change of median real time, after vs before (%; positive is slower)")
    axis.grid(axis="x", alpha=0.3)
    patches = [Patch(color=color) for color in _VERDICT_COLORS.values()]
    _legend(axis, [band, *patches], ["± run-to-run spread", *_VERDICT_COLORS])
    _save(figure, path, title, gpu)


def line_chart(path: Path, title: str, gpu: str, x_label: str, y_label: str,
               lines: Points) -> None:
    """Write one line per legend label through its ``(xs, ys)`` points; each axis is
    logarithmic when all its values are positive."""
    figure, axis = plt.subplots(figsize=(9, 5), layout="constrained")
    for label, (xs, ys) in lines.items():
        axis.plot(xs, ys, marker="o", label=label)
    for values, set_scale in ((_all(lines, 0), axis.set_xscale), (_all(lines, 1), axis.set_yscale)):
        if min(values) > 0:
            set_scale("log")
    axis.set_xlabel(x_label)
    axis.set_ylabel(y_label)
    axis.grid(which="both", alpha=0.3)
    _legend(axis)
    _save(figure, path, title, gpu)


def _all(lines: Points, coordinate: int) -> list[float]:
    """Every x (``coordinate`` 0) or y (1) value of ``lines``."""
    return [value for points in lines.values() for value in points[coordinate]]


def _legend(axis, handles: Sequence | None = None, labels: Sequence[str] | None = None) -> None:
    """A legend outside the axes, on the right, so it never hides data."""
    placement = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "fontsize": 8}
    if handles is None:
        axis.legend(**placement)
    else:
        axis.legend(handles, labels, **placement)


def _save(figure, path: Path, title: str, gpu: str) -> None:
    """Title the figure with the GPU name, write it to ``path`` and free it."""
    figure.suptitle(f"{title}\nGPU: {gpu}")
    figure.savefig(path, dpi=120)
    plt.close(figure)


def cdf_chart(path: Path, title: str, gpu: str, x_label: str, lines: Points,
              dashed: Sequence[str] = ()) -> None:
    """Write empirical CDFs, one line per legend label through its ``(xs, ys)``, the x axis
    logarithmic when every x is positive, y from 0 to 1; labels in ``dashed`` are drawn
    dashed (e.g. negative controls)."""
    figure, axis = plt.subplots(figsize=(9, 5), layout="constrained")
    for label, (xs, ys) in lines.items():
        axis.step(xs, ys, where="post", label=label,
                  linestyle="--" if label in dashed else "-", linewidth=1.2)
    if min(_all(lines, 0)) > 0:
        axis.set_xscale("log")
    axis.set_ylim(0.0, 1.0)
    axis.set_xlabel(x_label)
    axis.set_ylabel("fraction of draws at or below (empirical CDF)")
    axis.grid(which="both", alpha=0.3)
    _legend(axis)
    _save(figure, path, title, gpu)
