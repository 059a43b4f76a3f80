"""GRPO on an execution reward with TRL's ``GRPOTrainer``, continuing the SFT adapter (the study's setup).

``slmsql train grpo --config recipes/world/grpo_band.yaml`` (or ``python -m slmsql_hub.training.grpo --config
...``, which ``accelerate launch`` can start on several processes) runs :func:`main` in phases:

1. **data** — the prompts: rows from saved datasets (a world split, or the pass-rate filter's band) or from a
   benchmark, turned into the project's chat prompt (:func:`~slmsql_hub.prompts.build_messages` with the
   schema read through the sandbox), keeping ``gold_sql`` and ``db_path`` for the rewards;
2. **model** — the base model with the SFT adapter loaded **trainable**
   (``PeftModel.from_pretrained(base, adapter, is_trainable=True)``, handed to TRL with no ``peft_config``), or a
   fresh LoRA adapter when the recipe names none. TRL's own CLI cannot continue an adapter this way;
3. **rewards** — :mod:`slmsql_hub.rewards` by name and value, each timed into the telemetry;
4. **guards** — fail fast on zero trainable parameters; warn when ``epsilon`` cannot fire or a LoRA run uses a
   full-fine-tuning learning rate; checksum and snapshot the adapter (see :mod:`~slmsql_hub.training.guards`);
5. **train** — with checkpoints and ``--resume_from_checkpoint`` (``true``/``last`` resumes the latest one),
   every logged step appended to ``telemetry.jsonl`` exactly once (see :mod:`~slmsql_hub.training.telemetry`);
6. **save** — adapter, tokenizer, ``config.yaml``, and ``run_summary.json`` (resolved config, data counts,
   guard results, checksums, ``adapter_update`` (how far the adapter's effective update moved), telemetry
   summary, wall time).

TRL drafts a model card at every save and PEFT writes a template ``README.md`` with the adapter; neither is the
project's card, so the run keeps ``README.md`` free for it: TRL's draft goes to ``trl_model_card.md`` (noted in
``run_summary.json``) and PEFT's template is dropped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..configs import config_to_dict, parse_recipe, save_resolved_config
from ..errors import UsageError
from ..model_refs import looks_local
from ..sql.recipe_limits import LIMITS_KEY, limits_record
from .common import (
    RESOLVED_CONFIG,
    Stopwatch,
    count_parameters,
    environment,
    loaded_revisions,
    resolve_db_path,
    set_num_threads,
    write_run_summary,
)
from .configs import (
    GRPO_ARGUMENTS,
    GRPOScriptArguments,
    GRPOTrainingConfig,
    ModelArguments,
)
from .guards import (
    GuardResult,
    adapter_checksum,
    adapter_update,
    check_adapter_changed,
    check_adapter_update,
    check_clipping_can_fire,
    check_lora_learning_rate,
    check_trainable_parameters,
    guards_summary,
    lora_snapshot,
)
from .metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC
from .telemetry import TELEMETRY_FILE, TelemetryCallback, TimedReward, read_telemetry, summarize_telemetry
from .zero_variance import flat_groups, frac_zero_std_groups, zero_flat_advantages

if TYPE_CHECKING:
    from datasets import Dataset

    from ..prompts import PromptConfig

logger = logging.getLogger(__name__)

TRL_MODEL_CARD = "trl_model_card.md"
"""Where TRL's draft model card goes (``README.md`` is left for the project's card)."""

# ----------------------------------------------------------------------------------------------------------
# Phase 1: data
# ----------------------------------------------------------------------------------------------------------


def load_prompt_rows(script_args: GRPOScriptArguments, seed: int = 0) -> Dataset:
    """The question rows a run trains on: saved datasets and benchmarks, concatenated.

    Read as SFT reads them (:func:`~slmsql_hub.training.sft.load_training_rows`).

    Raises:
        UsageError: a folder or benchmark is missing, there are no rows (e.g. an empty band), or the rows
            have no ``db_path`` (the rewards execute against it).
    """
    from .sft import load_training_rows

    rows = load_training_rows(script_args, seed=seed)
    if len(rows) == 0:
        sources = list(script_args.dataset_paths) + list(script_args.benchmarks)
        raise UsageError(
            f"no training rows in {', '.join(sources) or 'the configured sources'}: there is nothing to train on; "
            "check the benchmarks entries (NAME:SPLIT[:LIMIT])"
        )  # (an empty dataset folder, such as an empty band, is reported by load_datasets with its own fix)
    if "db_path" not in rows.column_names:
        raise UsageError(
            "the training rows have no db_path column, so the execution reward has no database to run on; use a "
            "world split, the filter's band, or a benchmark (benchmarks: [spider:train] with spider_root)"
        )
    return rows


def build_prompt_dataset(
    rows: Dataset,
    prompt_config: PromptConfig,
    sandbox: Any = None,
    progress: bool = True,
) -> Dataset:
    """Rows -> TRL's conversational prompt dataset: ``prompt`` (chat messages), ``gold_sql``, ``db_path``.

    The schema text of each database is read once through the sandbox (or taken from a ``schema`` column);
    ``db_path`` becomes absolute, so the rewards find the database from any working directory or process.

    Args:
        rows: ``question``, ``gold_sql``, ``db_path``, optional ``evidence``/``schema``/``_source``.
        prompt_config: the prompt's sample rows, value length and templates.
        sandbox: a :class:`~slmsql_hub.sql.Sandbox` to read schemas through (``None``: a short-lived one).
        progress: show a progress bar.

    Returns:
        The dataset TRL's ``GRPOTrainer`` reads (its extra columns reach the reward functions).

    Example:

    ```python
    >>> import os, sqlite3, tempfile
    >>> from datasets import Dataset
    >>> from slmsql_hub.prompts import PromptConfig
    >>> from slmsql_hub.training.grpo import build_prompt_dataset
    >>> db = os.path.join(tempfile.mkdtemp(), "pets.sqlite")
    >>> with sqlite3.connect(db) as conn:
    ...     _ = conn.execute("CREATE TABLE pet (id INTEGER, name TEXT)")
    >>> rows = Dataset.from_dict({"question": ["How many pets?"], "gold_sql": ["SELECT count(*) FROM pet"],
    ...                           "db_path": [db]})
    >>> example = build_prompt_dataset(rows, PromptConfig(sample_rows=0), progress=False)[0]
    >>> [m["role"] for m in example["prompt"]], example["gold_sql"], example["db_path"] == db
    (['system', 'user'], 'SELECT count(*) FROM pet', True)

    ```
    """
    from datasets import Dataset as _Dataset
    from tqdm.auto import tqdm

    from ..sql.sandbox import Sandbox

    columns = rows.column_names
    sources = rows["_source"] if "_source" in columns else [str(Path.cwd())] * len(rows)
    given = rows["schema"] if "schema" in columns else [None] * len(rows)
    evidences = rows["evidence"] if "evidence" in columns else [""] * len(rows)
    own = sandbox is None
    box = Sandbox(workers=1) if own else sandbox
    prompts, golds, db_paths = [], [], []
    schemas: dict[str, str] = {}
    try:
        for question, gold_sql, db_value, source, schema, evidence in tqdm(
            zip(rows["question"], rows["gold_sql"], rows["db_path"], sources, given, evidences),
            total=len(rows),
            desc="prompts",
            unit="question",
            disable=not progress,
        ):
            db_path = str(resolve_db_path(db_value, source).resolve())
            if not schema:
                if db_path not in schemas:
                    schemas[db_path] = prompt_config.schema(db_path, box)
                schema = schemas[db_path]
            prompts.append(prompt_config.messages(question, schema, evidence or ""))
            golds.append(gold_sql)
            db_paths.append(db_path)
    finally:
        if own:
            box.close()
    return _Dataset.from_dict({"prompt": prompts, "gold_sql": golds, "db_path": db_paths})


def drop_long_prompts(dataset: Dataset, tokenizer: Any, max_prompt_tokens: int | None) -> tuple[Dataset, int]:
    """Drop prompts longer than ``max_prompt_tokens`` (their completion would not fit the model's context).

    Returns the kept dataset and how many were dropped.
    """
    if max_prompt_tokens is None or len(dataset) == 0:
        return dataset, 0
    lengths = [
        len(
            tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )
        for p in dataset["prompt"]
    ]
    keep = [i for i, n in enumerate(lengths) if n <= max_prompt_tokens]
    dropped = len(dataset) - len(keep)
    if dropped:
        logger.warning(
            "dropped %d of %d prompts longer than %d tokens (longest: %d), which leave no room for the completion "
            "in the model's context; shorten the prompt (prompt_sample_rows) or max_completion_length",
            dropped,
            len(dataset),
            max_prompt_tokens,
            max(lengths),
        )
    return (dataset.select(keep) if dropped else dataset), dropped


def check_one_round(n_prompts: int, training_args: GRPOTrainingConfig) -> None:
    """Refuse fewer prompts than one generation round takes: TRL's sampler drops an incomplete round, so such a
    run would train 0 steps (and the ``adapter_changed`` guard would then blame the rewards).

    A round is ``generation_batch_size / num_generations`` prompts, ``generation_batch_size`` counting every
    process: a band that trains on one GPU can be too small for eight.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOTrainingConfig
    >>> from slmsql_hub.training.grpo import check_one_round
    >>> args = GRPOTrainingConfig(output_dir="o", num_generations=4, per_device_train_batch_size=8,
    ...                           gradient_accumulation_steps=4, report_to="none", use_cpu=True)
    >>> check_one_round(3, args)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: 3 prompt(s), but one generation round takes 8 ...

    ```
    """
    per_round = training_args.generation_batch_size // training_args.num_generations
    if n_prompts < per_round:
        raise UsageError(
            f"{n_prompts} prompt(s), but one generation round takes {per_round} (generation_batch_size "
            f"{training_args.generation_batch_size} over {training_args.world_size} process(es) / num_generations "
            f"{training_args.num_generations}), so TRL would train 0 steps; use more prompts, fewer processes, or a "
            "smaller per_device_train_batch_size or gradient_accumulation_steps"
        )


# ----------------------------------------------------------------------------------------------------------
# Phase 2: model
# ----------------------------------------------------------------------------------------------------------


def check_model_inputs(model_args: ModelArguments, training_args: GRPOTrainingConfig) -> None:
    """Fail early, with the fix, when a local base model or adapter folder named by the recipe is missing."""
    name = str(model_args.model_name_or_path)
    if looks_local(name) and not Path(name).expanduser().is_dir():
        raise UsageError(
            f"base model folder not found: {name}; train it (`slmsql train base --config recipes/world/base.yaml`) "
            "or fix model_name_or_path"
        )
    adapter = training_args.adapter_path
    if (
        adapter
        and looks_local(adapter)
        and not (Path(adapter).expanduser() / "adapter_config.json").is_file()
    ):
        raise UsageError(
            f"no LoRA adapter in {adapter} (adapter_config.json missing); run SFT first (`slmsql train sft --config "
            "recipes/world/sft_stage2.yaml`), fix adapter_path, or remove it to start a fresh LoRA adapter"
        )


def load_tokenizer(model_args: ModelArguments, training_args: GRPOTrainingConfig):
    """The tokenizer: ``tokenizer_name_or_path``, else the adapter folder's (SFT saves it there), else the model's."""
    from transformers import AutoTokenizer

    source, revision = model_args.tokenizer_name_or_path, None
    adapter = training_args.adapter_path
    if source is None and adapter and (Path(adapter).expanduser() / "tokenizer_config.json").is_file():
        source = adapter
    if source is None:
        source, revision = model_args.model_name_or_path, model_args.model_revision
    tokenizer = AutoTokenizer.from_pretrained(source, revision=revision)
    if tokenizer.chat_template is None:
        raise UsageError(f"the tokenizer from {source} has no chat template; use a chat/instruct model")
    return tokenizer


def load_policy_model(model_args: ModelArguments, training_args: GRPOTrainingConfig):
    """The policy to hand to ``GRPOTrainer`` and the ``peft_config`` TRL should attach.

    With ``adapter_path``: the base model with the adapter loaded trainable, and ``None`` (TRL must not add
    another adapter). Without: the base model and a fresh ``LoraConfig`` from ``model_args``.
    """
    from peft import LoraConfig, PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        model_args.model_name_or_path, dtype=model_args.torch_dtype(), revision=model_args.model_revision
    )
    if not training_args.adapter_path:
        peft_config = LoraConfig(
            r=model_args.lora_r,
            lora_alpha=model_args.lora_alpha,
            lora_dropout=model_args.lora_dropout,
            target_modules=model_args.peft_target_modules(),
            task_type="CAUSAL_LM",
        )
        logger.info(
            "no adapter_path: attaching a fresh LoRA adapter (r=%d, alpha=%d)",
            peft_config.r,
            peft_config.lora_alpha,
        )
        return model, peft_config
    model = PeftModel.from_pretrained(
        model, training_args.adapter_path, is_trainable=True, revision=model_args.adapter_revision
    )
    loaded = model.peft_config[model.active_adapter]
    if (loaded.r, loaded.lora_alpha) != (model_args.lora_r, model_args.lora_alpha):
        logger.warning(
            "continuing the adapter as saved (r=%s, alpha=%s); the recipe's lora_r=%s/lora_alpha=%s are not used",
            loaded.r,
            loaded.lora_alpha,
            model_args.lora_r,
            model_args.lora_alpha,
        )
    logger.info("continuing the SFT adapter %s (loaded trainable)", training_args.adapter_path)
    return model, None


# ----------------------------------------------------------------------------------------------------------
# Phase 3: rewards
# ----------------------------------------------------------------------------------------------------------


def reward_judging(training_args: GRPOTrainingConfig):
    """The one :class:`~slmsql_hub.rewards.BatchJudge` of a run: the recipe's comparison rule, limits and workers.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOTrainingConfig
    >>> from slmsql_hub.training.grpo import reward_judging
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
    """The reward functions the recipe names, with its values, each wrapped to time itself.

    Every reward, ``format`` included, reads its verdicts from one :class:`~slmsql_hub.rewards.BatchJudge`
    (``judging``, else :func:`reward_judging`): one execution per distinct query, one gold cache, and the same
    verdict per row, so a row with no verdict gets ``None`` from every reward.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOTrainingConfig
    >>> from slmsql_hub.training.grpo import build_reward_funcs
    >>> args = GRPOTrainingConfig(output_dir="out", report_to="none", use_cpu=True, format_reward_value=0.5)
    >>> rewards = build_reward_funcs(args)
    >>> [r.__name__ for r in rewards], rewards[1].func.value, rewards[0].func.judging is rewards[1].func.judging
    (['execution', 'format'], 0.5, True)

    ```
    """
    from ..rewards import ExecutionReward, FormatReward, ResultF1Reward

    judging = judging if judging is not None else reward_judging(training_args)
    funcs: list[Any] = []
    for name in training_args.reward_funcs:
        if name == "execution":
            func = ExecutionReward(
                correct=training_args.reward_correct,
                executes=training_args.reward_executes,
                fails=training_args.reward_fails,
                judging=judging,
            )
        elif name == "format":
            func = FormatReward(value=training_args.format_reward_value, judging=judging)
        else:
            func = ResultF1Reward(judging=judging)
        funcs.append(func)
    return [TimedReward(f) for f in funcs]


def close_rewards(reward_funcs: Sequence[Any]) -> None:
    """Close the rewards' sandboxes (closing a shared judge twice is harmless)."""
    for reward in reward_funcs:
        close = getattr(reward, "close", None)
        if callable(close):
            close()


def drop_unscorable_golds(dataset: Dataset, judge: Any) -> tuple[Dataset, dict[str, int]]:
    """Execute every gold once (through the rewards' ``judge``, whose cache then serves training) and drop the
    rows whose gold fails: their rewards would all be ``None`` at every step, so they cannot teach anything.

    A gold that meets an infrastructure failure (a wall-clock timeout on a loaded machine) is kept: it is not the
    gold's fault, and dropping it would make the data depend on the machine's load. At step time such a row gets
    no reward and is counted in ``sql/infra_failure_rate``.

    Returns:
        The kept rows and ``{"unscorable_gold": dropped, "gold_infra_failures": kept despite a failure}``.

    Example:

    ```python
    >>> import os, sqlite3, tempfile
    >>> from datasets import Dataset
    >>> from slmsql_hub.sql import Judge
    >>> from slmsql_hub.training.grpo import drop_unscorable_golds
    >>> db = os.path.join(tempfile.mkdtemp(), "pets.sqlite")
    >>> with sqlite3.connect(db) as conn:
    ...     _ = conn.execute("CREATE TABLE pet (id INTEGER)")
    >>> rows = Dataset.from_dict({"gold_sql": ["SELECT count(*) FROM pet", "SELECT * FROM cat"], "db_path": [db] * 2})
    >>> with Judge(workers=1) as judge:
    ...     kept, counts = drop_unscorable_golds(rows, judge)
    >>> list(kept["gold_sql"]), counts
    (['SELECT count(*) FROM pet'], {'unscorable_gold': 1, 'gold_infra_failures': 0})

    ```
    """
    from ..sql import Verdict

    judgements = judge.judge_many([None] * len(dataset), list(dataset["gold_sql"]), list(dataset["db_path"]))
    keep = [i for i, j in enumerate(judgements) if j.verdict is not Verdict.UNSCORABLE]
    counts = {
        "unscorable_gold": len(dataset) - len(keep),
        "gold_infra_failures": sum(j.verdict is Verdict.INFRA_FAILURE for j in judgements),
    }
    if counts["unscorable_gold"]:
        first = next(j for j in judgements if j.verdict is Verdict.UNSCORABLE)
        logger.warning(
            "dropped %d of %d prompts whose gold SQL fails under the run's limits (first: %s)",
            counts["unscorable_gold"],
            len(dataset),
            first.error,
        )
    if counts["gold_infra_failures"]:
        logger.warning(
            "%d gold queries met an infrastructure failure (kept; such rows get no reward)",
            counts["gold_infra_failures"],
        )
    return (dataset.select(keep) if counts["unscorable_gold"] else dataset), counts


# ----------------------------------------------------------------------------------------------------------
# Phase 5/6: training and saving
# ----------------------------------------------------------------------------------------------------------


def last_complete_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The latest ``checkpoint-N`` folder of ``output_dir`` that was written to the end.

    A run killed while saving leaves a checkpoint folder without ``trainer_state.json`` (the Trainer writes it
    last); resuming from it would fail, so it is skipped (with a warning) in favour of the previous one.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.training.grpo import last_complete_checkpoint
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> for step in (4, 8, 12):
    ...     (out / f"checkpoint-{step}").mkdir()
    >>> for step in (4, 8):
    ...     _ = (out / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    >>> pathlib.Path(last_complete_checkpoint(out)).name  # checkpoint-12 was cut short
    'checkpoint-8'

    ```
    """
    import re

    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    pattern = re.compile(r"^checkpoint-(\d+)$")
    found = sorted(
        (
            (int(m.group(1)), path)
            for path in folder.iterdir()
            if path.is_dir() and (m := pattern.match(path.name))
        ),
        reverse=True,
    )
    for _, path in found:
        if (path / "trainer_state.json").is_file():
            return str(path)
        logger.warning("skipping %s: it has no trainer_state.json (the run was killed while saving it)", path)
    return None


def resolve_checkpoint(value: str | bool | None, output_dir: str | os.PathLike) -> str | None:
    """The checkpoint ``--resume_from_checkpoint`` names: ``true``/``last`` means the latest complete one in
    ``output_dir`` (see :func:`last_complete_checkpoint`).

    Raises:
        UsageError: no checkpoint to resume from.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.training.grpo import resolve_checkpoint
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
        last = last_complete_checkpoint(output_dir)
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


def _log_guards(results: list[GuardResult]) -> None:
    for result in results:
        result.log()


def _is_main(training_args: GRPOTrainingConfig) -> bool:
    return training_args.process_index == 0


def train_grpo(
    script_args: GRPOScriptArguments,
    model_args: ModelArguments,
    training_args: GRPOTrainingConfig,
) -> dict[str, Any]:
    """Run GRPO and save the adapter, tokenizer, ``config.yaml``, ``telemetry.jsonl`` and ``run_summary.json``.

    Args:
        script_args: the prompts' source and settings.
        model_args: the base model and the LoRA settings of a fresh adapter.
        training_args: TRL's GRPO settings plus the adapter to continue and the rewards.

    Returns:
        The run summary (also written to ``<output_dir>/run_summary.json`` by the main process).

    Raises:
        UsageError: a dataset, model or adapter is missing, no prompt fits, or the policy has no trainable
            parameter (the ``trainable_parameters`` guard; the summary is written first).

    Example:

    ```python
    >>> from slmsql_hub.training.grpo import train_grpo
    >>> callable(train_grpo)  # end to end it needs a model and prompts: see tests/test_grpo.py
    True

    ```
    """
    clock = Stopwatch()
    threads = set_num_threads(script_args.num_threads)
    main_process = _is_main(training_args)
    if not main_process:  # the other processes only report problems
        for name in ("slmsql_hub", __name__):
            logging.getLogger(name).setLevel(logging.WARNING)
    output_dir = Path(training_args.output_dir)
    checkpoint = resolve_checkpoint(training_args.resume_from_checkpoint, output_dir)
    check_model_inputs(model_args, training_args)

    # 1. data
    prompt_config, prompt_source = script_args.resolve_prompt_config(training_args.adapter_path)
    rows = load_prompt_rows(script_args, seed=training_args.seed)
    n_rows = len(rows)
    rows = rows.shuffle(seed=training_args.seed)
    if script_args.max_train_samples is not None:
        rows = rows.select(range(min(script_args.max_train_samples, len(rows))))
    judging = reward_judging(training_args)  # the rewards' judge: the gold check fills its cache
    dataset = build_prompt_dataset(rows, prompt_config, sandbox=judging.judge.sandbox, progress=main_process)
    dataset, gold_counts = drop_unscorable_golds(dataset, judging.judge)
    if len(dataset) == 0:
        judging.close()
        raise UsageError(
            f"every one of the {len(rows)} gold queries fails (logged above), so no prompt can be rewarded; check the "
            "databases, or the SQL limits sql_timeout_s / sql_max_ops / sql_max_rows"
        )
    tokenizer = load_tokenizer(model_args, training_args)

    # 2. model
    model, peft_config = load_policy_model(model_args, training_args)
    revisions = loaded_revisions(
        model_args.model_name_or_path,
        model_args.model_revision,
        training_args.adapter_path,
        model_args.adapter_revision,
    )
    positions = getattr(model.config, "max_position_embeddings", None)
    room = positions - (training_args.max_completion_length or 0) if positions else None
    dataset, n_dropped = drop_long_prompts(dataset, tokenizer, room)
    if len(dataset) == 0:
        raise UsageError(
            f"no prompt fits the model's {positions} positions with max_completion_length="
            f"{training_args.max_completion_length}; lower prompt_sample_rows or max_completion_length"
        )
    check_one_round(len(dataset), training_args)
    data_counts = {
        "source": script_args.sources(),
        "rows": n_rows,
        "used": len(rows),
        **gold_counts,
        "dropped_too_long": n_dropped,
        "prompts": len(dataset),
        "databases": len(set(dataset["db_path"])),
    }
    logger.info(
        "GRPO data: %s (prompt: %d sample rows, from %s)",
        data_counts,
        prompt_config.sample_rows,
        prompt_source,
    )

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
        from peft import PeftModel

        is_lora = isinstance(trainer.model, PeftModel)
        params = count_parameters(trainer.model)
        guards = [
            check_trainable_parameters(trainer.model),
            check_clipping_can_fire(training_args),
            check_lora_learning_rate(training_args, is_lora),
        ]
        _log_guards(guards)
        summary: dict[str, Any] = {
            "kind": "grpo",
            "status": "running",
            "base_model": model_args.model_name_or_path,
            "adapter_path": training_args.adapter_path,
            "revisions": revisions,
            "fresh_adapter": training_args.adapter_path is None,
            "output_dir": str(output_dir),
            "data": data_counts,
            "prompt": {
                "sample_rows": prompt_config.sample_rows,
                "max_value_chars": prompt_config.max_value_chars,
                "source": prompt_source,
            },
            "rewards": {
                "funcs": list(training_args.reward_funcs),
                "weights": list(training_args.reward_weights or [1.0] * len(training_args.reward_funcs)),
                "execution": {
                    "correct": training_args.reward_correct,
                    "executes": training_args.reward_executes,
                    "fails": training_args.reward_fails,
                },
                "format": training_args.format_reward_value,
                "compare_mode": training_args.reward_compare_mode,
            },
            LIMITS_KEY: limits_record(training_args.sql_limits()),
            "parameters": params,
            "processes": training_args.world_size,
            "threads": threads,
            "resumed_from": checkpoint,
            "guards": guards_summary(guards),
            "config": config_to_dict(script_args, model_args, recipe_view(training_args)),
            "generation": {
                "generation_batch_size": training_args.generation_batch_size,
                "steps_per_generation": training_args.steps_per_generation,
                "prompts_per_generation": training_args.generation_batch_size
                // training_args.num_generations,
            },
            "environment": environment(),
        }
        failed = [g for g in guards if g.failed]
        if failed:
            summary["status"] = "failed"
            summary["wall_seconds"] = clock.seconds()
            if main_process:
                write_run_summary(output_dir, summary)
            raise UsageError(f"guard {failed[0].name} failed: {failed[0].message}")
        checksum_before = adapter_checksum(trainer.model)
        snapshot = lora_snapshot(trainer.model)

        # 5. train
        train_clock = Stopwatch()
        result = trainer.train(resume_from_checkpoint=checkpoint)
        train_seconds = train_clock.seconds()
        sandbox_stats = dict(judging.judge.sandbox.stats)  # this process's: gold check and every step's rewards
    finally:
        close_rewards(reward_funcs)

    # 6. save
    checksum_after = adapter_checksum(trainer.model)
    changed = check_adapter_changed(checksum_before, checksum_after)
    update = adapter_update(trainer.model, snapshot)
    moved = check_adapter_update(update, training_args.min_relative_update)
    guards += [changed, moved]
    _log_guards([changed, moved])
    trainer.save_model(str(output_dir))
    trainer.create_model_card(model_name=output_dir.name)
    if main_process:
        tokenizer.save_pretrained(str(output_dir))
        save_resolved_config(
            output_dir / RESOLVED_CONFIG, script_args, model_args, recipe_view(training_args)
        )
    summary.update(
        {
            "status": "completed",
            "guards": guards_summary(guards),
            "adapter_checksum": {
                "before": checksum_before,
                "after": checksum_after,
                "changed": not changed.failed,
            },
            "adapter_update": {**update, "min_relative_update": training_args.min_relative_update},
            "steps": int(result.global_step),
            "max_steps": int(trainer.state.max_steps),
            "epochs": float(trainer.state.epoch or 0.0),
            "sandbox": sandbox_stats,
            "telemetry_file": TELEMETRY_FILE,
            "telemetry": summarize_telemetry(read_telemetry(output_dir / TELEMETRY_FILE))
            if main_process
            else None,
            "trainer_metrics": telemetry.final_metrics,
            "trl_model_card": TRL_MODEL_CARD if (output_dir / TRL_MODEL_CARD).is_file() else None,
            "readme": "left for the project's model card (TRL's draft is trl_model_card.md)",
            "train_seconds": train_seconds,
            "wall_seconds": clock.seconds(),
        }
    )
    if main_process:
        write_run_summary(output_dir, summary)
        if training_args.push_to_hub:
            # TRL pushed the output folder without a card of ours (its draft is trl_model_card.md): add it now,
            # with the run files, in one commit.
            from ..hub import push_training_card

            push_training_card(
                output_dir,
                trainer.hub_model_id,
                token=training_args.hub_token,
                revision=training_args.hub_revision,
            )
        mean = (summary["telemetry"] or {}).get("mean", {})
        logger.info(
            "GRPO done: %d steps, mean frac_reward_zero_std %s (exact %s), mean reward %s, adapter %s "
            "(relative update %s), %.1fs; saved to %s",
            summary["steps"],
            _fmt(mean.get(TRL_ZERO_STD_METRIC)),
            _fmt(mean.get(EXACT_ZERO_STD_METRIC)),
            _fmt(mean.get("reward")),
            "changed" if not changed.failed else "UNCHANGED",
            "n/a" if update["relative_norm"] is None else f"{update['relative_norm']:.3g}",
            summary["wall_seconds"],
            output_dir,
        )
    return summary


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The one-line JSON the command prints: where the run went and its key numbers.

    Example:

    ```python
    >>> from slmsql_hub.training.grpo import headline
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slmsql_hub.training.grpo --config RECIPE.yaml [--field value ...]``.

    Returns 0 on success, 1 when a guard failed after training (e.g. the adapter did not change), 2 on bad
    input (one line on stderr).
    """
    import json

    args = list(sys.argv[1:] if argv is None else argv)
    config = None
    if "--config" in args:
        at = args.index("--config")
        if at + 1 >= len(args):
            print("slmsql train grpo: error: --config needs a YAML recipe", file=sys.stderr)  # noqa: T201
            return 2
        config = args[at + 1]
        del args[at : at + 2]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        summary = train_grpo(*parse_recipe(GRPO_ARGUMENTS, config, args))
    except UsageError as err:
        print(f"slmsql train grpo: error: {err}", file=sys.stderr)  # noqa: T201
        return 2
    if summary.get("kind") and int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(headline(summary)))  # noqa: T201
    return 1 if (summary.get("guards") or {}).get("failed") else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
