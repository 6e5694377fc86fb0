import pytest
from conftest import fixture, gb_document, gb_row

from resident_reports.loader import InputError, load_run
from resident_reports.naming import BenchName
from resident_reports.stats import (IMPROVEMENT, REGRESSION, SAME, Change, Summary,
                                    pair_runs, summarize_run)


def summary(median: float, low: float, high: float) -> Summary:
    return Summary(BenchName("g", "v"), median, low, high, 3, {})


def test_summary_from_repetitions():
    measured = summarize_run(load_run(fixture("base.json"))).measured
    dqn = measured["dqn_epoch/resident"]
    assert (dqn.median_s, dqn.min_s, dqn.max_s) == pytest.approx((10e-3, 9e-3, 11e-3))
    assert dqn.repetitions == 3
    assert dqn.spread == pytest.approx(0.2)


def test_summary_counters_are_medians_of_repetitions():
    measured = summarize_run(load_run(fixture("transfer_fail.json"))).measured
    assert measured["dqn_epoch/resident"].counters["audit.d2h_bulk"] == 0.0  # reps 0, 2, 0


def test_summary_without_aggregates(write_json):
    rows = [gb_row("g/v", time, repetition_index=index, repetitions=4)
            for index, time in enumerate([4.0, 1.0, 3.0, 2.0])]
    summary = summarize_run(load_run(write_json(gb_document(rows)))).measured["g/v"]
    assert (summary.median_s, summary.min_s, summary.max_s) == pytest.approx((2.5e-3, 1e-3, 4e-3))
    assert summary.repetitions == 4


def test_summary_from_aggregates_only():
    dqn = summarize_run(load_run(fixture("aggregates_only.json"))).measured["dqn_epoch/resident"]
    assert (dqn.median_s, dqn.min_s, dqn.max_s) == pytest.approx((10e-3, 9e-3, 11.5e-3))
    assert dqn.spread == pytest.approx(0.25)


def test_aggregates_without_max_cannot_give_a_spread(write_json):
    document = gb_document([gb_row("g/v", 1.0)])
    median = dict(document["benchmarks"][0], run_type="aggregate", aggregate_name="median")
    document["benchmarks"] = [median, dict(median, aggregate_name="min")]
    with pytest.raises(InputError, match='benchmark "g/v": no iteration rows and no "max"'):
        summarize_run(load_run(write_json(document)))


def test_errored_benchmark_is_not_measured():
    result = summarize_run(load_run(fixture("errored.json")))
    assert "dqn_epoch/resident" not in result.measured
    assert result.errors == {"dqn_epoch/resident": "no CUDA device"}
    assert "ppo_epoch/resident" in result.measured


def test_single_repetition_has_no_spread():
    assert summary(1.0, 1.0, 1.0).spread == 0.0


@pytest.mark.parametrize("before, after, min_change, verdict", [
    (summary(10, 9.9, 10.1), summary(12, 11.9, 12.1), 0.0, REGRESSION),   # +20% > 2%
    (summary(10, 9.9, 10.1), summary(8, 7.9, 8.1), 0.0, IMPROVEMENT),     # -20% > 2.5%
    (summary(10, 9, 11), summary(11, 10.5, 11.5), 0.0, SAME),             # +10% < 20% spread
    (summary(10, 9, 11), summary(8.5, 8.4, 8.6), 0.0, SAME),              # -15% < 20% spread
    (summary(10, 10, 10), summary(10.4, 10.4, 10.4), 0.05, SAME),         # +4% < 5% threshold
    (summary(10, 10, 10), summary(10.6, 10.6, 10.6), 0.05, REGRESSION),   # +6% > 5% threshold
    (summary(10, 9, 11), summary(13, 13, 13), 0.05, REGRESSION),          # +30% > 20% spread
    (summary(8, 7, 9), summary(10, 10, 10), 0.0, SAME),                   # +25% == spread
])
def test_verdict_needs_a_change_beyond_spread_and_threshold(before, after, min_change, verdict):
    assert Change(before, after).verdict(min_change) == verdict


def test_change_uses_the_larger_spread():
    change = Change(summary(10, 9.9, 10.1), summary(11, 10, 12))
    assert change.spread == pytest.approx(2 / 11)
    assert change.ratio == pytest.approx(1.1)
    assert change.verdict() == SAME


def test_pair_runs_matches_keys_across_units_and_suffixes():
    pairing = pair_runs(summarize_run(load_run(fixture("before.json"))),
                        summarize_run(load_run(fixture("after.json"))))
    by_key = {change.key: change for change in pairing.changes}
    assert list(by_key) == ["dqn_epoch/resident", "ppo_epoch/resident", "sac_epoch/resident",
                            "per_step/gpu_graph/capacity:1000/batch:256"]
    assert by_key["per_step/gpu_graph/capacity:1000/batch:256"].ratio == pytest.approx(1.0)
    assert [c.verdict() for c in by_key.values()] == [REGRESSION, IMPROVEMENT, SAME, SAME]
    assert pairing.only_before == ("td3_epoch/resident",)
    assert pairing.only_after == ("trading_epoch/resident",)
    assert dict(pairing.errors_after) == {"cartpole_epoch/resident": "no CUDA device"}
