"""compare and render: the files they write, their content, and the charts' labels."""

import json
import shutil

import matplotlib
import pytest
from conftest import REPORTS, fixture, run_script
from matplotlib.figure import Figure

from resident_reports.compare_report import write_compare_report
from resident_reports.loader import load_run
from resident_reports.run_report import find_pairs, find_sweeps, write_run_report
from resident_reports.stats import summarize_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def table_rows(markdown: str, first_cell: str) -> list[str]:
    """The cells of the Markdown table row whose first cell is ``first_cell``."""
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n{markdown}")


def assert_pngs(folder, names):
    for name in names:
        assert (folder / name).read_bytes().startswith(PNG_MAGIC), name


def test_compare_writes_summary_and_charts(tmp_path):
    result = run_script("reports/compare", fixture("before.json"), fixture("after.json"),
                        "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"reports/compare: wrote {tmp_path}/summary.md: 4 compared, "
                             "1 regressions, 1 improvements\n")
    assert_pngs(tmp_path, ["changes.png", "medians.png"])
    summary = (tmp_path / "summary.md").read_text()
    assert table_rows(summary, "dqn_epoch/resident") == [
        "dqn_epoch/resident", "10.1 ms", "12.1 ms", "1.198", "+19.8%", "2.0%", "3/3", "regression"]
    assert table_rows(summary, "ppo_epoch/resident")[-1] == "improvement"
    assert table_rows(summary, "sac_epoch/resident")[-1] == "same"
    assert table_rows(summary, "per_step/gpu_graph/capacity:1000/batch:256")[3] == "1.000"
    assert "![relative change per benchmark](changes.png)" in summary
    assert "![median real time per benchmark](medians.png)" in summary
    assert "- only in before: `td3_epoch/resident`" in summary
    assert "- only in after: `trading_epoch/resident`" in summary
    assert "- errored in after: `cartpole_epoch/resident`: no CUDA device" in summary
    assert table_rows(summary, "git commit") == ["git commit", "4f2a9c1", "9b7e0d3"]


def test_compare_without_common_benchmarks_writes_no_chart(tmp_path):
    result = run_script("reports/compare", fixture("errored.json"), fixture("aggregates_only.json"),
                        "--out", tmp_path)
    assert result.returncode == 0
    assert "No benchmark was measured in both runs." in (tmp_path / "summary.md").read_text()
    assert not (tmp_path / "changes.png").exists()


def test_render_writes_every_section(tmp_path):
    result = run_script("reports/render", fixture("run.json"), "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert_pngs(tmp_path, ["resident_vs_host_staged_time.png", "transfers_dqn.png",
                           "transfers_ppo.png", "scaling_per_step_capacity.png",
                           "audit_overhead.png"])
    summary = (tmp_path / "summary.md").read_text()
    assert table_rows(summary, "dqn") == ["dqn", "96.1 ms", "12.2 ms", "7.88×", "2.6%"]
    assert table_rows(summary, "ppo")[3] == "5.98×"
    assert table_rows(summary, "audit_overhead")[3:] == ["+3.3%", "2.5%", "beyond spread"]
    assert table_rows(summary, "audit.h2d_bytes") == ["audit.h2d_bytes", "500 MiB", "0 B"]
    for png in ("resident_vs_host_staged_time.png", "transfers_dqn.png",
                "scaling_per_step_capacity.png", "audit_overhead.png"):
        assert f"]({png})" in summary


def test_render_says_when_a_section_has_nothing(tmp_path):
    result = run_script("reports/render", fixture("base.json"), "--out", tmp_path)
    assert result.returncode == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "No group has both `resident` and `host_staged` variants." in summary
    assert "No benchmark sweeps a numeric parameter." in summary
    assert "No `audit_overhead` group" in summary
    assert not list(tmp_path.glob("*.png"))


def test_render_lists_errored_benchmarks(tmp_path):
    run_script("reports/render", fixture("errored.json"), "--out", tmp_path)
    assert "- `dqn_epoch/resident`: no CUDA device" in (tmp_path / "summary.md").read_text()


def test_render_default_out_is_named_after_the_run(tmp_path):
    run = tmp_path / "render_default_out_test.json"
    shutil.copy(fixture("base.json"), run)
    out = REPORTS / "out" / "render_default_out_test"
    try:
        result = run_script("reports/render", run)
        assert result.returncode == 0, result.stderr
        assert (out / "summary.md").is_file()
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize("script", ["reports/compare", "reports/render"])
def test_help(script):
    result = run_script(script, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: {script} ")
    assert "--out DIR" in result.stdout


def test_unwritable_out_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_script("reports/render", fixture("run.json"), "--out", blocker / "sub")
    assert result.returncode == 2
    assert result.stderr.startswith("reports/render: ")
    assert result.stderr.count("\n") == 1


@pytest.fixture
def saved_figures(monkeypatch):
    """Every figure the code saves, instead of writing it."""
    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: figures.append(figure))
    return figures


def test_every_chart_has_gpu_title_labels_with_units_and_legend(tmp_path, saved_figures):
    write_run_report(load_run(fixture("run.json")), tmp_path)
    write_compare_report(load_run(fixture("before.json")), load_run(fixture("after.json")),
                         tmp_path)
    assert len(saved_figures) == 7
    for figure in saved_figures:
        assert "GPU: NVIDIA H200" in figure.get_suptitle()
        for axis in figure.axes:
            value_label = axis.get_xlabel() if axis.get_ylabel() in (
                "model", "benchmark", "audit counter") else axis.get_ylabel()
            assert "(" in value_label and ")" in value_label, value_label
            assert axis.get_xlabel() and axis.get_ylabel()
            assert axis.get_legend() is not None


def test_charts_use_agg():
    assert matplotlib.get_backend().lower() == "agg"


def test_compare_names_both_gpus_when_they_differ(tmp_path, saved_figures, write_json):
    after = json.loads(fixture("after.json").read_text())
    after["context"]["gpu_name"] = "NVIDIA A100"
    write_compare_report(load_run(fixture("before.json")), load_run(write_json(after)), tmp_path)
    assert "NVIDIA H200 (before) vs NVIDIA A100 (after)" in saved_figures[0].get_suptitle()


def test_pairs_and_sweeps_found_in_run():
    measured = summarize_run(load_run(fixture("run.json"))).measured
    pairs = find_pairs(measured, "host_staged", "resident")
    assert [(p.before.name.key, p.after.name.key) for p in pairs] == [
        ("dqn_epoch/host_staged", "dqn_epoch/resident"),
        ("ppo_epoch/host_staged", "ppo_epoch/resident")]
    audit = find_pairs(measured, "untraced", "traced", group="audit_overhead")
    assert [p.before.name.key for p in audit] == ["audit_overhead/untraced"]
    sweeps = find_sweeps(measured)
    assert [(s.group, s.param) for s in sweeps] == [("per_step", "capacity")]
    line = sweeps[0].lines["gpu_graph batch:256"]
    assert [s.name.numeric_params()["capacity"] for s in line] == [1e3, 1e5, 1e6]
