"""Loading the slices, drawing greedy and keyed samples, and judging them into one record per question.

A question's record (``questions/<slice>.jsonl``)::

    {"question_id", "db_id", "family", "key",            # key: the sampler key (config.sample_key)
     "scorable": bool, "greedy": 1 | 0 | None, "greedy_anatomy": {...} | None,
     "n", "c",                                             # scorable samples, correct ones
     "maj": 1 | 0 | None, "pass_rate": c / n | None,
     "samples": [{"sql", "verdict", "anatomy": {...} | None}, ...]}

``anatomy`` (:func:`~slmsql_hub.sql.anatomy.anatomy`) is set for every wrong sample, ``None`` for a correct one.
Training-band records carry the filter's own samples (its keys), re-judged here, and ``key: null``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..evaluation.majority import majority_vote
from ..sql.anatomy import anatomy
from ..sql.shape import sql_family
from .config import DiagnoseConfig, band_name, sample_key

logger = logging.getLogger(__name__)


def load_slices(config: DiagnoseConfig) -> dict[str, dict[str, Any]]:
    """``{slice: {"rows", "mode"}}``: each ``benchmarks`` slice (``slmsql eval``'s loader, its compare mode),
    then each band (:func:`band_name`, judged in ``compare_mode``)."""
    from ..evaluation import load_slice
    from ..filtering.report import read_band

    slices: dict[str, dict[str, Any]] = {}
    for spec in config.benchmark_specs() if config.benchmarks else []:
        slices[spec.key] = {"rows": load_slice(spec, config).rows, "mode": spec.mode}
    for ref in config.bands:
        rows = [dict(row) for row in read_band(ref, option="bands")]
        slices[band_name(ref)] = {"rows": rows, "mode": config.compare_mode}
    return slices


def _prompt_text(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else "\n".join(str(m.get("content", "")) for m in prompt)


def _question_record(
    row: dict, prompt: Any, greedy: Any | None, samples: Sequence[Any], mode: str, keep_distinct: bool, key: str | None
) -> dict[str, Any]:
    """One question's record (module docstring) from its greedy judgement (``None``: none drawn) and its samples'
    judgements, in sample order."""
    gold, question, schema = row["gold_sql"], row.get("question", ""), _prompt_text(prompt)

    seen: dict[tuple, dict] = {}  # K samples often repeat one answer: classify each once

    def shape(judgement: Any) -> dict | None:
        if judgement.correct != 0:
            return None
        key = (judgement.pred_sql, str(judgement.verdict), judgement.error)
        if key not in seen:
            seen[key] = anatomy(judgement.pred_sql, gold, verdict=key[1], error=judgement.error,
                                question=question, schema=schema).to_dict()  # fmt: skip
        return seen[key]

    scorable = [j.correct for j in samples if j.correct is not None]
    unscorable = any(not j.scorable for j in [*samples, *([greedy] if greedy else [])])
    vote = majority_vote(samples, gold, mode, keep_distinct=keep_distinct)
    return {
        "question_id": row["question_id"],
        "db_id": row.get("db_id"),
        "family": sql_family(gold),
        "key": key,
        "scorable": not unscorable,
        "greedy": None if greedy is None else greedy.correct,
        "greedy_anatomy": None if greedy is None else shape(greedy),
        "n": len(scorable),
        "c": int(sum(scorable)),
        "maj": vote.correct,
        "pass_rate": sum(scorable) / len(scorable) if scorable else None,
        "samples": [{"sql": j.pred_sql, "verdict": str(j.verdict), "anatomy": shape(j)} for j in samples],
    }


def sample_slice(
    rows: list[dict], prompts: list[Any], mode: str, policy: tuple[Any, Any], sandbox: Any, config: DiagnoseConfig
) -> list[dict]:
    """Greedy answer and K keyed samples (keys :func:`~slmsql_hub.diagnosis.config.sample_key`) for every row, judged
    in ``mode``, batch by batch; one record per row, in order."""
    from ..filtering import generate_keyed_samples
    from ..generation import generate_completions
    from ..sql import Judge

    model, tokenizer = policy
    judge = Judge(sandbox=sandbox, mode=mode, keep_distinct=config.keep_distinct)
    greedy_config, sampled_config = config.generation_config(False), config.generation_config(True)
    k, records = config.num_samples, []
    for start in range(0, len(rows), config.batch_size):
        batch, batch_prompts = rows[start : start + config.batch_size], prompts[start : start + config.batch_size]
        keys = [sample_key(row["question_id"]) for row in batch]  # recorded; seeded from the id in NAMESPACE
        greedy = [group[0] for group in generate_completions(model, tokenizer, batch_prompts, greedy_config,
                                                             progress=False)]  # fmt: skip
        sampled = generate_keyed_samples(model, tokenizer, batch_prompts, [r["question_id"] for r in batch],
                                         sampled_config)  # fmt: skip
        texts = [c.text for c in greedy] + [c.text for group in sampled for c in group]
        golds = [row["gold_sql"] for row in batch] + [row["gold_sql"] for row in batch for _ in range(k)]
        dbs = [row["db_path"] for row in batch] + [row["db_path"] for row in batch for _ in range(k)]
        judged = judge.judge_many(texts, golds, dbs)  # each distinct (database, SQL) runs once
        n = len(batch)
        for i, (row, prompt, key) in enumerate(zip(batch, batch_prompts, keys)):
            samples = judged[n + i * k : n + (i + 1) * k]
            records.append(_question_record(row, prompt, judged[i], samples, mode, config.keep_distinct, key))
        logger.info("diagnosed %d of %d questions", len(records), len(rows))
    return records


def training_records(rows: list[dict], prompts: list[Any], sandbox: Any, config: DiagnoseConfig) -> list[dict]:
    """The training band's records from the filter's own samples (``samples`` column), re-judged in
    ``compare_mode``; no greedy answer and no new sample is drawn."""
    from ..errors import UsageError
    from ..sql import Judge

    if rows and "samples" not in rows[0]:
        raise UsageError("training_band has no samples column: name the band folder slmsql filter wrote")
    judge = Judge(sandbox=sandbox, mode=config.compare_mode, keep_distinct=config.keep_distinct)
    texts = [text for row in rows for text in row["samples"]]
    golds = [row["gold_sql"] for row in rows for _ in row["samples"]]
    judged = iter(judge.judge_many(texts, golds, [row["db_path"] for row in rows for _ in row["samples"]]))
    return [
        _question_record(row, prompt, None, [next(judged) for _ in row["samples"]], config.compare_mode,
                        config.keep_distinct, None)  # fmt: skip
        for row, prompt in zip(rows, prompts)
    ]
