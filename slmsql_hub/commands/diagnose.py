"""``slmsql diagnose --config RECIPE.yaml [--field value ...]``: will GRPO help this policy?
(:mod:`slmsql_hub.diagnosis`)."""

from __future__ import annotations

import argparse

from . import print_result
from ._recipe import add_recipe_parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``slmsql diagnose --config RECIPE [--field value ...]``."""
    from ..diagnosis import DiagnoseConfig  # light: no torch, TRL or datasets at import

    parser = add_recipe_parser(
        subparsers,
        "diagnose",
        help="predict whether GRPO can move EX: support, error anatomy and headroom of one policy",
        description=(
            "Greedy answers and K keyed samples per question from one policy on each slice, judged by execution: "
            "greedy EX, pass@1..K, maj@K, all-fail / mixed / all-pass, each wrong answer's error class with its "
            "consistency, support and where it occurs (the training band, the slices), and a ranked prediction. "
            "Writes <output_dir>/report.json, report.md, diagnosis.png and questions/. "
            "Example: slmsql diagnose --config recipes/world/diagnose.yaml --num_samples 8"
        ),
        example="recipes/world/diagnose.yaml",
        config_cls=DiagnoseConfig,
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Parse the recipe and overrides (a bad one: one line, exit 2, nothing loaded), diagnose, print the verdict."""
    from pathlib import Path

    from ..diagnosis import REPORT_FILE, load_diagnose_config, run_diagnose

    config = load_diagnose_config(args.config, args.overrides)
    report = run_diagnose(config)
    out = Path(str(config.output_dir))
    lines = [
        f"{name}: greedy EX {s['greedy_ex']}, maj@K {s['maj_at_k']}, ceiling (pass@K) {s['ceiling']}"
        for name, s in report["slices"].items()
    ]
    return print_result(*lines, report["prediction"]["sentence"], f"report: {out / REPORT_FILE}")
