"""``slmsql filter --config RECIPE.yaml [--field value ...]``: the pass-rate filter (:mod:`slmsql_hub.filtering`)."""

from __future__ import annotations

import argparse

from . import print_result
from ._recipe import add_recipe_parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``slmsql filter --config RECIPE [--field value ...]``."""
    from ..filtering import FilterConfig  # light: no torch, TRL or datasets at import

    parser = add_recipe_parser(
        subparsers,
        "filter",
        help="keep the questions the SFT policy sometimes solves (pass-rate band) for GRPO",
        description=(
            "Sample K completions per question from the SFT policy, score them by execution and split the pool "
            "into band (low < pass rate < high), all-fail, all-pass and unscorable. Writes <output_dir>/band "
            "(a dataset), results.jsonl and filter_report.json; an interrupted run resumes. "
            "Example: slmsql filter --config recipes/world/filter.yaml --num_samples 4"
        ),
        example="recipes/world/filter.yaml",
        config_cls=FilterConfig,
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Parse the recipe and overrides, run the filter, and print the study's summary line."""
    from ..filtering import load_filter_config, run_filter
    from ..run.guard import check_output, config_inputs, output_lock

    config = load_filter_config(args.config, args.overrides)
    with output_lock(check_output(config.output_dir, config_inputs(config), "output_dir")):
        report = run_filter(config)
    outputs = report["outputs"]
    return print_result(
        report["summary"],
        f"K={report['num_samples']}, band {report['pass_rate_low']} < p < {report['pass_rate_high']}; "
        f"{report['time']['questions_sampled']} sampled, {report['time']['questions_resumed']} resumed, "
        f"{report['time']['wall_seconds']:.1f} s",
        f"band dataset: {outputs['band']}",
        f"report: {outputs['report']}",
        f"per-question results: {outputs['results']}",
    )
