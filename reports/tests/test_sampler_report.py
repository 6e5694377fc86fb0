"""The report's replay-sampler section: sampler_distribution_<mode>.json files beside a run
(as the GPU sampler distribution test writes them) rendered as a CDF chart and a p-value table
per mode, verdicts from the p-values at the file's level, and a malformed file named."""

import json
import shutil

from conftest import fixture, run_script

GRID = [0.01 * 10 ** (i / 10) for i in range(31)]


def cdf(shift: float = 0.0) -> list[float]:
    return [min(1.0, max(0.0, i / 30 + shift)) for i in range(31)]


def document(mode: str, sampler_p: float = 0.5, control_p: float = 1e-9) -> dict:
    def sampler(name, p, shift):
        return {"name": name, "chi_square_p": p, "ks_priority_p": p, "ks_slot_p": 0.9,
                "cdf": cdf(shift)}
    return {"mode": mode, "capacity": 1000, "batch": 32, "draws": 128000, "alpha": 0.6,
            "level": 0.01, "priority_grid": GRID, "cpu_cdf": cdf(),
            "samplers": [sampler("GPU sampler", sampler_p, 0.0),
                         sampler("control: wrong alpha", control_p, 0.1),
                         sampler("control: off-by-one leaf", control_p, -0.05)]}


def render_with(tmp_path, documents: dict[str, dict | str]):
    run = tmp_path / "run" / "bench.json"
    run.parent.mkdir()
    shutil.copy(fixture("run.json"), run)
    for mode, doc in documents.items():
        text = doc if isinstance(doc, str) else json.dumps(doc)
        (run.parent / f"sampler_distribution_{mode}.json").write_text(text)
    out = tmp_path / "out"
    return run_script("reports/render", run, "--out", out), out


def test_each_mode_gets_a_chart_and_a_table_with_verdicts(tmp_path):
    result, out = render_with(tmp_path, {"proportional": document("proportional"),
                                         "rank": document("rank")})
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.md").read_text()
    assert "## Replay sampler distribution" in summary
    for mode in ("proportional", "rank"):
        assert (out / f"sampler_cdf_{mode}.png").stat().st_size > 0
        assert f"](sampler_cdf_{mode}.png)" in summary
        assert f"### {mode.capitalize()} priorities" in summary
    assert "| GPU sampler | 0.5 | 0.5 | 0.9 | accepted (right) |" in summary
    assert "| control: wrong alpha | 1e-09 | 1e-09 | 0.9 | rejected (right) |" in summary
    assert "capacity 1000, batch 32, 128000 draws per sampler, alpha 0.6" in summary


def test_a_wrong_sampler_and_a_weak_control_are_called_out(tmp_path):
    result, out = render_with(tmp_path, {"rank": document("rank", sampler_p=1e-4,
                                                          control_p=0.3)})
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.md").read_text()
    assert "| GPU sampler | 0.0001 | 0.0001 | 0.9 | REJECTED (the sampler is wrong) |" in summary
    assert "NOT rejected (a test is too weak)" in summary


def test_without_files_the_section_says_where_they_come_from(tmp_path):
    result, out = render_with(tmp_path, {})
    assert result.returncode == 0, result.stderr
    summary = (out / "summary.md").read_text()
    assert "No `sampler_distribution_*.json` beside the run" in summary
    assert not list(out.glob("sampler_cdf_*.png"))


def test_a_malformed_file_is_named_with_exit_2(tmp_path):
    broken = document("proportional")
    broken["samplers"][1]["cdf"] = broken["samplers"][1]["cdf"][:-1]
    result, _ = render_with(tmp_path, {"proportional": broken})
    assert result.returncode == 2
    assert "sampler_distribution_proportional.json: samplers[1]: cdf has 30 points, the grid 31" \
        in result.stderr
    missing = document("rank")
    del missing["level"]
    result, _ = render_with(tmp_path / "b", {"rank": missing}) if (tmp_path / "b").mkdir() is None \
        else (None, None)
    assert result.returncode == 2 and "missing field 'level'" in result.stderr
    result, _ = render_with(tmp_path / "c", {"rank": "{not json"}) if (tmp_path / "c").mkdir() \
        is None else (None, None)
    assert result.returncode == 2 and "not a readable JSON file" in result.stderr
