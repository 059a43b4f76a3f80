"""GRPO's rewards by name (:data:`slmsql_hub.rewards.REWARDS`, like open-r1's ``REWARD_FUNCS_REGISTRY``) or dotted
path (a user's function, as TRL and open-r1 take it), each wrapped in
:class:`~slmsql_hub.training.telemetry.TimedReward`; the table's all read one :class:`~slmsql_hub.rewards.BatchJudge`
(why: :mod:`slmsql_hub.rewards`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rewards import BatchJudge, resolve_reward
from .configs import GRPOTrainingConfig
from .telemetry import TimedReward


def reward_judging(training_args: GRPOTrainingConfig):
    """The one :class:`~slmsql_hub.rewards.BatchJudge` of a run: the recipe's comparison rule, limits and workers.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOTrainingConfig
    >>> args = GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, sql_max_rows=500)
    >>> reward_judging(args).limits.max_rows
    500

    ```
    """
    return BatchJudge(
        mode=training_args.reward_compare_mode,
        limits=training_args.sql_limits(),
        workers=training_args.sandbox_workers,
    )


def build_reward_funcs(training_args: GRPOTrainingConfig, judging: Any = None) -> list[TimedReward]:
    """The rewards the recipe names, with its values, sharing ``judging`` (else :func:`reward_judging`); a dotted
    path's function as it is.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOTrainingConfig
    >>> args = GRPOTrainingConfig(output_dir="out", report_to="none", use_cpu=True, format_reward_value=0.5)
    >>> rewards = build_reward_funcs(args)
    >>> [r.__name__ for r in rewards], rewards[1].func.value, rewards[0].func.judging is rewards[1].func.judging
    (['execution', 'format'], 0.5, True)

    ```
    """
    judging = judging if judging is not None else reward_judging(training_args)
    rewards = []
    for spec in training_args.reward_funcs:
        reward = resolve_reward(spec)
        if isinstance(reward, type):
            reward = reward(judging=judging, **reward.values(training_args))
        rewards.append(TimedReward(reward))
    return rewards


def close_rewards(reward_funcs: Sequence[Any]) -> None:
    """Close the rewards' sandboxes (closing a shared judge twice is harmless)."""
    for reward in reward_funcs:
        close = getattr(reward, "close", None)
        if callable(close):
            close()
