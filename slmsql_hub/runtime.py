"""What every stage does at run time: set torch's threads, time itself, and record the library versions and the
Hub commits it loaded."""

from __future__ import annotations

import logging
import os
import platform
import time
from pathlib import Path

logger = logging.getLogger(__name__)


def bar_disabled(progress: object = True) -> bool | None:
    """tqdm's ``disable`` for one of the package's progress bars: off when ``progress`` is false, else tqdm's own
    rule (``None``: shown only where its stream is a terminal), so a log file gets no carriage returns or the
    cursor codes of nested bars.

    Example:

    ```python
    >>> from slmsql_hub.runtime import bar_disabled
    >>> bar_disabled(False), bar_disabled(True), bar_disabled("executing SQL")
    (True, None, None)

    ```
    """
    return None if progress else True


def die_with_parent(parent_pid: int) -> None:
    """In a worker process: end (SIGTERM) when the process that started it, ``parent_pid``, dies, so a killed
    ``slmsql ablate`` leaves no orphan still training into an output folder whose lock its death released.
    Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere a no-op. Exits at once when the parent is already gone.

    Example: ``ProcessPoolExecutor(2, context, initializer=die_with_parent, initargs=(os.getpid(),))``.
    """
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1  # <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the prctl took hold
        os._exit(1)


def set_num_threads(num_threads: int | None) -> int:
    """Set torch's intra-op threads (``None`` keeps the current value); return the value in effect."""
    import torch

    if num_threads is not None:
        torch.set_num_threads(num_threads)
    return torch.get_num_threads()


def code_commit() -> str | None:
    """The git commit of the checkout this package runs from, ``-dirty`` appended when its tracked files under
    ``slmsql_hub/`` differ from it; ``None`` for an installed copy (no checkout) or without git.

    Example:

    ```python
    >>> commit = code_commit()
    >>> commit is None or len(commit.split("-")[0]) == 40
    True

    ```
    """
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    git = ["git", "-C", str(root)]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no", "--", "slmsql_hub"],
                                 capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if changed else "") if head else None


def environment() -> dict[str, str]:
    """Versions of the libraries a run depends on, the package's commit when it runs from a checkout
    (:func:`code_commit`) and the device torch runs on (``device``: ``cuda``, ``mps`` or ``cpu``; with CUDA its
    version and the GPU's name), for every stage's summary and the card.

    Example:

    ```python
    >>> import torch
    >>> environment()["device"] == ("cuda" if torch.cuda.is_available() else environment()["device"])
    True
    >>> torch.cuda.is_available() or "gpu" not in environment()
    True

    ```
    """
    import datasets
    import peft
    import torch
    import transformers
    import trl

    from . import __version__

    return {
        "slmsql_hub": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "peft": peft.__version__,
        "datasets": datasets.__version__,
        **({"slmsql_hub_commit": commit} if (commit := code_commit()) else {}),
        **_device(torch),
    }


def _device(torch) -> dict[str, str]:
    if torch.cuda.is_available():
        return {"device": "cuda", "cuda": str(torch.version.cuda), "gpu": torch.cuda.get_device_name(0)}
    if torch.backends.mps.is_available():
        return {"device": "mps"}
    return {"device": "cpu"}


def hub_commit(
    ref: str | os.PathLike | None, revision: str | None = None, repo_type: str | None = None
) -> str | None:
    """The commit sha a Hub id (a model, or a ``repo_type`` one) at ``revision`` (``None``: main) was loaded
    from, read from the local cache (``huggingface_hub.resolve_revision``, no network); ``None`` for a local
    folder, no ``ref``, or an uncached one.

    Example:

    ```python
    >>> hub_commit(".") is None  # a local folder has no commit
    True

    ```
    """
    if not ref or Path(ref).expanduser().exists():
        return None
    from huggingface_hub import resolve_revision
    from huggingface_hub.errors import RevisionResolutionError

    try:
        return resolve_revision(
            str(ref), repo_type=repo_type, revision=revision, local_files_only=True
        ).resolved
    except RevisionResolutionError:
        logger.warning(
            "the commit of %s at %s is not in the local cache; not recorded", ref, revision or "main"
        )
        return None


def loaded_revisions(
    model: str | None, model_revision: str | None, adapter: str | None, adapter_revision: str | None
) -> dict[str, str | None]:
    """The Hub revisions a run asked for (``None``: main) and the commits they resolved to (:func:`hub_commit`), so
    even an unpinned run says which weights it loaded. Call it after loading, which fills the cache it reads.

    Example:

    ```python
    >>> loaded_revisions(".", None, None, None)
    {'model_revision': None, 'model_commit': None, 'adapter_revision': None, 'adapter_commit': None}

    ```
    """
    return {
        "model_revision": model_revision,
        "model_commit": hub_commit(model, model_revision),
        "adapter_revision": adapter_revision,
        "adapter_commit": hub_commit(adapter, adapter_revision),
    }


class Stopwatch:
    """Wall-clock seconds since creation."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def seconds(self) -> float:
        """Seconds elapsed, rounded to 0.01."""
        return round(time.perf_counter() - self._start, 2)
