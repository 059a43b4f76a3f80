"""Typed results of running one SQL string in the sandbox, and the limits it runs under."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class ExecStatus(str, enum.Enum):
    """What happened to one SQL string.

    - ``ok``: it ran and produced a result set (possibly empty) with at least one column.
    - ``error``: SQLite (or the input itself) rejected it: syntax error, unknown column, empty input, no
      result columns, invalid text.
    - ``timeout``: it exceeded the op budget or used ``timeout_s`` of CPU time and was interrupted (or its
      worker process was killed and replaced): the query's fault. Only a query starved of CPU until the
      wall-clock cap is the machine's (``ExecResult.infra``; :mod:`slmsql_hub.sql.sandbox`).
    - ``too_large``: it produced more than ``max_rows`` rows, or rows whose values add up to more than
      ``max_result_bytes``; the rest was never read. Deterministic: the same rows give the same verdict.
    - ``refused``: the sandbox would not run it at all: writes, ATTACH, state-changing PRAGMAs, extension
      loading, stacked statements, over-long text, forbidden functions.
    """

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    REFUSED = "refused"

    def __str__(self) -> str:  # so f-strings and JSON show "ok", not "ExecStatus.OK"
        return self.value


@dataclass(frozen=True)
class Limits:
    """Resource limits for one execution. Running out of any of them is the query's fault: ``max_ops`` is
    deterministic, ``timeout_s`` is counted in the worker's CPU seconds (a busy machine does not shorten it;
    :mod:`slmsql_hub.sql.sandbox`).

    >>> Limits(timeout_s=5).timeout_s
    5
    """

    timeout_s: float = 30.0  # CPU seconds of the worker (the wall clock on a free core); see the sandbox
    max_ops: int | None = 1_000_000_000  # SQLite VM instructions, ~10 s on one core (None: the deadline only)
    max_rows: int = 100_000  # one more row: too_large
    max_result_bytes: int = 64 * 2**20  # text and blobs by length, other values as 8; more: too_large
    max_sql_chars: int = 100_000
    memory_mb: int | None = 2048  # address-space cap of each worker process (None: no cap)

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"Limits.timeout_s must be > 0, got {self.timeout_s!r}")
        if self.max_ops is not None and self.max_ops <= 0:
            raise ValueError(f"Limits.max_ops must be > 0 or None, got {self.max_ops!r}")
        if self.max_rows <= 0:
            raise ValueError(f"Limits.max_rows must be > 0, got {self.max_rows!r}")
        if self.max_result_bytes <= 0:
            raise ValueError(f"Limits.max_result_bytes must be > 0, got {self.max_result_bytes!r}")
        if self.max_sql_chars <= 0:
            raise ValueError(f"Limits.max_sql_chars must be > 0, got {self.max_sql_chars!r}")
        if self.memory_mb is not None and self.memory_mb < 64:
            raise ValueError(f"Limits.memory_mb must be >= 64 or None, got {self.memory_mb!r}")


@dataclass(frozen=True)
class ExecResult:
    """The outcome of running one SQL string against one database.

    ``rows`` and ``columns`` are filled only when ``status`` is ``ok``; ``error`` says why otherwise.
    Text is decoded from UTF-8 with invalid bytes dropped (the Spider evaluator's rule).

    ``infra`` is ``True`` only when the outcome is the machine's, not the SQL's: a query that could not get
    ``timeout_s`` of CPU before the wall-clock cap (the cores were busy), or workers killed from outside.
    Such a result is never cached, and the judge turns it into :attr:`~slmsql_hub.sql.Verdict.INFRA_FAILURE`,
    not a verdict.
    """

    status: ExecStatus
    rows: tuple[tuple, ...] = ()
    columns: tuple[str, ...] = ()
    error: str | None = None
    elapsed_s: float = 0.0
    cached: bool = field(default=False, compare=False)
    infra: bool = False

    @property
    def ok(self) -> bool:
        return self.status is ExecStatus.OK
