"""The run report's supervised-models section, the supervised targets, and the PyTorch script's
parts that need no torch (its row names, its merge into a run, its skip without torch)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, gb_document, gb_row, run_script

from resident_reports.loader import load_run
from resident_reports.stats import summarize_run
from resident_reports.supervised import (EPOCH_GROUP, NONE_LINE, SAMPLE_GROUP, STEP_GROUP,
                                         row_key, supervised_section)
from resident_reports.targets import MET, MISSED, evaluate, load_targets

SCRIPT = REPO / "bench" / "pytorch" / "supervised_models.py"
MIB = 2**20


def load_script():
    """bench/pytorch/supervised_models.py as a module (it imports torch only when it runs)."""
    spec = importlib.util.spec_from_file_location("supervised_models", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(group: str, variant: str, model: str, times: list[float], unit: str = "us",
         peak_bytes: float | None = None, error: str | None = None) -> list[dict]:
    """One benchmark's iteration rows (one per repetition), as the benches write them."""
    counters = {"peak_device_bytes": peak_bytes} if peak_bytes is not None else {}
    out = [gb_row(f"{row_key(group, variant, model)}/manual_time", time, unit, counters,
                  index, len(times)) for index, time in enumerate(times)]
    if error:
        for row in out:
            row.update(error_occurred=True, error_message=error, real_time=0.0)
    return out


def full_run() -> dict:
    """KAN measured everywhere; Mamba2 missing its host-fed step (no row) and its compiled
    PyTorch step (the script's note), and missing two of its targets (negative controls)."""
    benchmarks = [
        *rows(STEP_GROUP, "resident", "kan", [300, 310, 320], peak_bytes=50 * MIB),
        *rows(STEP_GROUP, "host_fed", "kan", [900, 930, 1000], peak_bytes=60 * MIB),
        *rows(STEP_GROUP, "pytorch_eager", "kan", [2480, 2500, 2600], peak_bytes=80 * MIB),
        *rows(STEP_GROUP, "pytorch_compile", "kan", [1240, 1240, 1260], peak_bytes=70 * MIB),
        *rows(EPOCH_GROUP, "resident", "kan", [10, 10.5, 11], "ms"),
        *rows(EPOCH_GROUP, "host_fed", "kan", [40, 42, 45], "ms"),
        *rows(STEP_GROUP, "resident", "mamba2", [700, 710, 720]),
        *rows(STEP_GROUP, "pytorch_eager", "mamba2", [350, 355, 370], peak_bytes=1.5 * MIB),
        *rows(EPOCH_GROUP, "resident", "mamba2", [20, 21, 22], "ms"),
        *rows(EPOCH_GROUP, "host_fed", "mamba2", [50, 52, 55], "ms"),
    ]
    document = gb_document(benchmarks)
    document["context"].update(
        pytorch_version="2.11.0+cu130", pytorch_cuda_version="13.0",
        pytorch_not_measured={
            "supervised_step/pytorch_compile/model:mamba2":
                "InductorError: a | b\nsecond line (exit status 1)"})
    return document


def table_row(markdown: str, heading: str, first_cell: str) -> list[str]:
    """The cells of the row ``first_cell`` of the table under ``### heading``."""
    section = markdown.split(f"### {heading}\n", 1)[1].split("\n#", 1)[0]
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} under {heading!r} in:\n{markdown}")


def render(write_json, tmp_path, document) -> str:
    result = run_script("reports/render", write_json(document), "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    return (tmp_path / "out" / "summary.md").read_text()


def test_one_table_per_model_with_ratios_and_memory(write_json, tmp_path):
    summary = render(write_json, tmp_path, full_run())
    assert "## Supervised models" in summary
    assert "PyTorch rows: torch 2.11.0+cu130 (CUDA 13.0)." in summary
    assert table_row(summary, "kan", "train step, resident (graph-replayed)") == [
        "train step, resident (graph-replayed)", "310 µs", "6.5%", "(reference)", "50 MiB"]
    assert table_row(summary, "kan", "train step, host-fed")[1:] == [
        "930 µs", "10.8%", "3.00× faster", "60 MiB"]
    assert table_row(summary, "kan", "train step, PyTorch eager")[3] == "8.06× faster"
    assert table_row(summary, "kan", "train step, PyTorch compiled")[3:] == [
        "4.00× faster", "70 MiB"]
    assert table_row(summary, "kan", "epoch, resident")[1:4] == ["10.5 ms", "9.5%", "(reference)"]
    assert table_row(summary, "kan", "epoch, host-fed")[1:] == [
        "42 ms", "11.9%", "4.00× faster", "not reported"]
    # resident slower than PyTorch reads as such
    assert table_row(summary, "mamba2", "train step, PyTorch eager")[3] == "2.00× slower"
    assert table_row(summary, "mamba2", "epoch, host-fed")[3] == "2.48× faster"
    # reduce-overhead was neither measured nor noted: no row for it
    assert "reduce-overhead" not in summary


def test_missing_rows_render_as_not_measured_with_the_reason(write_json, tmp_path):
    summary = render(write_json, tmp_path, full_run())
    assert table_row(summary, "mamba2", "train step, host-fed")[1:] == [
        "not measured (no row in this run)", "—", "—", "—"]
    # the script's note, on one line, its '|' escaped by the table
    assert table_row(summary, "mamba2", "train step, PyTorch compiled")[1] == (
        "not measured (InductorError: a \\| b second line (exit status 1))")


def test_the_reduce_overhead_row_shows_when_measured_or_noted(write_json, tmp_path):
    document = full_run()
    document["benchmarks"] += rows(STEP_GROUP, "pytorch_compile_ro", "kan", [620, 620, 640])
    document["context"]["pytorch_not_measured"][
        "supervised_step/pytorch_compile_ro/model:mamba2"] = "CUDA graph capture failed"
    summary = render(write_json, tmp_path, document)
    label = "train step, PyTorch compiled (reduce-overhead)"
    assert table_row(summary, "kan", label)[1:4] == ["620 µs", "3.2%", "2.00× faster"]
    assert table_row(summary, "mamba2", label)[1] == "not measured (CUDA graph capture failed)"


def test_pytorch_skipped_and_errored_rows_say_why(write_json, tmp_path):
    document = gb_document([
        *rows(STEP_GROUP, "resident", "kan", [300, 310, 320]),
        *rows(EPOCH_GROUP, "resident", "kan", [10, 10.5, 11], "ms"),
        *rows(EPOCH_GROUP, "host_fed", "kan", [40], "ms", error="out of memory"),
    ])
    reason = "torch is not importable (ModuleNotFoundError: No module named 'torch')"
    document["context"]["pytorch_skipped"] = reason
    summary = render(write_json, tmp_path, document)
    assert f"PyTorch rows: skipped ({reason})." in summary
    for label in ("train step, PyTorch eager", "train step, PyTorch compiled"):
        assert table_row(summary, "kan", label)[1] == (
            f"not measured (PyTorch rows skipped: {reason})")
    assert table_row(summary, "kan", "epoch, host-fed")[1] == (
        "not measured (errored: out of memory)")
    assert table_row(summary, "kan", "train step, host-fed")[1] == (
        "not measured (no row in this run)")


def test_a_run_from_before_the_pytorch_rows_says_so(write_json, tmp_path):
    document = gb_document(rows(STEP_GROUP, "host_fed", "kan", [900]))
    summary = render(write_json, tmp_path, document)
    assert table_row(summary, "kan", "train step, PyTorch eager")[1] == (
        "not measured (no row in this run: the PyTorch script did not run or left no note)")
    assert table_row(summary, "kan", "train step, host-fed")[3] == "— (no resident row)"


def test_no_supervised_rows(write_json, tmp_path):
    document = gb_document([gb_row("dqn_epoch/resident", 12.0)])
    summary = render(write_json, tmp_path, document)
    assert f"## Supervised models\n\n{NONE_LINE}" in summary
    document["context"]["pytorch_skipped"] = "torch 2.11.0 sees no CUDA GPU"
    section = supervised_section(summarize_run(load_run(write_json(document, "b.json"))),
                                 document["context"])
    assert section.endswith("PyTorch rows: skipped (torch 2.11.0 sees no CUDA GPU).")


def test_the_supervised_targets_met_and_missed(write_json, tmp_path):
    targets = [t for t in load_targets(REPO / "reports" / "targets.json")
               if any(key.startswith("supervised_") and key.endswith(("model:kan", "model:mamba2"))
                      for key in t.benchmarks())]
    assert len(targets) == 4
    measured = summarize_run(load_run(write_json(full_run()))).measured
    verdicts = {t.what: evaluate(t, measured).verdict for t in targets}
    assert verdicts == {
        "KAN train step (B=256, L=64, F=32), graph-replayed": MET,        # 310 us <= 400 us
        "Mamba2 train step (B=256, L=64, F=32), graph-replayed": MISSED,  # 710 us > 600 us
        "KAN epoch speedup over host-fed": MET,                           # 4.00x >= 3x
        "Mamba2 epoch speedup over host-fed": MISSED,                     # 2.48x < 3x
    }
    summary = render(write_json, tmp_path, full_run())
    assert ("| 31 | Mamba2 train step (B=256, L=64, F=32), graph-replayed | <= 600 µs | "
            "710 µs | missed |") in summary
    assert "| 31 | KAN epoch speedup over host-fed | >= 3.00x | 4.00x | met |" in summary


def test_a_sampling_model_shows_its_sampler_rows_and_others_do_not(write_json, tmp_path):
    document = gb_document([
        *rows(STEP_GROUP, "resident", "diffusion", [200, 210, 220]),
        *rows(SAMPLE_GROUP, "resident", "diffusion", [9, 10, 11], "ms"),
        *rows(SAMPLE_GROUP, "pytorch_eager", "diffusion", [300, 310, 330], "ms"),
        *rows(STEP_GROUP, "resident", "kan", [300, 310, 320]),
    ])
    summary = render(write_json, tmp_path, document)
    diffusion = summary.split("### diffusion", 1)[1].split("###", 1)[0]
    assert "| sampling a forecast, resident (one graph) | 10 ms |" in diffusion
    assert "| sampling a forecast, PyTorch eager | 310 ms |" in diffusion
    assert "31.00× faster" in diffusion
    assert "sampling a forecast, PyTorch compiled" not in diffusion  # optional, not measured
    kan = summary.split("### kan", 1)[1]
    assert "sampling" not in kan


def test_the_names_agree_between_script_targets_and_report():
    script = load_script()
    assert script.row_key("kan", "eager") == row_key(STEP_GROUP, "pytorch_eager", "kan")
    assert script.row_key("mamba2", "compile") == "supervised_step/pytorch_compile/model:mamba2"
    assert script.PEAK_COUNTER == "peak_device_bytes"
    keys = {key for t in load_targets(REPO / "reports" / "targets.json")
            for key in t.benchmarks() if key.startswith("supervised_")}
    samples = {key for key in keys if key.startswith(SAMPLE_GROUP + "/")}
    assert samples == {row_key(SAMPLE_GROUP, "resident", "diffusion")}
    keys -= samples
    models = {key.rsplit("model:", 1)[1] for key in keys}
    assert {"kan", "mamba2"} <= models
    assert keys == {row_key(group, variant, model) for model in models
                    for group, variant in ((STEP_GROUP, "resident"), (EPOCH_GROUP, "resident"),
                                           (EPOCH_GROUP, "host_fed"))}


def test_the_script_merges_its_rows_into_a_run(write_json, tmp_path):
    script = load_script()
    bench = write_json(gb_document(rows(STEP_GROUP, "resident", "kan", [300, 310, 320])),
                       "bench.json")
    measured = script.gb_rows(script.row_key("kan", "eager"),
                              [(2.5e-3, 2.4e-3), (2.4e-3, 2.3e-3), (2.6e-3, 2.5e-3)], 20,
                              {"peak_device_bytes": 80.0 * MIB, "batch": 256.0}, "eager")
    info = {"pytorch_version": "2.11.0", "pytorch_cuda_version": "13.0",
            "pytorch_gpu_name": "NVIDIA H200"}
    notes = {script.row_key("kan", "compile"): "timed out after 600 s"}
    assert script.merge(bench, tmp_path / "rows.json", measured, info, notes) == 0
    run = load_run(bench)
    summary = summarize_run(run)
    eager = summary.measured["supervised_step/pytorch_eager/model:kan"]
    assert (eager.median_s, eager.min_s, eager.max_s) == pytest.approx((2.5e-3, 2.4e-3, 2.6e-3))
    assert eager.counters["peak_device_bytes"] == 80.0 * MIB
    assert "supervised_step/resident/model:kan" in summary.measured
    assert run.context["pytorch_not_measured"] == notes
    assert run.context["pytorch_version"] == "2.11.0"
    assert run.context["gpu_name"] == json.loads(bench.read_text())["context"]["gpu_name"]


def test_the_script_without_torch_writes_no_rows_and_says_why(write_json, tmp_path):
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text('raise ImportError("hidden by the test")\n')
    bench = write_json(gb_document(rows(STEP_GROUP, "resident", "kan", [300, 310, 320])),
                       "bench.json")
    before = load_run(bench).rows
    result = subprocess.run([sys.executable, str(SCRIPT), "--merge-into", str(bench)],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(fake)})
    assert result.returncode == 0, result.stderr
    reason = "torch is not importable (ImportError: hidden by the test)"
    assert result.stdout == f"supervised_models: no PyTorch rows: {reason}\n"
    run = load_run(bench)
    assert run.rows == before
    assert run.context["pytorch_skipped"] == reason
    summary = render(write_json, tmp_path, json.loads(bench.read_text()))
    assert table_row(summary, "kan", "train step, PyTorch eager")[1] == (
        f"not measured (PyTorch rows skipped: {reason})")
    out = tmp_path / "alone.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(fake)})
    assert (result.returncode, result.stdout.count("\n")) == (0, 1)
    assert not out.exists()
