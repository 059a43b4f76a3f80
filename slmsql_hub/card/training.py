"""The card a repository gets at the end of training (``model_card/training_card.md``), from the stage's
``run_summary.json`` alone: ``slmsql push`` puts it on the SFT adapter's repository, ``push_training_card`` on the
repository TRL pushed to.
"""

from __future__ import annotations

from ..refs import looks_like_hub_id
from ..render import templates
from ..render.fmt import number
from ..run.layout import RUN_SUMMARY, STAGE_CONFIG, TELEMETRY
from ..run.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC

TRAINING_RUN_FILES: tuple[str, ...] = (RUN_SUMMARY, STAGE_CONFIG, TELEMETRY)


def training_card(summary: dict, repo_id: str, *, grpo_repo_id: str | None = None) -> str:
    """The training card of ``repo_id`` from ``summary`` (a ``run_summary.json``); ``grpo_repo_id``: the GRPO
    adapter this SFT adapter is published beside (its card holds the evaluation).

    Example:

    ```python
    >>> card = training_card({"kind": "grpo", "status": "completed", "base_model": "Qwen/Qwen2.5-Coder-1.5B",
    ...                       "adapter_path": "outputs/sft/stage2", "steps": 3}, "alice/qwen-grpo")
    >>> "base_model: Qwen/Qwen2.5-Coder-1.5B" in card, "3 steps" in card
    (True, True)

    ```
    """
    from huggingface_hub import ModelCard, ModelCardData

    from ..render.fmt import scientific

    base = summary.get("base_model") or "unknown"
    kind = str(summary.get("kind") or "grpo")
    data = ModelCardData(
        base_model=base if looks_like_hub_id(base) else None,
        library_name="peft",
        pipeline_tag="text-generation",
        tags=["text-to-sql", kind, "trl", "peft", "slmsql-hub"],
    )
    means = ((summary.get("telemetry") or {}).get("mean")) or {}
    relative = (summary.get("adapter_update") or {}).get("relative_norm")
    guards = summary.get("guards") or {}
    context = {
        "model_name": repo_id.split("/")[-1],
        "repo_id": repo_id,
        "grpo_repo_id": grpo_repo_id,
        "kind": kind,
        "base": base,
        "summary": summary,
        "checksum": summary.get("adapter_checksum") or {},
        "relative_update": None if relative is None else scientific(relative),
        "telemetry_means": [
            (name, number(means[name]))
            for name in (EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC, "reward", "reward_std", "grad_norm")
            if name in means
        ],
        "guards": [(r.get("name"), r.get("status")) for r in guards.get("results", [])]
        if isinstance(guards, dict)
        else [],
        "run_files": TRAINING_RUN_FILES,
    }
    path = templates.template_path(templates.TRAINING_CARD)
    return str(templates.render(ModelCard, data, path, **context))
