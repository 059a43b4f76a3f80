"""Generation and judging of several adapters, EX per policy with its breakdowns, the prediction records,
and reading ``eval_results.json`` back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .config import RESULTS_FILE

if TYPE_CHECKING:  # pragma: no cover
    from ..generation import Completion, GenerationConfig
    from ..sql import Judge, Judgement

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PolicyOutput:
    """One policy's answer to one question and its judgement.

    ``judgement.correct`` is 1, 0 or ``None`` (unscorable).
    """

    completion: Completion
    judgement: Judgement


def generate_and_judge(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    prompts: Mapping[str | None, Sequence[Any]],
    judge: Judge,
    generation_config: GenerationConfig,
    *,
    progress: bool = True,
) -> dict[str | None, list[PolicyOutput]]:
    """Greedy answers of several adapters of one model to the same questions, judged in ONE sandbox batch.

    Each adapter is activated in turn with :func:`~slmsql_hub.generation.use_adapter` (``None`` runs the base
    alone); all answers are then judged together, so each gold query runs once (the sandbox deduplicates).

    ``prompts``: per adapter name (``None``: base only), the prompts in row order. Returns, per adapter name,
    one :class:`PolicyOutput` per row, in order.
    """
    from ..generation import generate_completions, use_adapter

    completions: dict[str | None, list[Completion]] = {}
    for name, policy_prompts in prompts.items():
        if len(policy_prompts) != len(rows):
            raise ValueError(f"{len(policy_prompts)} prompts for {len(rows)} rows (adapter {name!r})")
        logger.info("generating %d answers with %s", len(rows), name or "the base model alone")
        with use_adapter(model, name):
            grouped = generate_completions(
                model, tokenizer, policy_prompts, generation_config, progress=progress
            )
        completions[name] = [group[0] for group in grouped]
    names = list(completions)
    judgements = judge.judge_many(
        [c.text for name in names for c in completions[name]],
        [row["gold_sql"] for _ in names for row in rows],
        [row["db_path"] for _ in names for row in rows],
        progress="judge" if progress else False,
    )
    n = len(rows)
    return {
        name: [PolicyOutput(c, j) for c, j in zip(completions[name], judgements[k * n : (k + 1) * n])]
        for k, name in enumerate(names)
    }


def _group_scores(report: Any) -> dict[str, dict]:
    """``{level: {"n", "n_scorable", "correct", "ex"}}`` from an ExReport's levels (the ``all`` row left out)."""
    from ..sql.ex_report import ALL_LEVEL

    return {
        level.level: {
            "n": level.count,
            "n_scorable": level.scored,
            "correct": level.correct,
            "ex": level.execution_accuracy,
        }
        for level in report.levels
        if level.level != ALL_LEVEL
    }


def policy_scores(
    rows: Sequence[Mapping[str, Any]],
    outputs: Sequence[PolicyOutput],
    *,
    breakdown_by: str = "hardness",
    held_out_db: str | None = None,
    mode: str | None = None,
) -> dict:
    """One policy's EX on one slice with its breakdowns, built with :func:`~slmsql_hub.sql.ex_report.build_ex_report`.

    Every group reports ``n`` (questions), ``n_scorable`` (EX's denominator), ``correct`` and ``ex``
    (``None`` when nothing in the group could be scored).

    ``breakdown_by`` names what the ``difficulty`` column holds; ``held_out_db`` adds ``held_out_db`` and
    ``seen_dbs`` groups. Keys: ``ex``, ``correct``, ``n_scorable``, ``verdicts``, ``by_difficulty``, ``by_db``,
    ``mean_completion_tokens``, ``finished_share``.
    """
    from ..sql.ex_report import build_ex_report, example_levels

    judgements = [o.judgement for o in outputs]
    _, levels = example_levels(
        [row["gold_sql"] for row in rows], [row.get("difficulty") or None for row in rows]
    )
    by_level = build_ex_report(judgements, levels=levels, breakdown_by=breakdown_by, mode=mode)
    by_db = build_ex_report(judgements, levels=[row["db_id"] for row in rows], breakdown_by="db", mode=mode)
    counts = by_level.counts
    tokens = [o.completion.num_tokens for o in outputs]
    scores: dict[str, Any] = {
        "ex": counts.execution_accuracy,
        "correct": counts.num_correct,
        "n_scorable": counts.num_scored,
        "verdicts": dict(counts.verdicts),
        "breakdown_by": breakdown_by,
        "by_difficulty": _group_scores(by_level),
        "by_db": _group_scores(by_db),
    }
    if held_out_db is not None:
        split = build_ex_report(
            judgements, levels=["held_out" if row["db_id"] == held_out_db else "seen" for row in rows]
        )
        groups = _group_scores(split)
        empty = {"n": 0, "n_scorable": 0, "correct": 0, "ex": None}
        scores["held_out_db"] = {"db_id": held_out_db, **groups.get("held_out", empty)}
        scores["seen_dbs"] = groups.get("seen", empty)
    scores["mean_completion_tokens"] = sum(tokens) / len(tokens) if tokens else 0.0
    scores["finished_share"] = sum(o.completion.finished for o in outputs) / len(outputs) if outputs else 0.0
    return scores


def prediction_records(
    rows: Sequence[Mapping[str, Any]], outputs: Mapping[str, Sequence[PolicyOutput]]
) -> list[dict]:
    """The lines of ``predictions/<key>.jsonl``: the question, then per policy its output, SQL, verdict.

    Per policy ``<p>``: ``<p>_output`` (the raw answer), ``<p>_sql`` (the SQL extracted from it, ``None``
    when there was none), ``<p>_correct`` (1 / 0 / ``None`` = unscorable), ``<p>_verdict``, ``<p>_error``
    and ``<p>_num_tokens``.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import PolicyOutput, prediction_records
    >>> from slmsql_hub.generation import Completion
    >>> from slmsql_hub.sql import ExecStatus, Judgement, Verdict
    >>> row = {"question_id": "q1", "db_id": "pets", "question": "How many?", "gold_sql": "SELECT 1",
    ...        "difficulty": "easy"}
    >>> out = PolicyOutput(Completion("SELECT 1", 4, True), Judgement(Verdict.CORRECT, "SELECT 1", ExecStatus.OK, ExecStatus.OK))
    >>> record = prediction_records([row], {"sft": [out]})[0]
    >>> record["sft_sql"], record["sft_correct"], record["sft_verdict"]
    ('SELECT 1', 1, 'correct')

    ```
    """
    records = []
    for index, row in enumerate(rows):
        record = {
            "question_id": row["question_id"],
            "db_id": row["db_id"],
            "question": row["question"],
            "evidence": row.get("evidence") or "",
            "gold_sql": row["gold_sql"],
            "difficulty": row.get("difficulty") or None,
        }
        for name, policy_outputs in outputs.items():
            output = policy_outputs[index]
            judgement = output.judgement
            record.update(
                {
                    f"{name}_output": output.completion.text,
                    f"{name}_sql": judgement.pred_sql,
                    f"{name}_correct": judgement.correct,
                    f"{name}_verdict": judgement.verdict.value,
                    f"{name}_error": judgement.error,
                    f"{name}_num_tokens": output.completion.num_tokens,
                }
            )
        records.append(record)
    return records


def read_eval_results(path: str | os.PathLike) -> dict:
    """Read an ``eval_results.json`` (or the folder holding it), with one clear error when it is not one.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import read_eval_results
    >>> read_eval_results("/nowhere/eval")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: /nowhere/eval/eval_results.json not found; run `slmsql eval --config ...` first

    ```
    """
    from ..run.files import read_json_object

    target = Path(path).expanduser()
    if target.is_dir() or target.suffix != ".json":
        target = target / RESULTS_FILE
    results = read_json_object(target, "run `slmsql eval --config ...` first")
    if "benchmarks" not in results:
        raise UsageError(f"{target} has no 'benchmarks' section: it is not an slmsql eval results file")
    return results


def summary_lines(results: Mapping[str, Any]) -> list[str]:
    """A short text summary of ``eval_results.json``: per slice, both policies' EX and the verdict (and their
    maj@K and its verdict when the evaluation voted).

    Example:

    ```python
    >>> from slmsql_hub.evaluation import summary_lines
    >>> results = {"benchmarks": {"world_dev": {"n": 4, "n_unscorable": 0, "mode": "bird",
    ...     "policies": {"sft": {"ex": 0.5, "correct": 2, "n_scorable": 4}, "grpo": {"ex": 0.75, "correct": 3, "n_scorable": 4}},
    ...     "comparison": {"summary": "no significant difference: ΔEX = +25.0 points, 95% CI [0.0, +75.0], p = 1.00, n = 4"}}}}
    >>> print("\\n".join(summary_lines(results)))
    world_dev (4 questions, bird): sft EX 50.0% (2/4) | grpo EX 75.0% (3/4)
      no significant difference: ΔEX = +25.0 points, 95% CI [0.0, +75.0], p = 1.00, n = 4

    ```
    """
    from ..sql.ex_report import format_percent

    lines = []
    for key, bench in results.get("benchmarks", {}).items():
        unscorable = f", {bench['n_unscorable']} unscorable" if bench.get("n_unscorable") else ""
        parts = []
        for name, scores in bench["policies"].items():
            ex = scores.get("ex")
            shown = "n/a" if ex is None else f"{format_percent(ex, 1)}%"
            parts.append(f"{name} EX {shown} ({scores['correct']}/{scores['n_scorable']})")
        lines.append(f"{key} ({bench['n']} questions{unscorable}, {bench['mode']}): " + " | ".join(parts))
        lines.append(f"  {bench['comparison']['summary']}")
        voted = bench.get("self_consistency")
        if voted:
            shown = " | ".join(
                f"{name} {'n/a' if s['ex'] is None else format_percent(s['ex'], 1) + '%'}"
                for name, s in voted["policies"].items()
            )
            lines.append(f"  maj@{voted['k']}: {shown}; {voted['comparison']['summary']}")
    return lines
