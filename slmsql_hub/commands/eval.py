"""``slmsql eval --config RECIPE.yaml [--field value ...]``: SFT vs GRPO on benchmark slices, paired statistics.

Loads the base model once with the SFT and GRPO adapters, generates greedily on every slice, judges in each
benchmark's own semantics and writes ``eval_results.json`` and ``predictions/``; see
:mod:`slmsql_hub.evaluation`. Every field of :class:`~slmsql_hub.evaluation.EvalConfig` can be overridden on
the command line and wins over the recipe.
"""

from __future__ import annotations

import argparse
import dataclasses

_BOOLEAN_VALUE = "true"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``slmsql eval``: ``--config`` plus one ``--field value`` override per config field."""
    from ..evaluation import EvalConfig  # light: no torch, TRL or datasets at import

    parser = subparsers.add_parser(
        "eval",
        help="evaluate the SFT and GRPO adapters on benchmark slices, with paired statistics",
        description=(
            "Greedy generation with the SFT and the GRPO adapters over one base model, EX in each benchmark's "
            "semantics with breakdowns, and the paired comparison (ΔEX, bootstrap 95% CI, McNemar exact p, "
            "verdict). Writes <output_dir>/eval_results.json and predictions/<benchmark>.jsonl. "
            "Example: slmsql eval --config recipes/world/eval.yaml --benchmarks world:dev:50"
        ),
    )
    parser.add_argument("--config", required=True, help="the YAML recipe (e.g. recipes/world/eval.yaml)")
    overrides = parser.add_argument_group("overrides (win over the recipe)")
    for f in dataclasses.fields(EvalConfig):
        help_text = f.metadata.get("help", "").replace("%", "%%")
        if f.type in ("bool", bool):
            overrides.add_argument(
                f"--{f.name}",
                nargs="?",
                const=_BOOLEAN_VALUE,
                default=argparse.SUPPRESS,
                metavar="BOOL",
                help=help_text,
            )
        elif f.type in ("list[str]", list[str]):
            overrides.add_argument(
                f"--{f.name}", nargs="+", default=argparse.SUPPRESS, metavar="VALUE", help=help_text
            )
        else:
            overrides.add_argument(f"--{f.name}", default=argparse.SUPPRESS, metavar="VALUE", help=help_text)
    parser.set_defaults(run=run)
    return parser


def _overrides(args: argparse.Namespace) -> list[str]:
    """The overrides given on the command line, as ``--field value ...`` strings for the recipe parser."""
    from ..evaluation import EvalConfig

    given: list[str] = []
    for f in dataclasses.fields(EvalConfig):
        if hasattr(args, f.name):
            value = getattr(args, f.name)
            given += [f"--{f.name}", *(value if isinstance(value, list) else [str(value)])]
    return given


def run(args: argparse.Namespace) -> int:
    """Parse the recipe and overrides, run the evaluation, and print each slice's EX and verdict."""
    from pathlib import Path

    from ..evaluation import RESULTS_FILE, load_eval_config, run_eval, summary_lines

    config = load_eval_config(args.config, _overrides(args))
    results = run_eval(config)
    out = Path(str(config.output_dir))
    lines = [
        *summary_lines(results),
        f"results: {out / RESULTS_FILE}",
        f"predictions: {out / 'predictions'}/",
    ]
    print("\n".join(lines))  # noqa: T201 - the command's output
    return 0
