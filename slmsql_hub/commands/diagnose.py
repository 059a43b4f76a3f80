"""``slmsql diagnose --config RECIPE.yaml [--field value ...]``: will GRPO help this policy?
(:mod:`slmsql_hub.diagnosis`). ``slmsql diagnose --validate STUDY... --report REPORT... --validation-dir DIR``:
did each study's diagnosis predict what it measured? (:mod:`slmsql_hub.study.validation`)."""

from __future__ import annotations

import argparse

from . import folder_to_write, print_result
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
            "Example: slmsql diagnose --config recipes/world/diagnose.yaml --num_samples 8. "
            "With --validate (no --config): score finished diagnoses against the studies' measured results, "
            "the i-th study against the i-th report, in one table. "
            "Example: slmsql diagnose --validate outputs/transfer/plant70 outputs/heldout/value_case70 "
            "--report docs/diagnosis/plant70 docs/diagnosis/value_case70 --development outputs/transfer/plant70 "
            "--validation-dir docs/diagnosis/validation. "
            "With --reanalyse: today's rule on a finished diagnosis's own samples (nothing sampled again)."
        ),
        example="recipes/world/diagnose.yaml",
        config_cls=DiagnoseConfig,
        config_required=False,
    )
    group = parser.add_argument_group("validation (issue #36: did the diagnosis predict the study?)")
    group.add_argument("--validate", metavar="STUDY", nargs="+",
                       help="study folders (slmsql ablate's output: runs/, sft/) or their report.json")  # fmt: skip
    group.add_argument("--report", metavar="REPORT", nargs="+",
                       help="each study's diagnosis report.json (or its folder), in the order of --validate")  # fmt: skip
    group.add_argument("--development", metavar="STUDY", nargs="+", default=[],
                       help="studies of --validate whose world the rule was revised on (counted apart from the test)")  # fmt: skip
    group.add_argument("--validation-dir", metavar="DIR", type=folder_to_write,
                       help="where validation.json and validation.md go (outside the inputs)")  # fmt: skip
    group = parser.add_argument_group("reanalysis (today's rule on a finished diagnosis's own samples)")
    group.add_argument("--reanalyse", metavar="DIAGNOSIS",
                       help="a finished diagnosis folder (report.json, questions/): nothing is sampled again")  # fmt: skip
    group.add_argument("--reanalysis-dir", metavar="DIR", type=folder_to_write,
                       help="where the reanalysed report goes (outside the diagnosis)")  # fmt: skip
    parser.set_defaults(run=run)
    return parser


def _validate(args: argparse.Namespace) -> int:
    """``--validate``: the table of :mod:`slmsql_hub.study.validation`; a bad combination is one line, exit 2."""
    from pathlib import Path

    from ..errors import UsageError
    from ..study.validation import VALIDATION_MD, validate

    if args.config or args.overrides:
        raise UsageError("--validate scores a finished diagnosis; it does not go with --config or recipe fields")
    if not args.report or not args.validation_dir:
        raise UsageError("--validate needs --report (the diagnosis's report.json) and --validation-dir")
    if len(args.report) != len(args.validate):
        raise UsageError(f"--validate names {len(args.validate)} studies and --report {len(args.report)} "
                         "diagnoses: give one report per study, in the same order")  # fmt: skip
    table = validate(list(zip(args.report, args.validate)), args.validation_dir, args.development)
    lines = [f"{s['study']}: held {s['held']} of {s['scored']} (variants that learnt their band: "
             f"{len(s['variants'])}; apart: {len(s['not_learnt'])})" for s in table["studies"]]  # fmt: skip
    return print_result(*lines, f"held {table['held']} of {table['scored']}; outside the rule's development data "
                        f"{table['test_held']} of {table['test_scored']}",
                        f"table: {Path(args.validation_dir) / VALIDATION_MD}")  # fmt: skip


def _reanalyse(args: argparse.Namespace) -> int:
    """``--reanalyse``: :func:`~slmsql_hub.diagnosis.reanalyse`; a bad combination is one line, exit 2."""
    from pathlib import Path

    from ..diagnosis import REPORT_FILE, reanalyse
    from ..errors import UsageError

    if args.config or args.overrides or args.validate:
        raise UsageError("--reanalyse rebuilds a finished diagnosis; it does not go with --config, fields or --validate")
    if not args.reanalysis_dir:
        raise UsageError("--reanalyse needs --reanalysis-dir (where the new report goes)")
    report = reanalyse(args.reanalyse, args.reanalysis_dir)
    return print_result(report["prediction"]["sentence"], f"report: {Path(args.reanalysis_dir) / REPORT_FILE}")


def run(args: argparse.Namespace) -> int:
    """Parse the recipe and overrides (a bad one: one line, exit 2, nothing loaded), diagnose, print the verdict."""
    from pathlib import Path

    from ..diagnosis import REPORT_FILE, load_diagnose_config, run_diagnose
    from ..errors import UsageError
    from ..run.guard import check_output, config_inputs, output_lock

    if args.reanalyse:
        return _reanalyse(args)
    if args.reanalysis_dir:
        raise UsageError("--reanalysis-dir goes with --reanalyse DIAGNOSIS")
    if args.validate:
        return _validate(args)
    if args.report or args.validation_dir or args.development:
        raise UsageError("--report, --development and --validation-dir go with --validate STUDY")
    if not args.config:
        raise UsageError("--config is required (the diagnose recipe), or --validate STUDY to score a diagnosis")
    config = load_diagnose_config(args.config, args.overrides)
    with output_lock(check_output(config.output_dir, config_inputs(config), "output_dir")):
        report = run_diagnose(config)
    out = Path(str(config.output_dir))
    lines = [
        f"{name}: greedy EX {s['greedy_ex']}, maj@K {s['maj_at_k']}, ceiling (pass@K) {s['ceiling']}"
        for name, s in report["slices"].items()
    ]
    return print_result(*lines, report["prediction"]["sentence"], f"report: {out / REPORT_FILE}")
