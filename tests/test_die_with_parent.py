"""A study worker ends with the ``slmsql ablate`` process that started it (``runtime.die_with_parent``): a parent
killed with SIGKILL released its output lock, so an orphan still training would be a second writer beside the
next run. The control shows the orphan the initializer prevents."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")

PARENT = textwrap.dedent("""
    import multiprocessing, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from slmsql_hub.runtime import die_with_parent

    def work(path):
        open(path, "w").write(str(os.getpid()))
        time.sleep(120)

    if __name__ == "__main__":
        guarded, path = sys.argv[1] == "guarded", sys.argv[2]
        init, args = (die_with_parent, (os.getpid(),)) if guarded else (None, ())
        with ProcessPoolExecutor(1, multiprocessing.get_context("spawn"), init, args) as pool:
            pool.submit(work, path).result()
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead
        return stat.read().split(")")[-1].split()[0] != "Z"


def _orphan_after_parent_killed(tmp_path: Path, mode: str) -> int:
    """Start the parent, wait for its worker's pid, SIGKILL the parent; the worker's pid."""
    script, pid_file = tmp_path / "parent.py", tmp_path / f"{mode}.pid"
    script.write_text(PARENT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    parent = subprocess.Popen([sys.executable, str(script), mode, str(pid_file)], env=env)
    deadline = time.monotonic() + 120
    while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    worker = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    return worker


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _alive(pid)


def test_a_worker_ends_with_its_killed_parent_and_without_the_guard_it_would_not(tmp_path):
    worker = _orphan_after_parent_killed(tmp_path, "guarded")
    assert _gone_within(worker, 20), "the guarded worker outlived its killed parent"
    orphan = _orphan_after_parent_killed(tmp_path, "bare")
    try:
        assert not _gone_within(orphan, 3), "control: an unguarded worker should have outlived its parent"
    finally:
        if _alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_a_worker_whose_parent_is_already_gone_exits_at_once():
    code = "from slmsql_hub.runtime import die_with_parent; die_with_parent(1); print('lived')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    assert done.returncode == 1 and "lived" not in done.stdout
