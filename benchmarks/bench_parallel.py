"""Two speed changes of issue #39, old path vs new, side by side in one run, each checked to change no number.

- **Attempt #1 beside the band run** (``slmsql quickstart``): the old path trains GRPO on the band, then attempt
  #1, in one process; the new one trains attempt #1 in a spawned process at the same time (both are one-thread
  runs). Timed from a copy of a finished run's world, base, SFT and filter; both adapters must be byte-identical.
- **The study's KL diagnostics over ``jobs`` workers** (``slmsql ablate``): the old path scores every run's
  KL(SFT ‖ GRPO) and entropy in one process; the new one shares the runs among ``jobs`` spawned workers. Timed on
  copies of a finished study's first ``--runs`` runs; every ``divergence.json`` must be identical.
- **The sampled diagnostics beside the grid's last runs** (``slmsql ablate``, ``jobs > 1``): the old path runs
  the grid, then SFT's diagnostic samples and the runs' KL; the new one queues them in the grid's pool behind
  the runs, so a worker the last runs leave idle does them. Timed as ``slmsql ablate`` of ``--tail-variants``
  (seed 0, ``--tail-steps`` GRPO steps) on copies of a finished study's band, pool and SFT answers; every run's
  ``result.json`` numbers, ``divergence.json`` and SFT's samples must be identical.

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


def bench_tail(study: Path, run_dir: Path, config_path: Path, variants: list[str], steps: int, jobs: int,
               scratch: Path) -> dict:
    """``slmsql ablate`` of ``variants`` (seed 0, ``steps`` steps, ``jobs`` workers) with the diagnostics after the
    grid (old) and beside it (new), each from a copy of ``study``'s band, pool and SFT answers and pass@k."""
    from slmsql_hub.study import grid, run_study

    real = grid.run_grid
    seconds, written = {}, {}
    for path in ("old", "new"):
        out = scratch / f"tail_{path}"
        shutil.copytree(study, out, ignore=shutil.ignore_patterns("runs", "diagnostics", "support", "support.json",
                                                                   "report.*", "plots", "shards", "slurm"))  # fmt: skip
        if path == "old":
            grid.run_grid = lambda *a, **kw: real(*a, **{**kw, "beside": None})
        started = time.perf_counter()
        try:
            run_study(config_path, variants=variants, run_dir=str(run_dir), output_dir=str(out), seeds=[0],
                      max_steps=steps, jobs=jobs)  # fmt: skip
        finally:
            grid.run_grid = real
        seconds[path] = time.perf_counter() - started
        files = sorted(p for p in out.rglob("*") if p.name == "divergence.json" or p.parent.name in ("diagnostics", "support"))
        written[path] = {str(p.relative_to(out)): p.read_bytes() for p in files}
        written[path].update({str(p.relative_to(out)): _numbers(p) for p in out.glob("runs/*/result.json")})
        written[path].update({str(p.relative_to(out)): p.read_bytes() for p in out.glob("runs/*/grpo/*.safetensors")})
    differ = sorted(k for k in written["old"].keys() | written["new"].keys() if written["old"].get(k) != written["new"].get(k))
    if differ:
        print(f"diagnostics beside the grid: {len(differ)} files differ: {', '.join(differ)}", file=sys.stderr)
    return {"runs": len(variants), "jobs": jobs, "old_s": round(seconds["old"], 1), "new_s": round(seconds["new"], 1),
            "speedup": round(seconds["old"] / seconds["new"], 2),
            "identical": len(written["old"]) > 2 * len(variants) and not differ}  # fmt: skip


def _numbers(result: Path) -> str:
    """A run's verdicts and measurements in ``result.json`` (its paired slices, pass@k and adapter update; not its
    times, device or step-time telemetry)."""
    entry = json.loads(result.read_text())
    return json.dumps({k: entry.get(k) for k in ("slices", "passk", "passk_keys", "adapter_update", "steps")},
                      sort_keys=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=Path("outputs/quickstart"),
                        help="a finished quickstart (world, base, sft, filter), the run the study read")  # fmt: skip
    parser.add_argument("--study", type=Path, default=Path("outputs/ablations"), help="a finished ablation study")
    parser.add_argument("--config", type=Path, default=REPO / "recipes" / "world" / "ablations.yaml",
                        help="the study's recipe (its eval recipe and threads)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=4, help="runs whose diagnostics are timed (default 4)")
    parser.add_argument("--jobs", type=int, default=2, help="the new path's workers (default 2)")
    parser.add_argument("--tail-variants", nargs="*", default=["frozen", "high_lr", "kl"],
                        help="the grid timed with its diagnostics after and beside it (seed 0)")  # fmt: skip
    parser.add_argument("--tail-steps", type=int, default=30, help="GRPO steps of each of those runs")
    parser.add_argument("--skip-beside", action="store_true")
    parser.add_argument("--skip-diagnostics", action="store_true")
    parser.add_argument("--skip-tail", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    needed = [] if args.skip_beside else [args.run_dir / n for n in ("world", "base", "sft", "filter")]
    needed += [] if args.skip_diagnostics else [args.study / "sft" / "diagnostics", args.study / "runs"]
    needed += [] if args.skip_tail else [args.study / "band" / "band.json", args.study / "sft"]
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
        if not args.skip_tail:
            results["diagnostics_beside_grid"] = bench_tail(
                args.study, args.run_dir, args.config, args.tail_variants, args.tail_steps, args.jobs, Path(scratch)
            )
    print(f"{'change':<28} {'old s':>8} {'new s':>8} {'speedup':>8}  identical")
    for name, row in results.items():
        print(f"{name:<28} {row['old_s']:>8} {row['new_s']:>8} {row['speedup']:>7}x  {row['identical']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(row["identical"] for row in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
