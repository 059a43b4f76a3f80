"""Quality check on the embedded world: greedy execution accuracy of an adapter and of its base alone.

Runs ``slmsql eval``'s own pieces (:mod:`slmsql_hub.evaluation`), so its numbers are the eval stage's: loads the
split with ``load_benchmark``, builds every prompt as training did (``build_prompts`` with the adapter's prompt
settings from its ``run_summary.json``), loads the base ONCE with the adapter, generates greedily twice (adapter
on, then adapters disabled) and judges both in one sandbox batch with the world's comparison (``bird``), then
scores each with ``policy_scores``. It prints EX overall, per database (the
held-out database of ``<world>/world.json`` flagged), per difficulty, the verdict counts, and completion
lengths; ``--json OUT`` writes every number and ``--predictions OUT`` every completion.

EX counts scorable examples only: a gold that does not run is reported, never scored as a miss.

Usage::

    python benchmarks/measure_world_ex.py --world outputs/world --base outputs/world/base \\
        --adapter outputs/world/sft/stage2 --split dev
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from slmsql_hub.data.benchmarks import get_benchmark, load_benchmark
from slmsql_hub.errors import UsageError
from slmsql_hub.evaluation import (
    build_prompts,
    generate_and_judge,
    policy_scores,
    prediction_records,
    resolve_prompt_config,
)
from slmsql_hub.generation import GenerationConfig, load_policy
from slmsql_hub.sql import Judge, Sandbox

logger = logging.getLogger("measure_world_ex")

ARMS = {"adapter": "default", "base": None}
"""Arm name -> the adapter ``use_adapter`` activates (``None``: the base alone)."""
WORLD = get_benchmark("world")  # its compare mode and breakdown, as slmsql eval reads them


def load_split(world: Path, split: str, limit: int | None, seed: int) -> tuple[list[dict], str | None]:
    """The split's rows (a seeded subset of ``limit`` when given), as ``slmsql eval`` loads them, and the held-out
    database id of ``world.json``."""
    manifest = world / "world.json"
    if not manifest.is_file():
        raise UsageError(f"{world} is not a built world (no world.json); build it with `slmsql world build`")
    rows = [dict(row) for row in load_benchmark("world", world, split, limit=limit, seed=seed)]
    return rows, json.loads(manifest.read_text(encoding="utf-8")).get("held_out_db")


def _pct(part: dict) -> str:
    if part["ex"] is None:
        return f"   n/a  (0/{part['n']} scorable)"
    unscorable = part["n"] - part["n_scorable"]
    extra = f", {unscorable} unscorable" if unscorable else ""
    return f"{100 * part['ex']:6.1f}% ({part['correct']}/{part['n_scorable']}{extra})"


def print_report(name: str, scores: dict, n: int) -> None:
    overall = {"n": n, "n_scorable": scores["n_scorable"], "correct": scores["correct"], "ex": scores["ex"]}
    held = scores["held_out_db"]
    print(f"\n== {name}")
    print(f"EX overall            : {_pct(overall)}")
    print(f"EX seen databases     : {_pct(scores['seen_dbs'])}")
    print(f"EX held-out ({held['db_id']}) : {_pct(held)}")
    for db, part in sorted(scores["by_db"].items()):
        flag = "  <- held out" if db == held["db_id"] else ""
        print(f"   {db:24s} {_pct(part)}{flag}")
    for level, part in scores["by_difficulty"].items():
        print(f"   [{level:6s}]                {_pct(part)}")
    print("verdicts: " + ", ".join(f"{k}={v}" for k, v in scores["verdicts"].items()))
    print(
        f"completions: {scores['mean_completion_tokens']:.1f} tokens on average, "
        f"{100 * scores['finished_share']:.0f}% ended their turn"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--world", type=Path, required=True, help="a built world (slmsql world build --out)")
    add("--base", type=Path, required=True, help="the base model folder (model + tokenizer)")
    add("--adapter", type=Path, required=True, help="the LoRA adapter folder (e.g. sft/stage2)")
    add("--split", default="dev", help="dataset split (default dev)")
    add("--limit", type=int, help="score a seeded subset of N questions")
    add("--seed", type=int, default=0, help="seed of the --limit subset")
    add("--batch-size", type=int, default=16, help="prompts per generate call")
    add("--max-new-tokens", type=int, default=160)
    add("--sample-rows", type=int, help="schema sample rows (default: the adapter's run_summary.json, else 3)")
    add("--max-value-chars", type=int, help="sample value length (default: the adapter's run_summary.json, else 40)")
    add("--skip-base", action="store_true", help="do not score the base without adapter")
    add("--threads", type=int, help="torch intra-op threads")
    add("--json", type=Path, help="write every number here")
    add("--predictions", type=Path, help="write every completion and verdict here (JSONL)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except UsageError as err:
        print(f"measure_world_ex: error: {err}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rows, held_out = load_split(args.world, args.split, args.limit, args.seed)
    prompt_config = resolve_prompt_config(args.adapter, args.sample_rows, args.max_value_chars)
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    model, tokenizer = load_policy(args.base, args.adapter, device="cpu", dtype="float32")
    print(f"{len(rows)} questions of {args.world}/{args.split}; held-out database: {held_out}")
    print(
        f"prompts: {prompt_config.sample_rows} sample rows per table, values cut at "
        f"{prompt_config.max_value_chars} chars; greedy, {config.max_new_tokens} new tokens max"
    )
    arms = {arm: name for arm, name in ARMS.items() if not (args.skip_base and name is None)}
    start = time.perf_counter()
    with Sandbox() as sandbox:
        prompts = build_prompts(rows, prompt_config, sandbox)
        # slmsql eval's path: each adapter answers in turn, then every answer is judged in one batch.
        judge = Judge(sandbox=sandbox, mode=WORLD.compare_mode)
        outputs = generate_and_judge(model, tokenizer, rows, {name: prompts for name in arms.values()}, judge, config)
    seconds = time.perf_counter() - start
    print(f"\ngeneration + judging: {seconds:.1f} s")
    report: dict = {"world": str(args.world), "split": args.split, "n": len(rows), "seconds": seconds, "models": {}}
    by_arm = {}
    for arm, name in arms.items():
        scores = policy_scores(
            rows, outputs[name], breakdown_by=WORLD.breakdown, held_out_db=held_out, mode=WORLD.compare_mode.value
        )
        label = f"{arm}: {args.base}" + (f" + {args.adapter}" if name else "")
        print_report(label, scores, len(rows))
        report["models"][arm] = {"name": label, **scores}
        by_arm[arm] = outputs[name]
    unscorable = sum(scores["verdicts"].get("unscorable", 0) for scores in report["models"].values())
    if unscorable:
        print(
            f"\nwarning: {unscorable} judgements were unscorable (their gold did not run); see --predictions"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.predictions:
        records = prediction_records(rows, by_arm)
        args.predictions.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
