"""Shared helpers: fixture paths, running the entry scripts, building Google Benchmark
rows in the exact shape libbenchmark 1.7.1 writes (see fixtures/run.json)."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPORTS = Path(__file__).resolve().parent.parent
REPO = REPORTS.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

sys.path.insert(0, str(REPORTS))


def fixture(name: str) -> Path:
    """The path of a fixture file."""
    return FIXTURES / name


def run_script(script: str, *args: object) -> subprocess.CompletedProcess:
    """Run ``script`` (relative to the repository root) with ``args``; capture output."""
    return subprocess.run([sys.executable, str(REPO / script), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def gb_row(run_name: str, real_time: float, time_unit: str = "ms",
           counters: dict | None = None, repetition_index: int = 0,
           repetitions: int = 1) -> dict:
    """One iteration row, keys in Google Benchmark's order, counters appended."""
    return {"name": run_name, "family_index": 0, "per_family_instance_index": 0,
            "run_name": run_name, "run_type": "iteration", "repetitions": repetitions,
            "repetition_index": repetition_index, "threads": 1, "iterations": 10,
            "real_time": real_time, "cpu_time": real_time / 100, "time_unit": time_unit,
            **(counters or {})}


def gb_document(rows: list[dict], **context: str) -> dict:
    """A whole file around ``rows``, with the context of fixtures/run.json."""
    base = json.loads(fixture("run.json").read_text())["context"]
    return {"context": {**base, **context}, "benchmarks": rows}


@pytest.fixture
def write_json(tmp_path):
    """Write a document (or raw text) into ``tmp_path``; return its path."""
    def write(document, name: str = "run.json") -> Path:
        path = tmp_path / name
        path.write_text(document if isinstance(document, str) else json.dumps(document))
        return path
    return write


@pytest.fixture
def run_document():
    """A deep copy of fixtures/run.json, to be broken by a test."""
    return copy.deepcopy(json.loads(fixture("run.json").read_text()))
