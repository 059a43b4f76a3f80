"""A stage run beside another in its own process (``slmsql quickstart``: GRPO attempt #1 beside the band run).

The process is spawned, not forked (torch's OpenMP threads do not survive a fork), so it imports torch,
transformers and TRL afresh, ~5 s on one core. It does so as soon as it starts and then waits for its job:
started while the parent runs a one-core stage, those seconds cost the run nothing.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

from ..errors import UsageError


class BesideProcess:
    """A spawned process for ``stage`` (anything with a ``name``): it imports ``warm`` at once (``module`` or
    ``module:attribute`` names: an attribute of a lazy module such as ``trl:GRPOTrainer`` loads it), then waits
    for :meth:`run`; :meth:`result` waits for the job; :meth:`stop` ends it (an
    unused one exits without a word). Its log lines carry the stage's name; its stdout is dropped (the
    parent's progress shows), as are its tqdm bars.

    Example: ``process = BesideProcess(stage, ("slmsql_hub.training.grpo", "trl:GRPOTrainer"))``, later
    ``process.run(fn, *args)`` while this process runs its own stage, then ``process.result()``.
    """

    def __init__(self, stage: Any, warm: tuple[str, ...] = ()) -> None:
        self.stage = stage
        context = multiprocessing.get_context("spawn")
        jobs, self._jobs = context.Pipe(duplex=False)
        self._results, send = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_main, name=stage.name, daemon=True,
            args=(stage.name, warm, logging.getLogger().getEffectiveLevel(), os.getpid(), jobs, send),
        )  # fmt: skip
        quiet = os.environ.get("TQDM_DISABLE")
        os.environ["TQDM_DISABLE"] = "1"  # read when tqdm is imported: the child inherits it, no second set of bars
        try:
            self.process.start()
        finally:
            if quiet is None:
                del os.environ["TQDM_DISABLE"]
            else:
                os.environ["TQDM_DISABLE"] = quiet
        jobs.close()
        send.close()

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Hand it its job, ``fn(*args, **kwargs)`` (picklable), and return at once."""
        self._jobs.send((fn, args, kwargs))

    def result(self) -> tuple[str, Any]:
        """Wait for the job: ``("done", seconds)``, ``("usage", message)`` (a UsageError) or ``("crashed", None)``
        (its traceback printed by the child)."""
        try:
            outcome = self._results.recv()
        except EOFError:  # it ended without a word: it crashed
            outcome = ("crashed", None)
        self.process.join()
        return outcome

    def stop(self) -> None:
        """End it (waiting or running)."""
        self._jobs.close()
        self.process.terminate()
        self.process.join()


def warm_up(names: tuple[str, ...]) -> None:
    """Import each ``module`` or ``module:attribute`` name (what :class:`BesideProcess` does as it starts)."""
    import importlib

    for name in names:
        module, _, attribute = name.partition(":")
        loaded = importlib.import_module(module)
        if attribute:
            getattr(loaded, attribute)


def _main(name: str, warm: tuple[str, ...], level: int, parent: int, jobs: Any, send: Any) -> None:
    import sys

    from ..runtime import die_with_parent

    die_with_parent(parent)
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115  (for the child's life)
    warm_up(warm)
    try:
        fn, args, kwargs = jobs.recv()
    except EOFError:  # the parent ran nothing beside after all
        return
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s [{name}] %(name)s: %(message)s")
    t0 = time.monotonic()
    try:
        fn(*args, **kwargs)
        send.send(("done", time.monotonic() - t0))
    except UsageError as err:
        send.send(("usage", str(err)))
