"""Greedy answers through ``generate`` (old) and through the package's decoding loop that drops finished rows
(new, ``GenerationConfig.drop_finished``), side by side in one run on a run's own eval recipe (issue #39).

Both paths decode the same prompts in the same batches with the same loaded policy (``eval.yaml``'s batch size
and token budget, its slices, each adapter of the run); only how a batch is decoded differs. ``generate`` decodes
every row of a batch until the batch's longest ends; the new loop drops the rows that have stopped. The script
prints each path's wall and CPU seconds and their ratio, checks that every completion's token ids are identical,
and judges both (the verdicts then must be too). Exit 1 on any difference.

Usage (reads the run folder; writes nothing under it)::

    python benchmarks/bench_greedy.py --run-dir outputs/quickstart --threads 1
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

from slmsql_hub.evaluation import BenchmarkSpec, build_prompts, load_eval_config, load_slice
from slmsql_hub.generation import generate_completions, use_adapter
from slmsql_hub.runtime import set_num_threads
from slmsql_hub.sql import Judge, Sandbox


def run_settings(run_dir: Path, recipe: str, threads: int) -> Any:
    """The run's ``eval.yaml`` pointed at the run folder (as the quickstart's eval stage sets it)."""
    values = {
        "model_name_or_path": str(run_dir / "base"), "sft_adapter": str(run_dir / "sft" / "stage2"),
        "grpo_adapter": str(run_dir / "grpo"), "world_root": str(run_dir / "world"),
        "output_dir": str(run_dir / "eval"), "num_threads": threads,
    }  # fmt: skip
    return load_eval_config(recipe, values=values)


def timed(work: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="a quickstart run folder (base, sft, grpo, world)")
    parser.add_argument("--recipe", default="recipes/world/eval.yaml")
    parser.add_argument("--adapters", nargs="+", default=["sft/stage2", "grpo"], help="adapters under the run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    settings = run_settings(args.run_dir, args.recipe, args.threads)
    set_num_threads(args.threads)
    adapters = {name.replace("/", "_"): str(args.run_dir / name) for name in args.adapters}
    model, tokenizer = settings.load_policy(adapters=adapters)
    greedy = settings.generation_config()
    paths = {"old": greedy.__class__(**{**greedy.__dict__, "drop_finished": False}), "new": greedy}
    totals = {path: [0.0, 0.0] for path in paths}
    same, verdicts_same, report = True, True, {}
    with Sandbox(settings.sql_limits()) as sandbox:
        cache: dict = {}
        for text in settings.benchmarks:
            piece = load_slice(BenchmarkSpec.parse(text), settings)
            judge = Judge(sandbox=sandbox, mode=piece.spec.mode)
            prompts = {
                name: build_prompts(piece.rows, settings.resolve_prompt_config(adapter)[0], sandbox, cache)
                for name, adapter in adapters.items()
            }
            for config in paths.values():  # warm both paths up (first calls pay for allocations and lazy imports)
                generate_completions(model, tokenizer, next(iter(prompts.values()))[:4], config, False)
            got: dict[str, dict] = {path: {} for path in paths}
            for name in adapters:
                with use_adapter(model, name):
                    for path, config in paths.items():
                        work = functools.partial(generate_completions, model, tokenizer, prompts[name], config, False)
                        grouped, wall, cpu = timed(work)
                        got[path][name] = [group[0] for group in grouped]
                        totals[path][0] += wall
                        totals[path][1] += cpu
                        report[f"{piece.spec.key}/{name}/{path}"] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
                old, new = got["old"][name], got["new"][name]
                same &= [c.token_ids for c in old] == [c.token_ids for c in new]
                golds, dbs = [r["gold_sql"] for r in piece.rows], [r["db_path"] for r in piece.rows]
                verdicts = {
                    path: [j.correct for j in judge.judge_many([c.text for c in got[path][name]], golds, dbs)]
                    for path in paths
                }
                verdicts_same &= verdicts["old"] == verdicts["new"]
                times = {path: report[f"{piece.spec.key}/{name}/{path}"]["wall_s"] for path in paths}
                ex = sum(bool(v) for v in verdicts["new"]) / len(new)
                print(f"{piece.spec.key} {name}: {len(new)} questions, EX {ex:.3f}, old {times['old']} s, new {times['new']} s")
    (old_wall, old_cpu), (new_wall, new_cpu) = totals["old"], totals["new"]
    print("| path | wall s | CPU s |\n| --- | --- | --- |")
    print(f"| old (`generate`) | {old_wall:.1f} | {old_cpu:.1f} |\n| new (finished rows dropped) | {new_wall:.1f} | {new_cpu:.1f} |")
    print(f"| old / new | {old_wall / new_wall:.2f} | {old_cpu / new_cpu:.2f} |")
    print(f"identical token ids: {same}; identical verdicts: {verdicts_same}")
    if args.json:
        summary = {"old": totals["old"], "new": totals["new"], "identical": same, "verdicts_identical": verdicts_same}
        args.json.write_text(json.dumps({**summary, "slices": report}, indent=2) + "\n", encoding="utf-8")
    return 0 if same and verdicts_same else 1


if __name__ == "__main__":
    sys.exit(main())
