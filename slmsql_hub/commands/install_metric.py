"""``slmsql install-metric``: put the ``slmsql/ex`` metric into evaluate's module cache (works offline)."""

from __future__ import annotations

import argparse

from . import folder_to_write, print_result


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "install-metric",
        help="install the slmsql/ex metric so evaluate.load('slmsql/ex') works offline",
        description=(
            "Copy the slmsql/ex metric script into evaluate's module cache, so that "
            "evaluate.load('slmsql/ex') works with no network (HF_EVALUATE_OFFLINE=1) from any directory. "
            "Idempotent; prints where it installed."
        ),
    )
    parser.add_argument(
        "--cache-dir",
        type=folder_to_write,
        metavar="DIR",
        default=None,
        help="modules cache to install into (default: $HF_MODULES_CACHE, else $HF_HOME/modules)",
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from ..metric import install_metric

    return print_result(str(install_metric(cache_dir=args.cache_dir)))
