"""The study's four slices, and one adapter's greedy answers to them, paired against the SFT adapter's.

The answers come from the evaluation's own public pieces (:func:`~slmsql_hub.evaluation.build_prompts`,
:func:`~slmsql_hub.evaluation.generate_and_judge`, :func:`~slmsql_hub.evaluation.stats.paired_comparison`) with the
settings of ``eval.yaml``; unlike ``slmsql eval`` the SFT answers are computed once per slice and reused by
every variant (the same prompts in the same batches, so an unchanged adapter answers exactly as SFT).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..evaluation.findings import GROUPS
from ..run.files import read_jsonl, write_atomic

logger = logging.getLogger(__name__)

def load_eval_settings(config: Any, output_dir: Path) -> Any:
    """The ``EvalConfig`` of the study's ``eval_recipe`` pointed at the run (decoding, SQL limits, bootstrap)."""
    from ..evaluation import load_eval_config

    values = {
        "model_name_or_path": config.base_path, "sft_adapter": config.sft_path, "grpo_adapter": config.sft_path,
        "world_root": str(Path(config.run_dir) / "world"), "output_dir": str(output_dir),
        "model_revision": config.model_revision, "sft_adapter_revision": config.sft_adapter_revision,
        "num_threads": config.num_threads,
    }  # fmt: skip
    return load_eval_config(config.eval_recipe, values={k: v for k, v in values.items() if v is not None})


def load_slices(
    band_train: list[dict], band_heldout: list[dict], transfer: list[str], settings: Any
) -> dict[str, dict]:
    """``{slice: {"rows", "held_out_db", "mode"}}``: the band halves, then each ``transfer`` benchmark
    (``name:split[:limit]``, keyed ``name_split``; the band is judged in ``bird`` mode, as the filter did)."""
    from ..evaluation import BenchmarkSpec, load_slice

    slices: dict[str, dict] = {
        "band_train": {"rows": band_train, "held_out_db": None, "mode": "bird"},
        "band_heldout": {"rows": band_heldout, "held_out_db": None, "mode": "bird"},
    }
    for text in transfer:
        piece = load_slice(BenchmarkSpec.parse(text), settings)
        slices[piece.spec.key] = {
            "rows": piece.rows,
            "held_out_db": piece.held_out_db,
            "mode": piece.spec.mode,
        }
    return slices


def answer(
    adapter: str | Path, slices: dict[str, dict], settings: Any, out_dir: Path, revision: str | None = None
) -> dict[str, list[dict]]:
    """One adapter's judged greedy answers to every slice, written to ``out_dir/<slice>.jsonl``.

    ``revision`` is the adapter's Hub revision (the SFT adapter's, when it is a Hub id).

    Returns ``{slice: [{"question_id", "db_id", "correct", "sql"}]}`` in row order.
    """
    from ..evaluation import build_prompts, generate_and_judge
    from ..runtime import set_num_threads
    from ..sql import Judge, Sandbox

    set_num_threads(settings.num_threads)
    loaded = settings.load_policy(adapters={"policy": str(adapter)}, adapter_revisions={"policy": revision})
    # as run_eval: the vLLM backend returns one VLLMPolicy that tokenizes for itself (unverified here)
    model, tokenizer = (loaded, None) if settings.backend == "vllm" else loaded
    prompt_config, _ = settings.resolve_prompt_config(adapter)
    answers: dict[str, list[dict]] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    with Sandbox(settings.sql_limits(), workers=settings.sandbox_workers) as sandbox:
        cache: dict = {}
        for name, piece in slices.items():
            rows = piece["rows"]
            judge = Judge(sandbox=sandbox, mode=piece["mode"])
            prompts = {"policy": build_prompts(rows, prompt_config, sandbox, cache)}
            outputs = generate_and_judge(
                model, tokenizer, rows, prompts, judge, settings.generation_config(), progress=False
            )["policy"]
            answers[name] = [
                {"question_id": row["question_id"], "db_id": row["db_id"], "correct": o.judgement.correct,
                 "sql": o.judgement.pred_sql}
                for row, o in zip(rows, outputs)
            ]  # fmt: skip
            lines = "".join(json.dumps(a, ensure_ascii=False) + "\n" for a in answers[name])
            write_atomic(out_dir / f"{name}.jsonl", lines)
    return answers


def cached_answers(
    adapter: str | Path, slices: dict[str, dict], settings: Any, out_dir: Path, revision: str | None = None
) -> dict[str, list[dict]]:
    """:func:`answer`, reusing ``out_dir/<slice>.jsonl`` when every slice is there with the same questions."""
    files = {name: out_dir / f"{name}.jsonl" for name in slices}
    if all(path.is_file() for path in files.values()):
        cached = {name: read_jsonl(path) for name, path in files.items()}
        if all(
            [a["question_id"] for a in cached[name]] == [r["question_id"] for r in slices[name]["rows"]]
            for name in slices
        ):
            return cached
        logger.warning("the answers under %s are for other questions; answering again", out_dir)
    return answer(adapter, slices, settings, out_dir, revision)


def comparison_entry(sft: list, grpo: list, resamples: int | None = None, seed: int = 0) -> dict[str, Any]:
    """``{sft_ex, grpo_ex, delta, ci, p, n, discordant}`` of paired correctness lists (``resamples`` ``None``: the
    stats default)."""
    from ..evaluation.stats import paired_comparison

    kwargs = {} if resamples is None else {"resamples": resamples}
    result = paired_comparison(sft, grpo, seed=seed, **kwargs)
    return {
        "sft_ex": result.ex_a,
        "grpo_ex": result.ex_b,
        "delta": result.delta_ex,
        "ci": [result.ci95[0], result.ci95[1]],
        "p": result.mcnemar_p,
        "n": result.n,
        "discordant": result.discordant,
    }


def in_group(db_id: str, held_out_db: str | None, group: str | None) -> bool:
    """Whether a question on ``db_id`` belongs to ``group`` (``None``: the whole slice; else one of :data:`GROUPS`)."""
    return group is None or (db_id == held_out_db) == (group == "held_out_db")


def compare_slices(
    sft: dict[str, list[dict]], grpo: dict[str, list[dict]], slices: dict[str, dict], settings: Any
) -> dict[str, dict]:
    """Per slice ``{sft_ex, grpo_ex, delta, ci, p, n, discordant}``; world slices add :data:`GROUPS` entries.

    ``sft`` and ``grpo`` are :func:`answer` results for the same slices and question order.
    """
    entries: dict[str, dict] = {}
    for name, piece in slices.items():
        a = [x["correct"] for x in sft[name]]
        b = [x["correct"] for x in grpo[name]]
        entry = comparison_entry(a, b, settings.bootstrap_resamples, settings.bootstrap_seed)
        held = piece["held_out_db"]
        if held is not None:
            for group in GROUPS:
                pairs = [(x, y) for x, y, row in zip(a, b, sft[name]) if in_group(row["db_id"], held, group)]
                if pairs:
                    entry[group] = comparison_entry(
                        [x for x, _ in pairs], [y for _, y in pairs], settings.bootstrap_resamples,
                        settings.bootstrap_seed,
                    )
        entries[name] = entry
    return entries
