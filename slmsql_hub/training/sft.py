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

from ..data.sft_record import row_databases, row_keys, write_sft_record
from ..errors import UsageError
from ..runtime import Stopwatch, environment, loaded_revisions, set_num_threads
from .common import (
    ROW_COLUMNS,
    count_parameters,
    drop_too_long,
    final_loss,
    load_datasets,
    shuffle_and_cap,
    to_prompt_completion,
    train_and_save,
    write_run_summary,
)
from .configs import ModelArguments, SFTScriptArguments, SFTTrainingConfig
from .models import check_local_inputs, load_model_and_tokenizer

logger = logging.getLogger(__name__)


def _as_list(value: str | list[str] | None) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def load_training_rows(script_args: SFTScriptArguments, seed: int = 0):
    """The run's rows: every ``dataset_paths`` folder or Hub dataset and every benchmark of ``benchmarks``, concatenated.

    Benchmarks (``NAME:SPLIT[:LIMIT]``, a seeded subset) are read with
    :func:`~slmsql_hub.data.benchmarks.load_benchmark`, so BIRD, Spider and SynSQL train from their release files.
    """
    from datasets import concatenate_datasets

    parts = []
    if script_args.dataset_paths:
        parts.append(load_datasets(script_args.dataset_paths, script_args.dataset_revision))
    for entry in script_args.benchmark_entries():
        from ..data.benchmarks import load_benchmark

        root = script_args.root(entry.name)
        loaded = load_benchmark(entry.name, root, entry.split, limit=entry.limit, seed=seed)
        loaded = loaded.select_columns([c for c in ROW_COLUMNS if c in loaded.column_names])
        parts.append(loaded.add_column("_source", [str(Path(root).expanduser().resolve())] * len(loaded)))
    if len(parts) == 1:
        return parts[0]
    shared = [c for c in parts[0].column_names if all(c in p.column_names for p in parts)]
    return concatenate_datasets([p.select_columns(shared) for p in parts])


def _dataset_pins(script_args: SFTScriptArguments) -> dict[str, Any]:
    """``dataset_revision`` and ``dataset_commits`` for a run that read Hub datasets; ``{}`` otherwise."""
    commits = script_args.dataset_commits()
    return {"dataset_revision": script_args.dataset_revision, "dataset_commits": commits} if commits else {}


def _prompt_dataset(
    script_args: SFTScriptArguments, training_args: SFTTrainingConfig, prompt_config: Any
) -> tuple[Any, int, int]:
    """The prompt-completion dataset (shuffled, capped), with the rows read and used. Its ``question_key`` and
    ``question_db`` columns ride through ``drop_too_long``, so the record lists exactly the examples trained on."""
    rows = load_training_rows(script_args, seed=training_args.seed)
    n_rows = len(rows)
    rows = shuffle_and_cap(rows, training_args.seed, script_args.max_train_samples)
    dataset = to_prompt_completion(rows, prompt_config).add_column("question_key", row_keys(rows))
    return dataset.add_column("question_db", row_databases(rows)), n_rows, len(rows)


def _trainable_parameters(trainer: Any) -> dict[str, int]:
    """The trainer model's parameter counts; raises when nothing is trainable."""
    params = count_parameters(trainer.model)
    if params["trainable"] == 0:
        raise RuntimeError(
            "nothing to train: the model has no trainable parameters after attaching the adapter"
        )
    return params


def train_sft(
    script_args: SFTScriptArguments,
    model_args: ModelArguments,
    training_args: SFTTrainingConfig,
) -> dict[str, Any]:
    """Run one SFT stage; save adapter, tokenizer, ``config.yaml``, ``sft_questions.json`` and ``run_summary.json``.

    Returns the run summary. Raises :class:`UsageError` when a dataset, base model or adapter folder is missing,
    or no example fits ``max_length``. End to end it needs a base model: see ``tests/test_sft.py``.
    """
    from trl import SFTTrainer

    clock = Stopwatch()
    threads = set_num_threads(script_args.num_threads)
    check_local_inputs(
        model_args,
        training_args.adapter_path,
        "run stage 1 first (`slmsql train sft --config recipes/world/sft_stage1.yaml`) or fix adapter_path",
    )
    prompt_config, _ = script_args.resolve_prompt_config(training_args.adapter_path)  # stage 2: stage 1's text

    dataset, n_rows, n_used = _prompt_dataset(script_args, training_args, prompt_config)
    model, peft_config, tokenizer = load_model_and_tokenizer(model_args, training_args.adapter_path)
    dataset, n_dropped = drop_too_long(dataset, tokenizer, training_args.max_length)
    if len(dataset) == 0:
        raise UsageError(
            f"no example fits max_length={training_args.max_length}; raise it or shorten the prompt"
        )
    trained_keys, trained_databases = dataset["question_key"], dataset["question_db"]
    dataset = dataset.remove_columns(["question_key", "question_db"])

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
    params = _trainable_parameters(trainer)
    logger.info(
        "SFT stage %d: %d examples (%d dropped as too long), %d trainable / %d parameters, %d threads",
        training_args.stage,
        len(dataset),
        n_dropped,
        params["trainable"],
        params["total"],
        threads,
    )
    output_dir = Path(training_args.output_dir)
    result, train_seconds = train_and_save(trainer, tokenizer, output_dir, script_args, model_args, training_args)
    if not trainer.is_world_process_zero():  # under `accelerate launch`, one process writes the run's files
        return {"kind": "sft", "stage": training_args.stage, "output_dir": str(output_dir)}
    record = write_sft_record(
        output_dir,
        trained_keys,
        stage=training_args.stage,
        continued=training_args.adapter_path if training_args.stage == 2 else None,
        databases=trained_databases,
    )
    data = {"rows": n_rows, "used": n_used, "dropped_too_long": n_dropped, "trained_on": len(dataset)}
    summary = _summary(
        script_args, model_args, training_args, trainer, result,
        revisions=revisions, data=data, record=record, trained_keys=trained_keys, prompt_config=prompt_config,
        params=params, threads=threads, seconds=(train_seconds, clock.seconds()),
    )
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


def _summary(
    script_args: SFTScriptArguments,
    model_args: ModelArguments,
    training_args: SFTTrainingConfig,
    trainer: Any,
    result: Any,
    *,
    revisions: dict[str, Any],
    data: dict[str, int],
    record: Any,
    trained_keys: list[str],
    prompt_config: Any,
    params: dict[str, int],
    threads: int,
    seconds: tuple[float, float],
) -> dict[str, Any]:
    """``run_summary.json`` of an SFT stage."""
    return {
        "kind": "sft",
        "stage": training_args.stage,
        "base_model": model_args.model_name_or_path,
        "adapter_path": training_args.adapter_path,
        "revisions": revisions,
        "output_dir": str(Path(training_args.output_dir)),
        "datasets": list(script_args.dataset_paths),
        **_dataset_pins(script_args),
        "benchmarks": list(script_args.benchmarks),
        "data": data,
        "sft_questions": {
            **record.summary(),
            "file": record.path.name,
            "stage_questions": len(set(trained_keys)),
        },
        "prompt": prompt_config.record(),
        "lora": {
            "r": model_args.lora_r,
            "alpha": model_args.lora_alpha,
            "dropout": model_args.lora_dropout,
            "target_modules": _as_list(model_args.lora_target_modules),
        },
        "parameters": params,
        "steps": int(result.global_step),
        "epochs": float(trainer.state.epoch or 0.0),
        "final_loss": final_loss(trainer.state.log_history),
        "mean_train_loss": float(result.training_loss),
        "train_seconds": seconds[0],
        "wall_seconds": seconds[1],
        "threads": threads,
        "environment": environment(),
    }


if __name__ == "__main__":  # pragma: no cover - `slmsql train sft` runs it (the CLI is above this layer)
    from ..errors import exit_not_a_command

    exit_not_a_command("slmsql_hub.training.sft", "sft")
