"""The computation behind the ``slmsql/ex`` metric, usable without ``evaluate``."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence, Sized
from pathlib import Path

from ..errors import InfrastructureError, UsageError
from ..sql import CompareMode, Judge, Judgement, Limits, Sandbox
from ..sql.compare import check_keep_distinct
from ..sql.ex_report import VerdictCounts, count_verdicts

logger = logging.getLogger(__name__)


def compute_execution_accuracy(
    predictions: Sequence[str | None],
    references: Sequence[str],
    db_path: Sequence[str | os.PathLike],
    *,
    mode: str = "bird",
    keep_distinct: bool = False,
    timeout_s: float = 30.0,
    max_ops: int | None = Limits.max_ops,
    return_details: bool = False,
    workers: int | None = None,
    sandbox: Sandbox | None = None,
    progress: bool = False,
) -> dict:
    """Execution accuracy (EX) of predictions against gold SQL, judged by running both in the sandbox.

    Each prediction may be raw model output (the SQL is pulled out with :func:`~slmsql_hub.sql.extract_sql`) or
    plain SQL. The arguments and the result (``execution_accuracy`` and the ``num_*`` counts of
    :class:`~slmsql_hub.sql.ex_report.VerdictCounts`) are those of the metric's ``_KWARGS_DESCRIPTION``
    (:mod:`slmsql_hub.metric.ex`); a ``None`` prediction is no SQL; ``timeout_s`` and ``workers`` are ignored
    with an open ``sandbox`` (which is left open).

    Raises:
        UsageError: the inputs differ in length or are empty, ``mode`` is unknown, a database file is
            missing, or **no example could be scored** (every gold query failed: EX would be undefined, so
            there is no number to report rather than a misleading 0).
        InfrastructureError: no example could be scored because of the machine (a query starved of CPU by
            busy cores until the wall-clock cap, workers killed from outside); a query over its budget is
            never this: it is wrong (a prediction) or unscorable (a gold).

    Example:

    ```python
    >>> from slmsql_hub.metric import compute_execution_accuracy, make_demo_database
    >>> db = make_demo_database()
    >>> result = compute_execution_accuracy(
    ...     ["SELECT count(*) FROM singer", "SELECT name FROM singer", "SELEC oops"],
    ...     ["SELECT count(*) FROM singer", "SELECT name FROM singer WHERE age > 40", "SELECT 1"],
    ...     [db] * 3,
    ...     workers=1,
    ... )
    >>> round(result["execution_accuracy"], 4), result["num_scored"], result["num_pred_errors"]
    (0.3333, 3, 1)

    ```
    """
    compare_mode = _check_inputs(predictions, references, db_path, mode, keep_distinct, timeout_s)
    judge = Judge(
        sandbox,
        mode=compare_mode,
        keep_distinct=keep_distinct,
        limits=Limits(timeout_s=float(timeout_s), max_ops=max_ops),
        workers=workers,
    )
    with judge:
        judgements = judge.judge_many(list(predictions), list(references), list(db_path), progress=progress)

    counts = _scorable_counts(judgements)
    result = {"execution_accuracy": counts.execution_accuracy}
    result.update(
        (f.name, getattr(counts, f.name)) for f in dataclasses.fields(counts) if f.name.startswith("num_")
    )
    if return_details:
        result["details"] = [j.to_dict() for j in judgements]
    return result


def _check_inputs(predictions, references, db_path, mode: str, keep_distinct: bool, timeout_s) -> CompareMode:
    """The compare mode, after refusing inputs that cannot be scored: ``TypeError`` for an argument of the wrong
    type (``None`` or a plain string where a list goes, a ``timeout_s`` that is not a number), ``UsageError`` for
    the rest."""
    for name, value in (("predictions", predictions), ("references", references), ("db_path", db_path)):
        if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, Sized):
            raise TypeError(f"{name} must be a list with one entry per example; got {type(value).__name__}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise TypeError(f"timeout_s must be a number of seconds; got {timeout_s!r}"[:200])
    n = len(predictions)
    if not (n == len(references) == len(db_path)):
        raise UsageError(
            f"predictions, references and db_path must have one entry per example; got {n}, "
            f"{len(references)} and {len(db_path)}"
        )
    if n == 0:
        raise UsageError("no examples to score: predictions, references and db_path are empty")
    compare_mode = CompareMode.parse(mode)
    check_keep_distinct(compare_mode, keep_distinct, mode_option="mode")
    if not timeout_s or timeout_s <= 0:
        raise UsageError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    _check_databases(db_path)
    return compare_mode


def _scorable_counts(judgements: list[Judgement]) -> VerdictCounts:
    """The verdict counts; raises when no example was scored, logs the examples left out of EX."""
    n = len(judgements)
    counts = count_verdicts(judgements)
    if counts.num_scored == 0:
        first = judgements[0].error
        if counts.num_infra_failures:
            raise InfrastructureError(
                f"none of the {n} examples could be scored: {counts.num_infra_failures} hit an infrastructure "
                f"failure (first: {first}). Rerun on a less loaded machine"
            )
        raise UsageError(
            f"none of the {n} examples could be scored: every gold query failed to run (first: {first}). "
            "Check that db_path points at the right databases and that references are valid SQL"
        )
    if counts.num_infra_failures:
        logger.warning(
            "%d of %d examples hit an infrastructure failure (a query starved of CPU by a busy machine, or "
            "workers killed from outside: the machine, not the SQL) and are left out of EX",
            counts.num_infra_failures,
            n,
        )
    if counts.num_unscorable:
        logger.warning(
            "%d of %d examples are unscorable (their gold SQL failed) and are left out of EX",
            counts.num_unscorable,
            n,
        )
    return counts


def _check_databases(db_paths: Sequence[str | os.PathLike]) -> None:
    seen: set[str] = set()
    for index, path in enumerate(db_paths):
        if path is None:
            raise UsageError(f"db_path[{index}] is missing: give the SQLite file of every example")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"db_path[{index}] must be a path (str); got {type(path).__name__}")
        key = os.fspath(path)
        if key in seen:
            continue
        seen.add(key)
        shown = key if len(key) <= 200 else f"{key[:200]}... ({len(key)} characters)"
        try:
            found = Path(key).is_file()
        except (OSError, ValueError) as err:  # a name too long for the file system, a NUL in it
            raise UsageError(f"db_path[{index}] is not a usable path ({err.__class__.__name__}): {shown}") from None
        if not found:
            raise UsageError(f"db_path[{index}]: database file not found: {shown}")


_INVALID_TEXT = "\x00slmsql:invalid-utf8:"  # a prefix no valid SQL or path can start with (NUL)


def storable_text(value):
    """Text that Arrow can store: a string that is not valid UTF-8 (a lone surrogate) becomes a marked hex form.

    ``evaluate`` writes every input to an Arrow cache before ``_compute``, and Arrow refuses such strings
    with ``UnicodeEncodeError``. :func:`restored_text` gives the original back, so the sandbox judges it
    (a clean ``error`` verdict) and the rest of the batch is judged as usual.

    Example:

    ```python
    >>> storable_text("SELECT 1")
    'SELECT 1'
    >>> restored_text(storable_text("SELECT '\\ud800'")) == "SELECT '\\ud800'"
    True

    ```
    """
    if not isinstance(value, str):
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _INVALID_TEXT + value.encode("utf-8", "surrogatepass").hex()
    return value


def restored_text(value):
    """The inverse of :func:`storable_text`."""
    if isinstance(value, str) and value.startswith(_INVALID_TEXT):
        return bytes.fromhex(value[len(_INVALID_TEXT) :]).decode("utf-8", "surrogatepass")
    return value
