"""The run report's replay-sampler section: whether the GPU prioritized replay draws the right
distribution, not only fast. The main job runs the GPU sampler distribution test
(tests/replay/gpu_sampler_distribution_test.cu) with RESIDENT_SAMPLER_REPORT_DIR set to the
run's folder; it writes ``sampler_distribution_<mode>.json`` per priority mode: the settings,
the chi-square (GPU draws against the exact P(i)) and two-sample KS p-values (GPU draws
against the CPU sum tree's, on the drawn priorities and on the slots) of the sampler and of
its negative controls, and the empirical CDFs of the drawn priorities on a common grid. This
section shows one CDF chart and one p-value table per mode; the sampler passes when each of
its p-values is above the level and each control is rejected by at least one test."""

import json
from pathlib import Path

from .loader import InputError
from .naming import slug
from .plotting import cdf_chart
from .tables import markdown_table

HEADING = "## Replay sampler distribution"
FILE_GLOB = "sampler_distribution_*.json"
CONTROL_PREFIX = "control: "
_FIELDS = ("mode", "capacity", "batch", "draws", "alpha", "level", "priority_grid", "cpu_cdf",
           "samplers")
_SAMPLER_FIELDS = ("name", "chi_square_p", "ks_priority_p", "ks_slot_p", "cdf")


def sampler_section(run_source: str, gpu: str, out_dir: Path) -> str:
    """The section for the sampler files beside ``run_source`` (the run's JSON file)."""
    files = sorted(Path(run_source).resolve().parent.glob(FILE_GLOB))
    if not files:
        return (f"{HEADING}\n\nNo `{FILE_GLOB}` beside the run: the main job writes them "
                f"(the GPU sampler distribution test with RESIDENT_SAMPLER_REPORT_DIR set).")
    parts = [HEADING,
             "GPU sampler draws against the exact probabilities (chi-square) and against the "
             "CPU sum tree's draws (two-sample KS on the drawn priorities and on the slots), "
             "with the negative controls the same tests must reject (dashed in the chart). "
             "Stratified draws make the chi-square conservative: p near 1 is expected for the "
             "right sampler."]
    for path in files:
        parts.append(_mode_part(_load(path), gpu, out_dir))
    return "\n\n".join(parts)


def _load(path: Path) -> dict:
    """The file's document, every field present and the CDFs as long as the grid."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise InputError(str(path), f"not a readable JSON file ({error})") from error
    missing = [f for f in _FIELDS if f not in document]
    if missing:
        raise InputError(str(path), f"missing field {missing[0]!r}")
    grid = document["priority_grid"]
    for index, sampler in enumerate(document["samplers"]):
        absent = [f for f in _SAMPLER_FIELDS if f not in sampler]
        if absent:
            raise InputError(str(path), f"missing field {absent[0]!r}", f"samplers[{index}]")
        if len(sampler["cdf"]) != len(grid):
            raise InputError(str(path), f"cdf has {len(sampler['cdf'])} points, the grid "
                             f"{len(grid)}", f"samplers[{index}]")
    if len(document["cpu_cdf"]) != len(grid):
        raise InputError(str(path), f"cpu_cdf has {len(document['cpu_cdf'])} points, the grid "
                         f"{len(grid)}")
    return document


def _verdict(sampler: dict, level: float) -> str:
    ps = [sampler["chi_square_p"], sampler["ks_priority_p"], sampler["ks_slot_p"]]
    if sampler["name"].startswith(CONTROL_PREFIX):
        return "rejected (right)" if min(ps) < level else "NOT rejected (a test is too weak)"
    return "accepted (right)" if min(ps) > level else "REJECTED (the sampler is wrong)"


def _p(value) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _mode_part(document: dict, gpu: str, out_dir: Path) -> str:
    mode, level = document["mode"], document["level"]
    grid = document["priority_grid"]
    lines = {"CPU sum tree (reference)": (grid, document["cpu_cdf"])}
    dashed = []
    for sampler in document["samplers"]:
        lines[sampler["name"]] = (grid, sampler["cdf"])
        if sampler["name"].startswith(CONTROL_PREFIX):
            dashed.append(sampler["name"])
    png = f"sampler_cdf_{slug(mode)}.png"
    cdf_chart(out_dir / png, f"Replay sampler, {mode} priorities: drawn-priority CDFs", gpu,
              "priority of the drawn slot (its leaf value)", lines, dashed)
    rows = [[s["name"], _p(s["chi_square_p"]), _p(s["ks_priority_p"]), _p(s["ks_slot_p"]),
             _verdict(s, level)] for s in document["samplers"]]
    table = markdown_table(["draws", "chi-square p", "KS p (priorities)", "KS p (slots)",
                            f"verdict at level {level:g}"], rows, align="lrrrl")
    settings = (f"capacity {document['capacity']}, batch {document['batch']}, "
                f"{document['draws']} draws per sampler, alpha {document['alpha']:g}")
    return "\n\n".join([f"### {mode.capitalize()} priorities", settings, table,
                        f"![drawn-priority CDFs, {mode}]({png})"])
