"""The sandbox limits as recipe fields: one vocabulary for the GRPO, filter and eval recipes.

The reward, the pass-rate filter and the evaluation must judge a query under the SAME :class:`Limits`, or a
prediction the filter counted correct can score 0 in training and a gold the band kept can become unscorable.
So each of their configs mixes in :class:`SQLLimitsArguments` (a field ``sql_<name>`` is ``Limits.<name>``),
builds its sandbox with :meth:`~SQLLimitsArguments.sql_limits` and records :func:`limits_record` under
:data:`LIMITS_KEY` of its output file; the model card states them.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from ..errors import UsageError
from .result import Limits

logger = logging.getLogger(__name__)

LIMITS_KEY = "limits"
_OPS_PER_SECOND = 100_000_000  # rough SQLite VM instructions per second on one core

_PREFIX = "sql_"


@dataclass
class SQLLimitsArguments:
    """Recipe fields for the sandbox :class:`Limits`; a config that mixes this in calls
    :meth:`resolve_sql_limits` from its ``__post_init__``.

    Example:

    ```python
    >>> args = SQLLimitsArguments(sql_timeout_s=10.0, sql_max_ops=200_000_000)
    >>> args.resolve_sql_limits()
    >>> args.sql_limits().max_rows
    100000

    ```
    """

    sql_timeout_s: float = field(
        default=Limits.timeout_s,
        metadata={"help": "Time limit of one query in CPU seconds; a query needing more is wrong (a gold: unscorable)."},
    )
    sql_max_ops: int | None = field(
        default=Limits.max_ops,
        metadata={"help": "SQLite VM instruction budget of one query (~1e8/s); unlike time, machine-independent."},
    )
    sql_max_rows: int = field(
        default=Limits.max_rows, metadata={"help": "Most result rows; one more makes the result too_large."}
    )
    sql_max_result_bytes: int = field(
        default=Limits.max_result_bytes,
        metadata={"help": "Most bytes of values in one result (text and blobs by length); more is too_large."},
    )

    def sql_limits(self) -> Limits:
        """The :class:`Limits` these fields describe."""
        return Limits(**self._limit_values())

    def _limit_values(self) -> dict:
        return {
            f.name[len(_PREFIX) :]: getattr(self, f.name)
            for f in dataclasses.fields(SQLLimitsArguments)
        }

    def resolve_sql_limits(self, deprecated_timeout: str | None = None) -> None:
        """Check the fields (UsageError naming the field), move the deprecated field ``deprecated_timeout``
        (if set) into ``sql_timeout_s``, and warn when the op budget does not run out well before the deadline."""
        if deprecated_timeout is not None and getattr(self, deprecated_timeout) is not None:
            old = getattr(self, deprecated_timeout)
            if self.sql_timeout_s not in (old, Limits.timeout_s):
                raise UsageError(
                    f"{deprecated_timeout} ({old}) and sql_timeout_s ({self.sql_timeout_s}) are both set; "
                    f"keep sql_timeout_s ({deprecated_timeout} is deprecated)"
                )
            logger.warning(
                "%s is deprecated and will be removed in the next release: use sql_timeout_s", deprecated_timeout
            )
            self.sql_timeout_s = old
            setattr(self, deprecated_timeout, None)
        for name, value in self._limit_values().items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise UsageError(f"{_PREFIX}{name} must be a number; got {value!r}")
        try:
            limits = self.sql_limits()
        except ValueError as err:
            raise UsageError(str(err).replace("Limits.", _PREFIX)) from None
        if limits.max_ops is None:
            logger.warning(
                "sql_max_ops is null, so a runaway query ends at sql_timeout_s of CPU time: still the query's "
                "fault, but a verdict that depends on the machine's speed instead of the deterministic op budget"
            )
        elif limits.max_ops / _OPS_PER_SECOND > limits.timeout_s / 2:
            logger.warning(
                "sql_max_ops=%s takes about %g s on one core, not well inside sql_timeout_s=%g: a runaway query may "
                "end at the CPU-time limit (the query's fault, but a verdict that depends on the machine's speed, "
                "and on a busy machine one that may come too late: no reward) instead of the deterministic op "
                "budget; lower sql_max_ops (e.g. %s) or raise sql_timeout_s",
                f"{limits.max_ops:_}",
                limits.max_ops / _OPS_PER_SECOND,
                limits.timeout_s,
                f"{int(limits.timeout_s * _OPS_PER_SECOND / 5):_}",
            )


def limits_record(limits: Limits) -> dict:
    """The JSON record of ``limits`` written under :data:`LIMITS_KEY` (every field of :class:`Limits`).

    Example:

    ```python
    >>> record = limits_record(Limits(timeout_s=10, max_ops=200_000_000))
    >>> record["timeout_s"], record["max_ops"], record["max_rows"]
    (10, 200000000, 100000)

    ```
    """
    return dataclasses.asdict(limits)
