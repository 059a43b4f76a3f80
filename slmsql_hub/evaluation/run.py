"""The evaluation run: load the slices, build the prompts, generate, judge, compare, write the results."""

from __future__ import annotations

import datetime
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from .. import __version__
from ..data import prompts as prompt_settings
from ..data.prompts import build_prompts
from ..errors import UsageError
from ..recipes import config_to_dict
from ..run.files import write_atomic
from ..run.layout import PREDICTIONS_DIR, WORLD_MANIFEST
from ..runtime import bar_disabled, environment
from ..sql.recipe_limits import LIMITS_KEY, limits_record
from .config import (
    POLICIES,
    RESULTS_FILE,
    BenchmarkSpec,
    EvalConfig,
)
from .scoring import generate_and_judge, policy_scores, prediction_records
from .self_consistency import prediction_fields, sample_and_vote, sampling_record, self_consistency_entry

if TYPE_CHECKING:  # pragma: no cover
    from ..data.prompts import PromptConfig

logger = logging.getLogger(__name__)


@dataclass
class EvalSlice:
    """One loaded benchmark slice.

    ``held_out_db`` is the world's held-out database (``None`` elsewhere).
    """

    spec: BenchmarkSpec
    rows: list[dict]
    dataset_id: str | None
    held_out_db: str | None = None


def load_slice(spec: BenchmarkSpec, config: EvalConfig) -> EvalSlice:
    """Load one slice through :func:`~slmsql_hub.data.benchmarks.load_benchmark` (seeded ``limit`` subset).

    Adds the world's held-out database (from its ``world.json``). Raises :class:`UsageError` on a missing root,
    split or database, an empty slice, or repeated question ids.
    """
    from ..data.benchmarks import load_benchmark

    root = config.root(spec.name)
    dataset = load_benchmark(
        spec.name,
        root,
        spec.split,
        limit=spec.limit,
        seed=config.seed,
        skip_missing_db=config.skip_missing_db,
    )
    rows = [dict(row) for row in dataset]
    if not rows:
        raise UsageError(f"benchmark {spec.key} under {root} has no questions to evaluate")
    ids = [row["question_id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise UsageError(f"benchmark {spec.key} under {root} repeats question ids; they must be unique")
    held_out = None
    if spec.name == "world":
        manifest = Path(root).expanduser() / WORLD_MANIFEST
        held_out = json.loads(manifest.read_text(encoding="utf-8")).get("held_out_db")
    return EvalSlice(
        spec=spec, rows=rows, dataset_id=config.dataset_id_map()[spec.name], held_out_db=held_out
    )


def resolve_prompt_config(
    adapter: str | os.PathLike | None,
    sample_rows: int | None = None,
    max_value_chars: int | None = None,
    **text: str | None,
) -> PromptConfig:
    """:func:`slmsql_hub.data.prompts.resolve_prompt_config` without its ``source`` (the Space and
    ``benchmarks/measure_world_ex.py`` call it this way).

    Example:

    ```python
    >>> from slmsql_hub.evaluation import resolve_prompt_config
    >>> resolve_prompt_config("org/hub-adapter", sample_rows=0).max_value_chars
    40

    ```
    """
    return prompt_settings.resolve_prompt_config(adapter, sample_rows, max_value_chars, **text)[0]


def _config_record(config: EvalConfig) -> dict:
    """The resolved config as a recipe-shaped mapping (every value is already YAML/JSON-safe)."""
    return config_to_dict(config)


def run_eval(config: EvalConfig, *, policy: tuple[Any, Any] | None = None, progress: bool = True) -> dict:
    """Evaluate the SFT and GRPO adapters on every slice and write ``eval_results.json`` and the predictions.

    ``eval_results.json`` (the shared run-folder contract)::

        {"created_at", "slmsql_hub_version", "config": {...resolved...},
         "policies": {"sft": {"base_model", "adapter"}, "grpo": {...}},
         "prompt": {"sft": {"sample_rows", "max_value_chars"}, "grpo": {...}},
         "limits": {"timeout_s", "max_ops", "max_rows", ...},
         "significance_rule": "...", "time": {"wall_seconds"},
         "benchmarks": {"<name>_<split>": {
             "benchmark", "split", "limit", "seed", "dataset_id", "mode", "breakdown_by", "held_out_db",
             "n", "n_scorable", "n_unscorable",
             "policies": {"sft": {"ex", "correct", "n_scorable", "verdicts", "by_difficulty", "by_db",
                                  ["held_out_db", "seen_dbs"], "mean_completion_tokens", "finished_share"},
                          "grpo": {...}},
             "comparison": {"a", "b", "ex_a", "ex_b", "delta_ex", "ci95", "bootstrap_resamples",
                            "bootstrap_seed", "mcnemar_p", "discordant": {"a_only", "b_only"}, "n",
                            "significant", "rule", "verdict", "summary"},
             "predictions_file": "predictions/<name>_<split>.jsonl",
             ["self_consistency": {"k", "policies", "comparison", "versus_greedy"}]}},
         ["self_consistency": {"k", "temperature", "top_p", "top_k", "max_new_tokens", "seed", "key_namespace",
                               "keys", "sampler", "vote", "prompt"}]}

    The ``self_consistency`` entries (maj@K, :mod:`~slmsql_hub.evaluation.self_consistency`) are there only when
    ``self_consistency`` is K > 0; the predictions then carry each policy's vote and samples.

    ``policy``: an already loaded ``(model, tokenizer)`` with PEFT adapters named ``sft`` and ``grpo``; ``None``
    loads them once. Returns what was written to ``eval_results.json``. Raises :class:`UsageError` on missing
    data, model or adapters, or a slice with no scorable question.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import EvalConfig, run_eval
    >>> run_eval(EvalConfig(model_name_or_path="./m", sft_adapter="./a", grpo_adapter="./b", output_dir="o",
    ...                     world_root="/nowhere"))
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: base model './m' does not exist; pass an existing folder or a Hub repo id

    ```
    """
    from .stats import SIGNIFICANCE_RULE

    started = time.perf_counter()
    created_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if policy is None:  # a Hub model or adapter that is not there: one line before any slice loads
        from ..generation.loading import check_model_refs

        check_model_refs(
            config.model_name_or_path,
            config.adapters(),
            revision=config.model_revision,
            adapter_revisions=config.adapter_revisions(),
        )
    slices = [load_slice(spec, config) for spec in config.benchmark_specs()]
    prompt_configs = _prompt_configs(config)
    generation_config = config.generation_config()
    model, tokenizer = policy if policy is not None else _load_eval_policy(config)
    out = Path(str(config.output_dir)).expanduser()
    (out / PREDICTIONS_DIR).mkdir(parents=True, exist_ok=True)
    benchmarks, sampling_seconds = _evaluate_slices(
        config, slices, prompt_configs, generation_config, (model, tokenizer), out, progress
    )
    policy_records = _policy_records(config, prompt_configs)
    results = {
        "created_at": created_at,
        "slmsql_hub_version": __version__,
        "environment": environment(),
        "config": _config_record(config),
        **policy_records,
        LIMITS_KEY: limits_record(config.sql_limits()),
        "significance_rule": SIGNIFICANCE_RULE,
        "time": {"wall_seconds": round(time.perf_counter() - started, 3)},
        "benchmarks": benchmarks,
    }
    if config.self_consistency:
        results["self_consistency"] = sampling_record(config, policy_records["prompt"])
        results["time"]["self_consistency_seconds"] = round(sampling_seconds, 3)
    write_atomic(out / RESULTS_FILE, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    _remove_stale_predictions(out, benchmarks)
    logger.info("wrote %s", out / RESULTS_FILE)
    return results


def _evaluate_slices(
    config: EvalConfig, slices: list, prompt_configs: dict[str, PromptConfig], generation_config: Any,
    policy: tuple[Any, Any], out: Path, progress: bool,
) -> tuple[dict[str, dict], float]:
    """Answer, judge (and with ``self_consistency``, sample and vote) every slice in one sandbox; write each
    slice's predictions. Returns the ``benchmarks`` entries and the seconds spent sampling for maj@K."""
    from ..sql import Sandbox

    model, tokenizer = policy
    benchmarks: dict[str, dict] = {}
    sampling_seconds = 0.0
    with Sandbox(config.sql_limits(), workers=config.sandbox_workers) as sandbox:
        schema_cache: dict = {}
        shown = bar_disabled(progress and len(slices) > 1)
        for piece in tqdm(slices, desc="eval slices", unit="slice", disable=shown):
            prompts = {
                name: build_prompts(piece.rows, prompt_configs[name], sandbox, schema_cache)
                for name in POLICIES
            }
            judge = _judge(piece.spec, config, sandbox)
            outputs = generate_and_judge(
                model, tokenizer, piece.rows, prompts, judge, generation_config, progress=progress
            )
            voted = None
            if config.self_consistency:
                sampling_started = time.perf_counter()
                voted = sample_and_vote(model, tokenizer, piece.rows, prompts, judge, config.sampling_config())
                sampling_seconds += time.perf_counter() - sampling_started
            benchmarks[piece.spec.key] = _slice_results(piece, outputs, config, out, voted)
    return benchmarks, sampling_seconds


def _prompt_configs(config: EvalConfig) -> dict[str, PromptConfig]:
    """Each adapter's prompt settings (the recipe's overrides, else what the adapter was trained with)."""
    prompt_configs = {
        name: config.resolve_prompt_config(path)[0] for name, path in config.adapters().items()
    }
    if len(set(prompt_configs.values())) > 1:
        logger.warning(
            "the adapters were trained with different prompt settings (%s); each is evaluated with its own",
            {name: (c.sample_rows, c.max_value_chars) for name, c in prompt_configs.items()},
        )
    return prompt_configs


def _load_eval_policy(config: EvalConfig) -> tuple[Any, Any]:
    """The base loaded once with both adapters (``(VLLMPolicy, None)`` on the vLLM backend, which tokenizes
    for itself)."""
    from ..runtime import set_num_threads

    set_num_threads(config.num_threads)
    loaded = config.load_policy(adapters=config.adapters(), adapter_revisions=config.adapter_revisions())
    return (loaded, None) if config.backend == "vllm" else loaded


def _judge(spec: BenchmarkSpec, config: EvalConfig, sandbox: Any) -> Any:
    """The slice's judge: its benchmark's own comparison mode (DISTINCT kept only where Spider's rule asks)."""
    from ..sql import Judge

    logger.info("%s: %s mode", spec.key, spec.mode)
    return Judge(
        sandbox=sandbox, mode=spec.mode, keep_distinct=config.keep_distinct and spec.mode == "spider"
    )


def _slice_results(
    piece: EvalSlice, outputs: dict, config: EvalConfig, out: Path, voted: dict | None = None
) -> dict:
    """One slice's entry of ``eval_results.json`` (scores, paired comparison, maj@K from ``voted`` when
    given); writes its predictions file."""
    from .stats import paired_comparison

    spec, rows = piece.spec, piece.rows
    a_name, b_name = POLICIES
    correct = {name: [o.judgement.correct for o in outputs[name]] for name in POLICIES}
    n_unscorable = sum(1 for value in correct[a_name] if value is None)
    if n_unscorable == len(rows):
        raise UsageError(
            f"{spec.key}: none of the {len(rows)} gold queries ran (every example is unscorable); "
            f"check the databases under {config.root(spec.name)}"
        )
    if n_unscorable:
        logger.warning(
            "%s: %d of %d questions are unscorable (their gold SQL failed); left out of EX and the "
            "paired statistics",
            spec.key,
            n_unscorable,
            len(rows),
        )
    comparison = paired_comparison(
        correct[a_name],
        correct[b_name],
        a_name=a_name,
        b_name=b_name,
        resamples=config.bootstrap_resamples,
        seed=config.bootstrap_seed,
    )
    predictions_file = f"{PREDICTIONS_DIR}/{spec.key}.jsonl"
    records = prediction_records(rows, outputs)
    for index, record in enumerate(records):
        for name in voted or {}:
            record.update(prediction_fields(name, voted[name][index]))  # type: ignore[index]
    write_atomic(out / predictions_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    logger.info("%s: %s", spec.key, comparison.summary)
    breakdown_by = spec.breakdown
    extra = {}
    if voted is not None:
        extra["self_consistency"] = self_consistency_entry(
            correct, voted, k=config.self_consistency, resamples=config.bootstrap_resamples,
            seed=config.bootstrap_seed,
        )  # fmt: skip
        logger.info("%s maj@%d: %s", spec.key, config.self_consistency, extra["self_consistency"]["comparison"]["summary"])
    return {
        "benchmark": spec.name,
        "split": spec.split,
        "limit": spec.limit,
        "seed": config.seed,
        "dataset_id": piece.dataset_id,
        "mode": spec.mode,
        "keep_distinct": config.keep_distinct if spec.mode == "spider" else None,
        "breakdown_by": breakdown_by,
        "held_out_db": piece.held_out_db,
        "n": len(rows),
        "n_scorable": len(rows) - n_unscorable,
        "n_unscorable": n_unscorable,
        "policies": {
            name: policy_scores(
                rows, outputs[name], breakdown_by=breakdown_by, held_out_db=piece.held_out_db, mode=spec.mode
            )
            for name in POLICIES
        },
        "comparison": comparison.to_dict(),
        "predictions_file": predictions_file,
        **extra,
    }


def _policy_records(config: EvalConfig, prompt_configs: dict[str, PromptConfig]) -> dict:
    """The ``policies`` (base, adapter, resolved revisions) and ``prompt`` sections of ``eval_results.json``."""
    from ..runtime import loaded_revisions

    adapters, revisions = config.adapters(), config.adapter_revisions()
    return {
        "policies": {
            name: {
                "base_model": str(config.model_name_or_path),
                "adapter": adapters[name],
                **loaded_revisions(
                    config.model_name_or_path, config.model_revision, adapters[name], revisions[name]
                ),
            }
            for name in POLICIES
        },
        "prompt": {name: c.record() for name, c in prompt_configs.items()},
    }


def _remove_stale_predictions(out: Path, benchmarks: dict[str, dict]) -> None:
    """Remove an earlier run's predictions of slices this run did not evaluate, so that the folder (shipped
    with the model) matches ``eval_results.json``."""
    current = {bench["predictions_file"] for bench in benchmarks.values()}
    for stale in sorted((out / PREDICTIONS_DIR).glob("*.jsonl")):
        if f"{PREDICTIONS_DIR}/{stale.name}" not in current:
            logger.warning("removing %s: not a slice of this evaluation", stale)
            stale.unlink()
