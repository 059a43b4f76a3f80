"""``slmsql push RUN_DIR --repo-id NAMESPACE/NAME``: publish a run to the Hugging Face Hub.

``--what`` picks the targets (``model`` by default; ``world-benchmark``, ``sft-model``, ``dataset``,
``metric-space``, ``demo-space``, comma-separated, or ``all``); the dataset and Space ids default to names derived from ``--repo-id`` (see
:func:`slmsql_hub.hub.default_repo_ids`). ``--dry-run`` writes the exact folders that would be uploaded under
``RUN_DIR/push_dry_run/`` and prints files and targets without touching the network.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from . import folder_to_write, print_result, repo_id


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``slmsql push``."""
    parser = subparsers.add_parser(
        "push",
        help="publish a run to the Hub: model card + adapter, band dataset, metric Space, demo Space",
        description=(
            "Push a run folder to the Hugging Face Hub. Targets (--what): model = RUN_DIR/card (run `slmsql card` "
            "first) to --repo-id, and a local base model (RUN_DIR/card/base) to NAMESPACE/NAME-base so the adapter "
            "loads with AutoPeftModelForCausalLM.from_pretrained(REPO_ID); dataset = the pass-rate band "
            "(RUN_DIR/filter/band) as parquet with a dataset card, to NAMESPACE/NAME-band; sft-model = the SFT "
            "adapter (RUN_DIR/sft/stage2) to NAMESPACE/NAME-sft; metric-space = the ex metric (script, card, "
            "Gradio app) to NAMESPACE/ex; demo-space = spaces/demo with its configuration (the run's base, SFT and "
            "GRPO repos) and databases to NAMESPACE/NAME-demo. Both Spaces carry the slmsql-hub wheel of this "
            "version, pinned in requirements.txt. world-benchmark = a world run's evaluation splits, their "
            "databases and eval.yaml (RUN_DIR/world_benchmark, built from RUN_DIR/world) to "
            "NAMESPACE/NAME-world-benchmark, pushed first; the model card pushed with it names it, at its commit, in "
            "model-index and .eval_results (all includes it for a run evaluated on the world that names no "
            "benchmark dataset). Models and datasets are created private, Spaces public, unless --private or "
            "--public. "
            "The token comes from HF_TOKEN or `hf auth login`; HF_ENDPOINT selects another Hub. "
            "Example: slmsql push outputs/quickstart --repo-id alice/qwen-grpo --what all --dry-run"
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run folder (e.g. outputs/quickstart)")
    parser.add_argument(
        "--repo-id", type=repo_id(), help="the model repository NAMESPACE/NAME; other ids derive from it"
    )
    parser.add_argument(
        "--what",
        default="model",
        help="model (default), world-benchmark, sft-model, dataset, metric-space, demo-space: comma-separated, or "
        "all",
    )
    visibility = parser.add_mutually_exclusive_group()
    visibility.add_argument(
        "--private",
        dest="private",
        action="store_true",
        default=None,
        help="create every new repository private (default: models and datasets private, Spaces public; a "
        "private Space cannot install its wheel as pushed, see docs/usage.md)",
    )
    visibility.add_argument(
        "--public", dest="private", action="store_false", help="create every new repository public"
    )
    parser.add_argument("--revision", help="branch to push to (created from main when missing; default main)")
    parser.add_argument(
        "--create-pr", action="store_true", help="open a pull request instead of committing to the branch"
    )
    parser.add_argument("--commit-message", help="commit title for the model and Space repositories")
    parser.add_argument(
        "--base-repo-id",
        type=repo_id(),
        help="where a local base model goes with --what model (default NAMESPACE/NAME-base)",
    )
    parser.add_argument(
        "--sft-repo-id", type=repo_id(), help="the SFT adapter's repository (default NAMESPACE/NAME-sft)"
    )
    parser.add_argument(
        "--dataset-repo-id", type=repo_id(), help="dataset repository (default NAMESPACE/NAME-band)"
    )
    parser.add_argument(
        "--benchmark-repo-id",
        type=repo_id(),
        help="the world benchmark's dataset repository (default NAMESPACE/NAME-world-benchmark)",
    )
    parser.add_argument("--metric-space-id", type=repo_id(), help="metric Space (default NAMESPACE/ex)")
    parser.add_argument("--demo-space-id", type=repo_id(), help="demo Space (default NAMESPACE/NAME-demo)")
    parser.add_argument("--demo-dir", help="the demo Space's files (default spaces/demo)")
    parser.add_argument(
        "--wheel",
        metavar="PATH",
        help="the slmsql-hub wheel the Spaces install (default: built from the source tree this runs from; "
        "needed when slmsql-hub was itself installed from a wheel)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="write the exact folders that would be uploaded and print them; no network, no token needed",
    )
    parser.add_argument(
        "--dry-run-dir", type=folder_to_write, help="where --dry-run writes (default RUN_DIR/push_dry_run)"
    )
    parser.set_defaults(run=run)
    return parser


def _human(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"  # pragma: no cover


def run(args: argparse.Namespace) -> int:
    """Plan the push; then write the dry-run folders, or upload."""
    from ..hub import push, space_token_note
    from ..run.guard import check_output, output_lock
    from ..run.layout import RunLayout
    from ..run.read import read_run

    run = RunLayout(args.run_dir)
    if args.dry_run:
        read_run(run.root)  # a missing run folder: one line, before a lock creates it
        inputs = [*run.stage_folders, run.card.root, run.world_benchmark, args.demo_dir, args.wheel]
        with output_lock(check_output(args.dry_run_dir or run.push_dry_run, inputs, "--dry-run-dir")):
            return _dry_run(args, run)
    targets = _targets(args)
    progress = run.push_progress if run.root.is_dir() else None  # a Space alone needs no run folder
    with output_lock(progress) if progress is not None else contextlib.nullcontext():
        results = push(
            targets,
            private=args.private,
            revision=args.revision,
            create_pr=args.create_pr,
            commit_message=args.commit_message,
            progress=progress,
        )
    lines = []
    for result in results:
        resumed = " (pushed by the interrupted push before; not sent again)" if result.resumed else ""
        lines.append(f"{result.what} -> {result.url} ({'private' if result.private else 'public'}){resumed}")
        lines.append(f"  commit {result.commit_url}")
        if result.pr_url:
            lines.append(f"  pull request {result.pr_url}")
    note = space_token_note(results)
    if note:
        lines.append(f"note: {note}")
    return print_result(*lines)


def _targets(args: argparse.Namespace) -> list:
    """The push plan's targets for ``args``."""
    from ..hub import plan_push

    return plan_push(
        args.run_dir,
        args.repo_id,
        args.what,
        dataset_repo_id=args.dataset_repo_id,
        metric_space_id=args.metric_space_id,
        demo_space_id=args.demo_space_id,
        demo_dir=args.demo_dir,
        base_repo_id=args.base_repo_id,
        sft_repo_id=args.sft_repo_id,
        revision=args.revision,
        wheel=args.wheel,
        benchmark_repo_id=args.benchmark_repo_id,
    )


def _dry_run(args: argparse.Namespace, run) -> int:
    """Write the dry-run folders and print what would be uploaded."""
    from ..hub import write_dry_run

    revision = args.revision or "main"
    mode = "pull request against " + revision if args.create_pr else revision
    out_dir = Path(args.dry_run_dir) if args.dry_run_dir else run.push_dry_run
    plan = write_dry_run(
        _targets(args), out_dir, private=args.private, revision=args.revision, create_pr=args.create_pr
    )
    lines = [f"dry run: nothing was sent; the folders below are exactly what would be uploaded ({out_dir})"]
    for target in plan["targets"]:
        total = sum(f["size"] for f in target["files"])
        lines.append(
            f"{target['what']} -> {target['repo_type']} {target['repo_id']} "
            f"({'private' if target['private'] else 'public'} if created, {mode}): "
            f"{target['url']}"
        )
        lines.append(f"  folder {target['folder']}: {len(target['files'])} files, {_human(total)}")
        lines += [f"    {f['path']}  ({_human(f['size'])})" for f in target["files"]]
        if target.get("base_model"):
            base = target["base_model"]
            pinned = f" at revision {base['revision']}" if base.get("revision") else ""
            lines.append(f"  adapter_config.json and README.md name the base model {base['repo_id']}{pinned}")
        if target.get("note"):
            lines.append(f"  note: {target['note']}")
    lines.append(f"plan: {out_dir / 'plan.json'}")
    return print_result(*lines)
