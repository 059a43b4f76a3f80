"""Execution-accuracy reports: overall EX, verdict counts and a breakdown by level, as a dict and a table.

EX is over **scorable** examples only: an example whose gold SQL fails is counted apart (``num_unscorable``),
never scored 0. The breakdown is by Spider hardness (from the gold SQL; ``unknown`` when it does not parse) or
by given difficulty labels (BIRD); the table follows the official evaluators' print-out.

Example:

```python
>>> from slmsql_hub.sql.ex_report import build_ex_report
>>> from slmsql_hub.sql import ExecStatus, Judgement, Verdict
>>> ok, bad = ExecStatus.OK, ExecStatus.ERROR
>>> judgements = [
...     Judgement(Verdict.CORRECT, "SELECT 1", ok, ok),
...     Judgement(Verdict.PRED_ERROR, "SELEC", bad, ok, error="syntax error"),
...     Judgement(Verdict.UNSCORABLE, "SELECT 1", ok, bad, error="gold SQL failed"),
... ]
>>> report = build_ex_report(judgements, levels=["easy", "hard", "easy"], breakdown_by="hardness")
>>> report.execution_accuracy, report.counts.num_scored, report.counts.num_unscorable
(0.5, 2, 1)
>>> print(report.render())
EX 50.00% (1 of 2 scorable; 3 examples, 1 unscorable)
verdicts: correct 1, pred_error 1, unscorable 1
           easy    hard     all
count         2       1       3
scored        1       1       2
EX (%)   100.00    0.00   50.00

```
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from . import Judgement, Verdict
from .hardness import spider_hardness

logger = logging.getLogger(__name__)

_HARDNESS_LEVELS = ("easy", "medium", "hard", "extra")
_BIRD_DIFFICULTIES = ("simple", "moderate", "challenging")
_UNKNOWN_LEVEL = "unknown"
ALL_LEVEL = "all"

# Prediction failures counted as `num_pred_errors`; timeouts are counted apart in `num_timeouts`.
_PRED_ERROR_VERDICTS = frozenset(
    {Verdict.PRED_ERROR, Verdict.PRED_REFUSED, Verdict.PRED_TOO_LARGE, Verdict.NO_SQL}
)


@dataclass(frozen=True)
class LevelScore:
    """EX of the examples at one level (``easy``, ``simple``, …, ``unknown``, or ``all``)."""

    level: str
    count: int
    scored: int
    correct: int

    @property
    def execution_accuracy(self) -> float | None:
        """``correct / scored``, or ``None`` when nothing at this level could be scored."""
        return self.correct / self.scored if self.scored else None

    def to_dict(self) -> dict:
        return {**asdict(self), "execution_accuracy": self.execution_accuracy}


@dataclass(frozen=True)
class VerdictCounts:
    """Counts over a list of judgements (the numbers the ``slmsql/ex`` metric returns); EX is over
    ``num_scored``, ``num_pred_errors`` counts :data:`_PRED_ERROR_VERDICTS`."""

    num_examples: int
    num_scored: int
    num_correct: int
    num_unscorable: int
    num_pred_errors: int
    num_timeouts: int
    num_infra_failures: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)

    @property
    def execution_accuracy(self) -> float | None:
        """``num_correct / num_scored``, or ``None`` when no example could be scored."""
        return self.num_correct / self.num_scored if self.num_scored else None


def format_percent(fraction: float | None, digits: int = 2) -> str:
    """A fraction as a percentage number with ``digits`` decimals, ``"n/a"`` for ``None``.

    Example:

    ```python
    >>> format_percent(0.5), format_percent(2 / 3, 1), format_percent(None)
    ('50.00', '66.7', 'n/a')

    ```
    """
    return "n/a" if fraction is None else f"{100 * fraction:.{digits}f}"


def count_verdicts(judgements: Sequence[Judgement]) -> VerdictCounts:
    """Count verdicts the way every EX number in slmsql-hub is counted.

    Example:

    ```python
    >>> from slmsql_hub.sql import ExecStatus, Judgement, Verdict
    >>> ok = ExecStatus.OK
    >>> counts = count_verdicts([Judgement(Verdict.WRONG, "SELECT 2", ok, ok), Judgement(Verdict.NO_SQL, None, None, ok)])
    >>> counts.num_scored, counts.num_correct, counts.num_pred_errors
    (2, 0, 1)

    ```
    """
    tally = Counter(j.verdict for j in judgements)
    verdicts = {v.value: tally[v] for v in Verdict if tally[v]}
    return VerdictCounts(
        num_examples=len(judgements),
        num_scored=sum(n for v, n in tally.items() if v not in (Verdict.UNSCORABLE, Verdict.INFRA_FAILURE)),
        num_correct=tally[Verdict.CORRECT],
        num_unscorable=tally[Verdict.UNSCORABLE],
        num_pred_errors=sum(tally[v] for v in _PRED_ERROR_VERDICTS),
        num_timeouts=tally[Verdict.PRED_TIMEOUT],
        num_infra_failures=tally[Verdict.INFRA_FAILURE],
        verdicts=verdicts,
    )


def _hardness_levels(gold_sqls: Sequence[str]) -> list[str]:
    """Spider hardness of each gold query; ``unknown`` where it does not parse.

    Example:

    ```python
    >>> _hardness_levels(["SELECT count(*) FROM singer", "SELEC nonsense ((("])
    ['easy', 'unknown']

    ```
    """
    levels = []
    for sql in gold_sqls:
        try:
            levels.append(spider_hardness(sql))
        except ValueError as err:
            logger.debug("no hardness for %r: %s", sql, err)
            levels.append(_UNKNOWN_LEVEL)
    return levels


def example_levels(
    gold_sqls: Sequence[str], difficulties: Sequence[str | None] | None = None
) -> tuple[str, list[str]]:
    """``("difficulty", labels)`` from given difficulties (``None`` is ``unknown``) unless all are ``None``,
    else ``("hardness", spider_levels)``.

    Example:

    ```python
    >>> example_levels(["SELECT 1", "SELECT 2"], ["simple", None])
    ('difficulty', ['simple', 'unknown'])
    >>> example_levels(["SELECT count(*) FROM singer"])
    ('hardness', ['easy'])

    ```
    """
    if difficulties is not None and any(d is not None for d in difficulties):
        return "difficulty", [d if d is not None else _UNKNOWN_LEVEL for d in difficulties]
    return "hardness", _hardness_levels(gold_sqls)


def _ordered_levels(present: set[str]) -> list[str]:
    known = [level for level in (*_HARDNESS_LEVELS, *_BIRD_DIFFICULTIES) if level in present]
    others = sorted(present - set(known) - {_UNKNOWN_LEVEL})
    return known + others + ([_UNKNOWN_LEVEL] if _UNKNOWN_LEVEL in present else [])


@dataclass(frozen=True)
class ExReport:
    """An execution-accuracy report (:func:`build_ex_report`): one :class:`LevelScore` per level present, in
    the official order, then ``all``; ``mode``/``keep_distinct`` record the judge's settings."""

    counts: VerdictCounts
    breakdown_by: str | None
    levels: tuple[LevelScore, ...]
    mode: str | None = None
    keep_distinct: bool | None = None

    @property
    def execution_accuracy(self) -> float | None:
        return self.counts.execution_accuracy

    def to_dict(self) -> dict:
        return {
            "execution_accuracy": self.execution_accuracy,
            **asdict(self.counts),
            "mode": self.mode,
            "keep_distinct": self.keep_distinct,
            "breakdown_by": self.breakdown_by,
            "levels": [level.to_dict() for level in self.levels],
        }

    def render(self) -> str:
        """A summary line, the verdict counts and a table of the levels."""
        counts = self.counts
        ex = self.execution_accuracy
        if ex is None:
            head = f"EX n/a: none of the {counts.num_examples} examples could be scored (every gold query failed)"
        else:
            head = (
                f"EX {format_percent(ex)}% ({counts.num_correct} of {counts.num_scored} scorable; "
                f"{counts.num_examples} examples, {counts.num_unscorable} unscorable"
                + (f", {counts.num_infra_failures} infrastructure failures)" if counts.num_infra_failures else ")")
            )
        if self.mode is not None:
            head += f" [mode {self.mode}{', keep DISTINCT' if self.keep_distinct else ''}]"
        lines = [head, "verdicts: " + ", ".join(f"{v} {n}" for v, n in counts.verdicts.items())]
        width = max(8, *(len(level.level) + 2 for level in self.levels))
        rows = {
            "": [level.level for level in self.levels],
            "count": [str(level.count) for level in self.levels],
            "scored": [str(level.scored) for level in self.levels],
            "EX (%)": [format_percent(level.execution_accuracy) for level in self.levels],
        }
        for name, cells in rows.items():
            lines.append(f"{name:<8}" + "".join(f"{cell:>{width}}" for cell in cells))
        return "\n".join(lines)


def build_ex_report(
    judgements: Sequence[Judgement],
    *,
    levels: Sequence[str] | None = None,
    breakdown_by: str | None = None,
    mode: str | None = None,
    keep_distinct: bool | None = None,
) -> ExReport:
    """An :class:`ExReport` of ``judgements``, broken down by ``levels`` (one label per judgement, see
    :func:`example_levels`; ``None``: no breakdown). ValueError when the lengths differ.

    Example:

    ```python
    >>> from slmsql_hub.sql import ExecStatus, Judgement, Verdict
    >>> ok = ExecStatus.OK
    >>> report = build_ex_report([Judgement(Verdict.CORRECT, "SELECT 1", ok, ok)], mode="bird")
    >>> report.to_dict()["execution_accuracy"], [level.level for level in report.levels]
    (1.0, ['all'])

    ```
    """
    if levels is not None and len(levels) != len(judgements):
        raise ValueError(f"{len(levels)} levels for {len(judgements)} judgements")
    scores = []
    if levels is not None:
        by_level: dict[str, list[Judgement]] = {}
        for judgement, level in zip(judgements, levels):
            by_level.setdefault(level, []).append(judgement)
        for level in _ordered_levels(set(by_level)):
            counted = count_verdicts(by_level[level])
            scores.append(LevelScore(level, counted.num_examples, counted.num_scored, counted.num_correct))
    counts = count_verdicts(judgements)
    scores.append(LevelScore(ALL_LEVEL, counts.num_examples, counts.num_scored, counts.num_correct))
    return ExReport(
        counts=counts,
        breakdown_by=breakdown_by if levels is not None else None,
        levels=tuple(scores),
        mode=mode,
        keep_distinct=keep_distinct,
    )
