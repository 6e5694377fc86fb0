"""The host's speed in a run, read from its launch-bound probe.

``audit_overhead/untraced`` times a loop of plain kernel launches with the audit off; its
``launches_per_s`` counter gives the host's cost of one launch. A row timed from one launch on
an idle GPU (a graph-replayed step: the timed window holds the host's launch) moves with that
cost, a GPU-bound row does not, so runs on hosts of different speed differ in the first kind
of row for reasons the code did not cause. The run report states the cost; the before/after
report states both and whether they differ by more than the probe's spread."""

from collections.abc import Mapping

from .stats import SAME, Change, Summary
from .units import format_duration, format_percent

PROBE = "audit_overhead/untraced"
LAUNCH_RATE = "launches_per_s"

_WHY = ("A row timed from one launch on an idle GPU (a graph-replayed step) includes the "
        "host's launch")


def launch_cost_s(measured: Mapping[str, Summary]) -> float | None:
    """Seconds per plain kernel launch on the run's host, or None when the probe or its rate
    is missing or not positive."""
    probe = measured.get(PROBE)
    if probe is None:
        return None
    rate = probe.counters.get(LAUNCH_RATE)
    if rate is None or not rate > 0:
        return None
    return 1.0 / rate


def host_line(measured: Mapping[str, Summary]) -> str:
    """One paragraph on the run's host speed, for the run report."""
    cost = launch_cost_s(measured)
    if cost is None:
        return (f"Host speed not measured (no `{PROBE}` row with `{LAUNCH_RATE}`). {_WHY}: "
                "compare such rows only between runs on hosts of the same speed.")
    return (f"Host: one plain kernel launch costs {format_duration(cost)} here (`{PROBE}`, "
            f"median). {_WHY}: compare such rows only between runs whose hosts cost about "
            "the same.")


def host_comparison(before: Mapping[str, Summary], after: Mapping[str, Summary],
                    probe_change: Change | None) -> str:
    """One paragraph comparing the two runs' host speed, for the before/after report;
    ``probe_change`` is the pairing's change of the probe row, if both runs measured it."""
    cost_before, cost_after = launch_cost_s(before), launch_cost_s(after)
    if cost_before is None or cost_after is None or probe_change is None:
        return (f"Host speed not compared (`{PROBE}` with `{LAUNCH_RATE}` is not in both "
                f"runs). {_WHY}, which may differ between the two hosts.")
    change = cost_after / cost_before - 1
    spread = format_percent(probe_change.spread, signed=False)
    if probe_change.verdict() == SAME:
        verdict = f"within the probe's spread {spread}: the hosts are alike"
    else:
        verdict = (f"beyond the probe's spread {spread}: the hosts differ, and rows timed "
                   "from one launch on an idle GPU (graph-replayed steps) move with them while "
                   "GPU-bound rows do not; read their changes with that in mind")
    return (f"Host: one plain kernel launch cost {format_duration(cost_before)} before and "
            f"{format_duration(cost_after)} after ({format_percent(change)}; `{PROBE}`), "
            f"{verdict}.")
