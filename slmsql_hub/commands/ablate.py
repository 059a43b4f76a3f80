"""``slmsql ablate --config recipes/world/ablations.yaml``: the hypothesis study (see :mod:`slmsql_hub.ablate`)."""

from __future__ import annotations

import argparse

from . import folder_to_write, number, print_result


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``slmsql ablate``."""
    parser = subparsers.add_parser(
        "ablate",
        help="the ablation study: GRPO variants x seeds from one run's SFT adapter, paired slices, one report",
        description=(
            "For each variant and seed, train GRPO from the run's SFT adapter on band_train, then evaluate it on "
            "band_train, band_heldout, world dev and world test paired against SFT. Finished (variant, seed) "
            "folders are reused; the report merges every finished folder under --output-dir. "
            "Example: slmsql ablate --config recipes/world/ablations.yaml --variants frozen high_lr --seeds 0"
        ),
    )
    parser.add_argument(
        "--config", required=True, help="the study's recipe (e.g. recipes/world/ablations.yaml)"
    )
    parser.add_argument(
        "--run-dir", metavar="DIR", help="the finished run folder to start from (default: the recipe's)"
    )
    parser.add_argument("--variants", nargs="+", metavar="NAME", help="run only these variants")
    parser.add_argument(
        "--seeds", nargs="+", type=number(int, low=0), metavar="N", help="run only these seeds"
    )
    parser.add_argument(
        "--max-steps", type=number(int, low=1), help="GRPO steps per run (default: the recipe's)"
    )
    parser.add_argument(
        "--output-dir",
        type=folder_to_write,
        metavar="DIR",
        help="where runs and the report go (default: the recipe's)",
    )
    parser.add_argument(
        "--jobs",
        type=number(int, low=1),
        help="runs at a time, each in its own process (default: the recipe's)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="only merge the finished folders into the report"
    )
    parser.add_argument(
        "--skip-diagnostics",
        action="store_true",
        help="write the report without bringing the diagnostics (KL, entropy, families, support) up to date",
    )
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="run share K (from 0, as a Slurm array index) of N of the (variant, seed) grid, in "
        "<output_dir>/shards/K-of-N; every shard prepares the band and the SFT answers itself",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        metavar="DIR",
        help="run nothing: check that these shard folders share one band and SFT answers, and write the one "
        "report of their runs in --output_dir",
    )
    parser.add_argument(
        "--combine",
        action="store_true",
        help="run nothing: join the finished reports of every world of a multi-world recipe (its `worlds`) into "
        "one transfer report, Holm across the worlds, in --output-dir (default: the folder above the worlds' "
        "output folders, e.g. outputs/transfer)",
    )
    parser.set_defaults(run=run)
    return parser


_NOT_WITH_COMBINE = ("run_dir", "variants", "seeds", "max_steps", "jobs", "report_only", "shard", "merge")


def _combine(args: argparse.Namespace) -> int:
    """``--combine``: the transfer report across the recipe's worlds (:mod:`slmsql_hub.ablate.transfer`)."""
    from ..ablate.transfer import write_transfer_report
    from ..errors import UsageError

    given = [
        f"--{name.replace('_', '-')}"
        for name in _NOT_WITH_COMBINE
        if getattr(args, name) not in (None, False)
    ]
    if given:
        raise UsageError(
            f"--combine runs nothing and reads every world; it does not go with {', '.join(given)}"
        )
    report = write_transfer_report(args.config, args.output_dir)
    claims = report["claims"]
    missing = [f"{name} ({len(w['missing'])} of {w['expected']} runs)" for name, w in report["worlds"].items()
               if w["missing"]]  # fmt: skip
    verdict = {None: "not yet known", True: "yes", False: "NO"}[claims["main_transferred"]]
    return print_result(
        f"{len(report['worlds'])} worlds, {len(report['rows'])} variants; the main arm transferred: {verdict}",
        f"missing: {', '.join(missing)}" if missing else "every world's runs are in",
        f"report: {report['path']}",
    )


def run(args: argparse.Namespace) -> int:
    """Validate the recipe and the selection, run the grid, write the report, print where it is."""
    from ..ablate import run_study

    if args.combine:
        return _combine(args)

    report = run_study(
        args.config,
        variants=args.variants,
        report_only=args.report_only,
        shard=args.shard,
        merge=args.merge,
        diagnostics=not args.skip_diagnostics,
        run_dir=args.run_dir,
        output_dir=args.output_dir,
        seeds=args.seeds,
        max_steps=args.max_steps,
        jobs=args.jobs,
        on_progress=lambda line: print(line, flush=True),  # noqa: T201 - the command's progress
    )
    controls = report["controls"]
    return print_result(
        f"{len(report['variants'])} finished (variant, seed) entries; negative control "
        f"{'n/a' if controls['negative'] is None else 'held' if controls['negative'] else 'FAILED'}, positive control "
        f"{'held' if controls['positive'] else 'FAILED'}",
        f"report: {report['path']}",
    )
