"""dev/kernel-times and resident_reports.kernel_times on a real ncu CSV excerpt (one PPO
minibatch of an H200 run at commit 2734d01, plus a few launches either side)."""

import pytest

from conftest import fixture, run_script
from resident_reports.kernel_times import (InputError, read_launches, segment, short_name,
                                           totals)

CSV = fixture("ncu_ppo_minibatch.csv")


def test_short_names_drop_templates_parameters_and_anonymous_namespaces():
    assert short_name("void resident::<unnamed>::bias_grad(float *, const float *, unsigned long)"
                      ) == "resident::bias_grad"
    assert short_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nt_align1>(T1::Params)"
                      ) == "cutlass::Kernel2"
    assert short_name("void f<a<b>, (c)>(x)") == "f"


def test_one_minibatch_segment_sums_its_31_launches():
    launches = read_launches(CSV)
    assert len(launches) == 36  # the excerpt: 3 launches before, the minibatch, 2 after
    one = segment(launches, "gather_minibatch", 1)
    assert len(one) == 31
    assert one[0].name == "ppo::gather_minibatch"
    rows = totals(one)
    assert sum(r.launches for r in rows) == 31
    assert sum(r.microseconds for r in rows) == pytest.approx(896.1, abs=0.05)
    assert rows[0].name == "resident::activation_backward_bias_grad"
    assert rows[0].launches == 4
    # The whole file is more than the segment (the control: the segment really cuts).
    assert sum(r.microseconds for r in totals(launches)) > 896.1 + 1.0


def test_the_last_segment_runs_to_the_end():
    launches = read_launches(CSV)
    last = segment(launches, "gather_minibatch", 2)
    assert last[0].name == "ppo::gather_minibatch"
    assert len(last) == 2


def test_a_missing_segment_and_a_file_without_a_header_are_errors(tmp_path):
    with pytest.raises(InputError, match="2 launches match 'gather_minibatch', asked for number 3"):
        segment(read_launches(CSV), "gather_minibatch", 3)
    bad = tmp_path / "bad.csv"
    bad.write_text("==PROF== nothing profiled\n")
    result = run_script("dev/kernel-times", bad)
    assert result.returncode == 2
    assert "no ncu CSV header" in result.stderr


def test_the_script_prints_the_table():
    result = run_script("dev/kernel-times", CSV, "--segment", "gather_minibatch")
    assert result.returncode == 0, result.stderr
    assert "| `resident::activation_backward_bias_grad` | 4 | 256.9 | 64.2 | 28.7% |" in result.stdout
    assert "| total | 31 | 896.1 | | 100% |" in result.stdout
