"""Two-stage supervised fine-tuning of a LoRA adapter with TRL's ``SFTTrainer``, as in the study.

Stage 1 attaches a fresh LoRA adapter (rank 32, alpha 64, every linear layer) to the base model and trains
it on the first dataset (SynSQL in the study, the world's ``foundation`` split here). Stage 2 loads that same
adapter back, trainable, and continues it on the second dataset (BIRD + Spider; the world's ``grounding``).
The data is conversational prompt-completion (the project's prompt, then the gold SQL in a ``sql`` block),
so the loss covers the answer and its end-of-turn token only.

Every run writes, into ``output_dir``: the adapter, the tokenizer, the resolved configuration
(``config.yaml``, a recipe that reproduces the run), ``run_summary.json`` (data counts, steps, wall time,
final loss) and ``sft_questions.json``, the questions the adapter's lineage trained on (stage 2 carries stage
1's forward; see :mod:`slmsql_hub.data.sft_record`), which the pass-rate filter leaves out of its pool.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..data.sft_record import row_keys, write_sft_record
from ..errors import UsageError
from ..model_refs import looks_local
from .common import (
    RESOLVED_CONFIG,
    Stopwatch,
    count_parameters,
    drop_too_long,
    environment,
    final_loss,
    load_datasets,
    loaded_revisions,
    set_num_threads,
    to_prompt_completion,
    write_run_summary,
)
from ..configs import save_resolved_config
from .configs import ModelArguments, SFTScriptArguments, SFTTrainingConfig

logger = logging.getLogger(__name__)


def _check_local_inputs(model_args: ModelArguments, training_args: SFTTrainingConfig) -> None:
    """Fail early, with the fix, when a local model or adapter folder named by the recipe is missing."""
    name = str(model_args.model_name_or_path)
    model = Path(name).expanduser()
    if looks_local(name) and not model.is_dir():
        raise UsageError(
            f"base model folder not found: {model}; train it with `slmsql train base --config "
            "recipes/world/base.yaml` or fix model_name_or_path"
        )
    if training_args.stage == 2 and looks_local(str(training_args.adapter_path)):
        adapter = Path(training_args.adapter_path).expanduser()
        if not (adapter / "adapter_config.json").is_file():
            raise UsageError(
                f"no LoRA adapter in {adapter} (adapter_config.json missing); run stage 1 first "
                "(`slmsql train sft --config recipes/world/sft_stage1.yaml`) or fix adapter_path"
            )


def load_training_rows(script_args: SFTScriptArguments, seed: int = 0):
    """The run's rows: every ``dataset_paths`` folder and every benchmark of ``benchmarks``, concatenated.

    Benchmarks (``NAME:SPLIT[:LIMIT]``, a seeded subset) are read with
    :func:`~slmsql_hub.data.benchmarks.load_benchmark`, so BIRD, Spider and SynSQL train from their release files.
    """
    from datasets import concatenate_datasets

    parts = []
    if script_args.dataset_paths:
        parts.append(load_datasets(script_args.dataset_paths))
    for entry in script_args.benchmark_entries():
        from ..data.benchmarks import load_benchmark

        root = script_args.root(entry.name)
        loaded = load_benchmark(entry.name, root, entry.split, limit=entry.limit, seed=seed)
        loaded = loaded.select_columns(["question", "gold_sql", "evidence", "db_path", "db_id"])
        parts.append(loaded.add_column("_source", [str(Path(root).expanduser().resolve())] * len(loaded)))
    if len(parts) == 1:
        return parts[0]
    shared = [c for c in parts[0].column_names if all(c in p.column_names for p in parts)]
    return concatenate_datasets([p.select_columns(shared) for p in parts])


def load_model_for_stage(model_args: ModelArguments, training_args: SFTTrainingConfig):
    """The model to hand to ``SFTTrainer`` and the PEFT config it should attach (``None`` for stage 2).

    Stage 1 returns the base model and a fresh ``LoraConfig``; stage 2 returns the base model with the
    stage-1 adapter loaded trainable (``PeftModel.from_pretrained(..., is_trainable=True)``).

    Raises:
        RuntimeError: the loaded stage-2 adapter has no trainable parameter (it would silently not learn).
    """
    from peft import LoraConfig, PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        model_args.model_name_or_path, dtype=model_args.torch_dtype(), revision=model_args.model_revision
    )
    if training_args.stage == 1:
        peft_config = LoraConfig(
            r=model_args.lora_r,
            lora_alpha=model_args.lora_alpha,
            lora_dropout=model_args.lora_dropout,
            target_modules=model_args.peft_target_modules(),
            task_type="CAUSAL_LM",
        )
        return model, peft_config
    model = PeftModel.from_pretrained(
        model, training_args.adapter_path, is_trainable=True, revision=model_args.adapter_revision
    )
    counts = count_parameters(model)
    if counts["trainable"] == 0:
        raise RuntimeError(
            f"the adapter loaded from {training_args.adapter_path} has no trainable parameters"
        )
    loaded = model.peft_config["default"]
    if (loaded.r, loaded.lora_alpha) != (model_args.lora_r, model_args.lora_alpha):
        logger.warning(
            "stage 2 continues the adapter as saved (r=%s, alpha=%s); the recipe's lora_r=%s/lora_alpha=%s are "
            "not used",
            loaded.r,
            loaded.lora_alpha,
            model_args.lora_r,
            model_args.lora_alpha,
        )
    logger.info(
        "stage 2: continuing adapter %s (%d trainable of %d parameters)",
        training_args.adapter_path,
        counts["trainable"],
        counts["total"],
    )
    return model, None


def train_sft(
    script_args: SFTScriptArguments,
    model_args: ModelArguments,
    training_args: SFTTrainingConfig,
) -> dict[str, Any]:
    """Run one SFT stage and save adapter, tokenizer, ``config.yaml`` and ``run_summary.json``.

    Args:
        script_args: the datasets and the prompt settings.
        model_args: the base model and the LoRA settings (stage 1).
        training_args: TRL's SFT settings plus ``stage`` and ``adapter_path``.

    Returns:
        The run summary (also written to ``<output_dir>/run_summary.json``).

    Raises:
        UsageError: a dataset, base model or adapter folder is missing, or no example fits ``max_length``.

    Example:

    ```python
    >>> from slmsql_hub.training.sft import train_sft
    >>> callable(train_sft)  # end to end it needs a base model: see tests/test_sft.py
    True

    ```
    """
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from ..prompts import PromptConfig

    clock = Stopwatch()
    threads = set_num_threads(script_args.num_threads)
    _check_local_inputs(model_args, training_args)
    prompt_config = PromptConfig(
        sample_rows=script_args.prompt_sample_rows, max_value_chars=script_args.prompt_max_value_chars
    )

    rows = load_training_rows(script_args, seed=training_args.seed)
    n_rows = len(rows)
    rows = rows.shuffle(seed=training_args.seed)
    if script_args.max_train_samples is not None:
        rows = rows.select(range(min(script_args.max_train_samples, len(rows))))
    # The key column rides through drop_too_long, so the record lists exactly the examples trained on.
    dataset = to_prompt_completion(rows, prompt_config).add_column("question_key", row_keys(rows))

    tokenizer_source, tokenizer_revision = model_args.tokenizer_name_or_path, None
    if tokenizer_source is None and training_args.stage == 2:
        tokenizer_source, tokenizer_revision = training_args.adapter_path, model_args.adapter_revision
    elif tokenizer_source is None:
        tokenizer_source, tokenizer_revision = model_args.model_name_or_path, model_args.model_revision
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, revision=tokenizer_revision)
    if tokenizer.chat_template is None:
        raise UsageError(
            f"the tokenizer from {tokenizer_source} has no chat template; use a chat/instruct model"
        )
    dataset, n_dropped = drop_too_long(dataset, tokenizer, training_args.max_length)
    if len(dataset) == 0:
        raise UsageError(
            f"no example fits max_length={training_args.max_length}; raise it or shorten the prompt"
        )
    trained_keys = dataset["question_key"]
    dataset = dataset.remove_columns("question_key")

    model, peft_config = load_model_for_stage(model_args, training_args)
    revisions = loaded_revisions(
        model_args.model_name_or_path,
        model_args.model_revision,
        training_args.adapter_path,
        model_args.adapter_revision,
    )
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    params = count_parameters(trainer.model)
    if params["trainable"] == 0:
        raise RuntimeError(
            "nothing to train: the model has no trainable parameters after attaching the adapter"
        )
    logger.info(
        "SFT stage %d: %d examples (%d dropped as too long), %d trainable / %d parameters, %d threads",
        training_args.stage,
        len(dataset),
        n_dropped,
        params["trainable"],
        params["total"],
        threads,
    )
    train_clock = Stopwatch()
    result = trainer.train()
    train_seconds = train_clock.seconds()

    output_dir = Path(training_args.output_dir)
    trainer.save_model(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
    save_resolved_config(output_dir / RESOLVED_CONFIG, script_args, model_args, training_args)
    record = write_sft_record(
        output_dir,
        trained_keys,
        stage=training_args.stage,
        continued=training_args.adapter_path if training_args.stage == 2 else None,
    )
    summary = {
        "kind": "sft",
        "stage": training_args.stage,
        "base_model": model_args.model_name_or_path,
        "adapter_path": training_args.adapter_path,
        "revisions": revisions,
        "output_dir": str(output_dir),
        "datasets": list(script_args.dataset_paths),
        "benchmarks": list(script_args.benchmarks),
        "data": {
            "rows": n_rows,
            "used": len(rows),
            "dropped_too_long": n_dropped,
            "trained_on": len(dataset),
        },
        "sft_questions": {
            **record.summary(),
            "file": record.path.name,
            "stage_questions": len(set(trained_keys)),
        },
        "prompt": {
            "sample_rows": prompt_config.sample_rows,
            "max_value_chars": prompt_config.max_value_chars,
        },
        "lora": {
            "r": model_args.lora_r,
            "alpha": model_args.lora_alpha,
            "dropout": model_args.lora_dropout,
            "target_modules": model_args.lora_target_modules,
        },
        "parameters": params,
        "steps": int(result.global_step),
        "epochs": float(trainer.state.epoch or 0.0),
        "final_loss": final_loss(trainer.state.log_history),
        "mean_train_loss": float(result.training_loss),
        "train_seconds": train_seconds,
        "wall_seconds": clock.seconds(),
        "threads": threads,
        "environment": environment(),
    }
    write_run_summary(output_dir, summary)
    logger.info(
        "SFT stage %d done: %d steps, final loss %s, %.1fs; adapter in %s",
        training_args.stage,
        summary["steps"],
        summary["final_loss"],
        summary["wall_seconds"],
        output_dir,
    )
    return summary
