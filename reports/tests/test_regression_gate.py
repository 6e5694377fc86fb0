import pytest
from conftest import fixture, run_script

GATE = "ci/regression-gate"


def table_row(stdout: str, benchmark: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.startswith(benchmark + " "))


def test_slowdown_inside_the_spread_does_not_fail():
    # +10%: above the 5% threshold, inside the base run's 20% spread.
    result = run_script(GATE, fixture("base.json"), fixture("new_within_spread.json"))
    assert result.returncode == 0, result.stdout
    assert table_row(result.stdout, "dqn_epoch/resident") == ["dqn_epoch/resident", "10", "ms",
                                                              "11", "ms", "+10.0%", "20.0%", "same"]


def test_slowdown_beyond_spread_and_threshold_fails():
    result = run_script(GATE, fixture("base.json"), fixture("new_slower.json"))
    assert result.returncode == 1
    assert table_row(result.stdout, "dqn_epoch/resident")[-1] == "FAIL"
    assert table_row(result.stdout, "ppo_epoch/resident")[-1] == "same"
    assert result.stdout.splitlines()[-1].startswith(f"{GATE}: FAIL: 2 compared, 1 slower")


def test_a_larger_threshold_lets_it_pass():
    result = run_script(GATE, fixture("base.json"), fixture("new_slower.json"),
                        "--max-slowdown", "40%")
    assert result.returncode == 0, result.stdout


def test_benchmarks_in_one_file_are_reported_not_failed():
    result = run_script(GATE, fixture("base.json"), fixture("new_within_spread.json"))
    assert "only in base: ppo_epoch/resident" in result.stdout
    assert "only in new: trading_epoch/resident" in result.stdout
    assert result.returncode == 0


def test_identical_runs_pass():
    result = run_script(GATE, fixture("run.json"), fixture("run.json"))
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == (f"{GATE}: ok: 12 compared, "
                                              "0 slower than max(5.0%, spread)")


def test_errored_benchmark_in_new_fails():
    result = run_script(GATE, fixture("errored.json"), fixture("errored.json"))
    assert result.returncode == 1
    assert "errored in new: dqn_epoch/resident: no CUDA device" in result.stdout


@pytest.mark.parametrize("value", ["abc", "-5%", "nan"])
def test_bad_threshold_exits_2(value):
    result = run_script(GATE, fixture("base.json"), fixture("new_slower.json"),
                        f"--max-slowdown={value}")
    assert result.returncode == 2
    assert f'"{value}" is not a percentage such as 5%' in result.stderr


def test_malformed_file_exits_2_in_one_line():
    result = run_script(GATE, fixture("base.json"), fixture("missing_real_time.json"))
    assert result.returncode == 2
    assert result.stderr == (f'{GATE}: {fixture("missing_real_time.json")}: benchmarks[3]: '
                             'missing field "real_time"\n')
