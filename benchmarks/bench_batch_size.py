"""The quickstart's evaluation and pass-rate filter at the world recipes' old batch size (16) and new one (64),
side by side in one run (issue #39).

The batch is a speed setting only: a greedy row's tokens do not depend on the rows beside it, and the filter's
keyed sampler draws a question's samples from its own seeds. Each path runs the library call the quickstart runs
(``run_eval`` with ``eval.yaml``, ``run_filter`` with ``filter.yaml``) on a run folder's own policy into a
scratch folder; only ``batch_size`` differs. The script prints each path's wall and CPU seconds and their ratio
and checks that both paths wrote the same predictions files byte for byte (eval) and the same samples and
verdicts for every question (filter). Exit 1 on any difference.

Usage (reads the run folder; writes only under ``--out``, a new temporary folder by default)::

    python benchmarks/bench_batch_size.py --run-dir outputs/quickstart
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from slmsql_hub.evaluation import load_eval_config, run_eval
from slmsql_hub.filtering import load_filter_config, run_filter
from slmsql_hub.run.layout import RunLayout

RECIPES = Path(__file__).resolve().parents[1] / "recipes" / "world"


def run_stage(stage: str, run: RunLayout, out: Path, batch_size: int, threads: int) -> tuple[float, float]:
    """The quickstart's ``stage`` (eval or filter) at ``batch_size`` into ``out``; (wall, CPU) seconds."""
    values = {"model_name_or_path": str(run.base.path), "world_root": str(run.world), "output_dir": str(out),
              "num_threads": threads, "batch_size": batch_size}  # fmt: skip
    if stage == "eval":
        values |= {"sft_adapter": str(run.sft_stage2.path), "grpo_adapter": str(run.grpo.path)}
        call, config = run_eval, load_eval_config(RECIPES / "eval.yaml", values=values)
    else:
        values["adapter_path"] = str(run.sft_stage2.path)
        call, config = run_filter, load_filter_config(RECIPES / "filter.yaml", values=values)
    wall, cpu = time.perf_counter(), time.process_time()
    call(config, progress=False)
    return time.perf_counter() - wall, time.process_time() - cpu


def same_outputs(stage: str, left: Path, right: Path) -> bool:
    """Eval: every predictions file byte for byte. Filter: every question's samples and verdicts."""
    if stage == "eval":
        names = sorted(p.name for p in (left / "predictions").glob("*.jsonl"))
        return bool(names) and all(
            (left / "predictions" / n).read_bytes() == (right / "predictions" / n).read_bytes() for n in names
        )

    def rows(folder: Path) -> dict:
        with (folder / "results.jsonl").open(encoding="utf-8") as handle:
            return {r["question_id"]: (r["samples"], r["sample_verdicts"]) for r in map(json.loads, handle)}

    return rows(left) == rows(right)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="a finished quickstart run folder")
    parser.add_argument("--out", type=Path, help="scratch folder for the four runs (default: a new temporary one)")
    parser.add_argument("--old", type=int, default=16, help="the old batch size (16)")
    parser.add_argument("--new", type=int, default=64, help="the new batch size (64)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the quickstart's 2)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_batch_size-"))
    run, rows, identical = RunLayout(args.run_dir), [], True
    for stage in ("eval", "filter"):
        seconds = {}
        for path, size in (("old", args.old), ("new", args.new)):
            seconds[path] = run_stage(stage, run, out / f"{stage}-{path}", size, args.threads)
        same = same_outputs(stage, out / f"{stage}-old", out / f"{stage}-new")
        identical &= same
        (old_wall, old_cpu), (new_wall, new_cpu) = seconds["old"], seconds["new"]
        rows.append(
            f"| {stage} ({args.threads} thread(s)) | {old_wall:.1f} | {new_wall:.1f} | {old_wall / new_wall:.2f} | "
            f"{old_cpu:.1f} / {new_cpu:.1f} | {same} |"
        )
    print(f"| stage | batch {args.old} s | batch {args.new} s | old / new | CPU s old / new | same outputs |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    print(f"scratch runs in {out}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
