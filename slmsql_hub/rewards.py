"""Reward functions for TRL's ``GRPOTrainer``: execution, format, result-F1, and a random-reward control.

:data:`REWARDS` is the one place a reward is added: each class there owns its TRL name (``name``), its parameters
(:class:`_RewardParam`: the recipe field that sets each one, its default and help, from which the GRPO recipe's
fields are made) and its card text (``card``). A recipe may also name a function by dotted path,
``module:function`` (or TRL's ``module.function``) with TRL's signature ``(prompts, completions, **kwargs)``; see
:func:`resolve_reward` and :func:`reward_record`.

Each is a picklable class following TRL's reward-function contract: called with ``completions``, every dataset
column as a keyword argument (here ``gold_sql`` and ``db_path``), ``prompts`` and the ``log_metric`` /
``log_extra`` hooks, it returns one ``float | None`` per completion under a stable ``__name__`` (TRL's
``rewards/<name>/mean|std``). ``None`` means "no reward for this sample" (TRL leaves it out): that is what an
**unscorable gold** gets, never 0.

All SQL goes through one :class:`slmsql_hub.sql.Judge` (each distinct query runs once; gold results come from
the sandbox's cache after the first step). The rewards of one run share a :class:`BatchJudge`, so they agree
on every row and a row with no verdict gets ``None`` from ALL of them: TRL drops a row only when every reward
returns ``None``, and otherwise an unscorable gold or an infrastructure failure (a query starved of CPU by a
busy machine, workers killed from outside) would leave the format term alone as the row's reward. A
completion that runs past its budget (op budget, ``timeout_s`` of CPU, rows, bytes) is the model's fault
(``fails``, 0.0 by default), so the policy is pushed away from runaway SQL.

Example:

```python
>>> import sqlite3, tempfile, os
>>> from slmsql_hub.rewards import BatchJudge, ExecutionReward, FormatReward, ResultF1Reward
>>> db = os.path.join(tempfile.mkdtemp(), "toy.sqlite")
>>> _ = sqlite3.connect(db).executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3), (4)")
>>> shared = BatchJudge(workers=1)
>>> rewards = ExecutionReward(judging=shared), FormatReward(judging=shared), ResultF1Reward(judging=shared)
>>> batch = dict(
...     completions=[[{"role": "assistant", "content": "```sql\\nSELECT count(*) FROM t\\n```"}],
...                  "SELECT x FROM t", "SELECT nope FROM t", "SELECT 1"],
...     gold_sql=["SELECT count(*) FROM t", "SELECT x FROM t WHERE x <= 2", "SELECT x FROM t", "SELECT nope"],
...     db_path=[db] * 4,
... )
>>> for reward in rewards:  # the last gold fails: no reward from any of them
...     print(reward.__name__, reward(**batch))
execution [1.0, 0.1, 0.0, None]
format [0.2, 0.0, 0.0, None]
result_f1 [1.0, 0.6666666666666666, 0.0, None]
>>> shared.close()

```
"""

from __future__ import annotations

import importlib
import inspect
import logging
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import UsageError
from .sql import Judge, Limits, Verdict
from .sql.compare import CompareMode
from .sql.extract import has_sql_block

logger = logging.getLogger(__name__)


def _completion_text(completion) -> str:
    """The text of one completion, in TRL's standard (``str``) or conversational (list of messages) format.

    Example:

    ```python
    >>> _completion_text([{"role": "assistant", "content": "SELECT 1"}])
    'SELECT 1'
    >>> _completion_text("SELECT 2")
    'SELECT 2'

    ```
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if isinstance(m, dict))
    if isinstance(completion, dict):
        return completion.get("content") or ""
    raise TypeError(f"unsupported completion type {type(completion).__name__}")


class BatchJudge:
    """One judging step per batch for the rewards of a run: the first reward called on a batch judges it (and
    logs :func:`_execution_metrics` once), the others reuse it. ``judge``: an existing Judge (and its cache)
    instead of one made from the other settings."""

    def __init__(
        self,
        *,
        mode: CompareMode | str = "bird",
        keep_distinct: bool = False,
        limits: Limits | None = None,
        workers: int | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.mode = CompareMode(mode).value
        self.keep_distinct = keep_distinct
        self.limits = limits or Limits()
        self.workers = workers
        self.users = 0
        self._judge = judge
        self._memo: tuple | None = None  # (batch key, judgements, calls left that may reuse them)

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            self._judge = Judge(
                mode=self.mode, keep_distinct=self.keep_distinct, limits=self.limits, workers=self.workers
            )
        return self._judge

    def __call__(self, completions, gold_sql, db_path, prompts=None, log_metric=None, *, who: str = "reward"):
        if gold_sql is None or db_path is None:
            raise ValueError(
                f"the {who!r} reward needs the dataset columns 'gold_sql' and 'db_path' "
                "(TRL passes every dataset column to reward functions)"
            )
        texts = [_completion_text(c) for c in completions]
        key = (tuple(texts), tuple(gold_sql), tuple(map(str, db_path)))
        if self._memo is not None and self._memo[0] == key and self._memo[2] > 0:
            self._memo = (key, self._memo[1], self._memo[2] - 1)
            return self._memo[1]
        judgements = self.judge.judge_many(texts, list(gold_sql), list(db_path))
        self._memo = (key, judgements, max(self.users, 1) - 1)
        if log_metric is not None:
            for name, value in _execution_metrics(judgements, _group_keys(prompts, gold_sql, db_path)).items():
                log_metric(name, value)
        return judgements

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_judge"] = None  # a Judge owns worker processes; each process makes its own
        state["_memo"] = None
        return state

    def close(self) -> None:
        if self._judge is not None:
            self._judge.close()
            self._judge = None


@dataclass(frozen=True)
class _RewardParam:
    """One argument of a reward's constructor (its default is the constructor's): the GRPO recipe ``field`` that
    sets it (``None``: fixed at the default) and its ``help``. ``owned=False``: a field another part of the recipe
    declares (the trainer's ``seed``), read but not declared again."""

    arg: str
    field: str | None
    help: str = ""
    owned: bool = True


class _JudgedReward:
    """``None`` without a verdict, else :meth:`_score` of the completion and its judgement; its own
    :class:`BatchJudge` unless given ``judging``."""

    name = ""  # TRL's name of the reward (``rewards/<name>/...``), set as the instance's ``__name__``
    params: tuple[_RewardParam, ...] = ()  # what a recipe sets, in the constructor's terms
    card = ""  # what it rewards, for the model card: one or two sentences, ``{arg}`` and ``{mode}`` filled in
    scores_results = False  # its score reads the judged results (the card says how queries are judged there)
    logs_verdicts = False

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The parameters' defaults, read from the constructor (said once, there).

        Example:

        ```python
        >>> RandomReward.defaults()
        {'p': 0.5, 'seed': 0}

        ```
        """
        signature = inspect.signature(cls)
        return {p.arg: signature.parameters[p.arg].default for p in cls.params}

    @classmethod
    def values(cls, source: Any) -> dict[str, Any]:
        """The constructor arguments a recipe (any object with the fields) gives, e.g. ``{"value": 0.2}``."""
        defaults = cls.defaults()
        return {p.arg: defaults[p.arg] if p.field is None else getattr(source, p.field) for p in cls.params}

    @classmethod
    def describe(cls, values: Mapping[str, Any], mode: str = "") -> str:
        """The card text with ``values`` (missing ones: the defaults) and the comparison rule ``mode``.

        Example:

        ```python
        >>> FormatReward.describe({"value": 0.5})
        '0.5 for an answer in a ```` ```sql ```` block.'

        ```
        """
        return cls.card.format(**{**cls.defaults(), **values, "mode": mode})

    def __init__(self, *, judging: BatchJudge | None = None, **judge_kwargs) -> None:
        if judging is not None and judge_kwargs:
            raise ValueError(f"give either judging or the judge's settings, not both: {sorted(judge_kwargs)}")
        self.judging = judging if judging is not None else BatchJudge(**judge_kwargs)
        self.judging.users += 1

    @property
    def judge(self) -> Judge:
        return self.judging.judge

    def __call__(
        self,
        completions: list,
        gold_sql: Sequence[str] | None = None,
        db_path: Sequence[str] | None = None,
        prompts: list | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        log_extra: Callable[[str, list], None] | None = None,
        **kwargs,
    ) -> list[float | None]:
        if self.judging is None:  # a FormatReward without a judge reads the text only
            return [self._score(c, None) for c in completions]
        judgements = self.judging(completions, gold_sql, db_path, prompts, log_metric, who=self.__name__)
        if log_extra is not None and self.logs_verdicts:
            log_extra("sql_verdict", [j.verdict.value for j in judgements])
        return [self._score(c, j) if j.scorable else None for c, j in zip(completions, judgements)]

    def _score(self, completion, judgement) -> float:
        raise NotImplementedError

    def close(self) -> None:
        if self.judging is not None:
            self.judging.close()


class ExecutionReward(_JudgedReward):
    """``correct`` if the SQL runs and matches the gold, ``executes`` if it runs but is wrong, ``fails``
    otherwise; ``None`` with no verdict. The defaults are the study's (the Arctic-Text2SQL-R1 shape)."""

    name = "execution"
    params = (
        _RewardParam("correct", "reward_correct", "Execution reward of a correct query."),
        _RewardParam("executes", "reward_executes", "Execution reward of a wrong query that runs."),
        _RewardParam("fails", "reward_fails", "Execution reward of a failing or missing query."),
    )
    card = (
        "{correct} when the query's result matches the gold's ({mode}), {executes} when it runs but differs, "
        "{fails} when it fails, runs out of its time or instruction budget or has no SQL."
    )
    scores_results = True
    logs_verdicts = True

    def __init__(self, correct: float = 1.0, executes: float = 0.1, fails: float = 0.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.__name__ = self.name
        self.correct = correct
        self.executes = executes
        self.fails = fails

    def _score(self, completion, judgement) -> float:
        if judgement.verdict is Verdict.CORRECT:
            return self.correct
        return self.executes if judgement.verdict is Verdict.WRONG else self.fails


class FormatReward(_JudgedReward):
    """``value`` when the completion contains a ```sql fenced block, else 0.0; with ``judging``, ``None`` for a
    row with no verdict (without it, only the text is read).

    Example:

    ```python
    >>> FormatReward()(completions=["```sql\\nSELECT 1\\n```", "SELECT 1"])
    [0.2, 0.0]

    ```
    """

    name = "format"
    params = (_RewardParam("value", "format_reward_value", "Format reward for a ```sql block."),)
    card = "{value} for an answer in a ```` ```sql ```` block."

    def __init__(self, value: float = 0.2, judging: BatchJudge | None = None) -> None:
        self.__name__ = self.name
        self.value = value
        self.judging = judging
        if judging is not None:
            judging.users += 1

    def _score(self, completion, judgement) -> float:
        return self.value if has_sql_block(_completion_text(completion)) else 0.0


class ResultF1Reward(_JudgedReward):
    """Partial credit: :func:`rows_f1` of the predicted and gold rows, 1.0 when correct, 0.0 when the
    prediction fails, ``None`` with no verdict."""

    name = "result_f1"
    card = (
        "partial credit, the F1 of the predicted and the gold result rows (as multisets): 1.0 when the result "
        "matches the gold's ({mode}), 0.0 when the query fails, runs out of its budget or has no SQL."
    )
    scores_results = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.__name__ = self.name

    def _score(self, completion, judgement) -> float:
        if judgement.verdict is Verdict.CORRECT:
            return 1.0
        if judgement.verdict is Verdict.WRONG:
            return rows_f1(judgement.pred.rows, judgement.gold.rows)
        return 0.0


class RandomReward(_JudgedReward):
    """The random-reward control: 1.0 with probability ``p``, else 0.0, whatever the completion says (a Bernoulli
    draw from a stream seeded by ``seed``). With ``judging`` the batch is still judged, so a row with no verdict
    gets ``None`` as from every reward, and the ``sql/*`` metrics are logged: a policy trained on it must not
    get better at SQL.

    Example:

    ```python
    >>> draws = RandomReward(p=0.5, seed=0)(completions=["SELECT 1"] * 1000)
    >>> set(draws), 0.45 < sum(draws) / 1000 < 0.55, draws == RandomReward(p=0.5, seed=0)(completions=["x"] * 1000)
    ({0.0, 1.0}, True, True)

    ```
    """

    name = "random"
    params = (
        _RewardParam("p", None, "Probability of a 1.0."),
        _RewardParam("seed", "seed", "Seed of the draws: the run's seed.", owned=False),
    )
    card = (
        "a control, 1.0 with probability {p} and else 0.0 whatever the completion says (draws seeded by the "
        "run's seed, {seed}): a policy trained on it must not get better at SQL."
    )

    def __init__(self, p: float = 0.5, seed: int = 0, judging: BatchJudge | None = None) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must be within [0, 1], got {p}")
        self.__name__ = self.name
        self.p = p
        self.rng = random.Random(seed)
        self.judging = judging
        if judging is not None:
            judging.users += 1

    def _score(self, completion, judgement) -> float:
        return 1.0 if self.rng.random() < self.p else 0.0


REWARDS: dict[str, type[_JudgedReward]] = {
    cls.name: cls for cls in (ExecutionReward, FormatReward, ResultF1Reward, RandomReward)
}
"""The reward table: the names a GRPO recipe's ``reward_funcs`` may list (TRL logs ``rewards/<name>/...``) and
their classes, each owning its parameters and card text. Add a reward here (and its tests): the recipe's fields,
its ``--help``, the run summary and the card follow."""


def reward_fields() -> list[tuple[str, Any, str]]:
    """``(field, default, help)`` of the recipe fields the table's rewards own, in table order (the GRPO recipe
    declares them from here).

    Example:

    ```python
    >>> [field[:2] for field in reward_fields()]
    [('reward_correct', 1.0), ('reward_executes', 0.1), ('reward_fails', 0.0), ('format_reward_value', 0.2)]

    ```
    """
    return [
        (p.field, cls.defaults()[p.arg], p.help)
        for cls in REWARDS.values()
        for p in cls.params
        if p.owned and p.field is not None
    ]


def _is_reward_path(spec: str) -> bool:
    """Whether a ``reward_funcs`` entry is a dotted path (``module:function`` or ``module.function``), not a name."""
    return spec not in REWARDS and (":" in spec or "." in spec)


def _split_path(spec: str) -> tuple[str, str]:
    module, sep, name = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not (sep and module and name.isidentifier()):
        raise UsageError(f"reward_funcs: {spec!r} is not a dotted path; write it as module:function")
    return module, name


def resolve_reward(spec: str) -> type[_JudgedReward] | Callable[..., list]:
    """The table's class for a name, or the function a dotted path names (imported now, so a bad path is one
    :class:`~slmsql_hub.errors.UsageError` line before any model loads). A function must take TRL's reward
    signature ``(prompts, completions, **kwargs)`` and return one float (or ``None``) per completion.

    Example:

    ```python
    >>> resolve_reward("format") is FormatReward, resolve_reward("slmsql_hub.rewards:rows_f1")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: reward_funcs: slmsql_hub.rewards:rows_f1 must take TRL's reward signature (prompts, completions, **kwargs)

    ```
    """
    if spec in REWARDS:
        return REWARDS[spec]
    if not _is_reward_path(spec):
        raise UsageError(
            f"unknown reward function {spec}; choose from {', '.join(REWARDS)} or give a dotted path module:function"
        )
    module_name, name = _split_path(spec)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UsageError(f"reward_funcs: cannot import {module_name!r} for {spec} ({err}); is it installed or on "
                         "PYTHONPATH?") from err  # fmt: skip
    func = getattr(module, name, None)
    if not callable(func):
        raise UsageError(f"reward_funcs: module {module_name} has no function {name!r} (from {spec})")
    try:
        signature = inspect.signature(func)
        signature.bind(prompts=[], completions=[], completion_ids=[], trainer_state=None)
    except (TypeError, ValueError) as err:
        raise UsageError(
            f"reward_funcs: {spec} must take TRL's reward signature (prompts, completions, **kwargs)"
        ) from err
    return func


def reward_record(spec: str, source: Any) -> Any:
    """What the run summary records of one reward: a table reward's values (one value bare, e.g. ``format:
    0.2``); for a dotted path its module, function and the version of the distribution that ships the module
    (``None``: not an installed distribution).

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> reward_record("execution", SimpleNamespace(reward_correct=1.0, reward_executes=0.1, reward_fails=0.0))
    {'correct': 1.0, 'executes': 0.1, 'fails': 0.0}
    >>> reward_record("yaml:safe_load", None)["distribution"]
    'PyYAML'

    ```
    """
    if spec in REWARDS:
        values = REWARDS[spec].values(source)
        return next(iter(values.values())) if len(values) == 1 else values
    from importlib import metadata

    module, function = _split_path(spec)
    distributions = metadata.packages_distributions().get(module.split(".")[0]) or []
    distribution = distributions[0] if distributions else None
    return {
        "path": spec,
        "module": module,
        "function": function,
        "distribution": distribution,
        "version": metadata.version(distribution) if distribution else None,
    }


def describe_reward(spec: str, recorded: Any, mode: str = "") -> str:
    """The card's sentence for one reward of a run from what the summary recorded (``None``: not recorded, the
    defaults; a bare value: the reward's one parameter); ``mode``: the comparison rule as the card words it.

    Example:

    ```python
    >>> describe_reward("format", 0.2)
    '0.2 for an answer in a ```` ```sql ```` block.'
    >>> describe_reward("mypkg.rewards:speed", {"module": "mypkg.rewards", "function": "speed",
    ...                 "distribution": "mypkg", "version": "1.2"})
    'a user reward, `speed` from `mypkg.rewards` (mypkg 1.2); what it rewards is in its code.'

    ```
    """
    if spec in REWARDS:
        cls = REWARDS[spec]
        if recorded is not None and not isinstance(recorded, Mapping):
            recorded = {cls.params[0].arg: recorded}
        return cls.describe(recorded or {}, mode)
    recorded = recorded if isinstance(recorded, Mapping) else {}
    module, function = recorded.get("module"), recorded.get("function")
    if not (module and function):
        module, function = _split_path(spec)
    shipped = recorded.get("distribution")
    version = f" ({shipped} {recorded.get('version')})" if shipped else " (not from an installed distribution)"
    return f"a user reward, `{function}` from `{module}`{version}; what it rewards is in its code."


def rows_f1(pred_rows: Sequence[tuple], gold_rows: Sequence[tuple]) -> float:
    """F1 between two results seen as multisets of rows (two empty results: 1.0).

    Example:

    ```python
    >>> rows_f1([(1,), (2,)], [(2,), (3,)])
    0.5

    ```
    """
    if not pred_rows and not gold_rows:
        return 1.0
    overlap = sum((Counter(map(tuple, pred_rows)) & Counter(map(tuple, gold_rows))).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred_rows), overlap / len(gold_rows)
    return 2 * precision * recall / (precision + recall)


def _group_keys(prompts, gold_sql, db_path) -> list:
    n = len(gold_sql)
    if prompts is not None and len(prompts) == n:
        return [repr(p) for p in prompts]
    return list(zip(gold_sql, db_path))


def _execution_metrics(judgements, group_keys: Sequence) -> dict[str, float]:
    """Per-batch ``sql/*`` metrics: the unscorable and infra-failure rates over all samples, the other rates
    over scorable ones, ``sql/frac_correct_zero_std`` over groups (``group_keys``) with a scorable sample.

    Example:

    ```python
    >>> from slmsql_hub.sql import Judgement, Verdict, ExecStatus
    >>> ok, bad = (Judgement(v, "SELECT 1", ExecStatus.OK, ExecStatus.OK) for v in (Verdict.CORRECT, Verdict.WRONG))
    >>> m = _execution_metrics([ok, bad, bad, bad], ["q1", "q1", "q2", "q2"])
    >>> m["sql/correct_rate"], m["sql/frac_correct_zero_std"]
    (0.25, 0.5)

    ```
    """
    scorable = [j for j in judgements if j.scorable]
    n = max(len(scorable), 1)
    groups: dict = defaultdict(set)
    for key, j in zip(group_keys, judgements):
        if j.scorable:
            groups[key].add(j.correct)
    return {
        "sql/correct_rate": sum(j.correct for j in scorable) / n,
        "sql/exec_error_rate": sum(
            j.verdict in (Verdict.PRED_ERROR, Verdict.PRED_REFUSED, Verdict.NO_SQL) for j in scorable
        )
        / n,
        "sql/timeout_rate": sum(j.verdict in (Verdict.PRED_TIMEOUT, Verdict.PRED_TOO_LARGE) for j in scorable)
        / n,
        "sql/unscorable_rate": sum(j.verdict is Verdict.UNSCORABLE for j in judgements)
        / max(len(judgements), 1),
        "sql/infra_failure_rate": sum(j.verdict is Verdict.INFRA_FAILURE for j in judgements)
        / max(len(judgements), 1),
        "sql/frac_correct_zero_std": (sum(len(v) == 1 for v in groups.values()) / len(groups))
        if groups
        else 0.0,
    }
