"""The targets check: verdicts on the median, margins against the spread, unmeasured
targets, and malformed targets files."""

import json
from types import MappingProxyType

import pytest
from conftest import REPO, run_script

from resident_reports.loader import InputError, load_run
from resident_reports.naming import parse_name
from resident_reports.stats import Summary
from resident_reports.targets import (MET, MISSED, NOT_MEASURED, evaluate, load_targets,
                                      targets_table)


def summary(key: str, median: float, low: float | None = None, high: float | None = None,
            counters: dict | None = None) -> Summary:
    return Summary(parse_name(key), median, low if low is not None else median,
                   high if high is not None else median, 5, MappingProxyType(counters or {}))


def measured(*summaries: Summary) -> dict:
    return {s.name.key: s for s in summaries}


def write_targets(tmp_path, entries) -> list:
    path = tmp_path / "targets.json"
    path.write_text(json.dumps({"targets": entries}))
    return load_targets(path)


def test_max_time_is_judged_on_the_median(tmp_path):
    [target] = write_targets(tmp_path, [{"issue": 5, "what": "step", "kind": "max_time",
                                         "benchmark": "per_step/resident/capacity:1000", "limit_s": 20e-6}])
    fast = evaluate(target, measured(summary("per_step/resident/capacity:1000", 18e-6)))
    slow = evaluate(target, measured(summary("per_step/resident/capacity:1000", 37.6e-6)))
    assert (fast.verdict, slow.verdict) == (MET, MISSED)
    assert fast.margin == pytest.approx(0.1)
    assert slow.margin == pytest.approx(-0.88)


def test_ratios_and_counters(tmp_path):
    speedup, growth, rate = write_targets(tmp_path, [
        {"issue": 7, "what": "speedup", "kind": "min_ratio", "slow": "dqn_epoch/host_staged",
         "fast": "dqn_epoch/resident", "limit": 5},
        {"issue": 5, "what": "growth", "kind": "max_ratio", "slow": "s/r/capacity:10",
         "fast": "s/r/capacity:1", "limit": 2},
        {"issue": 7, "what": "rate", "kind": "min_counter", "benchmark": "dqn_epoch/resident",
         "counter": "gradient_steps_per_s", "limit": 20000}])
    run = measured(summary("dqn_epoch/host_staged", 129e-3), summary("dqn_epoch/resident", 45.6e-3,
                   counters={"gradient_steps_per_s": 4404.2}),
                   summary("s/r/capacity:10", 44.2e-6), summary("s/r/capacity:1", 19.3e-6))
    results = [evaluate(t, run) for t in (speedup, growth, rate)]
    assert [r.verdict for r in results] == [MISSED, MISSED, MISSED]
    assert results[0].value == pytest.approx(129 / 45.6)
    assert results[1].value == pytest.approx(44.2 / 19.3)
    assert results[2].value == pytest.approx(4404.2)
    rows = targets_table(results)
    assert rows[0][2:5] == [">= 5.00x", "2.83x", MISSED]
    assert rows[1][2:5] == ["<= 2.00x", "2.29x", MISSED]
    assert rows[2][2:5] == [">= 20k", "4.4k", MISSED]
    # Negative control: the same targets on a run that meets them.
    good = measured(summary("dqn_epoch/host_staged", 300e-3), summary("dqn_epoch/resident", 45.6e-3,
                    counters={"gradient_steps_per_s": 25000.0}),
                    summary("s/r/capacity:10", 30e-6), summary("s/r/capacity:1", 19.3e-6))
    assert [evaluate(t, good).verdict for t in (speedup, growth, rate)] == [MET, MET, MET]


def test_a_margin_inside_the_spread_is_flagged(tmp_path):
    [target] = write_targets(tmp_path, [{"issue": 3, "what": "overhead", "kind": "max_ratio",
                                         "slow": "a/traced", "fast": "a/untraced", "limit": 1.05}])
    noisy = evaluate(target, measured(summary("a/traced", 1.04, 0.9, 1.3), summary("a/untraced", 1.0)))
    steady = evaluate(target, measured(summary("a/traced", 1.04), summary("a/untraced", 1.0)))
    assert noisy.verdict == steady.verdict == MET
    assert noisy.within_spread and not steady.within_spread
    assert "within the spread" in targets_table([noisy])[0][5]
    assert targets_table([steady])[0][5] == ""


def test_missing_benchmarks_and_counters_are_not_measured(tmp_path):
    time_target, rate = write_targets(tmp_path, [
        {"issue": 6, "what": "mlp", "kind": "max_time", "benchmark": "mlp_step/resident/batch:256",
         "limit_s": 40e-6},
        {"issue": 8, "what": "rate", "kind": "min_counter", "benchmark": "ppo_train/resident",
         "counter": "env_steps_per_s", "limit": 3e7}])
    run = measured(summary("ppo_train/resident", 0.05))
    assert evaluate(time_target, run).verdict == NOT_MEASURED
    result = evaluate(rate, run)
    assert result.verdict == NOT_MEASURED
    assert "env_steps_per_s" in targets_table([result])[0][5]


@pytest.mark.parametrize("entry, message", [
    ({"issue": 1, "what": "x", "kind": "fastest", "benchmark": "a/b", "limit": 1}, "kind 'fastest'"),
    ({"issue": 1, "what": "x", "kind": "max_time", "limit_s": 1}, 'no "benchmark"'),
    ({"issue": 1, "what": "x", "kind": "min_ratio", "slow": "a/b", "fast": "a/c", "limit": -2},
     '"limit" = -2, allowed a finite number > 0'),
    ({"what": "x", "kind": "max_time", "benchmark": "a/b", "limit_s": 1}, 'no "issue"'),
])
def test_malformed_targets_name_the_entry(tmp_path, entry, message):
    path = tmp_path / "targets.json"
    path.write_text(json.dumps({"targets": [entry]}))
    with pytest.raises(InputError) as error:
        load_targets(path)
    assert f"{path}: targets[0]: " in str(error.value)
    assert message in str(error.value)


REFERENCE_RUN = REPO / "reports/results/h200-2026-12-01-5/bench.json"
"""The run of record the README quotes."""


def test_the_committed_targets_file_loads_and_reads_the_reference_run():
    targets = load_targets(REPO / "reports" / "targets.json")
    assert {3, 5, 6, 7, 8} <= {t.issue for t in targets}
    from resident_reports.stats import summarize_run
    run = summarize_run(load_run(REFERENCE_RUN))
    # The replay, nn, DQN, PPO and audit targets; the supervised models' rows are newer.
    results = [evaluate(t, run.measured) for t in targets if t.issue in {3, 5, 6, 7, 8}]
    assert all(r.verdict != NOT_MEASURED for r in results), [r.missing for r in results]


def test_render_writes_the_targets_section(tmp_path):
    result = run_script("reports/render", REFERENCE_RUN,
                        "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "summary.md").read_text()
    assert "## Targets" in text
    assert "| 8 | PPO update speedup over host-staged (256 envs x 128 steps) | >= 5.00x | 6.24x | met |" in text
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = run_script("reports/render", REFERENCE_RUN,
                        "--out", tmp_path / "x", "--targets", bad)
    assert result.returncode == 2
    assert 'no "targets" array' in result.stderr


def test_a_target_met_on_medians_but_not_at_the_least_favorable_repetitions_is_flagged(tmp_path):
    speedup, growth, step = write_targets(tmp_path, [
        {"issue": 7, "what": "speedup", "kind": "min_ratio", "slow": "dqn_epoch/host_staged",
         "fast": "dqn_epoch/resident", "limit": 5},
        {"issue": 5, "what": "growth", "kind": "max_ratio", "slow": "s/r/capacity:10",
         "fast": "s/r/capacity:1", "limit": 2},
        {"issue": 5, "what": "step", "kind": "max_time", "benchmark": "s/r/capacity:1",
         "limit_s": 20e-6}])
    # A measured DQN pair (H200): host-staged 58.6-95.3 ms around a 92.3 ms median (a margin of 46%,
    # larger than its 39.8% spread), resident 12.56-12.66 ms: 7.30x on the medians, 4.63x for
    # the fastest host-staged repetition against the slowest resident one.
    bimodal = measured(summary("dqn_epoch/host_staged", 92.3e-3, 58.6e-3, 95.3e-3),
                       summary("dqn_epoch/resident", 12.6e-3, 12.56e-3, 12.66e-3),
                       summary("s/r/capacity:10", 30e-6, 29e-6, 41e-6),
                       summary("s/r/capacity:1", 19.3e-6, 19e-6, 21e-6))
    results = [evaluate(t, bimodal) for t in (speedup, growth, step)]
    assert [r.verdict for r in results] == [MET, MET, MET]
    assert results[0].worst == pytest.approx(58.6 / 12.66)
    assert results[1].worst == pytest.approx(41 / 19)
    assert results[2].worst == pytest.approx(21e-6)
    assert not results[0].within_spread
    assert all(r.worst_misses for r in results)
    rows = targets_table(results)
    assert rows[0][5] == "4.63x at the least favorable repetitions"
    assert "2.16x at the least favorable repetitions" in rows[1][5]
    assert rows[2][5].endswith("at the least favorable repetitions")
    # A target missed on the medians is not flagged again.
    missed = evaluate(speedup, measured(summary("dqn_epoch/host_staged", 57e-3, 53.5e-3, 60.6e-3),
                                        summary("dqn_epoch/resident", 12.75e-3)))
    assert missed.verdict == MISSED and not missed.worst_misses
    # Negative control: tight repetitions on the right side of every limit are not flagged.
    steady = measured(summary("dqn_epoch/host_staged", 92.3e-3, 90e-3, 95e-3),
                      summary("dqn_epoch/resident", 12.6e-3, 12.5e-3, 12.7e-3),
                      summary("s/r/capacity:10", 30e-6, 29e-6, 31e-6),
                      summary("s/r/capacity:1", 19.3e-6, 19e-6, 19.5e-6))
    steady_results = [evaluate(t, steady) for t in (speedup, growth, step)]
    assert [r.verdict for r in steady_results] == [MET, MET, MET]
    assert not any(r.worst_misses for r in steady_results)
    assert [row[5] for row in targets_table(steady_results)] == ["", "", ""]
