import pytest
from conftest import fixture, gb_document, gb_row, run_script

from resident_reports.contracts import Violation, check_run
from resident_reports.loader import InputError, load_run

CONTRACT = {"contract.max_d2h_scalar": 1.0, "contract.max_d2h_bulk": 0.0,
            "contract.max_h2d": 0.0, "contract.max_syncs": 1.0, "contract.allow_mapped": 0.0}
AUDIT = {"audit.d2h_scalar": 1.0, "audit.d2h_bulk": 0.0, "audit.h2d": 0.0,
         "audit.syncs": 1.0, "audit.mapped_allocs": 0.0}


def check(write_json, *counter_sets):
    rows = [gb_row("dqn_epoch/resident/manual_time", 10.0, counters=counters,
                   repetition_index=index, repetitions=len(counter_sets))
            for index, counters in enumerate(counter_sets)]
    return check_run(load_run(write_json(gb_document(rows))))


def test_run_within_contract_passes():
    result = check_run(load_run(fixture("run.json")))
    assert result.passed
    assert result.checked_rows == 18
    assert result.uncontracted["per_step/gpu_graph/capacity:1000/batch:256"] == 3
    assert len(result.uncontracted) == 6


def test_worst_repetition_fails_even_when_the_median_passes():
    result = check_run(load_run(fixture("transfer_fail.json")))
    assert not result.passed
    assert result.violations == (
        Violation("dqn_epoch/resident", "audit.d2h_bulk", 2.0, 0.0, rows_over=1, rows=3),
        Violation("ppo_epoch/resident", "audit.mapped_allocs", 1.0, 0.0, rows_over=3, rows=3),
    )


@pytest.mark.parametrize("counter, limit_field", [
    ("audit.d2h_scalar", "contract.max_d2h_scalar"), ("audit.d2h_bulk", "contract.max_d2h_bulk"),
    ("audit.h2d", "contract.max_h2d"), ("audit.syncs", "contract.max_syncs"),
])
def test_each_limit_is_checked(write_json, counter, limit_field):
    over = {**AUDIT, **CONTRACT, counter: CONTRACT[limit_field] + 1}
    assert [v.counter for v in check(write_json, over).violations] == [counter]


def test_negative_limit_means_no_limit(write_json):
    unlimited = {**AUDIT, **CONTRACT, "contract.max_h2d": -1.0, "audit.h2d": 5000.0}
    assert check(write_json, unlimited).passed


def test_mapped_allocations_pass_when_allowed(write_json):
    allowed = {**AUDIT, **CONTRACT, "contract.allow_mapped": 1.0, "audit.mapped_allocs": 3.0}
    assert check(write_json, allowed).passed


def test_rounding_of_per_iteration_averages_is_tolerated(write_json):
    assert check(write_json, {**AUDIT, **CONTRACT, "audit.d2h_scalar": (0.1 + 0.2) / 0.3}).passed
    assert not check(write_json, {**AUDIT, **CONTRACT, "audit.d2h_scalar": 1.001}).passed


def test_partial_contract_is_bad_input(write_json):
    partial = {**AUDIT, **CONTRACT}
    del partial["contract.max_syncs"]
    with pytest.raises(InputError, match=r'benchmarks\[0\]: missing field "contract.max_syncs"'):
        check(write_json, partial)


def test_missing_audit_counter_is_bad_input(write_json):
    missing = {**AUDIT, **CONTRACT}
    del missing["audit.h2d"]
    with pytest.raises(InputError, match=r'benchmarks\[0\]: missing field "audit.h2d"'):
        check(write_json, missing)


def test_allow_mapped_must_be_0_or_1(write_json):
    with pytest.raises(InputError, match='"contract.allow_mapped" must be 0 or 1, got 0.5'):
        check(write_json, {**AUDIT, **CONTRACT, "contract.allow_mapped": 0.5})


def test_script_passes_with_a_one_line_count():
    result = run_script("ci/transfer-gate", fixture("run.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "18 rows within contract"
    assert "no contract: per_step/cpu_sum_tree/capacity:1000000/batch:256 (3 rows)" in lines


def test_script_fails_with_a_table_of_offenders():
    result = run_script("ci/transfer-gate", fixture("transfer_fail.json"))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["benchmark", "counter", "measured", "(worst)", "contract",
                                "repetitions", "over"]
    assert lines[2].split() == ["dqn_epoch/resident", "audit.d2h_bulk", "2", "max", "0", "1/3"]
    assert lines[3].split() == ["ppo_epoch/resident", "audit.mapped_allocs", "1", "max", "0", "3/3"]
    assert len({len(line) for line in lines[:4]}) == 1  # fixed width
    assert lines[-1].startswith("ci/transfer-gate: FAIL: 2 counters over contract")


def test_script_fails_on_an_errored_benchmark():
    result = run_script("ci/transfer-gate", fixture("errored.json"))
    assert result.returncode == 1
    assert "errored: dqn_epoch/resident: no CUDA device" in result.stdout


@pytest.mark.parametrize("name, message", [
    ("missing_real_time.json", 'benchmarks[3]: missing field "real_time"'),
    ("aggregates_only.json", "benchmarks: no iteration rows to check"),
    ("absent.json", "No such file or directory"),
])
def test_script_bad_input_exits_2_in_one_line(name, message):
    result = run_script("ci/transfer-gate", fixture(name))
    assert result.returncode == 2
    assert result.stderr.startswith(f"ci/transfer-gate: {fixture(name)}: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1


def test_script_help():
    result = run_script("ci/transfer-gate", "--help")
    assert result.returncode == 0
    assert "usage: ci/transfer-gate [-h] RUN.json" in result.stdout
