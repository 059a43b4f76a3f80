"""What a GRPO run reports: ``run_summary.json`` (written at start-up, on a failed guard, and at the end), the
closing log line, and the one-line JSON headline the command prints."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..recipes import config_to_dict
from ..render.fmt import number
from ..rewards import reward_record
from ..run.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC
from ..runtime import environment
from ..sql.recipe_limits import LIMITS_KEY, limits_record
from .configs import GRPOTrainingConfig
from .guards import GuardResult, guards_summary
from .telemetry import TELEMETRY_FILE, read_telemetry, summarize_telemetry

TRL_MODEL_CARD = "trl_model_card.md"
"""Where TRL's draft model card goes (``README.md`` is left for the project's card)."""

logger = logging.getLogger(__name__)


def recipe_view(training_args: GRPOTrainingConfig) -> GRPOTrainingConfig:
    """A copy of ``training_args`` that reads back as a recipe for the same run from scratch.

    TRL derives ``generation_batch_size`` from ``steps_per_generation`` (and the process count) and refuses both
    in one recipe, so the copy keeps only ``steps_per_generation``, which gives the same batches for the same
    number of processes; ``resume_from_checkpoint`` is cleared (it belongs to one invocation, not the run).
    """
    import copy

    view = copy.copy(training_args)
    view.generation_batch_size = None
    view.resume_from_checkpoint = None
    return view


def rewards_record(training_args: GRPOTrainingConfig) -> dict[str, Any]:
    """The summary's ``rewards``: names (or dotted paths), weights, each reward's record
    (:func:`~slmsql_hub.rewards.reward_record`) and the comparison rule.

    Example:

    ```python
    >>> args = GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True)
    >>> record = rewards_record(args)
    >>> list(record), record["execution"], record["format"]
    (['funcs', 'weights', 'execution', 'format', 'compare_mode'], {'correct': 1.0, 'executes': 0.1, 'fails': 0.0}, 0.2)

    ```
    """
    funcs = list(training_args.reward_funcs)
    return {
        "funcs": funcs,
        "weights": list(training_args.reward_weights or [1.0] * len(funcs)),
        **{spec: reward_record(spec, training_args) for spec in funcs},
        "compare_mode": training_args.reward_compare_mode,
    }


def start_summary(
    script_args: Any,
    model_args: Any,
    training_args: GRPOTrainingConfig,
    guards: list[GuardResult],
    *,
    revisions: dict[str, Any],
    data: dict[str, Any],
    prompt: tuple[Any, str],
    parameters: dict[str, int],
    threads: int,
    resumed_from: str | None,
) -> dict[str, Any]:
    """The summary as training starts: model and paths, data counts, prompt settings (and their source), the
    recipe's rewards and limits, parameter counts, the guards so far and the resolved config."""
    args = training_args
    prompt_config, prompt_source = prompt
    return {
        "kind": "grpo",
        "status": "running",
        "base_model": model_args.model_name_or_path,
        "adapter_path": args.adapter_path,
        "revisions": revisions,
        "fresh_adapter": args.adapter_path is None,
        "output_dir": str(Path(args.output_dir)),
        "data": data,
        "prompt": {**prompt_config.record(), "source": prompt_source},
        "rewards": rewards_record(args),
        LIMITS_KEY: limits_record(args.sql_limits()),
        "parameters": parameters,
        "processes": args.world_size,
        "threads": threads,
        "resumed_from": resumed_from,
        "guards": guards_summary(guards),
        "config": config_to_dict(script_args, model_args, recipe_view(args)),
        "generation": {
            "generation_batch_size": args.generation_batch_size,
            "steps_per_generation": args.steps_per_generation,
            "prompts_per_generation": args.generation_batch_size // args.num_generations,
        },
        "environment": environment(),
    }


def complete_summary(
    summary: dict[str, Any],
    trainer: Any,
    result: Any,
    guards: list[GuardResult],
    *,
    checksums: tuple[str, str, bool],
    update: dict[str, Any],
    sandbox: dict[str, Any],
    telemetry: Any,
    main_process: bool,
    seconds: tuple[float, float],
) -> None:
    """Mark ``summary`` completed and add the run's outcome: guards, adapter checksums and update, steps,
    sandbox stats, telemetry summary (main process), TRL's final metrics, timings."""
    output_dir = Path(trainer.args.output_dir)
    before, after, changed = checksums
    summary.update(
        {
            "status": "completed",
            "guards": guards_summary(guards),
            "adapter_checksum": {"before": before, "after": after, "changed": changed},
            "adapter_update": {**update, "min_relative_update": trainer.args.min_relative_update},
            "steps": int(result.global_step),
            "max_steps": int(trainer.state.max_steps),
            "epochs": float(trainer.state.epoch or 0.0),
            "sandbox": sandbox,
            "telemetry_file": TELEMETRY_FILE,
            "telemetry": summarize_telemetry(read_telemetry(output_dir / TELEMETRY_FILE)) if main_process else None,
            "trainer_metrics": telemetry.final_metrics,
            "trl_model_card": TRL_MODEL_CARD if (output_dir / TRL_MODEL_CARD).is_file() else None,
            "readme": "left for the project's model card (TRL's draft is trl_model_card.md)",
            "train_seconds": seconds[0],
            "wall_seconds": seconds[1],
        }
    )


def log_done(summary: dict[str, Any], output_dir: Any) -> None:
    """The closing log line: steps, zero-variance share, mean reward, whether the adapter moved, wall time."""
    mean = (summary["telemetry"] or {}).get("mean", {})
    relative = summary["adapter_update"]["relative_norm"]
    logger.info(
        "GRPO done: %d steps, mean frac_reward_zero_std %s (exact %s), mean reward %s, adapter %s "
        "(relative update %s), %.1fs; saved to %s",
        summary["steps"],
        number(mean.get(TRL_ZERO_STD_METRIC)),
        number(mean.get(EXACT_ZERO_STD_METRIC)),
        number(mean.get("reward")),
        "changed" if summary["adapter_checksum"]["changed"] else "UNCHANGED",
        "n/a" if relative is None else f"{relative:.3g}",
        summary["wall_seconds"],
        output_dir,
    )


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The one-line JSON the command prints: where the run went and its key numbers.

    Example:

    ```python
    >>> headline({"kind": "grpo", "steps": 3, "telemetry": {"mean": {"frac_reward_zero_std": 0.25}},
    ...           "guards": {"failed": [], "warned": ["clipping"]}})
    {'kind': 'grpo', 'steps': 3, 'mean_frac_reward_zero_std': 0.25, 'guards_warned': ['clipping'], 'guards_failed': []}

    ```
    """
    mean = (summary.get("telemetry") or {}).get("mean", {})
    out = {
        k: summary.get(k)
        for k in ("kind", "output_dir", "steps", "wall_seconds")
        if summary.get(k) is not None
    }
    for name in (
        TRL_ZERO_STD_METRIC,
        EXACT_ZERO_STD_METRIC,
        "sql/frac_correct_zero_std",
        "reward",
        "sql/correct_rate",
    ):
        if name in mean:
            out[f"mean_{name.replace('/', '_')}"] = round(mean[name], 4)
    if "adapter_checksum" in summary:
        out["adapter_changed"] = summary["adapter_checksum"]["changed"]
    if "adapter_update" in summary:
        out["adapter_relative_update"] = summary["adapter_update"]["relative_norm"]
    guards = summary.get("guards") or {}
    out["guards_warned"] = guards.get("warned", [])
    out["guards_failed"] = guards.get("failed", [])
    return out

