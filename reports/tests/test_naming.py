import pytest

from resident_reports.naming import BenchName, parse_name, slug


@pytest.mark.parametrize("run_name, expected", [
    ("dqn_epoch/resident/manual_time", BenchName("dqn_epoch", "resident")),
    ("dqn_epoch/host_staged/repeats:3/manual_time", BenchName("dqn_epoch", "host_staged")),
    ("per_step/gpu_graph/capacity:1000000/batch:256/manual_time/repeats:5",
     BenchName("per_step", "gpu_graph", (("capacity", "1000000"), ("batch", "256")))),
    ("per_step/gpu_graph/capacity:1000/iterations:5/repeats:2/manual_time/threads:1",
     BenchName("per_step", "gpu_graph", (("capacity", "1000"),))),
    ("audit_overhead/traced/min_time:0.010/min_warmup_time:0.010/real_time/process_time",
     BenchName("audit_overhead", "traced")),
    ("ppo_epoch/resident/envs:64", BenchName("ppo_epoch", "resident", (("envs", "64"),))),
])
def test_parse_name_drops_google_benchmark_suffixes(run_name, expected):
    assert parse_name(run_name) == expected


def test_key_is_the_same_whatever_the_suffixes():
    a = parse_name("per_step/gpu_graph/capacity:1000/repeats:3/manual_time")
    b = parse_name("per_step/gpu_graph/capacity:1000/manual_time/repeats:5")
    assert a.key == b.key == "per_step/gpu_graph/capacity:1000"


@pytest.mark.parametrize("run_name", [
    "BM_lonely", "dqn_epoch//resident", "dqn_epoch/resident/extra", "g/v/capacity:",
    "g/v/:3", "g/v/threads",
])
def test_parse_name_rejects_names_outside_the_convention(run_name):
    with pytest.raises(ValueError, match="run_name|component|not"):
        parse_name(run_name)


def test_numeric_params_keep_only_numbers():
    name = parse_name("per_step/gpu_graph/capacity:1e6/mode:graph/batch:256/scale:nan")
    assert name.numeric_params() == {"capacity": 1e6, "batch": 256.0}
    assert name.without_param("capacity") == (("mode", "graph"), ("batch", "256"), ("scale", "nan"))


def test_slug_is_file_name_safe():
    assert slug("per_step capacity:1000/batch") == "per_step_capacity_1000_batch"
