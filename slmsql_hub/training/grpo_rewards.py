"""GRPO's rewards by name (like open-r1's ``REWARD_FUNCS_REGISTRY``), each wrapped in
:class:`~slmsql_hub.training.telemetry.TimedReward` and all reading one :class:`~slmsql_hub.rewards.BatchJudge`
(why: :mod:`slmsql_hub.rewards`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .configs import GRPOTrainingConfig
from .telemetry import TimedReward


def _execution(args: GRPOTrainingConfig, judging: Any) -> Any:
    from ..rewards import ExecutionReward

    return ExecutionReward(
        correct=args.reward_correct, executes=args.reward_executes, fails=args.reward_fails, judging=judging
    )


def _format(args: GRPOTrainingConfig, judging: Any) -> Any:
    from ..rewards import FormatReward

    return FormatReward(value=args.format_reward_value, judging=judging)


def _result_f1(args: GRPOTrainingConfig, judging: Any) -> Any:
    from ..rewards import ResultF1Reward

    return ResultF1Reward(judging=judging)


def _random(args: GRPOTrainingConfig, judging: Any) -> Any:
    from ..rewards import RandomReward

    return RandomReward(seed=args.seed, judging=judging)


REWARD_REGISTRY: dict[str, Callable[[GRPOTrainingConfig, Any], Any]] = {
    "execution": _execution,
    "format": _format,
    "result_f1": _result_f1,
    "random": _random,
}  # a recipe's reward_funcs entry -> builder (training_args, judging) -> reward


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
    from ..rewards import BatchJudge

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
    return [TimedReward(REWARD_REGISTRY[name](training_args, judging)) for name in training_args.reward_funcs]


def close_rewards(reward_funcs: Sequence[Any]) -> None:
    """Close the rewards' sandboxes (closing a shared judge twice is harmless)."""
    for reward in reward_funcs:
        close = getattr(reward, "close", None)
        if callable(close):
            close()
