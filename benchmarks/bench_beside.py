"""A stage run beside another (the quickstart's GRPO attempt #1 beside the band run): its process spawned at its
turn (old) or while a one-core stage runs before it (new, ``slmsql_hub.commands._beside``), side by side in one
run (issue #39).

A spawned process imports torch, transformers, PEFT and TRL afresh before it can train. The old path paid those
seconds after the band run had started, so attempt #1 ended that much after it; the new one starts the process
with the world build, which leaves a core idle, and the imports are done when the job comes. The script hands each
process the same job (what a GRPO stage imports, then nothing) and prints the seconds from the hand-off to the
job's end; for the new path it first waits ``--lead`` seconds, the world build's share. The job's own seconds
(the stage's training) are the same on both paths.

Usage::

    python benchmarks/bench_beside.py
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass

from slmsql_hub.commands._beside import BesideProcess, warm_up
from slmsql_hub.commands.quickstart import _WARM

WARM = _WARM["train grpo"]
"""What the quickstart's beside process imports for a ``train grpo`` stage."""


@dataclass(frozen=True)
class _Stage:
    name: str


def handoff_seconds(warm: tuple[str, ...], lead: float) -> float:
    """Seconds the job took in a beside process started ``lead`` seconds before it was handed over (as the
    process measures it: from the hand-off to the job's end, without the process's exit)."""
    process = BesideProcess(_Stage("bench"), warm)
    try:
        time.sleep(lead)
        process.run(functools.partial(warm_up, WARM))  # what train grpo needs before its first step
        outcome = process.result()
        if outcome[0] != "done":
            raise RuntimeError(f"the beside process failed: {outcome}")
        return outcome[1]
    finally:
        process.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lead", type=float, default=8.0, help="seconds the new path's process starts early "
                        "(the quickstart's world build: ~8 s)")  # fmt: skip
    args = parser.parse_args(argv)
    old = handoff_seconds((), 0.0)
    new = handoff_seconds(WARM, args.lead)
    print("| path | process started | hand-off to job's end, s |")
    print("| --- | --- | --- |")
    print(f"| old | at its turn | {old:.2f} |")
    print(f"| new | {args.lead:.0f} s before (a one-core stage) | {new:.2f} |")
    print(f"old - new: attempt #1 starts training {old - new:.1f} s sooner")
    return 0


if __name__ == "__main__":
    sys.exit(main())
