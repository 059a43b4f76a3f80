"""benchmarks/bench_parallel.py (issue #39): its inputs are checked before anything runs. What it times is
tested where it lives: the quickstart's ``beside`` switch in tests/test_quickstart.py, the diagnostics over
workers in tests/test_ablate_diagnostics.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_parallel", REPO / "benchmarks" / "bench_parallel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_inputs_are_one_line_and_exit_2(tmp_path, capsys):
    assert _bench().main(["--run-dir", str(tmp_path / "run"), "--study", str(tmp_path / "study")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "run" / "world") in err and "study" in err

