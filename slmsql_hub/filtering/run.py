"""The filter loop: load the pool, sample K completions per question, judge them, log each batch."""

from __future__ import annotations

import datetime
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..data.prompts import build_prompts
from ..data.sft_record import SFTRecord, read_sft_record, report_fields, row_keys
from ..errors import UsageError
from ..runtime import bar_disabled
from .config import RESULTS_FILE, FilterConfig
from .report import ALL_FAIL, ALL_PASS, BAND, _finish, classify, pool_shortfall
from .resume import (
    _adapter_digest,
    _append_rows,
    _check_or_write_state,
    _clear_outputs,
    _fingerprint,
    read_results,
)
from .sampling import generate_keyed_samples

logger = logging.getLogger(__name__)


def _load_pool(config: FilterConfig, record: SFTRecord | None) -> tuple[list[dict], int]:
    """The pool: the split less the SFT record's questions, then the seeded ``limit`` subset; and how many were
    left out as SFT data (before the draw, so ``limit`` still counts held-out questions)."""
    from ..data.benchmarks import load_benchmark, seeded_subset

    dataset = load_benchmark(
        config.pool.name,
        config.pool_root,
        config.pool.split,
        seed=config.seed,
        skip_missing_db=config.skip_missing_db,
    )
    kept = list(range(len(dataset)))
    if record is not None:
        kept = [i for i, key in zip(kept, row_keys(dataset)) if key not in record.keys]
    excluded = len(dataset) - len(kept)
    pool = [
        dict(row)
        for row in dataset.select([kept[i] for i in seeded_subset(len(kept), config.pool.limit, config.seed)])
    ]
    duplicates = [qid for qid, n in Counter(row["question_id"] for row in pool).items() if n > 1]
    if duplicates:
        raise UsageError(
            f"question_id must be unique to resume by it; {len(duplicates)} repeat (e.g. {duplicates[0]!r})"
        )
    if not pool:
        why = f" (all {excluded} are in the adapter's SFT question record)" if excluded else ""
        raise UsageError(f"the pool is empty: {config.pool} under {config.pool_root}{why}")
    if excluded:
        logger.info("left %d SFT training questions out of the pool (%s)", excluded, record.path)
    shortfall = pool_shortfall(config.pool, len(pool), excluded)
    if shortfall:
        logger.warning("%s; filter_report.json says so too (dataset.shortfall)", shortfall)
    return pool, excluded


def _prompt_lengths(tokenizer: Any, prompts: dict[str, Any]) -> dict[str, int]:
    """Tokens per prompt, chat template applied (as generation will see it)."""
    from ..generation import render_prompts

    texts = render_prompts(tokenizer, list(prompts.values()))
    return {
        key: len(tokenizer(text, add_special_tokens=False)["input_ids"]) for key, text in zip(prompts, texts)
    }


def _warn_if_too_long(model: Any, lengths: dict[str, int], max_new_tokens: int) -> None:
    """Warn when prompts plus completions exceed the model's context: those questions would fail for it."""
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not isinstance(context, int):
        return
    too_long = [n for n in lengths.values() if n + max_new_tokens > context]
    if too_long:
        logger.warning(
            "%d of %d prompts plus max_new_tokens=%d exceed the model's %d positions (longest prompt: %d "
            "tokens); their samples will mostly fail: lower prompt_sample_rows or max_new_tokens",
            len(too_long),
            len(lengths),
            max_new_tokens,
            context,
            max(too_long),
        )


def score_batch(
    batch: list[dict], prompts: list[Any], model: Any, tokenizer: Any, judge: Any, gen_config: Any
) -> list[dict]:
    """Sample K completions for each question of the batch (the filter's keyed sampler: a question's samples do
    not depend on its batch), judge them, and build the result rows (``n_scorable``, ``n_correct``, ...)."""
    from ..sql import Verdict

    groups = generate_keyed_samples(
        model, tokenizer, prompts, [row["question_id"] for row in batch], gen_config
    )
    k = gen_config.num_samples
    judgements = judge.judge_many(
        [c.text for group in groups for c in group],
        [row["gold_sql"] for row in batch for _ in range(k)],
        [row["db_path"] for row in batch for _ in range(k)],
    )
    results = []
    for i, (row, group) in enumerate(zip(batch, groups)):
        verdicts = judgements[i * k : (i + 1) * k]
        correct = [j.correct for j in verdicts]
        scorable = [c for c in correct if c is not None]
        gold_error = next((j.error for j in verdicts if j.verdict is Verdict.UNSCORABLE), None)
        results.append(
            {
                **row,
                "n_samples": k,
                "n_scorable": len(scorable),
                "n_correct": int(sum(scorable)),
                "pass_rate": sum(scorable) / len(scorable) if scorable else None,
                "samples": [c.text for c in group],
                "sample_correct": correct,
                "sample_verdicts": [str(j.verdict) for j in verdicts],
                "sample_tokens": [c.num_tokens for c in group],
                "gold_error": gold_error,
            }
        )
    return results


def run_filter(config: FilterConfig, *, policy: tuple[Any, Any] | None = None, progress: bool = True) -> dict:
    """Run the pass-rate filter end to end (resuming from ``output_dir`` when it holds earlier results).

    ``policy``: an already loaded ``(model, tokenizer)``; ``None`` loads the model and adapter only when some
    question is left to sample. Returns the report written to ``filter_report.json`` (``counts`` per class adding
    up to ``pool``, thresholds, policy, dataset, time, histogram, ``summary``). Raises :class:`UsageError` on
    missing data or model, or an ``output_dir`` holding results of other settings.

    Example:

    ```python
    >>> from slmsql_hub.filtering import FilterConfig, run_filter
    >>> run_filter(FilterConfig(model_name_or_path="m", benchmarks=["world:rl_pool"], world_root="/nowhere",
    ...                       output_dir="o"))
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: world root is not a directory: /nowhere

    ```
    """
    started = time.perf_counter()
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if policy is None:  # a broken local model or adapter: one line before the pool loads
        from ..generation.loading import check_local_model_refs

        adapters = {"default": config.adapter_path} if config.adapter_path else {}
        check_local_model_refs(config.model_name_or_path, adapters)
    record = read_sft_record(config.adapter_path)
    pool, excluded = _load_pool(config, record)
    sft = report_fields(record, config.adapter_path, pool, excluded)
    prompt_config, _ = config.resolve_prompt_config(config.adapter_path)
    out = Path(str(config.output_dir)).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    if config.overwrite:
        _clear_outputs(out)
    log_path = out / RESULTS_FILE
    done = read_results(log_path)
    fingerprint = _fingerprint(
        config, prompt_config, _adapter_digest(config.adapter_path), record.sha256 if record else None
    )
    _check_or_write_state(out, fingerprint, config, have_results=bool(done))
    todo = [row for row in pool if row["question_id"] not in done]
    reused = len(pool) - len(todo)
    if reused:
        logger.info("resuming: %d of %d questions already done in %s", reused, len(pool), log_path)
    if todo:
        _sample_and_judge(config, todo, pool, done, prompt_config, policy, log_path, progress=progress)
    return _finish(
        config, out, pool, done, prompt_config, fingerprint, started, started_at, len(todo), reused, sft=sft
    )


def _load_filter_policy(config: FilterConfig) -> tuple[Any, Any]:
    """The SFT policy: ``(model, tokenizer)``, or ``(VLLMPolicy, its tokenizer)`` on the vLLM backend."""
    loaded = config.load_policy(config.adapter_path, adapter_revisions={"default": config.adapter_revision})
    return (loaded, loaded.llm.get_tokenizer()) if config.backend == "vllm" else loaded


def _sample_and_judge(
    config: FilterConfig,
    todo: list[dict],
    pool: list[dict],
    done: dict[str, dict],
    prompt_config: Any,
    policy: tuple[Any, Any] | None,
    log_path: Path,
    *,
    progress: bool,
) -> None:
    """Sample and judge the questions left to do, longest prompt first, appending each batch to the log (and
    to ``done``) as soon as it is judged."""
    from ..runtime import set_num_threads
    from ..sql import Judge, Sandbox

    set_num_threads(config.num_threads)
    model, tokenizer = policy if policy is not None else _load_filter_policy(config)
    gen_config = config.generation_config()
    with Sandbox(config.sql_limits(), workers=config.sandbox_workers) as sandbox:
        judge = Judge(sandbox=sandbox, mode=config.compare_mode, keep_distinct=config.keep_distinct)
        prompts = dict(zip([row["question_id"] for row in todo], build_prompts(todo, prompt_config, sandbox)))
        lengths = _prompt_lengths(tokenizer, prompts)
        _warn_if_too_long(model, lengths, config.max_new_tokens)
        # Longest prompts first: little padding per batch, and an out-of-memory error shows at once.
        todo.sort(key=lambda row: -lengths[row["question_id"]])
        batches = [todo[i : i + config.batch_size] for i in range(0, len(todo), config.batch_size)]
        in_pool = {row["question_id"] for row in pool}
        classes = Counter(_class_of(config, r) for qid, r in done.items() if qid in in_pool)
        with (
            log_path.open("a", encoding="utf-8") as handle,
            tqdm(
                total=len(pool),
                initial=len(pool) - len(todo),
                desc=f"filter (K={config.num_samples})",
                unit="q",
                disable=bar_disabled(progress),
            ) as bar,
        ):
            for batch in batches:
                rows = score_batch(
                    batch, [prompts[r["question_id"]] for r in batch], model, tokenizer, judge, gen_config
                )
                _append_rows(handle, rows)
                for row in rows:
                    done[row["question_id"]] = row
                    classes[_class_of(config, row)] += 1
                bar.update(len(rows))
                bar.set_postfix({name: classes[name] for name in (BAND, ALL_FAIL, ALL_PASS)})


def _class_of(config: FilterConfig, row: dict) -> str:
    return classify(row["n_correct"], row["n_scorable"], config.pass_rate_low, config.pass_rate_high)
