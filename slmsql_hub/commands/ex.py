"""``slmsql ex``: execution accuracy of a predictions file against gold SQL, with a per-level breakdown.

Reads predictions and gold in the Spider, BIRD or JSONL format (see
:mod:`slmsql_hub.data.prediction_files`), checks every database exists before running anything, judges all
questions in the sandbox (progress bar), prints EX with a breakdown by Spider hardness or given difficulty,
and optionally writes one JSON line per question.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from pathlib import Path

from ..errors import UsageError
from ..run.files import write_atomic
from ..run.guard import check_output, output_lock, refuse_finished
from ..sql.compare import CompareMode, check_keep_distinct
from . import existing_folder, number

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "ex",
        help="execution accuracy of a predictions file (Spider, BIRD or JSONL format)",
        description=(
            "Judge predictions against gold SQL by execution in the read-only sandbox and print EX over the "
            "scorable questions, broken down by Spider hardness or by given difficulty. A question whose "
            "gold SQL fails is unscorable: counted apart, never scored 0."
        ),
    )
    parser.add_argument("--pred", required=True, metavar="FILE", help="predictions file")
    parser.add_argument(
        "--gold",
        metavar="FILE",
        help="gold file, one 'SQL<TAB>db_id' per line (spider and bird formats; jsonl lines carry their gold)",
    )
    parser.add_argument(
        "--db-root",
        type=existing_folder,
        metavar="DIR",
        help="folder with one <db_id>/<db_id>.sqlite per database (relative JSONL db_path also resolve here)",
    )
    parser.add_argument(
        "--format",
        choices=("spider", "bird", "jsonl"),
        default=None,
        help="predictions format (default: detected from the extension and content)",
    )
    parser.add_argument(
        "--difficulty",
        metavar="FILE",
        help="difficulty per question: JSONL objects with 'difficulty', or a JSON list such as BIRD's dev.json",
    )
    parser.add_argument(
        "--mode",
        choices=[mode.value for mode in CompareMode],
        default="bird",
        help="comparison rule: bird (set of rows, column order matters; default) or spider (test-suite rule)",
    )
    parser.add_argument(
        "--keep-distinct", action="store_true", help="spider mode: keep DISTINCT instead of removing it"
    )
    parser.add_argument(
        "--timeout",
        type=number(float, low=0, above=True),
        default=30.0,
        metavar="S",
        help="time limit per query, CPU seconds (more: wrong)",
    )
    parser.add_argument(
        "--workers", type=number(int, low=1), default=None, metavar="N", help="sandbox worker processes"
    )
    parser.add_argument("--out", metavar="FILE", help="write one JSON line per question here")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..data.prediction_files import detect_format, load_prediction_records, resolve_db_paths

    out = _checked_out(args)
    with output_lock(out) if out is not None else contextlib.nullcontext():
        if out is not None:  # under the lock: a file another run finished meanwhile counts too
            refuse_finished(out, out.exists() and not args.overwrite, "--out", "verdict file")
        fmt = args.format or detect_format(args.pred)
        records = load_prediction_records(args.pred, args.gold, fmt=fmt, difficulty_path=args.difficulty)
        db_paths = resolve_db_paths(records, args.db_root)
        if out is not None:
            check_output(out, sorted(set(db_paths)), "--out")
        return _judge(args, out, fmt, records, db_paths)


def _judge(args: argparse.Namespace, out: Path | None, fmt: str, records, db_paths) -> int:
    """Judge every question, write ``--out`` (when given) and print the report."""
    from ..sql import Judge, Limits
    from ..sql.ex_report import build_ex_report, example_levels

    logger.info("judging %d questions (%s format, %s mode)", len(records), fmt, args.mode)

    # Spider/BIRD files hold SQL, run as written (as the official evaluators do); JSONL holds model output.
    judge = Judge(
        mode=args.mode,
        keep_distinct=args.keep_distinct,
        extract=fmt == "jsonl",
        limits=Limits(timeout_s=args.timeout),
        workers=args.workers,
    )
    with judge:
        judgements = judge.judge_many(
            [r.prediction for r in records], [r.gold_sql for r in records], db_paths, progress="judging"
        )
    breakdown_by, levels = example_levels([r.gold_sql for r in records], [r.difficulty for r in records])
    report = build_ex_report(
        judgements, levels=levels, breakdown_by=breakdown_by, mode=args.mode, keep_distinct=args.keep_distinct
    )
    if out is not None:
        _write_per_question(out, records, db_paths, judgements, breakdown_by, levels)
    print(report.render())  # noqa: T201 - the command's output
    if report.counts.num_scored == 0:
        raise UsageError(
            f"none of the {len(records)} questions could be scored: every gold query failed "
            f"(first: {judgements[0].error}); check --gold and --db-root"
        )
    return 0


def _checked_out(args: argparse.Namespace) -> Path | None:
    """The ``--out`` file, after refusing (``UsageError``) options that cannot work together."""
    check_keep_distinct(args.mode, args.keep_distinct, "--keep-distinct", "--mode")
    out = Path(args.out) if args.out else None
    if out is None:
        return None
    if out.is_dir():
        raise UsageError(f"--out {out} is a folder: give a file name, e.g. {out / 'per_example.jsonl'}")
    return check_output(out, [args.pred, args.gold, args.difficulty, args.db_root], "--out")


def _write_per_question(out: Path, records, db_paths, judgements, breakdown_by: str, levels) -> None:
    """One JSON line per question: where it ran, what was compared and the verdict."""
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = (
        {
            "index": record.index,
            "db_id": record.db_id,
            "db_path": str(db_path),
            "prediction": record.prediction,
            "gold": record.gold_sql,
            **judgement.to_dict(),
            breakdown_by: level,
        }
        for record, db_path, judgement, level in zip(records, db_paths, judgements, levels)
    )
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    # backslashreplace: text that is not UTF-8 (a lone surrogate) is written as its JSON escape, losslessly
    write_atomic(out, text, errors="backslashreplace")
    logger.info("wrote %d per-question verdicts to %s", len(records), out)
