"""Execution-majority EX (maj@K, self-consistency): the answer whose execution result wins a vote over K samples.

The one definition, shared by ``slmsql diagnose`` and (issue #37) ``slmsql eval``:

- only samples that execute vote (verdict ``correct`` or ``wrong``); an error, a timeout, a result too large, a
  refused query, no SQL or an infrastructure failure does not;
- votes are grouped by :func:`~slmsql_hub.sql.compare.result_key` of the sample's result on the (first)
  database under the benchmark's compare mode (rows in order only when the gold's prepared SQL orders them);
- the largest group wins; a tie goes to the group whose first sample has the lowest index;
- the question is right when the winning group's first sample is judged correct, wrong when no sample
  executes, and left out (``None``) when its gold is unscorable, as everywhere.

The samples are judged by :class:`~slmsql_hub.sql.Judge` (whose sandbox batch runs each distinct SQL once per
database); this module only counts.

Example:

```python
>>> from slmsql_hub.evaluation.majority import majority_vote
>>> from slmsql_hub.sql import ExecResult, ExecStatus, Judgement, Verdict
>>> def sample(verdict, rows=()):
...     return Judgement(Verdict(verdict), "q", ExecStatus.OK, ExecStatus.OK, pred=ExecResult(ExecStatus.OK, rows))
>>> wrong, right = sample("wrong", ((1,),)), sample("correct", ((2,),))
>>> majority_vote([wrong, right, right], "SELECT a FROM t", "bird").correct
1
>>> majority_vote([wrong, right], "SELECT a FROM t", "bird").correct   # a tie: the first group wins
0

```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..sql import CompareMode, Judgement, Verdict, prepare_sql, result_key
from ..sql.compare import order_matters


@dataclass(frozen=True)
class MajorityVote:
    """The vote over one question's samples: ``correct`` (1, 0, or ``None`` for an unscorable gold), the index
    of the winning group's first sample (``None`` when no sample executed), the winning group's size and the
    number of samples that voted."""

    correct: int | None
    winner: int | None
    votes: int
    voters: int


def majority_vote(
    judgements: Sequence[Judgement],
    gold_sql: str,
    mode: CompareMode | str,
    *,
    keep_distinct: bool = False,
) -> MajorityVote:
    """maj@K of one question from its samples' judgements, in sample order (module docstring for the rule).

    Example:

    ```python
    >>> from slmsql_hub.sql import ExecStatus, Judgement, Verdict
    >>> broken = Judgement(Verdict.PRED_ERROR, "SELECT x", ExecStatus.ERROR, ExecStatus.OK)
    >>> majority_vote([broken, broken], "SELECT a FROM t", "bird")
    MajorityVote(correct=0, winner=None, votes=0, voters=0)

    ```
    """
    if any(j.verdict is Verdict.UNSCORABLE for j in judgements):
        return MajorityVote(correct=None, winner=None, votes=0, voters=0)
    ordered = order_matters(prepare_sql(gold_sql, mode, keep_distinct), mode)
    groups: dict[tuple, list[int]] = {}
    for index, judgement in enumerate(judgements):
        if judgement.executed and judgement.pred is not None:
            groups.setdefault(result_key(judgement.pred.rows, mode, order_matters=ordered), []).append(index)
    if not groups:
        return MajorityVote(correct=0, winner=None, votes=0, voters=0)
    # max keeps the first of equal sizes, and dicts keep insertion order: the group seen first wins a tie.
    members = max(groups.values(), key=len)
    winner = members[0]
    return MajorityVote(
        correct=int(judgements[winner].verdict is Verdict.CORRECT),
        winner=winner,
        votes=len(members),
        voters=sum(map(len, groups.values())),
    )
