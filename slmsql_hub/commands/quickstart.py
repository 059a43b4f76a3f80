"""``slmsql quickstart``: the whole study on the embedded world, in one command (``make quickstart``)."""

from __future__ import annotations

import argparse
import time

from ..quickstart import DEFAULT_OUT, DEFAULT_REPO_ID
from ..run_files import Run, RunLayout, read_run
from . import print_result


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "quickstart",
        help="run every stage on the embedded world: world, base, SFT 1-2, filter, GRPO, eval, card, dry-run push",
        description="Run (or resume) the main job on the embedded world into one run folder. Finished stages "
        "are reused; --force starts over.",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"the run folder (default: {DEFAULT_OUT})")
    parser.add_argument(
        "--recipes", default=None, help="folder of the world recipes (default: recipes/world)"
    )
    parser.add_argument(
        "--repo-id",
        default=DEFAULT_REPO_ID,
        help="Hub id the card and dry-run push are written for",
    )
    parser.add_argument("--budget", type=float, default=600.0, help="time budget in seconds (default 600)")
    parser.add_argument(
        "--attempt1",
        choices=("auto", "always", "never"),
        default="auto",
        help="GRPO attempt #1 on unfiltered data: auto runs it when it fits the budget",
    )
    parser.add_argument("--force", action="store_true", help="delete the run folder and start over")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..quickstart import run_quickstart

    started = time.monotonic()

    def progress(i: int, total: int, stage, state: str) -> None:
        said = f"{stage.description} ..." if state == "start" else state
        print(f"[{i}/{total}] {time.monotonic() - started:6.0f}s  {stage.name}: {said}", flush=True)  # noqa: T201

    result = run_quickstart(
        args.out,
        recipes=args.recipes,
        repo_id=args.repo_id,
        budget_s=args.budget,
        attempt1=args.attempt1,
        force=args.force,
        on_stage=progress,
    )
    run = RunLayout(args.out)
    out = run.root
    lines = [f"\nquickstart finished in {result.wall_s:.0f} s -> {out}/"]
    if result.skipped:
        lines += [f"  skipped {name}: {why}" for name, why in result.skipped.items()]
    lines += _headline(read_run(out))
    lines += [
        "",
        "Where things are:",
        f"  model card:        {run.card.readme}  (plots in {run.card.plots}/)",
        f"  evaluation:        {run.eval_results}",
        f"  GRPO telemetry:    {run.grpo.telemetry}",
        f"  filter report:     {run.filter_report}",
        f"  dry-run push:      {run.push_dry_run}/  (publish: slmsql push {out} --repo-id NAMESPACE/NAME --what all)",
        f"  open the Space:    python spaces/demo/app.py --run-dir {out}   (then http://127.0.0.1:7860)",
    ]
    return print_result(*lines)


def _headline(run: Run) -> list[str]:
    lines = []
    if (run.filter_report or {}).get("summary"):
        lines.append(f"  filter:  {run.filter_report['summary']}")
    for key, bench in (run.eval_results or {}).get("benchmarks", {}).items():
        lines.append(f"  {key}: {bench['comparison']['summary']}")
    return lines
