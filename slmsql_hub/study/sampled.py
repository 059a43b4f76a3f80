"""Sampled pass@k on the band slices and the probes: n samples per question with the filter's sampler, SFT and
each GRPO run.

Greedy EX says whether the single most likely answer is right; pass@k says whether a right answer is among the
policy's samples at all (support). GRPO that sharpens raises pass@1 and may lower pass@k at large k. With
``passk_samples: N`` (0: off) the study samples every band question N times per adapter with the filter's keyed
sampler and decoding (``band.filter_recipe``: temperature, top-p/k, max tokens, seed), so sample j of a question
is the same draw whatever the batch, and an unchanged adapter (``frozen``) gives exactly SFT's counts. The counts
per question (``{"question_id", "n", "c"}``: scorable samples, correct ones) go to ``<folder>/passk/<slice>.jsonl``;
:func:`passk_entry` turns SFT's and a run's into paired pass@k per k (:mod:`slmsql_hub.evaluation.passk`).

Fresh keys: the study samples in its own key namespace (:data:`STUDY_KEYS`), never the filter's. With the
filter's keys, SFT's first K samples of a band question would be the very K samples that put it into the band
(2..6 of 8 correct), so SFT's pass@8 on the band would be 1 by construction (a winner's curse). Every sampled
folder records its keys (:data:`KEYS_FILE`: ``{"namespace", "seed"}``) and counts drawn with other keys are
drawn again, not reused.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..run.files import read_jsonl, write_atomic

logger = logging.getLogger(__name__)

PASSK_DIR = "passk"
BAND_SLICES = ("band_train", "band_heldout")
STUDY_KEYS = "study-passk"
"""The key namespace of every sample the study draws (pass@k, the diagnostics' samples, SFT's support)."""
KEYS_FILE = "keys.json"
"""``<folder>/keys.json``: the keys (``{"namespace", "seed"}``) the folder's samples were drawn with."""


def sampled_slices(names: list[str], only: list[str] | None = None) -> list[str]:
    """The slices sampled for pass@k: the band halves and the planted world's probes (dev and test keep greedy
    EX only, to hold the time), those of them in ``only`` when given (a recipe's ``passk_slices``); every one is
    judged as the filter judges (its ``compare_mode``).

    Example:

    ```python
    >>> from slmsql_hub.study.sampled import sampled_slices
    >>> sampled_slices(["band_train", "band_heldout", "world_dev", "world_test", "world_probe_same"])
    ['band_train', 'band_heldout', 'world_probe_same']
    >>> sampled_slices(["band_train", "band_heldout", "world_probe_same"], only=["world_probe_same"])
    ['world_probe_same']

    ```
    """
    return [name for name in names if (name in BAND_SLICES or "probe" in name) and (only is None or name in only)]


def sampler_settings(config: Any, output_dir: Path, num_samples: int | None = None) -> Any:
    """The ``FilterConfig`` of the study's filter recipe pointed at the run's base model, ``num_samples``
    (default ``passk_samples``) samples per question, keyed in :data:`STUDY_KEYS` (its adapter is set per
    call)."""
    from ..filtering import load_filter_config

    samples = config.passk_samples if num_samples is None else num_samples
    values = {"model_name_or_path": config.base_path, "num_samples": samples, "output_dir": str(output_dir),
              "model_revision": config.model_revision, "num_threads": config.num_threads}  # fmt: skip
    values = {key: value for key, value in values.items() if value is not None}
    return load_filter_config(config.band.filter_recipe, values={**values, "key_namespace": STUDY_KEYS})


def sample_keys(settings: Any) -> dict[str, Any]:
    """The keys a sampler's samples are drawn with: ``{"namespace", "seed"}`` (what :data:`KEYS_FILE` holds).

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> from slmsql_hub.study.sampled import sample_keys
    >>> sample_keys(SimpleNamespace(key_namespace="study-passk", seed=0))
    {'namespace': 'study-passk', 'seed': 0}

    ```
    """
    return {"namespace": settings.key_namespace, "seed": settings.seed}


def write_keys(out_dir: Path, keys: dict[str, Any]) -> None:
    """``out_dir/keys.json``: the keys of the samples written there."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / KEYS_FILE, json.dumps(keys) + "\n")


def read_keys(out_dir: Path) -> dict[str, Any] | None:
    """``out_dir/keys.json`` (``None``: samples from before keys were recorded, i.e. the filter's)."""
    path = out_dir / KEYS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def cached_rows(
    out_dir: Path, slices: dict[str, list[dict]], keys: dict[str, Any] | None = None
) -> dict[str, list[dict]] | None:
    """``out_dir/<slice>.jsonl`` of every slice when all are there for the same questions in the same order
    (one row per question, ``question_id`` first) and, given ``keys``, drawn with those keys; else ``None``."""
    files = {name: out_dir / f"{name}.jsonl" for name in slices}
    if not all(path.is_file() for path in files.values()):
        return None
    if keys is not None and read_keys(out_dir) != keys:
        return None
    cached = {name: read_jsonl(path) for name, path in files.items()}
    same = all([c["question_id"] for c in cached[n]] == [r["question_id"] for r in slices[n]] for n in slices)
    return cached if same else None


def load_sampler_policy(settings: Any, adapter: str | Path, revision: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of the sampler's base model with ``adapter`` (its backend: on vLLM the policy and
    its engine's tokenizer)."""
    loaded = settings.load_policy(str(adapter), adapter_revisions={"default": revision})
    return (loaded, loaded.llm.get_tokenizer()) if settings.backend == "vllm" else loaded


def sample_counts(
    settings: Any,
    adapter: str | Path,
    slices: dict[str, list[dict]],
    out_dir: Path,
    revision: str | None = None,
    policy: tuple[Any, Any] | None = None,
) -> dict[str, list[dict]]:
    """Per slice, per question in row order: ``{"question_id", "n", "c"}`` over ``settings.num_samples`` keyed
    samples of ``adapter``; reused from ``out_dir/<slice>.jsonl`` when every slice is there for the same
    questions, drawn with the same keys (:func:`sample_keys`, recorded in ``out_dir/keys.json``). ``policy``: an
    already loaded ``(model, tokenizer)`` (``None``: load the base with ``adapter``)."""
    import dataclasses

    from ..data.prompts import build_prompts
    from ..filtering import score_batch
    from ..runtime import set_num_threads
    from ..sql import Judge, Sandbox

    files = {name: out_dir / f"{name}.jsonl" for name in slices}
    keys = sample_keys(settings)
    cached = cached_rows(out_dir, slices, keys)
    if cached is not None:
        return cached
    settings = dataclasses.replace(settings, adapter_path=str(adapter), adapter_revision=revision)
    set_num_threads(settings.num_threads)
    model, tokenizer = policy or load_sampler_policy(settings, adapter, revision)
    prompt_config, _ = settings.resolve_prompt_config(settings.adapter_path)
    gen_config = settings.generation_config()
    counts: dict[str, list[dict]] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    with Sandbox(settings.sql_limits(), workers=settings.sandbox_workers) as sandbox:
        judge = Judge(sandbox=sandbox, mode=settings.compare_mode, keep_distinct=settings.keep_distinct)
        for name, rows in slices.items():
            prompts = build_prompts(rows, prompt_config, sandbox)
            counts[name] = []
            for i in range(0, len(rows), settings.batch_size):
                batch = rows[i : i + settings.batch_size]
                scored = score_batch(batch, prompts[i : i + len(batch)], model, tokenizer, judge, gen_config)
                counts[name] += [{"question_id": r["question_id"], "n": r["n_scorable"], "c": r["n_correct"]}
                                 for r in scored]  # fmt: skip
            write_atomic(files[name], "".join(json.dumps(c) + "\n" for c in counts[name]))
    write_keys(out_dir, keys)
    return counts


def passk_entry(
    sft: dict[str, list[dict]], grpo: dict[str, list[dict]] | list[dict[str, list[dict]]], seed: int = 0
) -> dict[str, list[dict]]:
    """Per slice, paired pass@k of SFT (``a``) and GRPO (``b``) for k = 1, 2, 4, ... up to the fewest samples a
    question has, over the questions scorable for both: ``[{"k", "a", "b", "delta", "ci95"}, ...]``. ``grpo``
    may be a list of seeds' counts: a question then needs every seed's, and its GRPO pass@k is their mean.

    Example:

    ```python
    >>> from slmsql_hub.study.sampled import passk_entry
    >>> sft = {"band_train": [{"question_id": "q1", "n": 4, "c": 0}, {"question_id": "q2", "n": 4, "c": 2}]}
    >>> grpo = {"band_train": [{"question_id": "q1", "n": 4, "c": 0}, {"question_id": "q2", "n": 4, "c": 4}]}
    >>> [(p["k"], p["a"], p["b"]) for p in passk_entry(sft, grpo)["band_train"]]
    [(1, 0.25, 0.5), (2, 0.41666666666666663, 0.5), (4, 0.5, 0.5)]
    >>> passk_entry(sft, [grpo, sft])["band_train"][0]["b"]    # (0.5 + 0.25) / 2 over the two seeds
    0.375

    ```
    """
    from ..evaluation.passk import paired_pass_at_k_delta

    runs = [grpo] if isinstance(grpo, dict) else grpo
    entry: dict[str, list[dict]] = {}
    for name in sft:
        rows = [list(r) for r in zip(sft[name], *(run.get(name, []) for run in runs))]
        rows = [r for r in rows if all(x["n"] > 0 for x in r)]
        if not rows:
            continue
        most = min(x["n"] for r in rows for x in r)
        ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= most]
        entry[name] = paired_pass_at_k_delta(
            [r[0]["n"] for r in rows], [r[0]["c"] for r in rows],
            [[r[i]["n"] for r in rows] for i in range(1, len(runs) + 1)],
            [[r[i]["c"] for r in rows] for i in range(1, len(runs) + 1)], ks, seed=seed,
        )  # fmt: skip
    return entry
