"""Two speed changes of issue #39, old path vs new, side by side in one run, each checked to change no number.

- **Attempt #1 beside the band run** (``slmsql quickstart``): the old path trains GRPO on the band, then attempt
  #1, in one process; the new one trains attempt #1 in a spawned process at the same time (both are one-thread
  runs). Timed from a copy of a finished run's world, base, SFT and filter; both adapters must be byte-identical.
- **The study's KL diagnostics over ``jobs`` workers** (``slmsql ablate``): the old path scores every run's
  KL(SFT ‖ GRPO) and entropy in one process; the new one shares the runs among ``jobs`` spawned workers. Timed on
  copies of a finished study's first ``--runs`` runs; every ``divergence.json`` must be identical.

Wall seconds (the point is to use both cores), so run it on quiet cores. Nothing is written into the inputs.

    .venv/bin/python benchmarks/bench_parallel.py --run-dir outputs/quickstart --study outputs/ablations
    .venv/bin/python benchmarks/bench_parallel.py --run-dir RUN --skip-diagnostics --json parallel.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def bench_beside(run_dir: Path, scratch: Path) -> dict:
    """Band run + attempt #1, in turn (old) and beside each other (new), each from a fresh copy of ``run_dir``."""
    from slmsql_hub.commands.quickstart import run_quickstart
    from slmsql_hub.run.layout import RunLayout

    seconds, adapters = {}, {}
    for path, beside in (("old", False), ("new", True)):
        out = scratch / f"quickstart_{path}"
        out.mkdir()
        for name in ("world", "base", "sft", "filter"):
            shutil.copytree(run_dir / name, out / name)
        started = time.perf_counter()
        run_quickstart(out, until="grpo_attempt1", attempt1="always", beside=beside)
        seconds[path] = time.perf_counter() - started
        layout = RunLayout(out)
        adapters[path] = [(folder.path / "adapter_model.safetensors").read_bytes()
                          for folder in (layout.grpo, layout.grpo_attempt1)]  # fmt: skip
    return {"old_s": round(seconds["old"], 1), "new_s": round(seconds["new"], 1),
            "speedup": round(seconds["old"] / seconds["new"], 2), "identical": adapters["old"] == adapters["new"]}  # fmt: skip


def bench_diagnostics(study: Path, run_dir: Path, config_path: Path, runs: int, jobs: int, scratch: Path) -> dict:
    """The first ``runs`` runs' KL diagnostics of ``study`` (which read ``run_dir``), serial (old) and over
    ``jobs`` workers (new)."""
    from slmsql_hub.study.config import load_ablation_config
    from slmsql_hub.study.diagnostics import DIAGNOSTICS_DIR, _divergence_slices, _divergences
    from slmsql_hub.study.evaluate import load_eval_settings

    out = scratch / "study"
    shutil.copytree(study / "sft" / DIAGNOSTICS_DIR, out / "sft" / DIAGNOSTICS_DIR)
    chosen = sorted(p.parent for p in (study / "runs").glob("*/result.json"))[:runs]
    for run in chosen:
        shutil.copytree(run / "grpo", out / "runs" / run.name / "grpo")
    copies = [out / "runs" / run.name for run in chosen]
    names = _divergence_slices([p.stem for p in (out / "sft" / DIAGNOSTICS_DIR).glob("*.jsonl")])
    config = load_ablation_config(config_path, run_dir=str(run_dir), output_dir=str(out))
    settings = load_eval_settings(config, out / "sft")
    seconds, written = {}, {}
    for path, workers in (("old", 1), ("new", jobs)):
        for run in copies:
            (run / "divergence.json").unlink(missing_ok=True)
        config.jobs = workers
        started = time.perf_counter()
        _divergences(config, settings, copies, names, lambda _: None)
        seconds[path] = time.perf_counter() - started
        written[path] = [(run / "divergence.json").read_text() for run in copies]
    return {"runs": len(copies), "jobs": jobs, "old_s": round(seconds["old"], 1), "new_s": round(seconds["new"], 1),
            "speedup": round(seconds["old"] / seconds["new"], 2), "identical": written["old"] == written["new"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=Path("outputs/quickstart"),
                        help="a finished quickstart (world, base, sft, filter), the run the study read")  # fmt: skip
    parser.add_argument("--study", type=Path, default=Path("outputs/ablations"), help="a finished ablation study")
    parser.add_argument("--config", type=Path, default=REPO / "recipes" / "world" / "ablations.yaml",
                        help="the study's recipe (its eval recipe and threads)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=4, help="runs whose diagnostics are timed (default 4)")
    parser.add_argument("--jobs", type=int, default=2, help="the new path's workers (default 2)")
    parser.add_argument("--skip-beside", action="store_true")
    parser.add_argument("--skip-diagnostics", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    needed = [] if args.skip_beside else [args.run_dir / n for n in ("world", "base", "sft", "filter")]
    needed += [] if args.skip_diagnostics else [args.study / "sft" / "diagnostics", args.study / "runs"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        print(f"bench_parallel: missing {', '.join(missing)} (a finished quickstart and study)", file=sys.stderr)
        return 2
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_parallel_") as scratch:
        if not args.skip_beside:
            results["attempt1_beside_band_run"] = bench_beside(args.run_dir, Path(scratch))
        if not args.skip_diagnostics:
            results["diagnostics_over_jobs"] = bench_diagnostics(
                args.study, args.run_dir, args.config, args.runs, args.jobs, Path(scratch)
            )
    print(f"{'change':<28} {'old s':>8} {'new s':>8} {'speedup':>8}  identical")
    for name, row in results.items():
        print(f"{name:<28} {row['old_s']:>8} {row['new_s']:>8} {row['speedup']:>7}x  {row['identical']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(row["identical"] for row in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
