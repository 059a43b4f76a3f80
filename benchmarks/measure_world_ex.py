"""Quality check on the embedded world: greedy execution accuracy of an adapter and of its base alone.

Loads ``<world>/datasets/<split>`` (``datasets.load_from_disk``), builds every prompt exactly as training
does (:class:`slmsql_hub.prompts.PromptConfig`: ``schema_text`` of the question's database + the question +
its evidence), loads the base ONCE with the adapter, generates greedily in batches twice (adapter on, then
adapters disabled) and scores both with ``Judge(mode="bird")``. It prints EX overall, per database (the
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
from collections import Counter, defaultdict
from pathlib import Path

from slmsql_hub.data.benchmarks import seeded_subset
from slmsql_hub.errors import UsageError
from slmsql_hub.generation import GenerationConfig, generate_completions, load_policy, use_adapter
from slmsql_hub.prompts import PromptConfig
from slmsql_hub.sql import Judge, Sandbox, Verdict

logger = logging.getLogger("measure_world_ex")


def load_split(world: Path, split: str, limit: int | None, seed: int):
    """The split's rows (a seeded subset of ``limit`` when given) and the held-out database id."""
    import datasets

    manifest_file = world / "world.json"
    split_dir = world / "datasets" / split
    if not manifest_file.is_file():
        raise UsageError(f"{world} is not a built world (no world.json); build it with `slmsql world build`")
    if not split_dir.is_dir():
        raise UsageError(f"world {world} has no split {split!r} (no {split_dir})")
    held_out = json.loads(manifest_file.read_text(encoding="utf-8")).get("held_out_db")
    dataset = datasets.load_from_disk(str(split_dir))
    rows = [dataset[i] for i in seeded_subset(len(dataset), limit, seed)]
    for row in rows:
        # Resolve databases inside this world folder, so a moved or copied world still works.
        row["db_path"] = str(world / "databases" / row["db_id"] / f"{row['db_id']}.sqlite")
    return rows, held_out


def prompt_config_for(adapter: Path, sample_rows: int | None, max_value_chars: int | None) -> PromptConfig:
    """The prompt settings the adapter was trained with (its ``run_summary.json``), unless overridden."""
    trained: dict = {}
    summary_file = adapter / "run_summary.json"
    if summary_file.is_file():
        trained = json.loads(summary_file.read_text(encoding="utf-8")).get("prompt", {}) or {}
    return PromptConfig(
        sample_rows=sample_rows if sample_rows is not None else int(trained.get("sample_rows", 3)),
        max_value_chars=max_value_chars
        if max_value_chars is not None
        else int(trained.get("max_value_chars", 40)),
    )


def summarise(rows, judgements, completions, held_out: str | None) -> dict:
    """EX overall, per database, per difficulty, verdict counts and completion lengths for one model."""

    def ex(indices: list[int]) -> dict:
        scored = [judgements[i].correct for i in indices if judgements[i].scorable]
        correct = sum(scored)
        return {
            "n": len(indices),
            "scorable": len(scored),
            "correct": correct,
            "ex": correct / len(scored) if scored else None,
        }

    by_db: dict[str, list[int]] = defaultdict(list)
    by_difficulty: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_db[row["db_id"]].append(i)
        by_difficulty[row["difficulty"]].append(i)
    everything = list(range(len(rows)))
    seen = [i for i in everything if rows[i]["db_id"] != held_out]
    held = [i for i in everything if rows[i]["db_id"] == held_out]
    tokens = [c.num_tokens for c in completions]
    return {
        "overall": ex(everything),
        "seen_databases": ex(seen),
        "held_out_database": {"db_id": held_out, **ex(held)},
        "per_database": {db: ex(ix) for db, ix in sorted(by_db.items())},
        "per_difficulty": {d: ex(ix) for d, ix in sorted(by_difficulty.items())},
        "verdicts": dict(Counter(str(j.verdict) for j in judgements).most_common()),
        "mean_completion_tokens": sum(tokens) / len(tokens) if tokens else 0.0,
        "finished_share": sum(c.finished for c in completions) / len(completions) if completions else 0.0,
    }


def _pct(part: dict) -> str:
    if part["ex"] is None:
        return f"   n/a  (0/{part['n']} scorable)"
    unscorable = part["n"] - part["scorable"]
    extra = f", {unscorable} unscorable" if unscorable else ""
    return f"{100 * part['ex']:6.1f}% ({part['correct']}/{part['scorable']}{extra})"


def print_report(name: str, summary: dict, seconds: float) -> None:
    print(f"\n== {name}  (generation + judging {seconds:.1f} s)")
    print(f"EX overall            : {_pct(summary['overall'])}")
    print(f"EX seen databases     : {_pct(summary['seen_databases'])}")
    held = summary["held_out_database"]
    print(f"EX held-out ({held['db_id']}) : {_pct(held)}")
    for db, part in summary["per_database"].items():
        flag = "  <- held out" if db == held["db_id"] else ""
        print(f"   {db:24s} {_pct(part)}{flag}")
    for difficulty, part in summary["per_difficulty"].items():
        print(f"   [{difficulty:6s}]                {_pct(part)}")
    verdicts = ", ".join(f"{k}={v}" for k, v in summary["verdicts"].items())
    print(f"verdicts: {verdicts}")
    print(
        f"completions: {summary['mean_completion_tokens']:.1f} tokens on average, "
        f"{100 * summary['finished_share']:.0f}% ended their turn"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, required=True, help="a built world (slmsql world build --out)")
    parser.add_argument("--base", type=Path, required=True, help="the base model folder (model + tokenizer)")
    parser.add_argument(
        "--adapter", type=Path, required=True, help="the LoRA adapter folder (e.g. sft/stage2)"
    )
    parser.add_argument("--split", default="dev", help="dataset split (default dev)")
    parser.add_argument("--limit", type=int, help="score a seeded subset of N questions")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit subset")
    parser.add_argument("--batch-size", type=int, default=16, help="prompts per generate call")
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument(
        "--sample-rows", type=int, help="schema sample rows (default: the adapter's run_summary.json, else 3)"
    )
    parser.add_argument(
        "--max-value-chars",
        type=int,
        help="sample value length (default: the adapter's run_summary.json, else 40)",
    )
    parser.add_argument("--skip-base", action="store_true", help="do not score the base without adapter")
    parser.add_argument("--threads", type=int, help="torch intra-op threads")
    parser.add_argument("--json", type=Path, help="write every number here")
    parser.add_argument("--predictions", type=Path, help="write every completion and verdict here (JSONL)")
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
    prompt_config = prompt_config_for(args.adapter, args.sample_rows, args.max_value_chars)
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    model, tokenizer = load_policy(args.base, args.adapter, device="cpu", dtype="float32")
    print(f"{len(rows)} questions of {args.world}/{args.split}; held-out database: {held_out}")
    print(
        f"prompts: {prompt_config.sample_rows} sample rows per table, values cut at "
        f"{prompt_config.max_value_chars} chars; greedy, {config.max_new_tokens} new tokens max"
    )

    arms = [("adapter", "default")] + ([] if args.skip_base else [("base only", None)])
    report: dict = {"world": str(args.world), "split": args.split, "n": len(rows), "models": {}}
    records: list[dict] = []
    with Sandbox() as sandbox:
        schemas = {db: prompt_config.schema(rows[i]["db_path"], sandbox) for i, db in _first_rows(rows)}
        prompts = [
            prompt_config.messages(r["question"], schemas[r["db_id"]], r["evidence"] or "") for r in rows
        ]
        judge = Judge(sandbox=sandbox, mode="bird")
        for arm, adapter_name in arms:
            start = time.perf_counter()
            with use_adapter(model, adapter_name):
                grouped = generate_completions(model, tokenizer, prompts, config, progress=True)
            completions = [group[0] for group in grouped]
            judgements = judge.judge_many(
                [c.text for c in completions],
                [r["gold_sql"] for r in rows],
                [r["db_path"] for r in rows],
                progress=True,
            )
            seconds = time.perf_counter() - start
            summary = summarise(rows, judgements, completions, held_out)
            name = f"{arm}: {args.base}" + (f" + {args.adapter}" if adapter_name else "")
            print_report(name, summary, seconds)
            report["models"][arm] = {"name": name, "seconds": seconds, **summary}
            records.extend(
                {
                    "model": arm,
                    "question_id": r["question_id"],
                    "db_id": r["db_id"],
                    "completion": c.text,
                    "num_tokens": c.num_tokens,
                    "verdict": str(j.verdict),
                    "gold_sql": r["gold_sql"],
                }
                for r, c, j in zip(rows, completions, judgements)
            )
    unscorable = sum(1 for r in records if r["verdict"] == Verdict.UNSCORABLE.value)
    if unscorable:
        print(
            f"\nwarning: {unscorable} judgements were unscorable (their gold did not run); see --predictions"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.predictions:
        args.predictions.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return 0


def _first_rows(rows: list[dict]) -> list[tuple[int, str]]:
    """One (row index, db_id) per database, in first-seen order."""
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        first.setdefault(row["db_id"], i)
    return [(i, db) for db, i in first.items()]


if __name__ == "__main__":
    sys.exit(main())
