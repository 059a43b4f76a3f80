"""GRPO with TRL's ``GRPOTrainer``, continuing the SFT adapter (the study's setup), shaped like open-r1's grpo.py.

``slmsql train grpo --config recipes/world/grpo_band.yaml`` (or ``accelerate launch -m slmsql_hub train
grpo --config ...`` on several processes) runs :func:`main` in phases:

1. **data** (:mod:`~slmsql_hub.training.grpo_data`): rows from saved datasets or benchmarks -> the project's chat
   prompts, keeping ``gold_sql`` and ``db_path``; unscorable golds dropped;
2. **model** (:mod:`~slmsql_hub.training.models`): the base model with the SFT adapter loaded **trainable**, or
   a fresh LoRA adapter (``trl.get_peft_config``); prompts too long for the context dropped;
3. **rewards** (:mod:`~slmsql_hub.training.grpo_rewards`): the recipe's rewards by name, one shared judge;
4. **guards** (:mod:`~slmsql_hub.training.guards`): fail fast on zero trainable parameters, warn on settings
   that cannot work, checksum and snapshot the adapter;
5. **train**: checkpoints, ``--resume_from_checkpoint`` (``true``/``last``: the latest complete one), every
   logged step appended once to ``telemetry.jsonl``; flat groups get an advantage of exactly 0
   (:mod:`~slmsql_hub.training.zero_variance`);
6. **save**: adapter, tokenizer, ``config.yaml``, ``run_summary.json``
   (:mod:`~slmsql_hub.training.grpo_summary`), and the SFT start's question record carried forward
   (``sft_questions.json``, :func:`~slmsql_hub.data.sft_record.carry_sft_record`), so filtering or sampling with
   the GRPO adapter leaves out the same questions as with its SFT parent.

``README.md`` is left for the project's card: TRL's draft card goes to ``trl_model_card.md`` and PEFT's template
is dropped. Publishing (``push_to_hub``: the project's card and run files) is the command layer's
(:func:`slmsql_hub.commands.train.run_grpo`); training never imports it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..data.sft_record import carry_sft_record, row_databases
from ..errors import UsageError
from ..recipes import save_resolved_config
from ..run.guard import staged_files
from ..run.layout import STAGE_CONFIG
from ..run.metric_names import EXACT_ZERO_STD_METRIC
from ..runtime import Stopwatch, loaded_revisions, set_num_threads
from .common import (
    count_parameters,
    drop_too_long,
    labelled_positions_only,
    shuffle_and_cap,
    write_run_summary,
)
from .configs import GRPOScriptArguments, GRPOTrainingConfig, ModelArguments
from .grpo_data import (
    build_prompt_dataset,
    check_one_round,
    drop_unscorable_golds,
    load_prompt_rows,
)
from .grpo_rewards import build_reward_funcs, close_rewards, reward_judging
from .grpo_summary import TRL_MODEL_CARD, complete_summary, log_done, recipe_view, start_summary
from .guards import (
    adapter_checksum,
    adapter_update,
    check_adapter_changed,
    check_adapter_update,
    check_clipping_can_fire,
    check_lora_learning_rate,
    check_trainable_parameters,
    lora_snapshot,
)
from .models import check_local_inputs, load_model_and_tokenizer
from .telemetry import TelemetryCallback
from .zero_variance import flat_groups, frac_zero_std_groups, zero_flat_advantages

if TYPE_CHECKING:
    from datasets import Dataset

    from ..data.prompts import PromptConfig

logger = logging.getLogger(__name__)


def _last_complete_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The latest ``checkpoint-N`` folder of ``output_dir`` that has ``trainer_state.json`` (written last). Not
    ``get_last_checkpoint``, which returns a folder a kill cut short, and resuming from it crashes.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> for step in (4, 8, 12):
    ...     (out / f"checkpoint-{step}").mkdir()
    >>> for step in (4, 8):
    ...     _ = (out / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    >>> pathlib.Path(_last_complete_checkpoint(out)).name  # checkpoint-12 was cut short
    'checkpoint-8'

    ```
    """
    from transformers.trainer_utils import sort_checkpoints

    if not Path(output_dir).is_dir():
        return None
    for path in reversed(sort_checkpoints(str(output_dir))):
        if (Path(path) / "trainer_state.json").is_file():
            return path
        logger.warning("skipping %s: it has no trainer_state.json (the run was killed while saving it)", path)
    return None


def resolve_checkpoint(value: str | bool | None, output_dir: str | os.PathLike) -> str | None:
    """The checkpoint ``--resume_from_checkpoint`` names (``true``/``last``: :func:`_last_complete_checkpoint`);
    :class:`UsageError` when there is none.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> for step in (4, 12):
    ...     (out / f"checkpoint-{step}").mkdir()
    ...     _ = (out / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    >>> pathlib.Path(resolve_checkpoint("last", out)).name, resolve_checkpoint(None, out)
    ('checkpoint-12', None)

    ```
    """
    if value is None or value is False:
        return None
    text = str(value).strip()
    if text.lower() in ("", "false", "none", "null", "no"):
        return None
    if text.lower() in ("true", "last", "latest", "yes"):
        last = _last_complete_checkpoint(output_dir)
        if last is None:
            raise UsageError(
                f"--resume_from_checkpoint {text}: no complete checkpoint-* folder in {output_dir}; set save_steps "
                "so the run writes checkpoints, or start without --resume_from_checkpoint"
            )
        return last
    if not (Path(text) / "trainer_state.json").is_file():
        raise UsageError(
            f"checkpoint folder not found or incomplete (no trainer_state.json): {text}; pass a checkpoint-* folder "
            "or `last`"
        )
    return text


@contextlib.contextmanager
def _readme_kept_for_the_card(
    folder: str | os.PathLike, enabled: bool, keep_as: str | None
) -> Iterator[None]:
    """Let TRL/PEFT write ``README.md`` in ``folder``, then move what they wrote to ``keep_as`` (or drop it)
    and put back the ``README.md`` that was there before (the project's card), if any."""
    readme = Path(folder) / "README.md"
    before = readme.read_bytes() if enabled and readme.is_file() else None
    try:
        yield
    finally:
        if enabled and readme.is_file() and readme.read_bytes() != before:
            if keep_as:
                os.replace(readme, readme.with_name(keep_as))
            else:
                readme.unlink()
            if before is not None:
                readme.write_bytes(before)


def _make_trainer_class():
    from trl import GRPOTrainer

    class SlmsqlGRPOTrainer(GRPOTrainer):
        """TRL's ``GRPOTrainer`` whose flat groups get an advantage of exactly 0 and which also logs
        :data:`EXACT_ZERO_STD_METRIC` (see :mod:`~slmsql_hub.training.zero_variance`); its draft model card goes
        to :data:`TRL_MODEL_CARD`, never ``README.md``."""

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            mode = "train" if self.model.training else "eval"
            groups = self.num_generations if mode == "train" else self.num_generations_eval
            aggregation = self.multi_objective_aggregation
            flat, _ = flat_groups(rewards_per_func, self.reward_weights, groups, aggregation)
            self._flat_samples = flat.repeat_interleave(groups)  # every process's samples, as gathered
            self._metrics[mode][EXACT_ZERO_STD_METRIC].append(
                frac_zero_std_groups(rewards_per_func, self.reward_weights, groups, aggregation)
            )
            return rewards_per_func

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            flat = self._flat_samples
            output["advantages"] = zero_flat_advantages(
                output["advantages"], flat, self.accelerator.process_index
            )
            logged = self._logs["advantages"]  # the completions table; every process's samples come last
            start = len(logged) - len(flat)
            for offset in flat.nonzero().flatten().tolist():
                if start + offset >= 0:
                    logged[start + offset] = 0.0
            return output

        def create_model_card(self, *args, **kwargs):
            folder = self.args.output_dir
            with _readme_kept_for_the_card(folder, self.is_world_process_zero(), TRL_MODEL_CARD):
                super().create_model_card(*args, **kwargs)

        def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
            folder = output_dir or self.args.output_dir
            top = Path(folder).resolve() == Path(self.args.output_dir).resolve()
            with _readme_kept_for_the_card(folder, top and self.args.should_save, None):
                super().save_model(output_dir, _internal_call)

    return SlmsqlGRPOTrainer


def _prepare_data(script_args: GRPOScriptArguments, training_args: GRPOTrainingConfig, prompt_config: PromptConfig,
                  main_process: bool) -> tuple[Dataset, dict[str, Any], Any]:
    """Phase 1: rows -> prompt dataset with unscorable golds dropped; returns it, its counts and the judge."""
    rows = load_prompt_rows(script_args, seed=training_args.seed)
    n_rows = len(rows)
    rows = shuffle_and_cap(rows, training_args.seed, script_args.max_train_samples)
    judging = reward_judging(training_args)  # the rewards' judge: the gold check fills its cache
    dataset = build_prompt_dataset(rows, prompt_config, sandbox=judging.judge.sandbox, progress=main_process)
    dataset, gold_counts = drop_unscorable_golds(dataset, judging.judge)
    if len(dataset) == 0:
        judging.close()
        raise UsageError(
            f"every one of the {len(rows)} gold queries fails (logged above), so no prompt can be rewarded; check the "
            "databases, or the SQL limits sql_timeout_s / sql_max_ops / sql_max_rows"
        )
    counts = {"source": script_args.sources(), "rows": n_rows, "used": len(rows), **gold_counts}
    commits = script_args.dataset_commits()
    if commits:
        counts["dataset_revision"], counts["dataset_commits"] = script_args.dataset_revision, commits
    return dataset, counts, judging


def _fit_to_model(dataset: Dataset, counts: dict[str, Any], model: Any, tokenizer: Any,
                  training_args: GRPOTrainingConfig) -> Dataset:
    """Phase 2 (after loading): drop prompts that leave no room for the completion; refuse less than one round."""
    positions = getattr(model.config, "max_position_embeddings", None)
    room = positions - (training_args.max_completion_length or 0) if positions else None
    dataset, n_dropped = drop_too_long(dataset, tokenizer, room)
    if len(dataset) == 0:
        raise UsageError(
            f"no prompt fits the model's {positions} positions with max_completion_length="
            f"{training_args.max_completion_length}; lower prompt_sample_rows or max_completion_length"
        )
    check_one_round(len(dataset), training_args)
    counts.update(
        {"dropped_too_long": n_dropped, "prompts": len(dataset), "databases": len(set(dataset["db_path"]))}
    )
    counts["database_names"] = sorted(set(row_databases(dataset)))  # what the Space calls trained on
    return dataset


def _save(trainer: Any, tokenizer: Any, args: tuple, output_dir: Path, main_process: bool) -> None:
    """Phase 6: adapter (README.md kept for the card), TRL's draft card, tokenizer and ``config.yaml``."""
    script_args, model_args, training_args = args
    with staged_files(output_dir, main_process=main_process) as staging:  # each file renamed into place whole
        trainer.save_model(str(staging), _internal_call=True)  # the push (push_to_hub) follows, from output_dir
        if main_process:
            (staging / "README.md").unlink(missing_ok=True)  # PEFT's; the card's README is the project's
            tokenizer.save_pretrained(str(staging))
            save_resolved_config(staging / STAGE_CONFIG, script_args, model_args, recipe_view(training_args))
    if training_args.push_to_hub:
        trainer.push_to_hub(commit_message="Model save", revision=training_args.hub_revision)
    trainer.create_model_card(model_name=output_dir.name)


def _quiet_logging() -> None:
    """A process other than the main one logs only warnings and errors."""
    for name in ("slmsql_hub", __name__):
        logging.getLogger(name).setLevel(logging.WARNING)


def _pre_train_guards(trainer: Any, training_args: GRPOTrainingConfig) -> list:
    """Phase 4: the guards checked before training (trainable parameters, clipping, the LoRA rate), logged."""
    from peft import PeftModel

    guards = [
        check_trainable_parameters(trainer.model),
        check_clipping_can_fire(training_args),
        check_lora_learning_rate(training_args, isinstance(trainer.model, PeftModel)),
    ]
    for guard in guards:
        guard.log()
    return guards


def _refuse_failed_guard(
    guards: list, summary: dict[str, Any], clock: Stopwatch, output_dir: Path | None
) -> None:
    """Raise :class:`UsageError` on the first failed guard, after writing the failed summary to ``output_dir``
    (``None``: a process other than the main one writes nothing)."""
    failed = [g for g in guards if g.failed]
    if failed:
        summary.update(status="failed", wall_seconds=clock.seconds())
        if output_dir is not None:
            write_run_summary(output_dir, summary)
        raise UsageError(f"guard {failed[0].name} failed: {failed[0].message}")


def _write_summary(summary: dict[str, Any], adapter: str | None, output_dir: Path) -> None:
    """The main process's last step: carry the SFT question record forward, write ``run_summary.json``."""
    record = carry_sft_record(adapter, output_dir)
    if record is not None:
        summary["sft_questions"] = {**record.summary(), "file": record.path.name, "carried_from": adapter}
    write_run_summary(output_dir, summary)
    log_done(summary, output_dir)


def main(
    script_args: GRPOScriptArguments, training_args: GRPOTrainingConfig, model_args: ModelArguments
) -> dict[str, Any]:
    """Run GRPO and save the adapter, tokenizer, ``config.yaml``, ``telemetry.jsonl`` and ``run_summary.json``.

    Returns the run summary (the main process also writes it). Raises :class:`UsageError` when a dataset, model
    or adapter is missing, no prompt fits, or a guard fails before training (the summary is written first).
    """
    clock = Stopwatch()
    threads = set_num_threads(script_args.num_threads)
    main_process = training_args.process_index == 0
    if not main_process:  # the other processes only report problems
        _quiet_logging()
    output_dir = Path(training_args.output_dir)
    checkpoint = resolve_checkpoint(training_args.resume_from_checkpoint, output_dir)
    adapter = training_args.adapter_path
    check_local_inputs(
        model_args,
        adapter,
        "run SFT first (`slmsql train sft --config recipes/world/sft_stage2.yaml`), fix adapter_path, or remove it "
        "to start a fresh LoRA adapter",
    )

    # 1. data
    prompt_config, prompt_source = script_args.resolve_prompt_config(adapter)
    dataset, data_counts, judging = _prepare_data(script_args, training_args, prompt_config, main_process)

    # 2. model
    model, peft_config, tokenizer = load_model_and_tokenizer(model_args, adapter)
    revisions = loaded_revisions(
        model_args.model_name_or_path, model_args.model_revision, adapter, model_args.adapter_revision
    )
    dataset = _fit_to_model(dataset, data_counts, model, tokenizer, training_args)
    logger.info("GRPO data: %s (prompt: %d sample rows, from %s)", data_counts, prompt_config.sample_rows, prompt_source)

    # 3. rewards
    reward_funcs = build_reward_funcs(training_args, judging)
    telemetry = TelemetryCallback(output_dir)
    try:
        trainer = _make_trainer_class()(
            model=model,
            reward_funcs=reward_funcs,
            args=training_args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[telemetry],
        )

        # 4. guards
        guards = _pre_train_guards(trainer, training_args)
        summary = start_summary(
            script_args, model_args, training_args, guards,
            revisions=revisions, data=data_counts, prompt=(prompt_config, prompt_source),
            parameters=count_parameters(trainer.model), threads=threads, resumed_from=checkpoint,
        )
        _refuse_failed_guard(guards, summary, clock, output_dir if main_process else None)
        checksum_before = adapter_checksum(trainer.model)
        snapshot = lora_snapshot(trainer.model)

        # 5. train
        train_clock = Stopwatch()
        with labelled_positions_only():
            result = trainer.train(resume_from_checkpoint=checkpoint)
        train_seconds = train_clock.seconds()
        sandbox_stats = dict(judging.judge.sandbox.stats)  # this process's: gold check and every step's rewards
    finally:
        close_rewards(reward_funcs)

    # 6. save
    checksum_after = adapter_checksum(trainer.model)
    changed = check_adapter_changed(checksum_before, checksum_after)
    update = adapter_update(trainer.model, snapshot)
    guards += [changed, check_adapter_update(update, training_args.min_relative_update)]
    for guard in guards[-2:]:
        guard.log()
    _save(trainer, tokenizer, (script_args, model_args, training_args), output_dir, main_process)
    complete_summary(
        summary, trainer, result, guards,
        checksums=(checksum_before, checksum_after, not changed.failed), update=update, sandbox=sandbox_stats,
        telemetry=telemetry, main_process=main_process, seconds=(train_seconds, clock.seconds()),
    )
    if training_args.push_to_hub:
        summary["hub_model_id"] = trainer.hub_model_id  # the command layer adds the project's card there
    if main_process:
        _write_summary(summary, adapter, output_dir)
    return summary


def train_grpo(
    script_args: GRPOScriptArguments, model_args: ModelArguments, training_args: GRPOTrainingConfig
) -> dict[str, Any]:
    """:func:`main` with the arguments in :data:`~slmsql_hub.training.configs.GRPO_ARGUMENTS` order."""
    return main(script_args, training_args, model_args)


if __name__ == "__main__":  # pragma: no cover  (the command lives in the CLI, above this layer)
    print(  # noqa: T201
        "run GRPO with `python -m slmsql_hub train grpo --config ...` "
        "(several processes: `accelerate launch -m slmsql_hub train grpo --config ...`)",
        file=sys.stderr,
    )
    sys.exit(2)
