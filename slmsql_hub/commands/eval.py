"""``slmsql eval --config RECIPE.yaml [--field value ...]``: SFT vs GRPO with paired statistics
(:mod:`slmsql_hub.evaluation`)."""

from __future__ import annotations

import argparse

from . import print_result
from ._recipe import add_recipe_parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``slmsql eval --config RECIPE [--field value ...]``."""
    from ..evaluation import EvalConfig  # light: no torch, TRL or datasets at import

    parser = add_recipe_parser(
        subparsers,
        "eval",
        help="evaluate the SFT and GRPO adapters on benchmark slices, with paired statistics",
        description=(
            "Greedy generation with the SFT and the GRPO adapters over one base model, EX in each benchmark's "
            "semantics with breakdowns, and the paired comparison (ΔEX, bootstrap 95% CI, McNemar exact p, "
            "verdict). Writes <output_dir>/eval_results.json and predictions/<benchmark>.jsonl. "
            "Example: slmsql eval --config recipes/world/eval.yaml --benchmarks world:dev:50"
        ),
        example="recipes/world/eval.yaml",
        config_cls=EvalConfig,
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Parse the recipe and overrides, run the evaluation, and print each slice's EX and verdict."""
    from pathlib import Path

    from ..evaluation import RESULTS_FILE, load_eval_config, run_eval, summary_lines
    from ..run.guard import check_output, config_inputs, output_lock

    config = load_eval_config(args.config, args.overrides)
    with output_lock(check_output(config.output_dir, config_inputs(config), "output_dir")):
        results = run_eval(config)
    out = Path(str(config.output_dir))
    return print_result(
        *summary_lines(results), f"results: {out / RESULTS_FILE}", f"predictions: {out / 'predictions'}/"
    )
