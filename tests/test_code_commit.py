"""Every stage's summary and every study report name the code that made them: the checkout's commit, marked
``-dirty`` when the package's tracked files differ from it, and nothing for a copy outside a checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slmsql_hub.runtime import code_commit, environment

REPO = Path(__file__).resolve().parents[1]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def _checkout(tmp_path: Path) -> Path:
    """A git checkout holding a copy of the package, one commit."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "slmsql_hub", root / "slmsql_hub", ignore=shutil.ignore_patterns("__pycache__"))
    _git(tmp_path, "init", "-q", str(root))
    _git(root, "add", "slmsql_hub")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "copy")
    return root


def _commit_of(root: Path) -> str:
    code = "from slmsql_hub.runtime import code_commit; print(code_commit())"
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)}).stdout.strip()  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_commit_is_heads_marked_dirty_when_the_package_differs_and_absent_outside_a_checkout(tmp_path):
    root = _checkout(tmp_path)
    head = _git(root, "rev-parse", "HEAD")
    assert _commit_of(root) == head
    (root / "untracked.txt").write_text("not the package's code\n")
    assert _commit_of(root) == head  # untracked files elsewhere do not make it dirty
    with (root / "slmsql_hub" / "errors.py").open("a") as f:
        f.write("# edited\n")
    assert _commit_of(root) == head + "-dirty"
    copy = tmp_path / "installed"
    shutil.copytree(root / "slmsql_hub", copy / "slmsql_hub")
    assert _commit_of(copy) == "None"


def test_environment_carries_the_commit_only_when_there_is_one():
    commit = code_commit()
    assert environment().get("slmsql_hub_commit") == commit
