"""The diagnostics that explain a null (issue #22), computed after the grid for every finished run folder.

One step between the grid and the report (also under ``--report-only``, so a study that finished before the
diagnostics existed gets them after the fact); every piece is cached, so a rerun costs nothing:

- **template families** (``sft/shapes.json``): each question's family from its gold SQL's shape
  (:func:`~slmsql_hub.sql.shape.sql_family`); the report splits paired ΔEX by family, Holm across the families
  of one (variant, slice) (:func:`family_comparison`). No model.
- **KL(SFT ‖ GRPO) and token entropy** (``diagnostic_samples`` > 0): SFT samples ``diagnostic_samples``
  completions per held-out question (band_heldout, the planted world's probes) with the filter's keyed
  sampler in the study's key namespace (:data:`~.sampled.STUDY_KEYS`), the same prompts, once per study (``sft/diagnostics/<slice>.jsonl``: the exact prompt token ids and
  each completion's token ids); each run's GRPO adapter is loaded beside the SFT adapter on one base and both
  score those tokens (:mod:`slmsql_hub.evaluation.divergence`), written to ``runs/<run>/divergence.json``
  with the digest of the samples it scored.
- **SFT's support on the held-out database** (``support_samples`` > 0): SFT's sampled pass@1..K on the transfer
  slices' questions whose database is the slice's held-out one (``sft/support/<slice>.jsonl`` counts,
  ``sft/support.json`` the curves). pass@K = 0 says the held-out database is outside SFT's support: no
  outcome reward can raise what the policy never samples.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..evaluation.divergence import add_sums, divergence_sums, mean_divergence
from ..evaluation.stats import holm
from ..run.files import read_jsonl, write_atomic
from .sampled import (
    BAND_SLICES,
    cached_rows,
    load_sampler_policy,
    sample_counts,
    sample_keys,
    sampled_slices,
    sampler_settings,
    write_keys,
)

logger = logging.getLogger(__name__)

DIAGNOSTICS_DIR = "diagnostics"
"""``sft/diagnostics/<slice>.jsonl``: SFT's sampled completions the divergence is teacher-forced on."""
_SUPPORT_DIR = "support"
"""``sft/support/<slice>.jsonl``: SFT's sampled counts on the held-out database's questions."""
_SUPPORT_FILE = "support.json"
_SHAPES_FILE = "shapes.json"
_DIVERGENCE_FILE = "divergence.json"
"""``runs/<run>/divergence.json``: ``{"samples_digest", "slices": {slice: sums}}`` of that run's adapter."""


def _divergence_slices(names: list[str]) -> list[str]:
    """The held-out slices the divergence is measured on: band_heldout and the probes.

    Example:

    ```python
    >>> from slmsql_hub.study.diagnostics import _divergence_slices
    >>> _divergence_slices(["band_train", "band_heldout", "world_dev", "world_probe_cross"])
    ['band_heldout', 'world_probe_cross']

    ```
    """
    return [name for name in sampled_slices(names) if name != BAND_SLICES[0]]


def _prepared_band(config: Any) -> Any:
    """The :class:`~.band.BandSplit` the grid prepared, re-read from ``band/band.json``'s band (no filter runs);
    one line when the band it names no longer splits into the recorded halves."""
    from ..errors import UsageError
    from ..filtering.report import read_band
    from .band import load_band

    out = Path(config.output_dir)
    record = json.loads((out / "band" / "band.json").read_text(encoding="utf-8"))
    pool = record.get("pool") or {}
    if not pool.get("band_dir"):
        raise UsageError(
            f"{out}/band/band.json names no band_dir, so its questions cannot be read again for the "
            "diagnostics; pass --skip-diagnostics"
        )
    rows = read_band(pool["band_dir"], pool.get("band_revision"))
    band = load_band(rows, pool["band_dir"], config.band.split_seed, config.band.heldout_share, 0)
    if [r["question_id"] for r in band.heldout] != record.get("band_heldout_ids", []):
        raise UsageError(f"{pool['band_dir']} no longer splits into {out}/band/band.json's halves")
    return band


def _write_shapes(out: Path, slices: dict[str, dict]) -> dict[str, dict[str, str]]:
    """``{slice: {question_id: family}}`` of every slice's gold SQL, written to ``sft/shapes.json``."""
    from ..sql.shape import sql_family

    shapes = {name: {r["question_id"]: sql_family(r["gold_sql"]) for r in piece["rows"]}
              for name, piece in slices.items()}  # fmt: skip
    _write_if_changed(out / "sft" / _SHAPES_FILE, json.dumps(shapes, indent=1) + "\n")
    return shapes


def _write_if_changed(path: Path, text: str) -> None:
    """Rewrite ``path`` only when ``text`` differs (an unchanged rerun leaves the folder as it was)."""
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        write_atomic(path, text)


def sample_completions(
    sampler: Any, policy: tuple[Any, Any], rows: dict[str, list[dict]], out_dir: Path
) -> None:
    """Per slice, per question: ``{"question_id", "prompt_ids", "completions", "texts"}``, the sampler's
    ``num_samples`` keyed samples as token ids after the exact prompt ids, to ``out_dir/<slice>.jsonl``."""
    from ..data.prompts import build_prompts
    from ..filtering import generate_keyed_samples
    from ..generation import encode_prompts
    from ..sql import Sandbox

    model, tokenizer = policy
    prompt_config, _ = sampler.resolve_prompt_config(sampler.adapter_path)
    gen_config = sampler.generation_config()
    out_dir.mkdir(parents=True, exist_ok=True)
    with Sandbox(sampler.sql_limits(), workers=sampler.sandbox_workers) as sandbox:
        for name, questions in rows.items():
            prompts = build_prompts(questions, prompt_config, sandbox)
            lines = []
            for i in range(0, len(questions), sampler.batch_size):
                batch, chats = questions[i : i + sampler.batch_size], prompts[i : i + sampler.batch_size]
                groups = generate_keyed_samples(
                    model, tokenizer, chats, [r["question_id"] for r in batch], gen_config
                )
                for row, ids, group in zip(batch, encode_prompts(tokenizer, chats), groups):
                    lines.append(json.dumps({"question_id": row["question_id"], "prompt_ids": ids,
                                             "completions": [list(c.token_ids) for c in group],
                                             "texts": [c.text for c in group]}, ensure_ascii=False) + "\n")  # fmt: skip
            write_atomic(out_dir / f"{name}.jsonl", "".join(lines))


def support_curves(counts: dict[str, list[dict]], held_out: dict[str, str], samples: int) -> dict[str, dict]:
    """Per slice: ``{"held_out_db", "questions", "scored", "passk", "inside_support"}``; ``passk`` the pass@1..
    ``samples`` curve over the questions with every sample scorable (``scored`` of ``questions``),
    ``inside_support`` whether pass@``samples`` > 0.

    Example:

    ```python
    >>> from slmsql_hub.study.diagnostics import support_curves
    >>> counts = {"world_test": [{"question_id": "a", "n": 2, "c": 0}, {"question_id": "b", "n": 2, "c": 1}]}
    >>> entry = support_curves(counts, {"world_test": "db9"}, 2)["world_test"]
    >>> [p["pass_at_k"] for p in entry["passk"]], entry["inside_support"], entry["scored"]
    ([0.25, 0.5], True, 2)

    ```
    """
    from ..evaluation.passk import pass_at_k_curve

    curves = {}
    for name, rows in counts.items():
        kept = [r for r in rows if r["n"] >= samples]
        curve = pass_at_k_curve([samples] * len(kept), [min(r["c"], samples) for r in kept],
                                ks=list(range(1, samples + 1))) if kept else []  # fmt: skip
        curves[name] = {"held_out_db": held_out[name], "questions": len(rows), "scored": len(kept),
                        "passk": curve, "inside_support": bool(curve) and curve[-1]["pass_at_k"] > 0}  # fmt: skip
    return curves


def _digest(folder: Path, names: list[str]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update((folder / f"{name}.jsonl").read_bytes())
    return digest.hexdigest()


def run_divergence(model: Any, samples: dict[str, list[dict]], run: Path, digest: str) -> dict[str, Any]:
    """``run/divergence.json``: per slice the summed KL(SFT ‖ GRPO) and entropies over ``samples``' completion
    tokens, with ``run/grpo`` loaded as adapter ``grpo`` beside ``sft`` on ``model`` (and deleted after);
    reused when it scored the same samples (``digest``)."""
    path = run / _DIVERGENCE_FILE
    if path.is_file():
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("samples_digest") == digest:
            return cached
    model.load_adapter(str(run / "grpo"), adapter_name="grpo", is_trainable=False)
    try:
        sums = {name: _slice_sums(model, rows) for name, rows in samples.items()}
    finally:
        model.delete_adapter("grpo")
    result = {"samples_digest": digest, "slices": sums}
    write_atomic(path, json.dumps(result, indent=2) + "\n")
    return result


def _slice_sums(model: Any, rows: list[dict]) -> dict[str, float]:
    total: dict[str, float] = {}
    for row in rows:
        total = add_sums(total, divergence_sums(model, row["prompt_ids"], row["completions"], "sft", "grpo"))
    return total


def _sft_sampling(
    config: Any, kl_rows: dict[str, list[dict]], held: dict[str, list[dict]], out: Path
) -> None:
    """SFT's samples for the divergence and its counts on the held-out database, where not cached with the
    study's keys (:data:`~.sampled.STUDY_KEYS`); one policy load for both."""
    import dataclasses

    from ..runtime import set_num_threads

    if not kl_rows and not held:
        return
    kl_dir, support_dir = out / "sft" / DIAGNOSTICS_DIR, out / "sft" / _SUPPORT_DIR
    sampler = sampler_settings(config, kl_dir, config.diagnostic_samples or config.support_samples)
    keys = sample_keys(sampler)
    cached = cached_rows(kl_dir, kl_rows, keys) if kl_rows else {}
    kl_todo = cached is None or any(len(r["completions"]) != config.diagnostic_samples
                                    for rows in cached.values() for r in rows)  # fmt: skip
    counted = cached_rows(support_dir, held, keys) if held else {}
    most = [max(r["n"] for r in rows) for rows in (counted or {}).values()]
    # counts of another sample size are redone (a question's n, its scorable samples, is at most its samples)
    support_todo = counted is None or any(
        n > config.support_samples or 0 < n < config.support_samples for n in most
    )
    if kl_todo or support_todo:
        sampler = dataclasses.replace(
            sampler, adapter_path=config.sft_path, adapter_revision=config.sft_adapter_revision
        )
        set_num_threads(sampler.num_threads)
        policy = load_sampler_policy(sampler, config.sft_path, config.sft_adapter_revision)
        if kl_todo:
            sample_completions(sampler, policy, kl_rows, kl_dir)
            write_keys(kl_dir, keys)
        if support_todo:
            shutil.rmtree(support_dir, ignore_errors=True)  # sample_counts would reuse counts of other sizes
            counting = sampler_settings(config, support_dir, config.support_samples)
            sample_counts(
                counting, config.sft_path, held, support_dir, config.sft_adapter_revision, policy=policy
            )
        del policy
        _free_memory()
    if held:
        counts = cached_rows(support_dir, held) or {}
        where = {name: rows[0]["db_id"] for name, rows in held.items()}
        curves = support_curves(counts, where, config.support_samples)
        curves = {name: {**curve, "keys": keys} for name, curve in curves.items()}
        _write_if_changed(out / "sft" / _SUPPORT_FILE, json.dumps(curves, indent=2) + "\n")


def _free_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _divergences(
    config: Any, settings: Any, runs: list[Path], names: list[str], on_progress: Callable
) -> None:
    """:func:`run_divergence` of every run not cached; with ``config.jobs > 1`` the runs are shared among that
    many spawned workers (each on its own GPU where there are some), each loading the model once. A run's
    numbers do not depend on which worker scored it: every worker sets the same threads and device kind."""
    kl_dir = Path(config.output_dir) / "sft" / DIAGNOSTICS_DIR
    digest = _digest(kl_dir, names)

    def done(run: Path) -> bool:
        path = run / _DIVERGENCE_FILE
        return path.is_file() and json.loads(path.read_text(encoding="utf-8")).get("samples_digest") == digest

    todo = [run for run in runs if not done(run)]
    jobs = min(config.jobs, len(todo))
    if jobs <= 1:
        if todo:
            _score_runs(config, settings, todo, names, digest, on_progress)
        return
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from .grid import _worker_devices, visible_devices

    devices = _worker_devices(visible_devices(), jobs) or [None] * jobs
    shares = [todo[i::jobs] for i in range(jobs)]
    on_progress(f"diagnostics: KL(SFT ‖ GRPO) and entropy of {len(todo)} runs, {jobs} at a time")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, context) as pool:
        futures = [pool.submit(_score_in_worker, config, settings, share, names, digest, device, os.getpid())
                   for share, device in zip(shares, devices)]  # fmt: skip
        for future in futures:
            future.result()


def _score_in_worker(
    config: Any, settings: Any, runs: list[Path], names: list[str], digest: str, device: str | None, parent: int
) -> None:
    """One diagnostics worker: end with ``parent``, take ``device`` (a GPU name) before anything touches CUDA."""
    import os

    from ..runtime import die_with_parent, set_num_threads

    die_with_parent(parent)
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    set_num_threads(settings.num_threads)
    _score_runs(config, settings, runs, names, digest, logger.info)


def _sft_policy(config: Any, settings: Any) -> Any:
    """The base with the SFT adapter as ``sft`` (transformers: the divergence needs every logit)."""
    from ..generation import load_policy

    model, _ = load_policy(
        config.base_path, adapters={"sft": config.sft_path}, tokenizer=settings.tokenizer_name_or_path,
        dtype=settings.dtype, device=settings.device, revision=config.model_revision,
        adapter_revisions={"sft": config.sft_adapter_revision},
    )  # fmt: skip
    return model


def _score_runs(
    config: Any, settings: Any, runs: list[Path], names: list[str], digest: str, on_progress: Callable
) -> None:
    """:func:`run_divergence` of ``runs``, one base with the SFT adapter loaded once."""
    kl_dir = Path(config.output_dir) / "sft" / DIAGNOSTICS_DIR
    samples = {name: read_jsonl(kl_dir / f"{name}.jsonl") for name in names}
    model = _sft_policy(config, settings)
    for k, run in enumerate(runs, start=1):
        on_progress(f"diagnostics {k}/{len(runs)}: KL(SFT ‖ GRPO) and entropy of {run.name}")
        run_divergence(model, samples, run, digest)
    del model
    _free_memory()


_POLICY: dict[str, Any] = {}
"""A grid worker's SFT policy for the divergence, loaded by its first :func:`_score_in_grid_worker`."""


def _score_in_grid_worker(config: Any, settings: Any, run: Path, names: list[str], digest: str) -> None:
    """:func:`run_divergence` of one run in a grid worker (:class:`BesideGrid`), with the threads the serial
    diagnostics set."""
    from ..runtime import set_num_threads

    set_num_threads(settings.num_threads)
    if "sft" not in _POLICY:
        _POLICY["sft"] = _sft_policy(config, settings)
    kl_dir = Path(config.output_dir) / "sft" / DIAGNOSTICS_DIR
    logger.info("diagnostics beside the grid: KL(SFT ‖ GRPO) and entropy of %s", run.name)
    run_divergence(_POLICY["sft"], {name: read_jsonl(kl_dir / f"{name}.jsonl") for name in names}, run, digest)


class BesideGrid:
    """The sampled diagnostics of a ``jobs > 1`` grid, queued in the grid's own pool behind its runs: SFT's
    samples (:func:`_sft_sampling`) once every run has a worker, then the divergence of each finished run. A
    worker that the grid's last runs leave idle does them, and :func:`run_diagnostics` then finds them cached;
    the numbers are those it would compute (the same functions, threads and samples).

    The grid calls :meth:`run_finished` with each finished run's folder and :meth:`finished` with each future of
    :meth:`pending` and of what those return; each returns the futures it adds to the pool.
    """

    def __init__(self, config: Any, settings: Any, slices: dict[str, dict], pool: Any) -> None:
        self.config, self.settings, self.pool = config, settings, pool
        kl_rows, held = _sampled_rows(config, slices)
        self.names, self.digest, self.waiting = list(kl_rows), None, []
        out = Path(config.output_dir)
        self.sft = pool.submit(_sft_sampling, config, kl_rows, held, out) if kl_rows or held else None

    def pending(self) -> set:
        return {self.sft} if self.sft is not None else set()

    def run_finished(self, run: Path) -> set:
        if self.sft is None or not self.names:
            return set()
        if self.digest is None:
            self.waiting.append(run)
            return set()
        return {self._score(run)}

    def finished(self, future: Any) -> set:
        future.result()  # a failure is the grid's, as it would be the diagnostics'
        if future is not self.sft or not self.names:
            return set()
        self.digest = _digest(Path(self.config.output_dir) / "sft" / DIAGNOSTICS_DIR, self.names)
        runs, self.waiting = self.waiting, []
        return {self._score(run) for run in runs}

    def _score(self, run: Path) -> Any:
        return self.pool.submit(_score_in_grid_worker, self.config, self.settings, run, self.names, self.digest)


def _sampled_rows(config: Any, slices: dict[str, dict]) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """``(kl_rows, held)``: per slice, the questions SFT samples for the divergence (``diagnostic_samples``) and
    those on the slice's held-out database it counts for the support (``support_samples``); empty when off."""
    kl_rows = (
        {n: slices[n]["rows"] for n in _divergence_slices(list(slices))} if config.diagnostic_samples else {}
    )
    held = {name: [r for r in piece["rows"] if r["db_id"] == piece["held_out_db"]]
            for name, piece in slices.items() if piece["held_out_db"] is not None and config.support_samples}  # fmt: skip
    return kl_rows, {name: rows for name, rows in held.items() if rows}


def run_diagnostics(
    config: Any, roots: list[Path] | None = None, on_progress: Callable = logger.info
) -> None:
    """Every diagnostic of the module docstring for the finished runs under each ``root/runs`` (default: the
    output folder's), each cached: a rerun loads no model."""
    from ..runtime import set_num_threads
    from .evaluate import load_eval_settings, load_slices
    from .grid import RESULT_FILE

    out = Path(config.output_dir)
    band = _prepared_band(config)
    settings = load_eval_settings(config, out / "sft")
    slices = load_slices(band.train, band.heldout, config.transfer, settings)
    _write_shapes(out, slices)
    runs = sorted(path.parent for root in roots or [out] for path in (root / "runs").glob(f"*/{RESULT_FILE}"))
    if not runs:
        return
    kl_rows, held = _sampled_rows(config, slices)
    _sft_sampling(config, kl_rows, held, out)
    if kl_rows:
        set_num_threads(settings.num_threads)
        _divergences(config, settings, runs, list(kl_rows), on_progress)


def family_comparison(
    out: Path, runs: list[dict], shapes: dict[str, dict[str, str]]
) -> dict[str, list[dict]]:
    """Per slice, per template family (:data:`~slmsql_hub.sql.shape.FAMILIES` order), the question the unit
    (:func:`~slmsql_hub.evaluation.stats.question_comparison` of the seeds): ``{"family", "n" (questions),
    "sft_ex", "grpo_ex", "delta", "fixed", "broken" (answers, summed over the seeds), "p", "p_holm"}``; the
    sign-flip p, Holm across the families of the slice. A question unscorable for any answer is left out."""
    from ..evaluation.stats import question_comparison
    from ..sql.shape import FAMILIES

    table: dict[str, list[dict]] = {}
    for name, families in shapes.items():
        answer_files = [Path(run["folder"]) / "answers" / f"{name}.jsonl" for run in runs]
        sft_file = out / "sft" / f"{name}.jsonl"
        if not sft_file.is_file() or not all(path.is_file() for path in answer_files):
            continue
        sft = read_jsonl(sft_file)
        seeds = [read_jsonl(path) for path in answer_files]
        by_family: dict[str, list[int]] = {}
        for i, x in enumerate(sft):
            if x["correct"] is not None and all(seed[i]["correct"] is not None for seed in seeds):
                by_family.setdefault(families.get(x["question_id"], "unparsed"), []).append(i)
        rows = []
        for family in (f for f in FAMILIES if f in by_family):
            index = by_family[family]
            result = question_comparison([sft[i]["correct"] for i in index],
                                         [[seed[i]["correct"] for i in index] for seed in seeds])  # fmt: skip
            rows.append({"family": family, "n": result.n, "sft_ex": result.ex_a, "grpo_ex": result.ex_b,
                         "delta": result.delta, "fixed": sum(d["b_only"] for d in result.discordant),
                         "broken": sum(d["a_only"] for d in result.discordant), "p": result.p})  # fmt: skip
        for row, adjusted in zip(rows, holm([row["p"] for row in rows])):
            row["p_holm"] = adjusted
        table[name] = rows
    return table


def _pooled_divergence(runs: list[dict]) -> dict[str, dict]:
    """Per slice, the token means of the runs' ``divergence.json`` sums pooled over seeds: ``{"tokens", "kl",
    "entropy_sft", "entropy_grpo", "runs"}`` (runs without the file left out)."""
    totals: dict[str, dict] = {}
    counted: dict[str, int] = {}
    for run in runs:
        path = Path(run["folder"]) / _DIVERGENCE_FILE
        if not path.is_file():
            continue
        for name, sums in json.loads(path.read_text(encoding="utf-8"))["slices"].items():
            totals[name] = add_sums(totals.get(name, {}), sums)
            counted[name] = counted.get(name, 0) + 1
    pooled = {}
    for name, sums in totals.items():
        means = mean_divergence(sums)
        pooled[name] = {"tokens": means["tokens"], "kl": means["kl"], "entropy_sft": means["entropy_a"],
                        "entropy_grpo": means["entropy_b"], "runs": counted[name]}  # fmt: skip
    return pooled


def variant_diagnostics(out: Path, runs: list[dict]) -> dict[str, Any]:
    """What a pooled variant's report entry adds: ``families`` (:func:`family_comparison`, when
    ``sft/shapes.json`` is there) and ``divergence`` (:func:`_pooled_divergence`, when some run has it)."""
    entry: dict[str, Any] = {}
    shapes = read_shapes(out)
    if shapes is not None:
        entry["families"] = family_comparison(out, runs, shapes)
    divergence = _pooled_divergence(runs)
    if divergence:
        entry["divergence"] = divergence
    return entry


def read_shapes(out: Path) -> dict[str, dict[str, str]] | None:
    """``sft/shapes.json`` (:func:`_write_shapes`: ``{slice: {question_id: family}}``); ``None`` if absent."""
    path = out / "sft" / _SHAPES_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_support(out: Path) -> dict[str, dict] | None:
    """``sft/support.json`` (:func:`support_curves`), ``None`` when the study computed none."""
    path = out / "sft" / _SUPPORT_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def significant_families(pooled: list[dict], alpha: float) -> tuple[list[dict], int]:
    """The (variant, slice, family) rows of ``pooled``'s ``families`` with ``p_holm < alpha`` (each with
    ``variant`` and ``slice`` added), and how many rows are not.

    Example:

    ```python
    >>> from slmsql_hub.study.diagnostics import significant_families
    >>> pooled = [{"name": "v", "families": {"s": [{"family": "join", "p_holm": 0.01}, {"family": "filter", "p_holm": 0.5}]}}]
    >>> significant_families(pooled, 0.05)
    ([{'family': 'join', 'p_holm': 0.01, 'variant': 'v', 'slice': 's'}], 1)

    ```
    """
    rows = [{**row, "variant": p["name"], "slice": name}
            for p in pooled for name, rows in p.get("families", {}).items() for row in rows]  # fmt: skip
    shown = [row for row in rows if row["p_holm"] < alpha]
    return shown, len(rows) - len(shown)
