"""GRPO's rewards by name (:data:`slmsql_hub.rewards.REWARDS`, like open-r1's ``REWARD_FUNCS_REGISTRY``), each wrapped in
:class:`~slmsql_hub.training.telemetry.TimedReward` and all reading one :class:`~slmsql_hub.rewards.BatchJudge`
(why: :mod:`slmsql_hub.rewards`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rewards import REWARDS, BatchJudge
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
        workers=training_args.reward_workers,
    )


def build_reward_funcs(training_args: GRPOTrainingConfig, judging: Any = None) -> list[TimedReward]:
    """The rewards the recipe names, with its values, sharing ``judging`` (else :func:`reward_judging`).

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
    return [
        TimedReward(
            REWARDS[name](
                judging=judging,
                **{arg: getattr(training_args, field) for arg, field in REWARDS[name].recipe_fields.items()},
            )
        )
        for name in training_args.reward_funcs
    ]


def close_rewards(reward_funcs: Sequence[Any]) -> None:
    """Close the rewards' sandboxes (closing a shared judge twice is harmless)."""
    for reward in reward_funcs:
        close = getattr(reward, "close", None)
        if callable(close):
            close()
