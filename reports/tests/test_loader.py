import math

import pytest
from conftest import fixture, gb_document, gb_row, run_script

from resident_reports.loader import InputError, load_run


def test_loads_the_google_benchmark_shape():
    run = load_run(fixture("run.json"))
    kinds = [row.aggregate for row in run.rows]
    # 12 benchmarks x 3 repetitions; of the 6 aggregates only median, min, max are kept.
    assert kinds.count(None) == 36
    assert kinds.count("median") == kinds.count("min") == kinds.count("max") == 12
    assert len(run.rows) == 72
    assert len(run.by_benchmark()) == 12
    assert run.gpu_name == "NVIDIA H200"
    assert run.context["git_commit"] == "4f2a9c1"


def test_times_are_converted_to_seconds():
    run = load_run(fixture("run.json"))
    first = run.by_benchmark()["per_step/gpu_graph/capacity:1000/batch:256"][0]
    assert first.real_time_s == pytest.approx(40e-6)
    epoch = run.by_benchmark()["dqn_epoch/resident"][0]
    assert epoch.real_time_s == pytest.approx(12.1e-3)


@pytest.mark.parametrize("unit, seconds", [("ns", 2e-9), ("us", 2e-6), ("ms", 2e-3), ("s", 2.0)])
def test_every_time_unit_converts(write_json, unit, seconds):
    run = load_run(write_json(gb_document([gb_row("g/v/manual_time", 2.0, unit)])))
    assert run.rows[0].real_time_s == pytest.approx(seconds)


def test_counters_are_the_user_keys_only():
    row = load_run(fixture("run.json")).rows[0]
    assert row.counters["audit.d2h_scalar"] == 1.0
    assert row.counters["contract.max_d2h_bulk"] == 0.0
    assert row.counters["env_steps_per_s"] == 4.1e6
    for standard in ("iterations", "repetition_index", "real_time", "cpu_time", "threads"):
        assert standard not in row.counters


def test_a_file_with_nan_loads_and_drops_the_cv_rows():
    # The cv of an all-zero counter is NaN, as libbenchmark 1.7.1 writes it.
    assert "NaN" in fixture("transfer_fail.json").read_text()
    run = load_run(fixture("transfer_fail.json"))
    assert {row.aggregate for row in run.rows} == {None, "median", "min", "max"}


def test_errored_rows_keep_their_message():
    rows = load_run(fixture("errored.json")).by_benchmark()["dqn_epoch/resident"]
    assert [row.error for row in rows] == ["no CUDA device", "no CUDA device"]
    assert all(row.real_time_s is None for row in rows)


def test_missing_gpu_name_is_named_unknown(write_json):
    document = gb_document([gb_row("g/v", 1.0)])
    del document["context"]["gpu_name"]
    assert load_run(write_json(document)).gpu_name == "unknown GPU"


def test_fixture_missing_real_time_names_file_and_field():
    path = fixture("missing_real_time.json")
    with pytest.raises(InputError) as caught:
        load_run(path)
    assert str(caught.value) == f'{path}: benchmarks[3]: missing field "real_time"'


def _break(document: dict, how: str) -> object:
    """``document`` broken in one way."""
    rows = document["benchmarks"]
    if how == "real_time text":
        rows[2]["real_time"] = "fast"
    elif how == "unit":
        rows[2]["time_unit"] = "min"
    elif how == "run_type":
        rows[2]["run_type"] = "warmup"
    elif how == "aggregate_name":
        del rows[3]["aggregate_name"]
    elif how == "run_name":
        rows[2]["run_name"] = "BM_lonely"
    elif how == "negative":
        rows[2]["real_time"] = -1.0
    elif how == "row not object":
        rows[2] = [1, 2]
    elif how == "empty":
        document["benchmarks"] = []
    elif how == "no context":
        del document["context"]
    elif how == "top level":
        return [document]
    elif how == "repetitions":
        rows[2]["repetitions"] = 1.5
    return document


@pytest.mark.parametrize("how, message", [
    ("real_time text", 'benchmarks[2]: field "real_time" must be a number, got "fast"'),
    ("unit", 'benchmarks[2]: field "time_unit" must be one of "ns", "us", "ms", "s", got "min"'),
    ("run_type", 'benchmarks[2]: field "run_type" must be one of "iteration", "aggregate"'),
    ("aggregate_name", 'benchmarks[3]: missing field "aggregate_name"'),
    ("run_name", 'benchmarks[2]: field "run_name": "BM_lonely" is not <group>/<variant>'),
    ("negative", 'benchmarks[2]: field "real_time" must be positive, got -1.0'),
    ("row not object", "benchmarks[2]: expected an object"),
    ("empty", "benchmarks: no rows"),
    ("no context", 'missing field "context"'),
    ("top level", "expected a JSON object at the top level"),
    ("repetitions", 'benchmarks[2]: field "repetitions" must be an integer, got 1.5'),
])
def test_malformed_documents_name_file_and_field(write_json, run_document, how, message):
    path = write_json(_break(run_document, how))
    with pytest.raises(InputError) as caught:
        load_run(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_invalid_json_names_line_and_column(write_json):
    path = write_json('{"context": {},\n  "benchmarks": [,]}')
    with pytest.raises(InputError, match=r"run\.json: invalid JSON at line 2 column 18"):
        load_run(path)


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match=r"absent\.json: No such file or directory"):
        load_run(tmp_path / "absent.json")


def test_names_merged_by_suffix_stripping_are_rejected(write_json):
    rows = [gb_row("g/v/manual_time/threads:1", 1.0), gb_row("g/v/manual_time/threads:2", 1.0)]
    with pytest.raises(InputError, match=r'benchmarks\[1\]: .*both name benchmark "g/v"'):
        load_run(write_json(gb_document(rows)))


@pytest.mark.parametrize("script", ["reports/compare", "reports/render"])
def test_scripts_report_a_malformed_file_in_one_line(script):
    args = ([fixture("missing_real_time.json")] if script == "reports/render"
            else [fixture("missing_real_time.json"), fixture("base.json")])
    result = run_script(script, *args, "--out", "/nonexistent-never-written")
    assert result.returncode == 2
    assert result.stderr == (f'{script}: {fixture("missing_real_time.json")}: benchmarks[3]: '
                             'missing field "real_time"\n')
    assert "Traceback" not in result.stderr


def test_nan_is_a_number_to_the_loader(write_json):
    row = gb_row("g/v", 1.0, counters={"audit.h2d": math.nan})
    assert math.isnan(load_run(write_json(gb_document([row]))).rows[0].counters["audit.h2d"])
