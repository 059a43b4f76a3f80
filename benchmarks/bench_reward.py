"""Reward time as a share of GRPO step time, measured in a real GRPO run of the world recipe.

Runs ``slmsql train grpo`` on a recipe (default: the world's attempt #1) for a few steps with one log line
per step, then reads ``telemetry.jsonl``: every reward function is timed by the run itself
(``timing/reward/<name>_s``, see :class:`slmsql_hub.training.telemetry.TimedReward`) next to TRL's
``step_time`` (generation + rewards + loss + backward of one optimizer step). The reward share is
``sum(reward seconds) / sum(step seconds)``; the target is ≤ 5%: executing SQL in the sandbox must not be
what GRPO waits for.

    python benchmarks/bench_reward.py                                  # world attempt #1, 8 steps
    python benchmarks/bench_reward.py --config recipes/world/grpo_band.yaml --steps 12
    python benchmarks/bench_reward.py --config recipes/world/grpo_attempt1_smoke.yaml --steps 3

Needs the world's base model and stage-2 adapter (and the filter's band for grpo_band.yaml). Exit code 0
when the share is within ``--max_share``, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--config", default=str(REPO / "recipes" / "world" / "grpo_attempt1.yaml"))
    add("--steps", type=int, default=8, help="optimizer steps to time")
    add("--max_share", type=float, default=0.05, help="largest acceptable reward share")
    add("--output_dir", default=None, help="where the run writes (default: a temporary folder)")
    add("--json", default=None, help="also write the measurements to this JSON file")
    return parser.parse_known_args(argv)


def step_rows(telemetry: str | Path) -> list[dict]:
    """Each logged train step of a GRPO run's ``telemetry.jsonl``: ``{"step", "step_s", "rewards_s": {name: s}}``."""
    from slmsql_hub.training.telemetry import read_telemetry

    rows = []
    for record in read_telemetry(telemetry):
        timings = {k.split("/")[-1][:-2]: v for k, v in record.items() if k.startswith("timing/reward/")}
        if record.get("kind", "train") != "train" or record.get("step_time") is None:
            continue
        rows.append({"step": record["step"], "step_s": record["step_time"], "rewards_s": timings})
    return rows


def reward_share(rows: list[dict]) -> dict:
    """Reward and step seconds of :func:`step_rows`, summed, per reward, and the reward's ``share`` of the steps.

    >>> reward_share([{"step": 1, "step_s": 2.0, "rewards_s": {"execution": 0.1, "format": 0.1}}])["share"]
    0.1
    """
    reward_total = sum(sum(r["rewards_s"].values()) for r in rows)
    step_total = sum(r["step_s"] for r in rows)
    by_reward: dict[str, float] = {}
    for row in rows:
        for name, seconds in row["rewards_s"].items():
            by_reward[name] = by_reward.get(name, 0.0) + seconds
    return {
        "reward_seconds": reward_total,
        "step_seconds": step_total,
        "share": reward_total / step_total if step_total else None,
        "by_reward_seconds": by_reward,
    }


def measure(config: str, steps: int, output_dir: str, overrides: list[str]) -> dict:
    """Run GRPO for ``steps`` steps and return the per-step and total reward and step times."""
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import GRPO_ARGUMENTS
    from slmsql_hub.training.grpo import train_grpo

    forced = {"max_steps": steps, "logging_steps": 1, "save_strategy": "no", "output_dir": output_dir}
    summary = train_grpo(*parse_recipe(GRPO_ARGUMENTS, config, overrides, values=forced))
    rows = step_rows(Path(output_dir) / "telemetry.jsonl")
    return {
        "config": config,
        "steps": rows,
        **reward_share(rows),
        "generation": summary.get("generation"),
        "wall_seconds": summary.get("wall_seconds"),
    }


def main(argv: list[str] | None = None) -> int:
    args, overrides = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with tempfile.TemporaryDirectory(prefix="bench_reward_") as scratch:
        result = measure(args.config, args.steps, args.output_dir or scratch, overrides)
    print(f"recipe: {args.config}")
    print(f"{'step':>4}  {'step s':>8}  {'reward s':>9}  {'share':>6}")
    for row in result["steps"]:
        reward_s = sum(row["rewards_s"].values())
        print(f"{row['step']:>4}  {row['step_s']:>8.3f}  {reward_s:>9.4f}  {reward_s / row['step_s']:>6.1%}")
    print(
        "per reward: "
        + ", ".join(f"{name} {seconds:.3f}s" for name, seconds in sorted(result["by_reward_seconds"].items()))
    )
    share = result["share"]
    verdict = "OK" if share is not None and share <= args.max_share else "OVER"
    shown = "n/a" if share is None else f"{share:.2%}"
    print(
        f"reward time {result['reward_seconds']:.3f}s of {result['step_seconds']:.2f}s of GRPO steps: "
        f"share {shown} (target <= {args.max_share:.0%}) {verdict}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
