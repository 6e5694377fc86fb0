"""The host-speed paragraph: the run report states the host's cost of one launch, the
before/after report both runs' and whether they differ beyond the probe's spread."""

import pytest
from conftest import fixture, gb_document, gb_row, run_script

from resident_reports.compare_report import write_compare_report
from resident_reports.host_speed import launch_cost_s
from resident_reports.loader import load_run
from resident_reports.run_report import write_run_report
from resident_reports.stats import summarize_run

PROBE_RUN = "audit_overhead/untraced/repeats:3/manual_time"
LAUNCHES = 2000


def probe_document(times_ms, with_rate=True, **context):
    """A run holding only the probe, one repetition per time (ms) of 2000 launches."""
    rows = [gb_row(PROBE_RUN, t, "ms",
                   {"launches_per_s": LAUNCHES / (t * 1e-3)} if with_rate else None,
                   repetition_index=i, repetitions=len(times_ms))
            for i, t in enumerate(times_ms)]
    return gb_document(rows, **context)


def test_run_report_states_the_launch_cost(tmp_path):
    write_run_report(load_run(fixture("run.json")), tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    # The median rate of the three repetitions: 2000 launches in 12.1 ms.
    assert "Host: one plain kernel launch costs 6.05 µs here" in summary


def test_run_report_says_when_the_host_was_not_measured(tmp_path):
    write_run_report(load_run(fixture("base.json")), tmp_path)
    assert "Host speed not measured" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan")])
def test_a_rate_that_is_not_positive_is_not_a_cost(write_json, rate):
    document = probe_document([6.0])
    document["benchmarks"][0]["launches_per_s"] = rate
    measured = summarize_run(load_run(write_json(document))).measured
    assert launch_cost_s(measured) is None


def test_a_probe_without_its_rate_is_not_a_cost(write_json):
    measured = summarize_run(load_run(write_json(probe_document([6.0], with_rate=False)))).measured
    assert launch_cost_s(measured) is None


def compare(tmp_path, write_json, before_ms, after_ms):
    before = load_run(write_json(probe_document(before_ms, git_commit="a"), "before.json"))
    after = load_run(write_json(probe_document(after_ms, git_commit="b"), "after.json"))
    write_compare_report(before, after, tmp_path / "out")
    return (tmp_path / "out" / "summary.md").read_text()


def test_compare_flags_hosts_that_differ_beyond_the_spread(tmp_path, write_json):
    summary = compare(tmp_path, write_json, [6.0, 6.1, 6.2], [9.0, 9.2, 9.4])
    assert ("Host: one plain kernel launch cost 3.05 µs before and 4.6 µs after (+50.8%; "
            "`audit_overhead/untraced`), beyond the probe's spread 4.3%: the hosts differ"
            in summary)


def test_compare_calls_hosts_within_the_spread_alike(tmp_path, write_json):
    summary = compare(tmp_path, write_json, [6.0, 6.1, 6.4], [6.0, 6.2, 6.3])
    assert "(+1.6%; `audit_overhead/untraced`), within the probe's spread 6.6%: the hosts are alike" in summary
    assert "the hosts differ" not in summary


def test_compare_says_when_a_run_lacks_the_probe(tmp_path):
    write_compare_report(load_run(fixture("before.json")), load_run(fixture("run.json")), tmp_path)
    assert "Host speed not compared" in (tmp_path / "summary.md").read_text()


def test_the_regression_gate_names_a_host_change_and_still_judges(tmp_path, write_json):
    base = write_json(probe_document([6.0, 6.1, 6.2]), "base.json")
    new = write_json(probe_document([9.0, 9.2, 9.4]), "new.json")
    result = run_script("ci/regression-gate", base, new)
    assert "(+50.8%; `audit_overhead/untraced`), beyond the probe's spread 4.3%: the hosts differ" in result.stdout
    assert result.returncode == 1, result.stdout  # the probe itself got slower: still a failure
