"""The report on one run: resident vs host-staged per model, scaling curves of swept
parameters, and the audit's overhead, as PNG charts and ``summary.md``."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .host_speed import host_line
from .loader import Run
from .naming import BenchName, slug
from .plotting import BarPanel, bar_chart, line_chart, timing_panel
from .stats import SAME, Change, RunSummary, Summary, summarize_run
from .sampler import sampler_section
from .supervised import supervised_section
from .tables import context_table, markdown_table, write_summary
from .targets import MET, NOT_MEASURED, Target, evaluate, targets_table
from .units import display_unit, format_bytes, format_count, format_duration, format_percent

HOST_STAGED, RESIDENT = "host_staged", "resident"
AUDIT_GROUP, UNTRACED, TRACED = "audit_overhead", "untraced", "traced"

TIME_PNG = "resident_vs_host_staged_time.png"
AUDIT_PNG = "audit_overhead.png"

COUNT_COUNTERS = ("audit.d2h_scalar", "audit.d2h_bulk", "audit.h2d", "audit.syncs",
                  "audit.mapped_allocs")
BYTE_COUNTERS = ("audit.d2h_bulk_bytes", "audit.h2d_bytes", "audit.um_d2h_bytes")
_COUNTER_KINDS = ((COUNT_COUNTERS, "count", format_count), (BYTE_COUNTERS, "bytes", format_bytes))

Measured = Mapping[str, Summary]


def write_run_report(run: Run, out_dir: Path, targets: Sequence[Target] | None = None) -> None:
    """Write the charts and ``SUMMARY_MD`` for ``run`` into ``out_dir`` (created if
    needed). A section with nothing to show says so in the summary. With ``targets``, the
    summary opens with each target against the run's medians."""
    summary = summarize_run(run)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [f"# Run report: `{run.source}`", context_table({"run": run}),
             host_line(summary.measured),
             *([_targets_section(summary.measured, targets)] if targets is not None else []),
             _resident_section(summary.measured, run.gpu_name, out_dir),
             supervised_section(summary, run.context),
             sampler_section(run.source, run.gpu_name, out_dir),
             _scaling_section(summary.measured, run.gpu_name, out_dir),
             _audit_section(summary.measured, run.gpu_name, out_dir),
             _all_benchmarks_section(summary)]
    write_summary(out_dir, parts)


def _targets_section(measured: Measured, targets: Sequence[Target]) -> str:
    """Each issue target: limit, median value, met or missed, and whether the margin is
    within the run-to-run spread."""
    heading = "## Targets"
    if not targets:
        return f"{heading}\n\nNo targets given."
    results = [evaluate(target, measured) for target in targets]
    met = sum(r.verdict == MET for r in results)
    unmeasured = sum(r.verdict == NOT_MEASURED for r in results)
    counts = f"{met} of {len(results)} met" + (f", {unmeasured} not measured" if unmeasured else "")
    table = markdown_table(["issue", "target", "limit", "median", "verdict", "note"],
                           targets_table(results), align="llrrll")
    return (f"{heading}\n\n{counts}. A target is judged on the median; a margin smaller than "
            f"the spread (max - min) / median of the benchmarks involved is flagged, and so is a "
            f"target met on the medians but missed at the least favorable repetitions (the "
            f"slowest for a time; for a ratio, the slow side's fastest against the fast side's "
            f"slowest, or the other way round for a maximum).\n\n{table}")


def find_pairs(measured: Measured, base: str, other: str, group: str | None = None) -> list[Change]:
    """Every benchmark of variant ``base`` that has a variant ``other`` in the same group
    with the same params, as a ``Change`` from base to other; only in ``group`` if given."""
    by_identity = {(s.name.group, s.name.variant, s.name.params): s for s in measured.values()}
    return [Change(summary, by_identity[(name.group, other, name.params)])
            for summary in measured.values()
            if (name := summary.name).variant == base
            and (group is None or name.group == group)
            and (name.group, other, name.params) in by_identity]


def _pair_label(name: BenchName) -> str:
    """The model a pair measures: the group minus a trailing ``_epoch``, then its params."""
    return " ".join([name.group.removesuffix("_epoch"), *name.param_parts()])


def _resident_section(measured: Measured, gpu: str, out_dir: Path) -> str:
    """Epoch time and transfer counters of each resident/host_staged pair."""
    pairs = find_pairs(measured, HOST_STAGED, RESIDENT)
    heading = "## Resident vs host-staged"
    if not pairs:
        return f"{heading}\n\nNo group has both `resident` and `host_staged` variants."
    labels = [_pair_label(pair.before.name) for pair in pairs]
    _time_chart(pairs, labels, gpu, out_dir / TIME_PNG)
    rows = [[label, format_duration(pair.before.median_s), format_duration(pair.after.median_s),
             f"{1 / pair.ratio:.2f}×", format_percent(pair.spread, signed=False)]
            for label, pair in zip(labels, pairs)]
    parts = [heading,
             "Speedup = host-staged median / resident median; spread is the larger of the "
             "two variants' (max − min) / median.",
             markdown_table(["model", HOST_STAGED, RESIDENT, "speedup", "spread"], rows),
             f"![epoch time, resident vs host-staged]({TIME_PNG})"]
    parts += [_transfers_part(label, pair, gpu, out_dir) for label, pair in zip(labels, pairs)]
    return "\n\n".join(parts)


def _time_chart(pairs: list[Change], labels: list[str], gpu: str, path: Path) -> None:
    """Epoch time bars of host_staged and resident per model, the speedup written on the
    resident bar."""
    variants = {HOST_STAGED: [pair.before for pair in pairs],
                RESIDENT: [pair.after for pair in pairs]}
    speedups = [f"{1 / pair.ratio:.2f}× speedup" for pair in pairs]
    panel = timing_panel(labels, "model", variants, "epoch time", notes={RESIDENT: speedups})
    bar_chart(path, "Epoch time: resident vs host-staged", gpu, [panel])


def _transfers_part(label: str, pair: Change, gpu: str, out_dir: Path) -> str:
    """The audit counters of one pair side by side: a chart and a table."""
    heading = f"### Transfers: {label}"
    panels = [panel for counters, unit, text in _COUNTER_KINDS
              if (panel := _counter_panel(pair, counters, unit, text)) is not None]
    if not panels:
        return f"{heading}\n\nNo `audit.*` counter is reported by both variants."
    png = f"transfers_{slug(label)}.png"
    bar_chart(out_dir / png, f"Audit transfer counters: {label}", gpu, panels)
    rows = [[name, panel.notes[HOST_STAGED][index], panel.notes[RESIDENT][index]]
            for panel in panels for index, name in enumerate(panel.categories)]
    return "\n\n".join([heading, markdown_table(["counter", HOST_STAGED, RESIDENT], rows),
                        f"![transfers of {label}]({png})"])


def _counter_panel(pair: Change, counters: tuple[str, ...], unit: str,
                   text: Callable[[float], str]) -> BarPanel | None:
    """A panel of the ``counters`` both variants report, each value also written as
    ``text(value)`` in the notes; ``None`` if there is no such counter."""
    shared = [name for name in counters
              if name in pair.before.counters and name in pair.after.counters]
    if not shared:
        return None
    series = {HOST_STAGED: [pair.before.counters[name] for name in shared],
              RESIDENT: [pair.after.counters[name] for name in shared]}
    return BarPanel(categories=shared, series=series, category_label="audit counter",
                    value_label=f"per timed iteration, median of repetitions ({unit})",
                    notes={variant: [text(value) for value in values]
                           for variant, values in series.items()})


@dataclass(frozen=True)
class Sweep:
    """A numeric param that takes several values in one group. ``lines`` maps a legend
    label (the variant and the other params) to its benchmarks, sorted by the param."""

    group: str
    param: str
    lines: Mapping[str, list[Summary]]


def find_sweeps(measured: Measured) -> list[Sweep]:
    """Every (group, numeric param) where the param takes at least two values."""
    groups: dict[str, list[Summary]] = {}
    for summary in measured.values():
        groups.setdefault(summary.name.group, []).append(summary)
    sweeps = []
    for group, summaries in groups.items():
        params = dict.fromkeys(p for s in summaries for p in s.name.numeric_params())
        for param in params:
            swept = [s for s in summaries if param in s.name.numeric_params()]
            if len({s.name.numeric_params()[param] for s in swept}) >= 2:
                sweeps.append(Sweep(group, param, _lines(swept, param)))
    return sweeps


def _lines(summaries: list[Summary], param: str) -> dict[str, list[Summary]]:
    """``summaries`` split by variant and other params, each sorted by ``param``."""
    lines: dict[str, list[Summary]] = {}
    for summary in summaries:
        name = summary.name
        label = " ".join([name.variant, *(f"{p}:{v}" for p, v in name.without_param(param))])
        lines.setdefault(label, []).append(summary)
    return {label: sorted(line, key=lambda s: s.name.numeric_params()[param])
            for label, line in lines.items()}


def _scaling_section(measured: Measured, gpu: str, out_dir: Path) -> str:
    """One log-log chart per sweep."""
    heading = "## Scaling"
    sweeps = find_sweeps(measured)
    if not sweeps:
        return f"{heading}\n\nNo benchmark sweeps a numeric parameter."
    parts = [heading]
    for sweep in sweeps:
        png = f"scaling_{slug(sweep.group)}_{slug(sweep.param)}.png"
        unit, scale = display_unit(s.median_s for line in sweep.lines.values() for s in line)
        lines = {label: ([s.name.numeric_params()[sweep.param] for s in line],
                         [s.median_s / scale for s in line])
                 for label, line in sweep.lines.items()}
        line_chart(out_dir / png, f"Scaling of {sweep.group} with {sweep.param}", gpu,
                   f"{sweep.param} (benchmark parameter value)",
                   f"median time per iteration ({unit})", lines)
        parts.append(f"![{sweep.group} vs {sweep.param}]({png})")
    return "\n\n".join(parts)


def _audit_section(measured: Measured, gpu: str, out_dir: Path) -> str:
    """Traced vs untraced time of each ``audit_overhead`` pair."""
    heading = "## Audit overhead"
    pairs = find_pairs(measured, UNTRACED, TRACED, group=AUDIT_GROUP)
    if not pairs:
        return f"{heading}\n\nNo `audit_overhead` group with `traced` and `untraced` variants."
    labels = [_pair_label(pair.before.name) for pair in pairs]
    variants = {UNTRACED: [pair.before for pair in pairs], TRACED: [pair.after for pair in pairs]}
    overheads = [f"{format_percent(pair.ratio - 1)} overhead" for pair in pairs]
    panel = timing_panel(labels, "benchmark", variants, "time per iteration",
                         notes={TRACED: overheads})
    bar_chart(out_dir / AUDIT_PNG, "Audit overhead: traced vs untraced", gpu, [panel])
    rows = [[label, format_duration(p.before.median_s), format_duration(p.after.median_s),
             format_percent(p.ratio - 1), format_percent(p.spread, signed=False),
             "within spread" if p.verdict() == SAME else "beyond spread"]
            for label, p in zip(labels, pairs)]
    table = markdown_table([
        "benchmark", UNTRACED, TRACED, "overhead", "spread", "significance"], rows, align="lrrrrl")
    return "\n\n".join([heading, table, f"![audit overhead]({AUDIT_PNG})"])


def _all_benchmarks_section(summary: RunSummary) -> str:
    """Every measured benchmark in a table, then the errored ones."""
    rows = [[key, format_duration(s.median_s), format_duration(s.min_s),
             format_duration(s.max_s), format_percent(s.spread, signed=False), str(s.repetitions)]
            for key, s in summary.measured.items()]
    parts = ["## All benchmarks",
             markdown_table(["benchmark", "median", "min", "max", "spread", "repetitions"], rows)]
    if summary.errors:
        errored = "\n".join(f"- `{key}`: {message}" for key, message in summary.errors.items())
        parts += ["### Errored", errored]
    return "\n\n".join(parts)

