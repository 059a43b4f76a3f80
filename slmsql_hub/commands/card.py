"""``slmsql card --run-dir RUN [--out RUN/card]``: the generated model card and the model repo folder.

Renders ``README.md`` from ``model_card/model_card.md`` with every number read from the run's files, draws the
telemetry plots and the pass-rate histogram, writes ``.eval_results/`` in the Hub's format, and copies the GRPO
adapter, its run files and the evaluation next to it; see :mod:`slmsql_hub.card`. The folder is what
``slmsql push`` uploads as the model repository.
"""

from __future__ import annotations

import argparse
import json

from . import hub_license, print_result, repo_id


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``slmsql card``."""
    parser = subparsers.add_parser(
        "card",
        help="generate the model card and assemble the model repo folder of a run",
        description=(
            "Generate the model card of a run folder from its own files (eval/eval_results.json, "
            "grpo/run_summary.json, config.yaml and telemetry.jsonl, filter/filter_report.json, the SFT and base "
            "summaries) and assemble the model repo folder: README.md, plots/, .eval_results/, the GRPO adapter, "
            "its run files, the evaluation and every stage's config. The folder is separate from TRL's output "
            "folders, whose README.md TRL rewrites at every save. "
            "Example: slmsql card --run-dir outputs/quickstart --repo-id alice/slmsql-quickstart-grpo"
        ),
    )
    parser.add_argument(
        "--run-dir", required=True, metavar="DIR", help="the run folder (e.g. outputs/quickstart)"
    )
    parser.add_argument("--out", metavar="DIR", help="the card folder (default DIR/card)")
    parser.add_argument("--overwrite", action="store_true", help="replace a finished card in --out")
    parser.add_argument(
        "--repo-id",
        type=repo_id(),
        metavar="NAMESPACE/NAME",
        help="the model repo the card will live in: source links of .eval_results and the usage snippet",
    )
    parser.add_argument(
        "--base-model-id",
        type=repo_id(namespace=False),
        metavar="ID",
        help="the base model's Hub id when the run used a local copy (metadata base_model); without it a local "
        "base model ships in the folder's base/",
    )
    parser.add_argument(
        "--license", type=hub_license, help="license id for the metadata (default: the project's license)"
    )
    parser.add_argument("--model-name", help="the model-index name (default: the repo's name)")
    parser.add_argument(
        "--dataset",
        action="append",
        default=[],
        type=repo_id(namespace=False),
        metavar="ID",
        help="a published training dataset for the metadata's datasets, e.g. the band's dataset repo once "
        "pushed (NAMESPACE/NAME-band; repeatable); evaluation sets never go there",
    )
    parser.add_argument(
        "--template", metavar="FILE", help="the Jinja template (default model_card/model_card.md)"
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Build the card folder and print where it is and what it says."""
    from pathlib import Path

    from ..card import CardOptions, build_card
    from ..run.guard import check_output, output_lock, refuse_finished
    from ..run.layout import CardLayout, RunLayout
    from ..run.read import read_run

    run = RunLayout(read_run(args.run_dir).root)  # a missing run folder: one line, before a lock creates it
    out = check_output(args.out or run.card.root, [*run.stage_folders, args.template], "--out")
    options = CardOptions(
        repo_id=args.repo_id,
        base_model_id=args.base_model_id,
        license=args.license,
        model_name=args.model_name,
        datasets=tuple(args.dataset),
    )
    with output_lock(out):  # a card finished while this one waited for the lock counts too
        refuse_finished(out, CardLayout(out).readme.is_file() and not args.overwrite, "--out", "card")
        result = build_card(args.run_dir, Path(out), options=options, template_path=args.template)
    return print_result(
        json.dumps(
            {
                "card": str(result.readme),
                "folder": str(result.folder),
                "outcome": result.outcome,
                "plots": sorted(str(p) for p in result.plots.values()),
                "eval_results": [str(p) for p in result.eval_results],
                "files": len(result.files),
            }
        )
    )
