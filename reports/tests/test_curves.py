"""reports/curves and resident_reports.curves on synthetic resident-train --log files: RL runs
(several seeds, the band over them), supervised runs (a resumed log), the charts and the
summary written; malformed logs refused with the file and the line named."""

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_script
from resident_reports.curves import RL, SUPERVISED, load_log, seed_band, write_curves
from resident_reports.loader import InputError

SCRIPT = "reports/curves"


def header(kind: str = RL, task: str = "dqn-cartpole", seed: int = 1, **extra) -> dict:
    """A header record as resident-train writes it."""
    return {"record": "header", "format": 1, "kind": kind, "task": task, "seed": seed,
            "commit": "abc123", "started_utc": "2025-01-01T00:00:00Z", "gpu": "NVIDIA H200",
            "command": f"resident-train {task}", "config": {"lr": 0.00025}, **extra}


def progress(env_steps: int, mean_return, wall_s: float, task: str = "dqn-cartpole",
             seed: int = 1) -> dict:
    """An RL progress record."""
    return {"record": "progress", "task": task, "seed": seed, "env_steps": env_steps,
            "episodes": 3, "mean_return_100": mean_return, "wall_s": wall_s,
            "gradient_steps": env_steps, "loss": 0.5}


def epoch(number: int, train: float, validation: float, task: str = "kan", seed: int = 1) -> dict:
    """A supervised epoch record."""
    return {"record": "epoch", "task": task, "seed": seed, "epoch": number, "train_loss": train,
            "validation_loss": validation, "best": True, "windows_per_second": 1e5,
            "epoch_s": 0.5, "wall_s": 0.5 * number}


def end(reached: bool = True, target: float = 475.0, **extra) -> dict:
    """An RL end record."""
    return {"record": "end", "reached": reached, "target": target, **extra}


def write_log(directory: Path, name: str, records: list, tail: str = "") -> Path:
    """Write ``records`` (dicts, or raw strings written as they are) one per line, then
    ``tail`` unterminated."""
    path = directory / name
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("".join(line + "\n" for line in lines) + tail, encoding="utf-8")
    return path


def rl_log(directory: Path, seed: int, scale: float, steps: int = 5,
           task: str = "dqn-cartpole") -> Path:
    """A run whose return rises linearly at ``scale`` per 1000 env steps."""
    records = [header(task=task, seed=seed)]
    records += [progress(1000 * k, scale * k, 2.0 * k, task, seed) for k in range(1, steps + 1)]
    return write_log(directory, f"{task}-{seed}.jsonl", records + [end()])


def test_rl_log_is_read_in_order(tmp_path):
    path = write_log(tmp_path, "a.jsonl", [
        header(), progress(16000, None, 1.5), progress(32000, 21.5, 3.0), end(False)])
    (run,) = load_log(path)
    assert (run.kind, run.task, run.seed, run.commit, run.gpu) == (
        RL, "dqn-cartpole", 1, "abc123", "NVIDIA H200")
    assert run.env_steps == [16000, 32000]
    assert run.wall_s == [1.5, 3.0]
    assert np.isnan(run.returns[0]) and run.returns[1] == 21.5
    assert run.end["reached"] is False


def test_each_rl_header_starts_a_run_and_unknown_records_are_skipped(tmp_path):
    path = write_log(tmp_path, "two.jsonl", [
        header(seed=1), progress(1000, 10, 1), {"record": "future_kind", "x": 1}, end(),
        header(seed=2), progress(1000, 20, 1)])
    runs = load_log(path)
    assert [(r.seed, r.returns) for r in runs] == [(1, [10.0]), (2, [20.0])]
    assert runs[1].end is None


def test_resumed_supervised_log_continues_and_a_repeated_epoch_keeps_the_later(tmp_path):
    path = write_log(tmp_path, "kan.jsonl", [
        header(SUPERVISED, "kan"), epoch(1, 1.0, 0.9), epoch(2, 0.8, 0.7),
        epoch(3, 0.7, 0.65),
        header(SUPERVISED, "kan", resumed_after_epoch=2), epoch(3, 0.6, 0.6), epoch(4, 0.5, 0.55),
        {"record": "end", "best_epoch": 4}])
    (run,) = load_log(path)
    assert run.epochs == [1, 2, 3, 4]
    assert run.train_loss == [1.0, 0.8, 0.6, 0.5]
    assert run.validation_loss == [0.9, 0.7, 0.6, 0.55]
    assert run.end == {"record": "end", "best_epoch": 4}


def test_an_unterminated_last_line_is_dropped_with_a_warning(tmp_path, capsys):
    path = write_log(tmp_path, "killed.jsonl", [header(), progress(1000, 10, 1)],
                     tail='{"record": "progress", "env_st')
    (run,) = load_log(path)
    assert run.env_steps == [1000]
    assert "line 3: skipped an unterminated last line" in capsys.readouterr().err


@pytest.mark.parametrize("records, tail, message", [
    ([], "", "no header record"),
    (["", "  "], "", "no header record"),
    ([header(), "{not json"], "", "line 2: not JSON"),
    ([header(), progress(1, 1, 1), '{"record": "progress", "env_st'], "", "line 3: not JSON"),
    ([header(), "[1, 2]"], "", "line 2: a JSON list, expected an object"),
    ([header(), {"env_steps": 3}], "", "line 2: an object without a string \"record\""),
    ([progress(1000, 1, 1)], "", "line 1: a 'progress' record before any header record"),
    ([header(kind="bandit")], "", "line 1: header kind \"bandit\""),
    ([{"record": "header", "kind": "rl", "seed": 1}], "", "line 1: header without a string "
                                                          "\"task\""),
    ([header(seed=-1)], "", "line 1: \"seed\" is -1, expected a whole number >= 0"),
    ([header(), {"record": "progress", "mean_return_100": 1, "wall_s": 1}], "",
     "line 2: 'progress' record without \"env_steps\""),
    ([header(), progress("many", 1, 1)], "", "line 2: \"env_steps\" is \"many\", expected a "
                                            "number"),
    ([header(), progress(10, True, 1)], "", "line 2: \"mean_return_100\" is true"),
    ([header(), progress(10, 1, None)], "", "line 2: \"wall_s\" is null, expected a number"),
    ([header(), progress(10.5, 1, 1)], "", "line 2: \"env_steps\" is 10.5, expected a whole"),
    ([header(), epoch(1, 1, 1)], "", "line 2: an 'epoch' record in an RL log"),
    ([header(SUPERVISED, "kan"), progress(1, 1, 1)], "",
     "line 2: a 'progress' record in a supervised log"),
    ([header(SUPERVISED, "kan"), header(SUPERVISED, "kan", seed=2)], "",
     "line 2: a second header for kan seed 2 after kan seed 1"),
])
def test_malformed_logs_name_the_file_and_line(tmp_path, records, tail, message):
    path = write_log(tmp_path, "bad.jsonl", records, tail)
    with pytest.raises(InputError) as error:
        load_log(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_a_missing_file_and_bad_bytes_are_named(tmp_path):
    with pytest.raises(InputError, match="nope.jsonl: no such file"):
        load_log(tmp_path / "nope.jsonl")
    bad = tmp_path / "bytes.jsonl"
    bad.write_bytes(b'{"record": "header"}\n\xff\xfe\n')
    with pytest.raises(InputError, match="bytes.jsonl: not UTF-8"):
        load_log(bad)


def test_seed_band_over_the_common_range():
    band = seed_band([([0, 10, 20], [0, 10, 20]), ([5, 15, 30], [0, 20, 40]),
                      ([0, 10], [np.nan, 1.0])])
    # The NaN point is dropped: the third curve is the one point (10, 1), so the common range
    # is [10, 10].
    np.testing.assert_array_equal(band.xs, [10.0])
    np.testing.assert_allclose(band.mean, [(10 + 10 + 1) / 3])
    np.testing.assert_allclose(band.low, [1.0])
    np.testing.assert_allclose(band.high, [10.0])
    band = seed_band([([0, 10, 20], [0, 10, 20]), ([5, 15, 30], [0, 20, 40])])
    np.testing.assert_array_equal(band.xs, [5, 10, 15, 20])
    # Every x of either curve inside [5, 20]; each curve interpolated there.
    second = np.interp([5, 10, 15, 20], [5, 15, 30], [0, 20, 40])
    np.testing.assert_allclose(band.mean, (np.array([5, 10, 15, 20]) + second) / 2)
    np.testing.assert_allclose(band.low, np.minimum([5, 10, 15, 20], second))
    np.testing.assert_allclose(band.high, np.maximum([5, 10, 15, 20], second))
    assert seed_band([([0, 1], [1, 2])]) is None
    assert seed_band([([0, 1], [1, 2]), ([2, 3], [1, 2])]) is None


def test_write_curves_draws_every_task(tmp_path):
    runs = [run for seed, scale in ((1, 50.0), (2, 80.0), (3, 95.0))
            for run in load_log(rl_log(tmp_path, seed, scale))]
    runs += load_log(rl_log(tmp_path, 1, 60.0, task="ppo-cartpole"))
    runs += load_log(write_log(tmp_path, "kan.jsonl", [
        header(SUPERVISED, "kan"), epoch(1, 1.0, 0.9), epoch(2, 0.8, 0.7)]))
    out = tmp_path / "out"
    charts = write_curves(runs, out)
    assert sorted(p.name for p in charts) == sorted([
        "dqn-cartpole_return_vs_env_steps.png", "dqn-cartpole_return_vs_wall_s.png",
        "ppo-cartpole_return_vs_env_steps.png", "ppo-cartpole_return_vs_wall_s.png",
        "kan_loss_vs_epoch.png"])
    for chart in charts:
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (out / "curves.md").read_text()
    assert "## dqn-cartpole" in summary and "## kan" in summary
    assert "| 3 | dqn-cartpole-3.jsonl | abc123 | 5000 | 475 | 10.0 | reached |" in summary
    assert "| 1 | kan.jsonl | abc123 | 2 | 0.8 | 0.7 |" in summary
    assert "![kan_loss_vs_epoch.png](kan_loss_vs_epoch.png)" in summary


def test_a_task_name_never_leaves_the_output_folder(tmp_path):
    runs = load_log(write_log(tmp_path, "odd.jsonl", [
        header(SUPERVISED, "../up"), epoch(1, 1.0, 0.9, task="../up")]))
    (chart,) = write_curves(runs, tmp_path / "out")
    assert chart.parent == tmp_path / "out" and chart.name == ".._up_loss_vs_epoch.png"


def test_script_writes_the_report(tmp_path):
    logs = [rl_log(tmp_path, seed, 40.0 * seed) for seed in (1, 2)]
    result = run_script(SCRIPT, *logs, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout and "2 charts from 2 runs" in result.stdout
    assert (tmp_path / "out" / "dqn-cartpole_return_vs_env_steps.png").exists()


def test_script_malformed_log_is_one_line_exit_2(tmp_path):
    good = rl_log(tmp_path, 1, 10.0)
    bad = write_log(tmp_path, "bad.jsonl", [header(), "{oops"])
    result = run_script(SCRIPT, good, bad, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"reports/curves: {bad}: line 2: not JSON (Expecting property name enclosed in double "
        "quotes at column 2)"]
    assert not (tmp_path / "out").exists()
