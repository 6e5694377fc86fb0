"""dev/ab-bench orchestration, without a GPU: fake builds whose selfcheck passes and whose
bench binary copies a fixture run to --benchmark_out (build A the "before", build B the
"after"), so the script's alternation, its files and its comparison can be checked here."""
import os
import subprocess
from pathlib import Path

from conftest import REPO, fixture

SCRIPT = REPO / "dev" / "ab-bench"


def fake_build(root: Path, run: Path, selfcheck_status: int = 0) -> Path:
    bench = root / "bench"
    bench.mkdir(parents=True)
    (bench / "resident-selfcheck").write_text(
        f"#!/bin/sh\necho 'resident-selfcheck: fake'\nexit {selfcheck_status}\n")
    (bench / "fake_bench").write_text(
        "#!/bin/sh\n"
        "for a in \"$@\"; do case \"$a\" in --benchmark_out=*) out=${a#--benchmark_out=};; "
        "esac; done\n"
        f"echo \"args: $* commit: $RESIDENT_GIT_COMMIT\" >> \"{root}/calls.txt\"\n"
        f"cp \"{run}\" \"$out\"\n")
    for f in bench.iterdir():
        f.chmod(0o755)
    return root


def run(*args: object, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RESIDENT_GIT_COMMIT")}
    full_env.update(env or {})
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=full_env)


def test_rounds_alternate_and_each_round_is_compared(tmp_path):
    a = fake_build(tmp_path / "a", fixture("before.json"))
    b = fake_build(tmp_path / "b", fixture("after.json"))
    out = tmp_path / "out"
    result = run(a, b, out, "fake_bench", "rows.*", 2, "--", "--extra=1")
    assert result.returncode == 0, result.stderr + result.stdout
    order = [line.split(", ")[1].split(" ")[0] for line in result.stdout.splitlines()
             if line.startswith("ab-bench: round")]
    assert order == ["a", "b", "a", "b"]
    for name in ["a-1.json", "b-1.json", "a-2.json", "b-2.json", "round-1/summary.md",
                 "round-2/summary.md"]:
        assert (out / name).is_file(), name
    calls = (tmp_path / "a" / "calls.txt").read_text().splitlines()
    assert len(calls) == 2
    assert "--benchmark_filter=rows.*" in calls[0] and "--extra=1" in calls[0]


def test_no_gpu_runs_nothing(tmp_path):
    a = fake_build(tmp_path / "a", fixture("before.json"), selfcheck_status=1)
    b = fake_build(tmp_path / "b", fixture("after.json"))
    result = run(a, b, tmp_path / "out", "fake_bench", "x")
    assert result.returncode == 1
    assert "no usable GPU" in result.stderr
    assert not (tmp_path / "a" / "calls.txt").exists()


def test_a_build_without_the_selfcheck_is_named(tmp_path):
    a = fake_build(tmp_path / "a", fixture("before.json"))
    b = fake_build(tmp_path / "b", fixture("after.json"))
    (a / "bench" / "resident-selfcheck").unlink()
    result = run(a, b, tmp_path / "out", "fake_bench", "x")
    assert result.returncode == 2
    assert "resident-selfcheck: no such binary" in result.stderr
    assert "--target resident-selfcheck" in result.stderr
    assert "no usable GPU" not in result.stderr
    assert not (tmp_path / "a" / "calls.txt").exists()


def test_bad_arguments_name_the_value(tmp_path):
    a = fake_build(tmp_path / "a", fixture("before.json"))
    result = run(a, a, tmp_path / "out", "fake_bench", "x", 0)
    assert result.returncode == 2 and "ROUNDS = '0', allowed 1 to 9" in result.stderr
    result = run(a, tmp_path / "missing", tmp_path / "out", "fake_bench", "x")
    assert result.returncode == 2 and "no such binary" in result.stderr
    assert run(a).returncode == 2


def test_each_side_runs_under_its_own_commit(tmp_path):
    a = fake_build(tmp_path / "a", fixture("before.json"))
    b = fake_build(tmp_path / "b", fixture("after.json"))
    result = run(a, b, tmp_path / "out", "fake_bench", "x", 1,
                 env={"RESIDENT_GIT_COMMIT": "both", "RESIDENT_GIT_COMMIT_A": "base",
                      "RESIDENT_GIT_COMMIT_B": "branch"})
    assert result.returncode == 0, result.stderr + result.stdout
    assert (tmp_path / "a" / "calls.txt").read_text().strip().endswith("commit: base")
    assert (tmp_path / "b" / "calls.txt").read_text().strip().endswith("commit: branch")
    # Without the per-side names, both sides keep RESIDENT_GIT_COMMIT.
    result = run(a, b, tmp_path / "out2", "fake_bench", "x", 1, env={"RESIDENT_GIT_COMMIT": "both"})
    assert result.returncode == 0, result.stderr + result.stdout
    assert (tmp_path / "a" / "calls.txt").read_text().splitlines()[-1].endswith("commit: both")
    assert (tmp_path / "b" / "calls.txt").read_text().splitlines()[-1].endswith("commit: both")
