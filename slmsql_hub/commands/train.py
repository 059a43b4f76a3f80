"""``slmsql train base|sft|grpo --config RECIPE.yaml [--field value ...]``: train the world's tiny base model,
one SFT stage of the LoRA adapter, or GRPO continuing that adapter. Overrides on the command line win over the
recipe."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator

from . import OneLineParser, print_result
from ._recipe import add_recipe_parser

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


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``slmsql train`` and its ``base`` / ``sft`` / ``grpo`` subcommands."""
    parser = subparsers.add_parser(
        "train",
        help="train the world's base model, an SFT LoRA adapter, or GRPO on it, from a YAML recipe",
        description="Train from a YAML recipe; `--field value` overrides win over the recipe. "
        "Example: slmsql train sft --config recipes/world/sft_stage1.yaml --learning_rate 1e-4",
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True, parser_class=OneLineParser)
    for kind, (help_text, example) in _KINDS.items():
        parser = add_recipe_parser(
            kinds,
            kind,
            help=help_text,
            description=f"{help_text}. Any field of the recipe can be overridden as --field value.",
            example=f"recipes/world/{example}",
        )
        parser.add_argument(
            "--overwrite", action="store_true", help="replace a finished run in output_dir (default: refused)"
        )
        parser.set_defaults(run=run)


@contextlib.contextmanager
def _guarded(configs: tuple, overwrite: bool) -> Iterator[None]:
    """Refuse an ``output_dir`` that overlaps the run's inputs; take its lock (main process only); refuse one that
    holds a finished run (unless ``overwrite``, or GRPO's ``resume_from_checkpoint``), a run finished while this
    one waited included; all before anything loads."""
    from ..run.guard import check_output, config_inputs, output_lock, refuse_finished
    from ..run.layout import StageFolder

    training = configs[-1]
    out = check_output(training.output_dir, config_inputs(*configs), "output_dir")
    resuming = bool(getattr(training, "resume_from_checkpoint", None))
    with output_lock(out, main_process=training.process_index == 0):
        refuse_finished(out, StageFolder(out).finished and not (overwrite or resuming), "output_dir")
        yield


def run(args: argparse.Namespace) -> int:
    """Parse the recipe and overrides, train, and print the run summary's headline."""
    from ..recipes import parse_recipe
    from ..training.configs import BASE_ARGUMENTS, SFT_ARGUMENTS

    if args.kind == "grpo":
        return run_grpo(args.config, args.overrides, overwrite=args.overwrite)
    if args.kind == "base":
        from ..training.base import train_base

        configs = parse_recipe(BASE_ARGUMENTS, args.config, args.overrides)
        with _guarded(configs, args.overwrite):
            summary = train_base(*configs)
    else:
        from ..training.sft import train_sft

        configs = parse_recipe(SFT_ARGUMENTS, args.config, args.overrides)
        with _guarded(configs, args.overwrite):
            summary = train_sft(*configs)
    if configs[-1].process_index != 0:  # under `accelerate launch`, the main process prints the headline
        return 0
    headline = {
        k: summary.get(k) for k in ("kind", "stage", "output_dir", "steps", "final_loss", "wall_seconds")
    }
    return print_result(json.dumps({k: v for k, v in headline.items() if v is not None}))


def run_grpo(config: str | None, overrides: list[str], overwrite: bool = False) -> int:
    """Train GRPO; on the main process print the headline and, with ``push_to_hub``, add the project's card and
    run files to the repository TRL pushed to (one commit). Exit 1 when a guard failed after training."""
    from ..recipes import parse_recipe
    from ..training.configs import GRPO_ARGUMENTS
    from ..training.grpo import main
    from ..training.grpo_summary import headline

    script_args, model_args, training_args = parse_recipe(GRPO_ARGUMENTS, config, overrides)
    with _guarded((script_args, model_args, training_args), overwrite):
        summary = main(script_args, training_args, model_args)
    if training_args.process_index == 0:
        if training_args.push_to_hub:
            from ..hub import push_training_card

            push_training_card(
                training_args.output_dir,
                summary["hub_model_id"],
                token=training_args.hub_token,
                revision=training_args.hub_revision,
            )
        print_result(json.dumps(headline(summary)))
    return 1 if summary["guards"]["failed"] else 0
