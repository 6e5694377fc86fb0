"""bench/pytorch/supervised_models.py's row plan, budget and --missing bookkeeping, without
torch: the order rows run in (eager before compiled, so a budget cut drops compiled rows
first), the reason a row left out by the budget records, which rows --missing takes from a
run, and the command-line checks of the new options."""

import importlib.util
import json

from conftest import REPO, run_script

SCRIPT = REPO / "bench/pytorch/supervised_models.py"
_spec = importlib.util.spec_from_file_location("supervised_models_script", SCRIPT)
rows_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rows_script)


def test_eager_rows_run_before_compiled_ones_samplers_after_steps():
    plan = rows_script.planned_rows(["kan", "diffusion", "tft"], ["compile", "eager"],
                                    ["diffusion"])
    assert plan == [("kan", "eager"), ("diffusion", "eager"), ("tft", "eager"),
                    ("diffusion", "sample_eager"),
                    ("kan", "compile"), ("diffusion", "compile"), ("tft", "compile"),
                    ("diffusion", "sample_compile")]


def test_every_planned_row_has_a_distinct_key():
    plan = rows_script.planned_rows(["kan", "diffusion"], ["eager", "compile", "compile_ro"],
                                    ["diffusion"])
    keys = [rows_script.row_key(m, v) for m, v in plan]
    assert len(keys) == len(set(keys)) == 2 * 3 + 3
    assert "supervised_sample/pytorch_compile_ro/model:diffusion" in keys


def test_a_row_left_out_by_the_budget_says_so_and_names_the_command():
    reason = rows_script.budget_spent_reason(95)
    assert "95 s budget" in reason and "--missing" in reason and "--merge-into" in reason


def test_missing_takes_the_listed_rows_the_run_lacks(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({
        "context": {"pytorch_not_measured": {
            "supervised_step/pytorch_compile/model:kan": "not run: budget",
            "supervised_step/pytorch_compile/model:tft": "timed out after 150 s",
            "supervised_step/pytorch_eager/model:kan": "stale note, row present"}},
        "benchmarks": [
            {"name": "supervised_step/pytorch_eager/model:kan/manual_time",
             "run_name": "supervised_step/pytorch_eager/model:kan/manual_time"},
            {"name": "supervised_step/resident/model:kan/repeats:5/manual_time_median",
             "run_name": "supervised_step/resident/model:kan/repeats:5/manual_time"}]}))
    wanted, notes = rows_script.missing_rows(bench)
    assert wanted == {"supervised_step/pytorch_compile/model:kan",
                      "supervised_step/pytorch_compile/model:tft"}
    assert set(notes) == wanted  # the present row's stale note is dropped


def test_missing_with_nothing_listed_takes_nothing(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"context": {}, "benchmarks": []}))
    assert rows_script.missing_rows(bench) == (set(), {})


def test_bad_budget_and_missing_without_a_run_are_usage_errors(tmp_path):
    out = tmp_path / "rows.json"
    result = run_script("bench/pytorch/supervised_models.py", "--out", out, "--budget", "-1")
    assert result.returncode == 2 and "--budget -1: must be >= 0" in result.stderr
    result = run_script("bench/pytorch/supervised_models.py", "--out", out, "--missing")
    assert result.returncode == 2 and "--missing needs --merge-into" in result.stderr
    result = run_script("bench/pytorch/supervised_models.py", "--out", out,
                        "--row-timeout", "0")
    assert result.returncode == 2 and "--row-timeout 0: must be > 0" in result.stderr
