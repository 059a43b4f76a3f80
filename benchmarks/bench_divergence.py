"""The study's KL(SFT ‖ GRPO) diagnostic of one run with each prompt run through the model once per completion
(old) and once per adapter, its KV cache repeated for its completions (new), side by side in one run (issue #39).

Both paths run :func:`slmsql_hub.study.diagnostics.run_divergence` on the same loaded policy (the base with the
SFT adapter) and the study's own SFT samples (``<output_dir>/sft/diagnostics/``); the old path is the new one
with ``divergence_sums(..., share_prompt=False)``. It prints each path's wall and CPU seconds and their ratio,
the largest relative difference of any slice's sums between the paths and against the run's recorded
``divergence.json``. A split forward sums in another order, so the two agree to float rounding, not bit for
bit: exit 1 when a sum differs by more than ``--rtol`` (or the token counts at all).

Usage (a copy of a study's outputs; nothing is written under it)::

    python benchmarks/bench_divergence.py --config recipes/world/transfer.yaml \\
        --run-dir outputs/transfer/worlds/plant70 --output-dir outputs/transfer/plant70 --run plant70-seed0
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from slmsql_hub.run.files import read_jsonl
from slmsql_hub.runtime import set_num_threads
from slmsql_hub.study import diagnostics
from slmsql_hub.study.config import load_ablation_config
from slmsql_hub.study.evaluate import load_eval_settings


def timed(share_prompt: bool, model: Any, samples: dict, run: Path, out: Path) -> tuple[dict, float, float]:
    """``run_divergence`` of ``run`` into ``out`` (a fresh folder linking the run's adapter): its slices' sums,
    wall and CPU seconds."""
    out.mkdir(parents=True)
    (out / "grpo").symlink_to(run.resolve() / "grpo")
    real = diagnostics.divergence_sums
    diagnostics.divergence_sums = functools.partial(real, share_prompt=share_prompt)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        result = diagnostics.run_divergence(model, samples, out, "bench")
    finally:
        diagnostics.divergence_sums = real
    return result["slices"], time.perf_counter() - wall, time.process_time() - cpu


def largest_difference(a: dict, b: dict) -> float:
    """The largest relative difference of any sum of any slice (``inf`` when the token counts differ)."""
    worst = 0.0
    for name, sums in a.items():
        if sums["tokens"] != b[name]["tokens"]:
            return float("inf")
        for key in ("kl", "entropy_a", "entropy_b"):
            worst = max(worst, abs(sums[key] - b[name][key]) / max(abs(b[name][key]), 1e-12))
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="recipes/world/transfer.yaml")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--output-dir", required=True, help="the study's output (sft/diagnostics/, runs/), read only")
    parser.add_argument("--run", required=True, help="a run folder under runs/, e.g. plant70-seed0")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    config = load_ablation_config(args.config, run_dir=args.run_dir, output_dir=args.output_dir)
    study, work = Path(config.output_dir), Path(tempfile.mkdtemp(prefix="bench-kl-"))
    settings = load_eval_settings(config, work)
    set_num_threads(settings.num_threads)
    kl_dir = study / "sft" / diagnostics.DIAGNOSTICS_DIR
    samples = {path.stem: read_jsonl(path) for path in sorted(kl_dir.glob("*.jsonl"))}
    if not samples:
        raise SystemExit(f"{kl_dir}: no SFT samples (the study ran with diagnostic_samples: 0?)")
    model = diagnostics._sft_policy(config, settings)
    run = study / "runs" / args.run
    out: dict[str, Any] = {"run": args.run, "completions": sum(len(r["completions"]) for s in samples.values()
                                                                for r in s)}  # fmt: skip
    sums = {}
    for path, share in (("old", False), ("new", True)):
        sums[path], wall, cpu = timed(share, model, samples, run, work / path)
        out[path] = {"wall_s": wall, "cpu_s": cpu}
        print(f"{path}: wall {wall:.1f} s, CPU {cpu:.1f} s", flush=True)
    out["ratio_wall_s"] = out["old"]["wall_s"] / out["new"]["wall_s"]
    out["ratio_cpu_s"] = out["old"]["cpu_s"] / out["new"]["cpu_s"]
    out["max_rel_diff_old_new"] = largest_difference(sums["new"], sums["old"])
    print(f"old / new: wall {out['ratio_wall_s']:.2f}, CPU {out['ratio_cpu_s']:.2f}; largest relative "
          f"difference of a sum {out['max_rel_diff_old_new']:.1e}")  # fmt: skip
    recorded = run / "divergence.json"
    if recorded.is_file():
        slices = json.loads(recorded.read_text(encoding="utf-8"))["slices"]
        out["max_rel_diff_recorded"] = {path: largest_difference(sums[path], slices) for path in ("old", "new")}
        print("against the run's divergence.json: "
              + ", ".join(f"{k} {v:.1e}" for k, v in out["max_rel_diff_recorded"].items()))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    worst = max([out["max_rel_diff_old_new"], *out.get("max_rel_diff_recorded", {}).values()])
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
