"""The before/after report: per benchmark, the two medians, their ratio, the run-to-run
spread and a verdict, as PNG charts and ``summary.md``."""

from pathlib import Path

from .host_speed import PROBE, host_comparison
from .loader import Run
from .plotting import bar_chart, change_chart, timing_panel
from .stats import Change, Pairing, pair_runs, summarize_run
from .tables import context_table, markdown_table, write_summary
from .units import format_duration, format_percent

CHANGES_PNG = "changes.png"
MEDIANS_PNG = "medians.png"


def write_compare_report(before: Run, after: Run, out_dir: Path) -> Pairing:
    """Write ``SUMMARY_MD`` into ``out_dir`` (created if needed), and ``changes.png`` and
    ``medians.png`` when some benchmark was measured in both runs. Returns the pairing
    the report shows."""
    before_summary, after_summary = summarize_run(before), summarize_run(after)
    pairing = pair_runs(before_summary, after_summary)
    out_dir.mkdir(parents=True, exist_ok=True)
    if pairing.changes:
        _write_charts(pairing.changes, _gpu_label(before, after), out_dir)
    probe = next((change for change in pairing.changes if change.key == PROBE), None)
    host = host_comparison(before_summary.measured, after_summary.measured, probe)
    write_summary(out_dir, _summary_blocks(before, after, pairing, host))
    return pairing


def _gpu_label(before: Run, after: Run) -> str:
    """The GPU name, or both names when the runs differ."""
    if before.gpu_name == after.gpu_name:
        return before.gpu_name
    return f"{before.gpu_name} (before) vs {after.gpu_name} (after)"


def _write_charts(changes: tuple[Change, ...], gpu: str, out_dir: Path) -> None:
    """The relative-change chart and the side-by-side medians chart."""
    names = [change.key for change in changes]
    change_chart(out_dir / CHANGES_PNG, "Median real time, after vs before", gpu, names,
                 [change.ratio - 1 for change in changes],
                 [change.spread for change in changes],
                 [change.verdict() for change in changes])
    runs = {"before": [change.before for change in changes],
            "after": [change.after for change in changes]}
    panel = timing_panel(names, "benchmark", runs, "real time")
    bar_chart(out_dir / MEDIANS_PNG, "Median real time per benchmark", gpu, [panel])


def _summary_blocks(before: Run, after: Run, pairing: Pairing, host: str) -> list[str]:
    """The Markdown blocks of the summary; ``host`` the paragraph on the hosts' speed."""
    parts = [f"# Before/after: `{before.source}` → `{after.source}`",
             context_table({"before": before, "after": after}),
             host,
             "A benchmark is flagged only when its median changed by more than the "
             "run-to-run spread, (max − min) / median of its repetitions, taking the larger "
             "of the two runs' spreads.",
             "## Benchmarks"]
    if pairing.changes:
        parts += [_changes_table(pairing.changes),
                  f"![relative change per benchmark]({CHANGES_PNG})",
                  f"![median real time per benchmark]({MEDIANS_PNG})"]
    else:
        parts.append("No benchmark was measured in both runs.")
    not_compared = _not_compared(pairing)
    if not_compared:
        parts += ["## Not compared", not_compared]
    return parts


def _changes_table(changes: tuple[Change, ...]) -> str:
    """One Markdown row per benchmark measured in both runs."""
    rows = [[change.key, format_duration(change.before.median_s),
             format_duration(change.after.median_s), f"{change.ratio:.3f}",
             format_percent(change.ratio - 1), format_percent(change.spread, signed=False),
             f"{change.before.repetitions}/{change.after.repetitions}", change.verdict()]
            for change in changes]
    return markdown_table(["benchmark", "before", "after", "ratio", "change", "spread",
                           "repetitions", "verdict"], rows, align="lrrrrrrl")


def _not_compared(pairing: Pairing) -> str:
    """A Markdown list of the benchmarks missing from or errored in one run."""
    items = ([f"- only in before: `{key}`" for key in pairing.only_before]
             + [f"- only in after: `{key}`" for key in pairing.only_after]
             + [f"- errored in before: `{key}`: {message}"
                for key, message in pairing.errors_before.items()]
             + [f"- errored in after: `{key}`: {message}"
                for key, message in pairing.errors_after.items()])
    return "\n".join(items)
