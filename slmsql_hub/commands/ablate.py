"""``slmsql ablate --config recipes/world/ablations.yaml``: the hypothesis study (see :mod:`slmsql_hub.study`).

A SIGTERM (``scancel``, a SLURM preemption, ``kill``) ends the command as an exception would, exit code 143: its
``with`` blocks unwind, so the output folder's lock is released and a task resubmitted on another host may take
the folder (a lock held by another host is never taken over; see :mod:`slmsql_hub.run.guard`).
"""

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
    parser.add_argument(
        "--prepare-only",
        action="store_true",
        help="only prepare the band and the SFT answers in --output-dir, for the shards to read (the SLURM "
        "path's first job)",
    )
    _add_slurm(parser)
    parser.set_defaults(run=run)
    return parser


def _add_slurm(parser: argparse.ArgumentParser) -> None:
    """The ``--slurm`` options (:mod:`slmsql_hub.study.slurm`; docs/cluster.md)."""
    group = parser.add_argument_group("SLURM (docs/cluster.md)")
    group.add_argument(
        "--slurm",
        action="store_true",
        help="submit the study as SLURM jobs (prepare, an array of shards, merge; a multi-world recipe without "
        "--run-dir: every world, then --combine) and record them in <output_dir>/slurm/jobs.json; rerun after a "
        "failed or cancelled job to submit what is left",
    )
    group.add_argument(
        "--slurm-status", action="store_true", help="record and print the states of the last submission's jobs"
    )
    group.add_argument(
        "--shards", type=number(int, low=1), metavar="N", help="array tasks (default: one per (variant, seed))"
    )
    group.add_argument("--partition", help="sbatch --partition")
    group.add_argument("--account", help="sbatch --account")
    group.add_argument("--gpus-per-task", type=number(int, low=0), metavar="N", help="sbatch --gpus-per-task")
    group.add_argument("--cpus-per-task", type=number(int, low=1), metavar="N", help="sbatch --cpus-per-task")
    group.add_argument("--time", metavar="T", help="sbatch --time per job (e.g. 04:00:00)")
    group.add_argument(
        "--array-throttle", type=number(int, low=1), metavar="N", help="at most N array tasks at a time (%%N)"
    )
    group.add_argument("--requeue", action="store_true", help="sbatch --requeue: a preempted task is requeued")
    group.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        metavar="ARGS",
        help="more sbatch options, as #SBATCH lines (repeatable, e.g. --sbatch-arg='--mem=32G')",
    )


_SLURM_ONLY = ("shards", "partition", "account", "gpus_per_task", "cpus_per_task", "time", "array_throttle",
               "requeue", "sbatch_arg")  # fmt: skip
_NOT_WITH_SLURM = ("report_only", "shard", "merge", "combine", "prepare_only")


_NOT_WITH_COMBINE = ("run_dir", "variants", "seeds", "max_steps", "jobs", "report_only", "shard", "merge")


def _combine(args: argparse.Namespace) -> int:
    """``--combine``: the transfer report across the recipe's worlds (:mod:`slmsql_hub.study.transfer`)."""
    from ..errors import UsageError
    from ..study.transfer import write_transfer_report

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


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run(args: argparse.Namespace) -> int:
    """Run the command with SIGTERM turned into ``SystemExit(143)`` (the module docstring), then restore it."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # signal handlers: the main thread only
        return _run(args)
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    """Validate the recipe and the selection, run the grid, write the report, print where it is."""
    from ..errors import UsageError
    from ..study import run_study

    if args.slurm or args.slurm_status:
        return _slurm(args)
    given = [f"--{name.replace('_', '-')}" for name in _SLURM_ONLY if getattr(args, name) not in (None, False, [])]
    if given:
        raise UsageError(f"{', '.join(given)} go with --slurm")
    if args.combine:
        return _combine(args)

    report = run_study(
        args.config,
        variants=args.variants,
        report_only=args.report_only,
        shard=args.shard,
        merge=args.merge,
        prepare_only=args.prepare_only,
        diagnostics=not args.skip_diagnostics,
        run_dir=args.run_dir,
        output_dir=args.output_dir,
        seeds=args.seeds,
        max_steps=args.max_steps,
        jobs=args.jobs,
        on_progress=lambda line: print(line, flush=True),  # noqa: T201 - the command's progress
    )
    if args.prepare_only:
        prepared = report["prepared"]
        return print_result(
            f"prepared: a band of {prepared['band']}, SFT answers on {', '.join(prepared['slices'])}",
            f"record: {report['path']}",
        )
    controls = report["controls"]
    return print_result(
        f"{len(report['variants'])} finished (variant, seed) entries; negative control "
        f"{'n/a' if controls['negative'] is None else 'held' if controls['negative'] else 'FAILED'}, positive control "
        f"{'held' if controls['positive'] else 'FAILED'}",
        f"report: {report['path']}",
    )


def _slurm(args: argparse.Namespace) -> int:
    """``--slurm`` (submit what is left) and ``--slurm-status`` (record and print the states)."""
    from ..errors import UsageError
    from ..study.slurm import (
        SlurmOptions,
        StudyArgs,
        check_slurm,
        refresh_states,
        slurm_folder,
        submit_study,
    )

    given = [f"--{name.replace('_', '-')}" for name in _NOT_WITH_SLURM if getattr(args, name) not in (None, False)]
    if args.slurm and args.slurm_status:
        given.append("--slurm-status")
    if given:
        raise UsageError(f"{'--slurm' if args.slurm else '--slurm-status'} does not go with {', '.join(given)}")
    check_slurm()
    study = StudyArgs(args.config, args.run_dir, args.output_dir, tuple(args.variants or ()) or None,
                      tuple(args.seeds) if args.seeds else None, args.max_steps, args.jobs,
                      not args.skip_diagnostics)  # fmt: skip
    if args.slurm_status:
        folder = slurm_folder(study)
        record = refresh_states(folder)
        if not record["submissions"]:
            raise UsageError(f"nothing submitted yet ({folder / 'jobs.json'} missing): run with --slurm")
        last = record["submissions"][-1]
        states = last["states"]
        lines = [f"{job['name']} {job['id']}: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())
                 if k == job["id"] or k.startswith(f"{job['id']}_")) for job in last["jobs"]]  # fmt: skip
        return print_result(*lines, f"recorded in {folder / 'jobs.json'}")
    options = SlurmOptions(args.partition, args.account, args.gpus_per_task, args.cpus_per_task, args.time,
                           args.array_throttle, args.requeue, tuple(args.sbatch_arg))  # fmt: skip
    result = submit_study(study, options, args.shards)
    folder = result["folder"]
    if result["active"]:
        waiting = ", ".join(f"{job} {state}" for job, state in sorted(result["active"].items()))
        return print_result(f"still queued or running: {waiting}; nothing submitted (rerun once they end, or "
                            "scancel them)", f"jobs: {folder}/jobs.json")  # fmt: skip
    if not result["submitted"]:
        return print_result("every job of the study finished; nothing to submit", f"jobs: {folder}/jobs.json")
    return print_result(
        "submitted: " + ", ".join(f"{name} {job}" for name, job in result["submitted"].items()),
        f"scripts and jobs.json: {folder}; states: the same command with --slurm-status",
    )
