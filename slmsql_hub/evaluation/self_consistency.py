"""Execution-majority EX in ``slmsql eval`` (``self_consistency: K``), beside greedy EX.

For every slice and policy, K keyed samples per question are drawn by the filter's sampler
(:func:`~slmsql_hub.filtering.generate_keyed_samples`, all K samples of a batch's prompts in one ``generate``
call) in the :data:`~slmsql_hub.evaluation.config.SC_KEYS` namespace, keyed by the question id, so both policies
draw with the same seeds and the samples never repeat the filter's or the diagnosis's. Both policies' samples are
judged in ONE sandbox batch (the sandbox runs each distinct SQL once per database), then voted by the one
definition of maj@K (:func:`~slmsql_hub.evaluation.majority.majority_vote`). GRPO's maj@K is compared with SFT's by
the same paired statistics as greedy EX (:func:`~slmsql_hub.evaluation.stats.paired_comparison`), and each
policy's maj@K with its own greedy EX.

A slice's ``self_consistency`` entry in ``eval_results.json``::

    {"k", "policies": {"sft": {"ex", "correct", "n_scorable", "no_vote", "mean_voters"}, "grpo": {...}},
     "comparison": {...as the greedy one...},
     "versus_greedy": {"sft": {...paired comparison, a = greedy, b = maj@K...}, "grpo": {...}}}

An unscorable gold is left out as everywhere; a question where no sample executes counts as wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .majority import MajorityVote, majority_vote

if TYPE_CHECKING:  # pragma: no cover
    from ..generation import Completion, GenerationConfig
    from ..sql import Judge, Judgement

logger = logging.getLogger(__name__)

_MAJ = "maj@K"
"""The name of a policy's maj@K answers in the paired comparison with its greedy ones."""


def sample_and_vote(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    prompts: Mapping[str, Sequence[Any]],
    judge: Judge,
    config: GenerationConfig,
) -> dict[str, list[tuple[MajorityVote, list[Judgement], list[Completion]]]]:
    """K keyed samples per row for each adapter of ``prompts`` (activated in turn), judged together, voted.

    ``config``: keyed sampling (:meth:`~slmsql_hub.evaluation.EvalConfig.sampling_config`); ``batch_size``
    prompts per ``generate`` call. Returns per adapter, per row in order, ``(vote, judgements, completions)``
    with the K judgements and completions in sample order.
    """
    from ..filtering import generate_keyed_samples
    from ..generation import use_adapter

    k, size = config.num_samples, config.batch_size
    samples: dict[str, list[list[Completion]]] = {}
    for name, policy_prompts in prompts.items():
        logger.info("sampling %d x %d answers with %s for maj@K", len(rows), k, name)
        samples[name] = []
        with use_adapter(model, name):
            for start in range(0, len(rows), size):
                keys = [str(row["question_id"]) for row in rows[start : start + size]]
                samples[name] += generate_keyed_samples(
                    model, tokenizer, policy_prompts[start : start + size], keys, config
                )
    names = list(samples)
    judged = judge.judge_many(  # one batch: each distinct (database, SQL) runs once
        [c.text for name in names for group in samples[name] for c in group],
        [row["gold_sql"] for _ in names for row in rows for _ in range(k)],
        [row["db_path"] for _ in names for row in rows for _ in range(k)],
    )
    out: dict[str, list[tuple[MajorityVote, list[Judgement], list[Completion]]]] = {}
    for p, name in enumerate(names):
        out[name] = []
        for i, row in enumerate(rows):
            start = (p * len(rows) + i) * k
            group = judged[start : start + k]
            vote = majority_vote(group, row["gold_sql"], judge.mode, keep_distinct=judge.keep_distinct)
            out[name].append((vote, group, samples[name][i]))
    return out


def self_consistency_entry(
    greedy: Mapping[str, Sequence[int | None]],
    voted: Mapping[str, Sequence[tuple[MajorityVote, Any, Any]]],
    *,
    k: int,
    resamples: int,
    seed: int,
) -> dict:
    """A slice's ``self_consistency`` entry (module docstring) from each policy's greedy correctness and votes,
    policies in comparison order (``a`` first).

    Example:

    ```python
    >>> from slmsql_hub.evaluation.majority import MajorityVote
    >>> def votes(*correct):
    ...     return [(MajorityVote(c, 0 if c is not None else None, 2, 3), [], []) for c in correct]
    >>> entry = self_consistency_entry({"sft": [1, 0, None], "grpo": [0, 0, None]},
    ...                                {"sft": votes(1, 1, None), "grpo": votes(1, 0, None)},
    ...                                k=3, resamples=10_000, seed=0)
    >>> entry["k"], entry["policies"]["sft"]["ex"], entry["comparison"]["discordant"]
    (3, 1.0, {'a_only': 1, 'b_only': 0})
    >>> entry["versus_greedy"]["grpo"]["discordant"]
    {'a_only': 0, 'b_only': 1}

    ```
    """
    from .stats import paired_comparison

    a_name, b_name = list(voted)
    maj = {name: [vote.correct for vote, _, _ in votes] for name, votes in voted.items()}
    comparison = paired_comparison(
        maj[a_name], maj[b_name], a_name=a_name, b_name=b_name, resamples=resamples, seed=seed
    )
    policies = {}
    for name, votes in voted.items():
        scored = [vote for vote, _, _ in votes if vote.correct is not None]
        correct = sum(vote.correct for vote in scored)
        policies[name] = {
            "ex": correct / len(scored) if scored else None,
            "correct": correct,
            "n_scorable": len(scored),
            "no_vote": sum(vote.voters == 0 for vote in scored),
            "mean_voters": sum(vote.voters for vote in scored) / len(scored) if scored else None,
        }
    return {
        "k": k,
        "policies": policies,
        "comparison": comparison.to_dict(),
        "versus_greedy": {
            name: paired_comparison(
                greedy[name], maj[name], a_name="greedy", b_name=_MAJ, resamples=resamples, seed=seed
            ).to_dict()
            for name in voted
        },
    }


def prediction_fields(
    name: str, voted: tuple[MajorityVote, Sequence[Judgement], Sequence[Completion]]
) -> dict:
    """One policy's maj@K fields of a ``predictions/<key>.jsonl`` line: ``<p>_maj_correct`` (1 / 0 / ``None``),
    ``<p>_maj_sql`` (the winning sample's SQL, ``None`` when no sample executed), ``<p>_maj_votes`` and
    ``<p>_maj_voters``, and ``<p>_samples``: every sample's SQL and verdict, in sample order."""
    vote, judgements, _ = voted
    return {
        f"{name}_maj_correct": vote.correct,
        f"{name}_maj_sql": None if vote.winner is None else judgements[vote.winner].pred_sql,
        f"{name}_maj_votes": vote.votes,
        f"{name}_maj_voters": vote.voters,
        f"{name}_samples": [{"sql": j.pred_sql, "verdict": j.verdict.value} for j in judgements],
    }


def sampling_record(config: Any, prompt: Mapping[str, Any]) -> dict:
    """The top-level ``self_consistency`` record of ``eval_results.json``: what a reader compares of the maj@K
    pass (K, the sampler's settings, its key namespace and seed, the token budget, each policy's prompt).

    Example:

    ```python
    >>> from slmsql_hub.evaluation import EvalConfig
    >>> config = EvalConfig(model_name_or_path="m", sft_adapter="a", grpo_adapter="b", output_dir="o",
    ...                     world_root="w", self_consistency=8, temperature=0.7)
    >>> record = sampling_record(config, {"sft": {"sample_rows": 3}})
    >>> record["k"], record["temperature"], record["key_namespace"], record["keys"]
    (8, 0.7, 'eval-sc', 'question_id')

    ```
    """
    sampling = config.sampling_config()
    return {
        "k": sampling.num_samples,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_new_tokens": sampling.max_new_tokens,
        "seed": sampling.seed,
        "key_namespace": sampling.key_namespace,
        "keys": "question_id",
        "sampler": "filtering.generate_keyed_samples",
        "vote": "execution majority (evaluation.majority.majority_vote): executing samples grouped by result, "
        "the largest group wins, a tie to the earliest sample; no executing sample is wrong",
        "prompt": dict(prompt),
    }
