"""ci/check-layering on small trees: it passes a tree that obeys lib -> kernels -> CUDA and
fails (naming the file and line) a tree whose kernels/ or audit/ includes from above."""

import shutil
import subprocess
from pathlib import Path

from conftest import REPO


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "ci").mkdir()
    shutil.copy(REPO / "ci" / "check-layering", tmp_path / "ci" / "check-layering")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / "ci" / "check-layering")], capture_output=True,
                          text=True, timeout=60)


def test_a_tree_that_obeys_the_rule_passes(tmp_path):
    root = _tree(tmp_path, {
        "kernels/nn/op.cu": '#include "kernels/core/error.h"\n',
        "lib/nn/op.cpp": '#include "kernels/nn/op.h"\n#include "lib/core/stream.h"\n',
        "audit/tracer.cpp": '#include "audit/tracer.h"\n'})
    result = _run(root)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_kernel_including_lib_fails_naming_the_line(tmp_path):
    root = _tree(tmp_path, {
        "kernels/nn/op.cu": '#include "kernels/core/error.h"\n#include "lib/core/stream.h"\n',
        "audit/tracer.cpp": "\n"})
    result = _run(root)
    assert result.returncode == 1
    assert "kernels/nn/op.cu:2:" in result.stdout


def test_the_audit_including_lib_fails(tmp_path):
    root = _tree(tmp_path, {"kernels/x.cuh": "\n",
                            "audit/tracer.cpp": '#  include <lib/core/error.h>\n'})
    result = _run(root)
    assert result.returncode == 1
    assert "audit/tracer.cpp:1:" in result.stdout


def test_the_repository_obeys_the_rule():
    result = _run(REPO)
    assert result.returncode == 0, result.stdout
