"""``slmsql train base|sft|grpo --config RECIPE.yaml [--field value ...]``: train the world's tiny base model,
one SFT stage of the LoRA adapter, or GRPO continuing that adapter. Overrides on the command line win over the
recipe."""

from __future__ import annotations

import argparse
import json
import logging

from . import OneLineParser

logger = logging.getLogger(__name__)

_KINDS = {
    "base": ("pretrain the tiny Qwen2 model and its tokenizer from scratch on a world's text", "base.yaml"),
    "sft": (
        "train (stage 1) or continue (stage 2) the LoRA adapter with TRL's SFTTrainer",
        "sft_stage1.yaml",
    ),
    "grpo": (
        "continue the SFT adapter with GRPO (TRL's GRPOTrainer) on an execution reward",
        "grpo_band.yaml",
    ),
}


class _RecipeParser(OneLineParser):
    """A subcommand parser that keeps every option it does not know as a recipe override (``--field value``),
    in order, instead of rejecting it: the fields are those of the recipe's dataclasses, which are only
    imported (with TRL and torch) when the command runs."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        namespace.overrides = extras
        return namespace, []


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``slmsql train`` and its ``base`` / ``sft`` / ``grpo`` subcommands."""
    parser = subparsers.add_parser(
        "train",
        help="train the world's base model, an SFT LoRA adapter, or GRPO on it, from a YAML recipe",
        description="Train from a YAML recipe; `--field value` overrides win over the recipe. "
        "Example: slmsql train sft --config recipes/world/sft_stage1.yaml --learning_rate 1e-4",
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True, parser_class=_RecipeParser)
    for kind, (help_text, example) in _KINDS.items():
        sub = kinds.add_parser(
            kind,
            help=help_text,
            description=f"{help_text}. Any field of the recipe can be overridden as --field value.",
        )
        sub.add_argument("--config", required=True, help=f"the YAML recipe (e.g. recipes/world/{example})")
        sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Parse the recipe and overrides, train, and print the run summary's headline."""
    from ..configs import parse_recipe
    from ..training.configs import BASE_ARGUMENTS, SFT_ARGUMENTS

    if args.kind == "grpo":
        return _run_grpo(args)
    if args.kind == "base":
        from ..training.base import train_base

        summary = train_base(*parse_recipe(BASE_ARGUMENTS, args.config, args.overrides))
    else:
        from ..training.sft import train_sft

        summary = train_sft(*parse_recipe(SFT_ARGUMENTS, args.config, args.overrides))
    headline = {
        k: summary.get(k) for k in ("kind", "stage", "output_dir", "steps", "final_loss", "wall_seconds")
    }
    print(json.dumps({k: v for k, v in headline.items() if v is not None}))  # noqa: T201
    return 0


def _run_grpo(args: argparse.Namespace) -> int:
    """GRPO: print the headline (main process only); exit 1 when a guard failed after training."""
    import os

    from ..configs import parse_recipe
    from ..training.configs import GRPO_ARGUMENTS
    from ..training.grpo import headline, train_grpo

    summary = train_grpo(*parse_recipe(GRPO_ARGUMENTS, args.config, args.overrides))
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(headline(summary)))  # noqa: T201
    return 1 if summary["guards"]["failed"] else 0
