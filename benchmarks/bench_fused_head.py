"""TRL's fused LM head scoring every position (old) or only the labelled ones (new,
``slmsql_hub.training.common.labelled_positions_only``), side by side in one run: SFT stage 1 and GRPO from a
quickstart run folder (issue #39).

On CPU, TRL 1.16 projects every prompt and padding position through the LM head and then zeroes them; the new
path projects only the answer's positions, as TRL does where Triton runs. Each path trains the quickstart's own
recipes (``sft_stage1.yaml`` from the run's base, ``grpo_band.yaml`` from its SFT adapter and filter band) for the
same steps into a scratch folder. The script prints each run's training seconds and their ratio, and checks that
both paths wrote the same adapter file, byte for byte, and the same final loss (SFT) or adapter checksum (GRPO). Exit 1 on any difference.

Usage (reads the run folder; writes only under ``--out``, a new temporary folder by default)::

    python benchmarks/bench_fused_head.py --run-dir outputs/quickstart
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from slmsql_hub.recipes import parse_recipe
from slmsql_hub.run.layout import RunLayout, StageFolder
from slmsql_hub.training import common, configs, grpo
from slmsql_hub.training.sft import train_sft


def stage_args(stage: str, run: RunLayout, out: Path, steps: int, threads: int) -> tuple:
    """One stage's typed configuration as the quickstart runs it, for ``steps`` steps into ``out``."""
    recipes = Path(__file__).resolve().parents[1] / "recipes" / "world"
    values = {"model_name_or_path": str(run.base.path), "output_dir": str(out), "max_steps": steps,
              "num_threads": threads}  # fmt: skip
    if stage == "sft":
        values["dataset_paths"] = [str(run.world_split("foundation"))]
        return parse_recipe(configs.SFT_ARGUMENTS, recipes / "sft_stage1.yaml", values=values)
    values |= {"adapter_path": str(run.sft_stage2.path), "dataset_paths": [str(run.band)], "save_strategy": "no"}
    return parse_recipe(configs.GRPO_ARGUMENTS, recipes / "grpo_band.yaml", values=values)


def train(stage: str, args: tuple, path: str) -> tuple[float, float]:
    """Train ``stage`` with ``args`` on ``path`` (old: every position scored); return (wall, CPU) seconds."""
    context = common.labelled_positions_only if path == "new" else contextlib.nullcontext
    saved = common.labelled_positions_only, grpo.labelled_positions_only
    common.labelled_positions_only = grpo.labelled_positions_only = context
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        (train_sft if stage == "sft" else grpo.train_grpo)(*args)
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        common.labelled_positions_only, grpo.labelled_positions_only = saved


def same_adapter(left: Path, right: Path) -> bool:
    """The two adapter files byte for byte (as ``bench_parallel.py`` compares them)."""
    name = "adapter_model.safetensors"
    return (left / name).read_bytes() == (right / name).read_bytes()


def summary(folder: Path) -> dict[str, Any]:
    return json.loads(StageFolder(folder).summary.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="a quickstart run folder (base, world, sft, filter)")
    parser.add_argument("--out", type=Path, help="scratch folder for the four runs (default: a new temporary one)")
    parser.add_argument("--sft-steps", type=int, default=375, help="SFT stage 1 steps (the recipe's 375)")
    parser.add_argument("--grpo-steps", type=int, default=30, help="GRPO steps (the recipe's 30)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the recipes': 2 for SFT; GRPO's 1)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_fused_head-"))
    steps = {"sft": args.sft_steps, "grpo": args.grpo_steps}
    threads = {"sft": args.threads, "grpo": 1}
    run, rows, identical = RunLayout(args.run_dir), [], True
    for stage in ("sft", "grpo"):
        seconds = {}
        for path in ("old", "new"):
            folder = out / f"{stage}-{path}"
            wall, cpu = train(stage, stage_args(stage, run, folder, steps[stage], threads[stage]), path)
            seconds[path] = (summary(folder)["train_seconds"], wall, cpu)
        same = same_adapter(out / f"{stage}-old", out / f"{stage}-new")
        old, new = summary(out / f"{stage}-old"), summary(out / f"{stage}-new")
        same &= all(old.get(f) == new.get(f) for f in ("final_loss", "adapter_checksum"))  # SFT's; GRPO's
        identical &= same
        (old_train, old_wall, old_cpu), (new_train, new_wall, new_cpu) = seconds["old"], seconds["new"]
        rows.append(
            f"| {stage} ({steps[stage]} steps, {threads[stage]} thread(s)) | {old_train:.1f} | {new_train:.1f} | "
            f"{old_train / new_train:.2f} | {old_wall:.1f} / {new_wall:.1f} | {old_cpu:.1f} / {new_cpu:.1f} | {same} |"
        )
    print("| stage | old train s | new train s | old / new | wall s old / new | CPU s old / new | same adapter |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    print(f"scratch runs in {out}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
