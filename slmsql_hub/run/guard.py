"""Nothing lost, nothing half-written (issue #34): the rules every command that writes follows, said once.

- :func:`check_output`: an output never overlaps an input (equal, inside, containing, or a symlink to one);
  one :class:`~slmsql_hub.errors.UsageError` line before anything loads.
- :func:`refuse_finished`: a finished artifact is replaced only with ``--overwrite``.
- :func:`output_lock`: one writer per output. The lock is a sibling file ``.NAME.slmsql.lock`` beside the output
  (not inside it, so a folder replaced by a rename, or uploaded as it is, never carries or loses it), holding
  the writer's host and pid. A second writer is refused naming them; a lock left by a dead process of this host
  is taken over with a warning, and what that writer left beside the output is cleaned up (its temporary
  siblings removed, an output it had moved aside put back); one from another host is never taken over (it may be a live cluster node).
  Under ``accelerate launch`` only the main process (``RANK`` 0) takes it; the other ranks write under it.
- :func:`atomic_folder`: a folder (a card, a dataset: :func:`save_dataset`) built in a temporary sibling and
  renamed into place; a failure leaves the old folder and no temporary one. Files go through
  :func:`~slmsql_hub.run.files.write_atomic`. A training stage's folder also holds checkpoints and telemetry,
  so its saved files (adapter, tokenizer, config) go through :func:`staged_files`: each renamed in whole.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import UsageError
from .layout import RUN_SUMMARY, WORLD_PARTS

logger = logging.getLogger(__name__)

LOCK_SUFFIX = ".slmsql.lock"


def check_output(output: str | os.PathLike, inputs: Iterable[str | os.PathLike | None], what: str) -> Path:
    """``output`` (as given) after refusing one that equals, is inside or contains an existing input, symlinks
    resolved; ``None`` inputs and ones that do not exist (Hub ids) are skipped.

    Example:

    ```python
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "data").mkdir()
    >>> check_output(root / "out", [root / "data", None, "Qwen/Qwen2.5-0.5B"], "--out") == root / "out"
    True
    >>> check_output(root / "data" / "x", [root / "data"], "--out")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: --out .../data/x is inside the input .../data; choose an output outside the inputs

    ```
    """
    out = Path(output).expanduser()
    real_out = out.resolve()
    for given in inputs:
        if given is None or not os.path.lexists(Path(given).expanduser()):
            continue
        real_in = Path(given).expanduser().resolve()
        if real_out == real_in:
            relation = "is a symlink to" if out.absolute() != real_out else "is"
        elif real_in in real_out.parents:
            relation = "is inside"
        elif real_out in real_in.parents:
            relation = "contains"
        else:
            continue
        raise UsageError(f"{what} {out} {relation} the input {given}; choose an output outside the inputs")
    return out


_INPUT_FIELDS = (
    "dataset_paths", "world_dir", "world_root", "bird_root", "spider_root", "synsql_root",
    "model_name_or_path", "tokenizer_name_or_path", "adapter_path", "sft_adapter", "grpo_adapter", "bands",
    "training_band",
)  # fmt: skip
"""The recipe fields (of every stage's config dataclasses) that name what a stage reads. A world folder counts
as its :data:`~slmsql_hub.run.layout.WORLD_PARTS`: the world recipes write their stages inside it
(``outputs/world/base``)."""

_WORLD_FIELDS = ("world_dir", "world_root")


def config_inputs(*configs: object) -> list[str]:
    """The paths a stage reads, from the :data:`_INPUT_FIELDS` its ``configs`` have (a list field gives each).

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> config_inputs(SimpleNamespace(dataset_paths=["d1", "d2"], world_root=None), SimpleNamespace(adapter_path="a"))
    ['d1', 'd2', 'a']
    >>> config_inputs(SimpleNamespace(world_root="w"))
    ['w/world.json', 'w/databases', 'w/datasets']

    ```
    """
    found: list[str] = []
    for config in configs:
        for name in _INPUT_FIELDS:
            value = getattr(config, name, None)
            values = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)] if value else []
            if name in _WORLD_FIELDS:
                values = [os.path.join(v, part) for v in values for part in WORLD_PARTS]
            found += values
    return found


def refuse_finished(
    output: str | os.PathLike, finished: bool, what: str, artifact: str = "run", how: str = "--overwrite"
) -> None:
    """A :class:`UsageError` when ``finished`` (the output already holds a finished artifact) and the user did not
    say ``how`` to replace it.

    Example:

    ```python
    >>> refuse_finished("runs/grpo", False, "--output_dir")
    >>> refuse_finished("runs/grpo", True, "--output_dir")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: --output_dir runs/grpo holds a finished run; pass --overwrite to replace it, or choose another

    ```
    """
    if finished:
        raise UsageError(f"{what} {output} holds a finished {artifact}; pass {how} to replace it, or choose another")


def lock_path(output: str | os.PathLike) -> Path:
    """The lock file of ``output``: ``.NAME.slmsql.lock`` beside it (symlinks resolved).

    Example:

    ```python
    >>> lock_path("/runs/q/grpo").as_posix()
    '/runs/q/.grpo.slmsql.lock'

    ```
    """
    real = Path(output).expanduser().resolve()
    return real.parent / f".{real.name}{LOCK_SUFFIX}"


def _main_process() -> bool:
    """False on the non-main ranks of ``accelerate launch``/``torchrun`` (which set ``RANK``)."""
    return os.environ.get("RANK", "0") == "0"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _holder(lock: Path) -> dict:
    """The ``{"host", "pid"}`` in ``lock``; an unreadable one is a :class:`UsageError` saying to remove it."""
    try:
        holder = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        holder = None
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        raise UsageError(f"the lock {lock} is not one this tool wrote; if no run writes there, remove it")
    return holder


def _try_create(lock: Path, me: dict) -> bool:
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(me) + "\n")
    return True


def _acquire(output: Path, lock: Path) -> dict:
    me = {"host": socket.gethostname(), "pid": os.getpid()}
    lock.parent.mkdir(parents=True, exist_ok=True)
    if _try_create(lock, me):
        return me
    holder = _holder(lock)
    host, pid = holder.get("host"), holder["pid"]
    if host != me["host"]:
        raise UsageError(
            f"{output} is being written by pid {pid} on host {host} (lock {lock}); if that run is gone, remove "
            "the lock and rerun"
        )
    if _alive(pid):
        raise UsageError(f"{output} is being written by pid {pid} on host {host} (lock {lock}); wait for it to end")
    logger.warning("taking over the stale lock %s of pid %d on %s, which is no longer running", lock, pid, host)
    lock.unlink(missing_ok=True)
    if not _try_create(lock, me):
        raise UsageError(f"{output} was taken by another writer while its stale lock {lock} was replaced; rerun")
    _clean_after_dead_writer(output)
    return me


def _clean_after_dead_writer(output: Path) -> None:
    """What a killed writer of ``output`` left beside it, once its lock is ours: an ``output`` it had moved aside
    (killed between :func:`replace_folder`'s two renames) goes back, and its temporary siblings
    (:func:`atomic_folder`'s, :func:`~slmsql_hub.run.files.write_atomic`'s) are removed."""
    real = output.expanduser().resolve()
    aside = sorted(real.parent.glob(f".{real.name}.old-*"), key=lambda p: p.stat().st_mtime)
    if aside and not os.path.lexists(real):
        logger.warning("putting back %s, which a killed writer had moved aside to %s", real, aside[-1])
        os.rename(aside.pop(), real)
    for left in [*real.parent.glob(f".{real.name}.tmp*"), *aside]:
        logger.warning("removing %s, left by a killed writer of %s", left, real)
        if left.is_dir() and not left.is_symlink():
            shutil.rmtree(left, ignore_errors=True)
        else:
            left.unlink(missing_ok=True)


@contextlib.contextmanager
def output_lock(output: str | os.PathLike, *, main_process: bool | None = None) -> Iterator[Path | None]:
    """Hold the one-writer lock of ``output`` (a file or a folder) for the ``with`` block; yields the lock file
    (``None`` on a non-main rank, which takes no lock). A second writer is a :class:`UsageError` naming the
    holder's host and pid.

    Example:

    ```python
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "card"
    >>> with output_lock(out) as lock:
    ...     lock.name, lock.exists()
    ('.card.slmsql.lock', True)
    >>> lock.exists()
    False

    ```
    """
    if not (_main_process() if main_process is None else main_process):
        yield None
        return
    lock = lock_path(output)
    me = _acquire(Path(output), lock)
    try:
        yield lock
    finally:
        with contextlib.suppress(UsageError, FileNotFoundError):
            if _holder(lock) == me:
                lock.unlink()


def replace_folder(built: str | os.PathLike, final: str | os.PathLike) -> None:
    """Rename the folder ``built`` to ``final``, replacing a folder there: the old one is moved aside first and
    removed after, so a crash leaves the old folder or the new one at ``final``, and a failed rename puts the old
    one back."""
    built, final = Path(built), Path(final)
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
    if final.exists():
        os.replace(final, old)
    try:
        os.replace(built, final)
    except OSError:
        if old.exists():
            os.rename(old, final)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_folder(final: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary sibling of ``final`` to fill; on success it replaces ``final``
    (:func:`replace_folder`), on any failure it is removed and ``final`` is left as it was.

    Example:

    ```python
    >>> import tempfile
    >>> final = Path(tempfile.mkdtemp()) / "band"
    >>> with atomic_folder(final) as tmp:
    ...     _ = (tmp / "data.arrow").write_text("rows")
    >>> sorted(p.name for p in final.parent.iterdir())
    ['band']

    ```
    """
    final = Path(final)
    tmp = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        yield tmp
        replace_folder(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save_dataset(dataset, folder: str | os.PathLike, **kwargs) -> Path:
    """``dataset.save_to_disk`` into an :func:`atomic_folder` replacing ``folder`` (``kwargs`` go to
    ``save_to_disk``): a crash leaves the old dataset or the new one, never a mix of their shards."""
    with atomic_folder(folder) as tmp:
        dataset.save_to_disk(str(tmp), **kwargs)
    return Path(folder)


@contextlib.contextmanager
def staged_files(folder: str | os.PathLike, *, main_process: bool = True) -> Iterator[Path]:
    """Yield ``folder/.saving`` to save several files into (a trainer's ``save_model`` on every rank); then the
    main process renames each into ``folder``. A file is never half-written at its place; the folder's
    ``run_summary.json`` (written last, the mark of a finished stage) is set aside while they move, and put back
    when none moved. The staging folder is removed in every case.

    Example:

    ```python
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> with staged_files(out) as staging:
    ...     _ = (staging / "adapter_model.safetensors").write_bytes(b"weights")
    >>> sorted(p.name for p in out.iterdir())
    ['adapter_model.safetensors']

    ```
    """
    folder = Path(folder)
    staging = folder / ".saving"
    if main_process:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    try:
        yield staging
        if main_process:
            _move_in(staging, folder)
    finally:
        if main_process:
            shutil.rmtree(staging, ignore_errors=True)


def _move_in(staging: Path, folder: Path) -> None:
    summary, aside = folder / RUN_SUMMARY, staging.with_name(f".{RUN_SUMMARY}.old")
    if summary.is_file():
        os.rename(summary, aside)
    moved = 0
    try:
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            target = folder / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            moved += 1
    except OSError:
        if not moved and aside.is_file():
            os.rename(aside, summary)  # nothing changed: the old stage is still whole
        raise
    finally:
        aside.unlink(missing_ok=True)
