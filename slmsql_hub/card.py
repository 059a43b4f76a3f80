"""The generated model card: ``slmsql card --run-dir RUN`` turns a run folder into the model repo folder.

Everything the card says is read from the run's own files — nothing is typed by hand:

- ``eval/eval_results.json`` (``slmsql eval``): EX of both policies, ΔEX, the paired bootstrap CI, McNemar's p,
  the verdict per benchmark; ``eval/predictions/*.jsonl`` ship with the card;
- ``grpo/`` (attempt #2, the shipped adapter) and ``grpo_attempt1/`` when present: ``run_summary.json``
  (guards, checksums, data, wall time), ``config.yaml`` (the resolved recipe), ``telemetry.jsonl``;
- ``filter/filter_report.json`` and ``filter_config.json`` (the pass-rate band counts and settings);
- ``sft/stage1|2/`` and ``base/`` (``run_summary.json``, ``config.yaml``): the adapter's lineage;
- ``world/world.json``: the embedded world's seed and sizes, for the reproduction commands.

:func:`~slmsql_hub.run_files.load_run` (in :mod:`slmsql_hub.run_files`) reads them; this module turns them into
the card's numbers and sentences, renders the template and assembles the folder.

The card is rendered with ``huggingface_hub.ModelCard.from_template`` from the Jinja template in
``model_card/`` (see ``model_card/README.md``); its metadata (``base_model``, ``library_name: peft``,
``pipeline_tag``, tags — ``negative-result`` when no benchmark shows a significant difference —, datasets,
license, ``model-index``) round-trips through ``ModelCard.load``.

:func:`build_card` assembles the **model repo folder** (default ``RUN/card``): ``README.md`` (the card),
``plots/*.png``, ``.eval_results/<benchmark>.yaml`` (the Hub's eval-results format), the GRPO adapter files
(config, weights, tokenizer), ``telemetry.jsonl``, ``run_summary.json``, ``config.yaml``, the evaluation
(``eval/``), attempt #1's telemetry, the filter report, every stage's resolved config (``configs/``, what
the reproduction commands run) and, when the base model is a local folder rather than a Hub model, the base
model itself (``base/``).

Why a separate folder: TRL rewrites ``README.md`` in its output folder at every save with a draft card that
names the base model only (and PEFT writes a template there too). The GRPO run already moves TRL's draft to
``trl_model_card.md``; the card folder goes further and never contains TRL's output folder's README or draft,
so the card that ships is this one whatever TRL does later. Importing this module does no I/O.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from . import card_templates
from .errors import UsageError
from .repo_ids import looks_like_hub_id
from .run_files import Attempt, RunFiles, load_run, read_json_object
from .sql.recipe_limits import LIMITS_KEY
from .training.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC

if TYPE_CHECKING:  # pragma: no cover
    from huggingface_hub import ModelCard, ModelCardData

logger = logging.getLogger(__name__)

CARD_DIR = "card"
"""The card folder's name inside a run folder (``slmsql card`` writes ``RUN/card`` unless ``--out`` is given)."""

PLOTS_DIR = "plots"
EVAL_RESULTS_DIR = ".eval_results"
"""The Hub's eval-results folder (``huggingface_hub.constants.EVAL_RESULTS_FOLDER``)."""

BASE_TAGS: tuple[str, ...] = ("text-to-sql", "grpo", "trl", "peft")
NULL_TAG = "negative-result"
"""Added to the tags when no benchmark shows a significant difference (the study's null result)."""

ADAPTER_FILES: tuple[str, ...] = (
    "adapter_config.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "generation_config.json",
)
"""Files of the GRPO output folder that make the adapter loadable (copied when present)."""

RUN_FILES: tuple[str, ...] = ("telemetry.jsonl", "run_summary.json", "config.yaml")
"""The shipped attempt's record of the run (copied as they are)."""

BASE_FILES: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "run_summary.json",
    "config.yaml",
)
"""Files of a local base model folder shipped in ``base/`` when the base is not on the Hub."""

_CARD_ENTRIES = frozenset(
    {"README.md", PLOTS_DIR, EVAL_RESULTS_DIR, "eval", "configs", "base", "grpo_attempt1", "filter"}
    | set(ADAPTER_FILES)
    | set(RUN_FILES)
)

GRPO_HYPERPARAMETERS: tuple[str, ...] = (
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "max_completion_length",
    "temperature",
    "top_p",
    "beta",
    "epsilon",
    "num_iterations",
    "loss_type",
    "scale_rewards",
    "max_grad_norm",
    "dtype",
    "seed",
)
"""Keys of the resolved GRPO config shown in the card's hyperparameter table (those present)."""

MECHANISM_METRICS: tuple[tuple[str, str, int], ...] = (
    (EXACT_ZERO_STD_METRIC, f"zero-variance groups ({EXACT_ZERO_STD_METRIC})", 3),
    (TRL_ZERO_STD_METRIC, f"TRL's {TRL_ZERO_STD_METRIC}", 3),
    ("reward_std", "reward_std", 3),
    ("grad_norm", "grad_norm", 3),
    ("completions/mean_length", "completion length (tokens)", 1),
    ("reward", "reward", 3),
    ("sql/correct_rate", "sql/correct_rate", 3),
)
"""Telemetry metrics of the attempts table: (key, label, decimals); a metric no attempt logs has no row."""

COMPARE_MODES: dict[str, str] = {
    "bird": "BIRD semantics: the result rows of prediction and gold are compared as sets; column order matters",
    "spider": "Spider test-suite semantics: DISTINCT removed, columns may be permuted, rows compared as "
    "multisets, order checked only when the gold has ORDER BY",
}

_DIFFICULTY_ORDER = ("easy", "simple", "medium", "moderate", "hard", "challenging", "extra")

FILE_DESCRIPTIONS: dict[str, str] = {
    "README.md": "this card",
    "adapter_config.json": "the LoRA adapter's configuration (PEFT)",
    "adapter_model.safetensors": "the LoRA adapter's weights",
    "adapter_model.bin": "the LoRA adapter's weights",
    "tokenizer.json": "the tokenizer",
    "tokenizer_config.json": "the tokenizer's settings",
    "chat_template.jinja": "the chat template prompts are rendered with",
    "telemetry.jsonl": "GRPO telemetry of this adapter's run, one JSON line per step",
    "run_summary.json": "the GRPO run's summary: data, rewards, guards, checksums, telemetry means, timings",
    "config.yaml": "the GRPO run's resolved configuration",
    "plots": "the telemetry plots and the pass-rate histogram shown above",
    EVAL_RESULTS_DIR: "evaluation results in the Hub's format (shown on the model page)",
    "eval": "eval_results.json (every number in the Results table) and per-question predictions and verdicts",
    "configs": "every stage's resolved configuration (the reproduction commands run them)",
    "base": "the base model (not on the Hub): weights, tokenizer, its run summary",
    "grpo_attempt1": "GRPO attempt #1's telemetry, summary and configuration (not shipped as an adapter)",
    "filter": "the pass-rate filter's report (band counts, histogram, settings)",
}


# ------------------------------------------------------------------------------------------------------------
# Numbers as the card prints them
# ------------------------------------------------------------------------------------------------------------


def percent(fraction: float, decimals: int = 1) -> str:
    """A fraction as a percentage without the sign: ``0.5417`` -> ``54.2``.

    Example:

    ```python
    >>> from slmsql_hub.card import percent
    >>> percent(0.54166), percent(1.0), percent(0.125, 0)
    ('54.2', '100.0', '12')

    ```
    """
    return f"{100 * fraction:.{decimals}f}"


def number(value: Any, decimals: int = 3) -> str:
    """A number with ``decimals`` decimals (``n/a`` for a missing value).

    Example:

    ```python
    >>> from slmsql_hub.card import number
    >>> number(0.123456), number(None), number(38.26, 1)
    ('0.123', 'n/a', '38.3')

    ```
    """
    if value is None:
        return "n/a"
    return f"{float(value):.{decimals}f}"


def scientific(value: Any, digits: int = 2) -> str:
    """A small ratio in scientific notation (``0`` when exactly zero, ``n/a`` when missing).

    Example:

    ```python
    >>> from slmsql_hub.card import scientific
    >>> scientific(0.000321), scientific(0.0), scientific(None)
    ('3.21e-04', '0', 'n/a')

    ```
    """
    if value is None:
        return "n/a"
    return "0" if value == 0 else f"{float(value):.{digits}e}"


def _cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _yaml_scalar(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text[:-4].strip() if text.endswith("...") else text


def is_significant_outcome(comparisons: Iterable[Mapping[str, Any]]) -> str:
    """The run's overall outcome from the benchmarks' paired comparisons.

    Returns:
        ``null`` (no benchmark significant), ``improved`` (every significant difference favours GRPO),
        ``regressed`` (every significant one favours SFT) or ``mixed``.

    Example:

    ```python
    >>> from slmsql_hub.card import is_significant_outcome
    >>> is_significant_outcome([{"significant": False, "delta_ex": 0.01}])
    'null'
    >>> is_significant_outcome([{"significant": True, "delta_ex": 0.2}, {"significant": False, "delta_ex": 0.0}])
    'improved'

    ```
    """
    significant = [c for c in comparisons if c.get("significant")]
    if not significant:
        return "null"
    if all(c["delta_ex"] > 0 for c in significant):
        return "improved"
    if all(c["delta_ex"] < 0 for c in significant):
        return "regressed"
    return "mixed"


def _difficulty_key(name: str) -> tuple[int, str]:
    return (_DIFFICULTY_ORDER.index(name) if name in _DIFFICULTY_ORDER else len(_DIFFICULTY_ORDER), name)


def telemetry_stats(records: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any] | None:
    """Mean (as :func:`~slmsql_hub.training.telemetry.summarize_telemetry` computes it), first, last, min and max
    of one metric over an attempt's training records; ``None`` when no record logs it.

    Example:

    ```python
    >>> from slmsql_hub.card import telemetry_stats
    >>> telemetry_stats([{"step": 1, "grad_norm": 0.2}, {"step": 2, "grad_norm": 0.4}], "grad_norm")
    {'mean': 0.30000000000000004, 'first': 0.2, 'last': 0.4, 'min': 0.2, 'max': 0.4, 'steps': 2}

    ```
    """
    values = [
        float(r[metric])
        for r in records
        if isinstance(r.get(metric), (int, float)) and not isinstance(r.get(metric), bool)
    ]
    if not values:
        return None
    return {
        "mean": sum(values) / len(values),
        "first": values[0],
        "last": values[-1],
        "min": min(values),
        "max": max(values),
        "steps": len(values),
    }


# ------------------------------------------------------------------------------------------------------------
# The card's content
# ------------------------------------------------------------------------------------------------------------


@dataclass
class CardOptions:
    """What the run's files cannot say: where the card will live and what the Hub should call things.

    Args:
        repo_id: the model repo (``namespace/name``); gives the ``.eval_results`` source URLs and the usage
            snippet's repo. ``None``: a local folder (the snippet loads from ``card_path``).
        base_model_id: the base model's Hub id when the run used a local copy (``None``: the run's
            ``base_model`` when it is a Hub id; otherwise ``base_model`` is left out of the metadata and the
            base model ships in ``base/``).
        license: the license id (``None``: the project's license).
        model_name: the model-index name (``None``: the repo's name, else ``slmsql-<run>-grpo``).
        datasets: extra dataset ids for the metadata (e.g. the band's dataset repo).
        card_path: the card folder, for the usage snippet when there is no ``repo_id``.
    """

    repo_id: str | None = None
    base_model_id: str | None = None
    license: str | None = None
    model_name: str | None = None
    datasets: Sequence[str] = ()
    card_path: str | None = None


def project_license() -> str | None:
    """The project's license as a Hub license id (``apache-2.0``), from the installed package's metadata."""
    import importlib.metadata

    try:
        meta = importlib.metadata.metadata("slmsql-hub")
    except importlib.metadata.PackageNotFoundError:
        return None
    text = meta.get("License-Expression") or meta.get("License")
    return text.strip().lower() if text else None


def _project_url() -> str | None:
    import importlib.metadata

    try:
        urls = importlib.metadata.metadata("slmsql-hub").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "homepage":
            return url.strip()
    return None


def _base_info(run: RunFiles, options: CardOptions) -> dict[str, Any]:
    recorded = str(run.shipped.summary.get("base_model") or "")
    hub_id = options.base_model_id or (recorded if looks_like_hub_id(recorded, run) else None)
    local = run.local(recorded) if recorded and not hub_id else None
    ships = bool(local is not None and (local / "config.json").is_file())
    stage = run.stages.get("base")
    info: dict[str, Any] = {"recorded": recorded, "hub_id": hub_id, "ships": ships, "local": local}
    if stage is not None:
        model = stage.summary.get("model", {})
        info["from_scratch"] = stage.summary.get("kind") == "base"
        info["architecture"] = model.get("architecture")
        info["parameters"] = (stage.summary.get("parameters") or {}).get("total")
        info["steps"] = stage.summary.get("steps")
        info["final_loss"] = stage.summary.get("final_loss")
        info["world_dir"] = stage.summary.get("world_dir")
    return info


def _describe_data(run: RunFiles, attempt: Attempt, with_count: bool = True) -> str:
    data = attempt.summary.get("data") or {}
    source = data.get("source")
    sources = source if isinstance(source, list) else [source] if source else []
    band = str((run.filter_report or {}).get("outputs", {}).get("band") or "")
    names = []
    for item in sources:
        item = str(item)
        if band and (item == band or run.local(item) == run.local(band)):
            names.append("the pass-rate band")
        elif PurePosixPath(item).name == "band":
            names.append("the pass-rate band")
        else:
            names.append(f"`{PurePosixPath(item).name}`")
    what = " + ".join(names) or "unknown prompts"
    return f"{what} ({data.get('prompts', 'n/a')} prompts)" if with_count else what


def _results(run: RunFiles) -> list[dict[str, Any]]:
    rows = []
    for key, entry in run.eval_results["benchmarks"].items():
        comparison = entry["comparison"]
        a, b = comparison.get("a", "sft"), comparison.get("b", "grpo")
        pa, pb = entry["policies"][a], entry["policies"][b]
        low, high = comparison["ci95"]
        rows.append(
            {
                "key": key,
                "benchmark": entry.get("benchmark", key),
                "split": entry.get("split", ""),
                "dataset_id": entry.get("dataset_id"),
                "mode": entry.get("mode", ""),
                "mode_text": COMPARE_MODES.get(entry.get("mode", ""), entry.get("mode", "")),
                "n": comparison["n"],
                "n_total": entry.get("n", comparison["n"]),
                "n_unscorable": entry.get("n_unscorable", 0),
                "sft_ex": pa["ex"],
                "grpo_ex": pb["ex"],
                "sft_correct": pa.get("correct"),
                "grpo_correct": pb.get("correct"),
                "delta_ex": comparison["delta_ex"],
                "ci95": (low, high),
                "mcnemar_p": comparison["mcnemar_p"],
                "a_only": comparison["discordant"]["a_only"],
                "b_only": comparison["discordant"]["b_only"],
                "significant": bool(comparison["significant"]),
                "verdict": comparison["verdict"],
                "summary": comparison["summary"],
                # the verdict sentence without its verdict words (the TL;DR's sentence around says them)
                "finding": comparison["summary"].removeprefix(comparison["verdict"] + ": "),
                "rule": comparison.get("rule"),
                "resamples": comparison.get("bootstrap_resamples"),
                "seed": comparison.get("bootstrap_seed"),
                "predictions_file": entry.get("predictions_file"),
                "by_difficulty": (pa.get("by_difficulty") or {}, pb.get("by_difficulty") or {}),
                "held_out": (pa.get("held_out_db") or {}, pb.get("held_out_db") or {}),
                "seen": (pa.get("seen_dbs") or {}, pb.get("seen_dbs") or {}),
            }
        )
    return rows


def _results_context(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from .stats import format_p, format_points

    table = []
    difficulty = []
    for row in rows:
        low, high = row["ci95"]
        table.append(
            {
                "key": row["key"],
                "benchmark": _cell(f"{row['benchmark']} {row['split']}".strip()),
                "mode": row["mode"],
                "n": row["n"],
                "sft": f"{percent(row['sft_ex'])}",
                "grpo": f"{percent(row['grpo_ex'])}",
                "delta": format_points(row["delta_ex"]),
                "ci": f"[{format_points(low)}, {format_points(high)}]",
                "p": format_p(row["mcnemar_p"]).removeprefix("p = "),
                "discordant": f"{row['a_only']} / {row['b_only']}",
                "verdict": _cell(row["verdict"]),
            }
        )
        sft_by, grpo_by = row["by_difficulty"]
        groups = [
            (name, sft_by.get(name, {}), grpo_by.get(name, {}))
            for name in sorted(set(sft_by) | set(grpo_by), key=_difficulty_key)
        ]
        sft_held, grpo_held = row["held_out"]
        if sft_held or grpo_held:
            db = sft_held.get("db_id") or grpo_held.get("db_id")
            groups.append((f"held-out database ({db})", sft_held, grpo_held))
            groups.append(("seen databases", *row["seen"]))
        for name, s, g in groups:
            difficulty.append(
                {
                    "key": row["key"],
                    "difficulty": _cell(name),
                    "n": s.get("n_scorable", s.get("n", g.get("n_scorable", g.get("n")))),
                    "sft": _group_ex(s),
                    "grpo": _group_ex(g),
                }
            )
    modes = []
    for row in rows:
        entry = next((m for m in modes if m["mode"] == row["mode"]), None)
        if entry is None:
            modes.append({"mode": row["mode"], "text": row["mode_text"], "benchmarks": [row["key"]]})
        else:
            entry["benchmarks"].append(row["key"])
    return {"results_table": table, "difficulty_table": difficulty, "modes": modes}


def _group_ex(group: Mapping[str, Any]) -> str:
    """``EX (correct)`` of a breakdown group; ``n/a`` when it is missing or nothing in it was scorable."""
    if not group or group.get("ex") is None:
        return "n/a"
    return f"{percent(group['ex'])} ({group['correct']})"


def _mechanism(run: RunFiles) -> dict[str, Any]:
    """Per attempt: data, steps, telemetry stats, adapter change; plus the attempts table rows."""
    attempts = []
    for attempt in run.attempts:
        stats = {key: telemetry_stats(attempt.records, key) for key, _, _ in MECHANISM_METRICS}
        checksum = attempt.summary.get("adapter_checksum") or {}
        update = attempt.summary.get("adapter_update") or {}
        attempts.append(
            {
                "label": attempt.label,
                "name": attempt.name,
                "number": attempt.number,
                "shipped": attempt.shipped,
                "data": _describe_data(run, attempt),
                "data_name": _describe_data(run, attempt, with_count=False),
                "steps": attempt.summary.get("steps"),
                "steps_logged": len(attempt.records),
                "stats": stats,
                "adapter_changed": checksum.get("changed"),
                "relative_update": update.get("relative_norm"),
                "wall_seconds": attempt.summary.get("wall_seconds"),
            }
        )
    header = [f"{a['label']}{' (this adapter)' if a['shipped'] else ''}" for a in attempts]
    rows = [
        ("prompts", [a["data"] for a in attempts]),
        ("steps (logged)", [f"{a['steps']} ({a['steps_logged']})" for a in attempts]),
    ]
    for key, label, decimals in MECHANISM_METRICS:
        if all(a["stats"][key] is None for a in attempts):
            continue
        cells = []
        for a in attempts:
            s = a["stats"][key]
            cells.append(
                "n/a"
                if s is None
                else f"{number(s['mean'], decimals)} "
                f"({number(s['first'], decimals)} → {number(s['last'], decimals)})"
            )
        rows.append((f"{label}: mean (first → last step)", cells))
    rows.append(
        (
            "adapter weights changed",
            [
                "yes" if a["adapter_changed"] else "n/a" if a["adapter_changed"] is None else "**no**"
                for a in attempts
            ],
        )
    )
    if any(a["relative_update"] is not None for a in attempts):
        rows.append(
            (
                "adapter update ‖ΔW‖ / ‖W‖",
                [scientific(a["relative_update"]) for a in attempts],
            )
        )
    rows.append(("wall time", [f"{number(a['wall_seconds'], 0)} s" for a in attempts]))
    disagree = any(
        a["stats"][EXACT_ZERO_STD_METRIC] is not None
        and a["stats"][TRL_ZERO_STD_METRIC] is not None
        and abs(a["stats"][EXACT_ZERO_STD_METRIC]["mean"] - a["stats"][TRL_ZERO_STD_METRIC]["mean"]) > 0.01
        for a in attempts
    )
    return {
        "attempts": attempts,
        "zero_std_disagree": disagree,
        "attempts_header": header,
        "attempts_rows": [
            {"label": _cell(label), "cells": [_cell(c) for c in cells]} for label, cells in rows
        ],
    }


def _filter_context(run: RunFiles) -> dict[str, Any] | None:
    report = run.filter_report
    if report is None:
        return None
    from .plots import band_bins

    k = int(report["num_samples"])
    bins = band_bins(k, float(report["pass_rate_low"]), float(report["pass_rate_high"]))
    dataset = report.get("dataset") or {}
    generation = report.get("generation") or {}
    return {
        "summary": report["summary"],
        "counts": report["counts"],
        "pool": report["pool"],
        "k": k,
        "low": report["pass_rate_low"],
        "high": report["pass_rate_high"],
        "band_bins": f"{bins[0]}–{bins[-1]}" if bins else "none",
        "mean_pass_rate": number(report.get("mean_pass_rate")),
        "split": dataset.get("split"),
        "benchmark": dataset.get("benchmark"),
        "temperature": generation.get("temperature"),
        "max_new_tokens": generation.get("max_new_tokens"),
        "compare_mode": (report.get("judging") or {}).get("compare_mode"),
        "excluded_sft": report.get("excluded_sft"),
        "sft_overlap": report.get("sft_overlap"),
    }


def _limits_context(run: RunFiles) -> dict[str, Any] | None:
    """The SQL limits the shipped GRPO run's reward judged under, and which stages recorded other ones."""
    recorded = {
        "filter": (run.filter_report or {}).get(LIMITS_KEY),
        "GRPO": run.shipped.summary.get(LIMITS_KEY),
        "eval": run.eval_results.get(LIMITS_KEY),
    }
    limits = recorded["GRPO"]
    if not limits:
        return None
    max_ops = limits.get("max_ops")
    return {
        "timeout_s": _yaml_scalar(limits.get("timeout_s")),
        "max_ops": "no" if max_ops is None else f"{max_ops:,}",
        "max_rows": f"{limits.get('max_rows'):,}",
        "max_result_mb": None if limits.get("max_result_bytes") is None else f"{limits['max_result_bytes'] / 2**20:g}",
        "same": [stage for stage, other in recorded.items() if other == limits],
        "differ": [stage for stage, other in recorded.items() if other and other != limits],
    }


def _tldr(rows: list[dict[str, Any]], mechanism: dict[str, Any]) -> dict[str, Any]:
    """The TL;DR's numbers (the template writes its sentences): the comparisons split by significance and the
    shipped attempt's zero-variance share (against attempt #1's), gradient norm and adapter change."""
    from .plots import METRIC_FALLBACKS

    numbers: dict[str, Any] = {
        "significant": [r for r in rows if r["significant"]],
        "others": [r for r in rows if not r["significant"]],
        "zero_pct": None,
    }
    shipped = next((a for a in mechanism["attempts"] if a["shipped"]), None)
    if shipped is None:
        return numbers
    zero = EXACT_ZERO_STD_METRIC
    if shipped["stats"][zero] is None:
        zero = METRIC_FALLBACKS[zero]  # a run from before the exact count: the plots' fallback, TRL's share
    if shipped["stats"][zero] is None:
        return numbers
    first = next((a for a in mechanism["attempts"] if a["number"] == 1 and not a["shipped"]), None)
    first_zero = first["stats"][zero] if first is not None else None
    grad = shipped["stats"]["grad_norm"]
    return {
        **numbers,
        "zero_pct": percent(shipped["stats"][zero]["mean"], 0),
        "data_name": shipped["data_name"],
        "first_pct": None if first_zero is None else percent(first_zero["mean"], 0),
        "first_data_name": first["data_name"] if first is not None else None,
        "grad_norm": None if grad is None else number(grad["mean"]),
        "adapter_changed": shipped["adapter_changed"],
        "relative_update": None if shipped["relative_update"] is None else scientific(shipped["relative_update"]),
    }


def _lineage(run: RunFiles, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The adapter's lineage, one item per step (``kind``: base, sft, grpo); the template writes the sentences."""
    items: list[dict[str, Any]] = [
        {
            **base,
            "kind": "base",
            "parameters": None if base.get("parameters") is None else f"{base['parameters']:,}",
            "final_loss": number(base.get("final_loss"), 4),
        }
    ]
    for name, stage_number in (("sft_stage1", 1), ("sft_stage2", 2)):
        stage = run.stages.get(name)
        if stage is None:
            continue
        s = stage.summary
        lora = s.get("lora") or {}
        items.append(
            {
                "kind": "sft",
                "stage": stage_number,
                "r": lora.get("r"),
                "alpha": lora.get("alpha"),
                "adapter_path": s.get("adapter_path"),
                "datasets": ", ".join(f"`{d}`" for d in s.get("datasets", [])),
                "trained_on": (s.get("data") or {}).get("trained_on"),
                "steps": s.get("steps"),
                "final_loss": number(s.get("final_loss"), 4),
            }
        )
    for attempt in run.attempts:
        items.append(
            {
                "kind": "grpo",
                "label": attempt.label,
                "adapter_path": attempt.summary.get("adapter_path"),
                "data": _describe_data(run, attempt),
                "steps": attempt.summary.get("steps"),
                "shipped": attempt.shipped,
            }
        )
    return items


def _training_context(run: RunFiles) -> dict[str, Any]:
    shipped = run.shipped
    config = shipped.config or shipped.summary.get("config") or {}
    hyper = [
        {"key": key, "value": _cell(_yaml_scalar(config[key]))}
        for key in GRPO_HYPERPARAMETERS
        if key in config
    ]
    adapter_config = {}
    if (shipped.folder / "adapter_config.json").is_file():
        adapter_config = read_json_object(shipped.folder / "adapter_config.json", "rerun `slmsql train grpo`")
    targets = adapter_config.get("target_modules") or config.get("lora_target_modules") or []
    if isinstance(targets, str):
        targets = [targets]
    lora = {
        "r": adapter_config.get("r", config.get("lora_r")),
        "alpha": adapter_config.get("lora_alpha", config.get("lora_alpha")),
        "dropout": adapter_config.get("lora_dropout", config.get("lora_dropout")),
        "targets": ", ".join(sorted({str(t).split(".")[-1] for t in targets})),
    }
    rewards = shipped.summary.get("rewards") or {}
    execution = rewards.get("execution") or {}
    funcs = list(rewards.get("funcs") or config.get("reward_funcs") or [])
    weights = list(rewards.get("weights") or config.get("reward_weights") or [1.0] * len(funcs))
    reward = {
        "funcs": funcs,
        "weights": ", ".join(f"{f} × {_yaml_scalar(w)}" for f, w in zip(funcs, weights)),
        "correct": _yaml_scalar(execution.get("correct", config.get("reward_correct"))),
        "executes": _yaml_scalar(execution.get("executes", config.get("reward_executes"))),
        "fails": _yaml_scalar(execution.get("fails", config.get("reward_fails"))),
        "format": _yaml_scalar(rewards.get("format", config.get("format_reward_value"))),
        "mode": rewards.get("compare_mode", config.get("reward_compare_mode")),
        "mode_text": COMPARE_MODES.get(
            str(rewards.get("compare_mode", config.get("reward_compare_mode"))), ""
        ),
        # runs from before `limits` was recorded; newer ones state their limits in their own row
        "timeout": _yaml_scalar(config["reward_timeout_s"]) if config.get("reward_timeout_s") is not None else None,
        "has_execution": "execution" in funcs,
        "has_format": "format" in funcs,
    }
    environment = shipped.summary.get("environment") or {}
    compute = {
        "processes": shipped.summary.get("processes"),
        "threads": shipped.summary.get("threads"),
        "train_seconds": number(shipped.summary.get("train_seconds"), 0),
        "wall_seconds": number(shipped.summary.get("wall_seconds"), 0),
        "device": "CPU" if config.get("use_cpu") else "the default device (GPU when present)",
        "environment": ", ".join(f"{k} {v}" for k, v in environment.items()),
    }
    parameters = shipped.summary.get("parameters") or {}
    prompt = shipped.summary.get("prompt") or {}
    generation = shipped.summary.get("generation") or {}
    return {
        "hyperparameters": hyper,
        "lora": lora,
        "reward": reward,
        "compute": compute,
        "prompt": prompt,
        "generation": generation,
        "parameters": {k: f"{v:,}" for k, v in parameters.items() if isinstance(v, int)},
    }


def _guards_context(run: RunFiles) -> list[dict[str, str]]:
    rows = []
    for attempt in run.attempts:
        for result in (attempt.summary.get("guards") or {}).get("results", []):
            rows.append(
                {
                    "attempt": attempt.label,
                    "name": _cell(result.get("name")),
                    "status": str(result.get("status", "")).upper(),
                    "message": _cell(result.get("message", "")),
                }
            )
    return rows


def _null_context(rows: list[dict[str, Any]]) -> list[str]:
    from .stats import format_points

    return [
        f"{r['key']}: between {format_points(r['ci95'][0])} and {format_points(r['ci95'][1])} points (n = {r['n']})"
        for r in rows
    ]


def _reproduce(run: RunFiles, options: CardOptions, configs: Mapping[str, str]) -> list[str]:
    """The exact commands, in order, from the world to this card (each stage's resolved config ships in
    ``configs/``)."""
    commands = []
    if run.world is not None:
        world_dir = None
        if "base" in run.stages:
            world_dir = run.stages["base"].summary.get("world_dir")
        world_dir = world_dir or (run.filter_report or {}).get("dataset", {}).get("data_root")
        world_dir = world_dir or str(run.recorded_root / "world")
        sizes = run.world.get("sizes") or {}
        flags = " ".join(
            f"--{split.replace('_', '-')} {sizes[split]}"
            for split in ("foundation", "grounding", "rl_pool", "dev", "test")
            if split in sizes
        )
        commands.append(
            f"slmsql world build --out {world_dir} --seed {run.world.get('seed')} {flags}".strip()
        )
    order = (
        ("base", "slmsql train base"),
        ("sft_stage1", "slmsql train sft"),
        ("sft_stage2", "slmsql train sft"),
        ("filter", "slmsql filter"),
        ("grpo_attempt1", "slmsql train grpo"),
        ("grpo", "slmsql train grpo"),
        ("eval", "slmsql eval"),
    )
    for name, command in order:
        if name in configs:
            commands.append(f"{command} --config {configs[name]}")
    card = f"slmsql card --run-dir {run.recorded_root}"
    if options.repo_id:
        card += f" --repo-id {options.repo_id}"
    commands.append(card)
    return commands


def _stage_configs(run: RunFiles) -> dict[str, Any]:
    """Each stage's resolved configuration (stage name -> mapping), for ``configs/``."""
    configs: dict[str, Any] = {}
    for name in ("base", "sft_stage1", "sft_stage2"):
        if name in run.stages and run.stages[name].config:
            configs[name] = run.stages[name].config
    if run.filter_config:
        configs["filter"] = run.filter_config
    for attempt in run.attempts:
        if attempt.config:
            configs[attempt.name] = attempt.config
    if isinstance(run.eval_results.get("config"), dict) and run.eval_results["config"]:
        configs["eval"] = run.eval_results["config"]
    return configs


def _citations(run: RunFiles) -> list[str]:
    from . import __version__

    created = str(run.eval_results.get("created_at") or "")
    year = created[:4] if created[:4].isdigit() else None
    url = _project_url()
    software = [
        "@software{slmsql_hub,",
        "  title   = {slmsql-hub: outcome-only GRPO for Text-to-SQL on the Hugging Face Hub},",
        "  author  = {{slmsql-hub developers}},",
        f"  version = {{{__version__}}},",
    ]
    if year:
        software.append(f"  year    = {{{year}}},")
    if url:
        software.append(f"  url     = {{{url}}},")
    software.append("}")
    entries = ["\n".join(software)]
    entries.append(
        "@article{shao2024deepseekmath,\n"
        "  title   = {DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models},\n"
        "  author  = {Shao, Zhihong and Wang, Peiyi and Zhu, Qihao and Xu, Runxin and Song, Junxiao and others},\n"
        "  journal = {arXiv preprint arXiv:2402.03300},\n"
        "  year    = {2024}\n"
        "}"
    )
    if run.filter_report is not None:
        entries.append(
            "@article{yu2025dapo,\n"
            "  title   = {DAPO: An Open-Source LLM Reinforcement Learning System at Scale},\n"
            "  author  = {Yu, Qiying and others},\n"
            "  journal = {arXiv preprint arXiv:2503.14476},\n"
            "  year    = {2025}\n"
            "}"
        )
    entries.append(
        "@misc{vonwerra2020trl,\n"
        "  title        = {TRL: Transformer Reinforcement Learning},\n"
        "  author       = {von Werra, Leandro and Belkada, Younes and Tunstall, Lewis and Beeching, Edward and others},\n"
        "  year         = {2020},\n"
        "  howpublished = {\\url{https://github.com/huggingface/trl}}\n"
        "}"
    )
    return entries


def _model_name(run: RunFiles, options: CardOptions) -> str:
    if options.model_name:
        return options.model_name
    if options.repo_id:
        return options.repo_id.split("/")[-1]
    return f"slmsql-{run.recorded_root.name or run.root.name}-grpo"


def eval_result_entries(run: RunFiles, repo_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """The ``.eval_results/<benchmark>.yaml`` contents: one entry per benchmark, the shipped (GRPO) adapter's EX
    in percent, in the Hub's format (built with ``huggingface_hub.EvalResultEntry``).

    Args:
        run: the run's files.
        repo_id: the model repo; gives each entry's ``source`` (the benchmark's predictions file in the repo).
            ``None`` leaves ``source`` out.

    Returns:
        File name (``<benchmark key>.yaml``) -> the YAML list to write.

    Example:

    ```python
    >>> from pathlib import Path, PurePosixPath
    >>> from slmsql_hub.card import RunFiles, eval_result_entries
    >>> comparison = {"n": 10, "delta_ex": 0.0, "significant": False, "mcnemar_p": 1.0, "ci95": [-0.1, 0.1],
    ...               "discordant": {"a_only": 1, "b_only": 1}, "verdict": "v", "summary": "s"}
    >>> benchmark = {"benchmark": "world", "split": "dev", "dataset_id": "slmsql/world", "mode": "bird", "n": 10,
    ...              "policies": {"sft": {"ex": 0.5}, "grpo": {"ex": 0.5}}, "comparison": comparison,
    ...              "predictions_file": "predictions/world_dev.jsonl"}
    >>> run = RunFiles(Path("run"), PurePosixPath("outputs/q"), {"created_at": "2026-12-02T16:40:00Z",
    ...                "benchmarks": {"world_dev": benchmark}}, [])
    >>> eval_result_entries(run, "me/model")["world_dev.yaml"][0]["dataset"]
    {'id': 'slmsql/world', 'task_id': 'dev'}

    ```
    """
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    files = {}
    created = run.eval_results.get("created_at")
    for row in _results(run):
        if not row["dataset_id"]:
            logger.warning("benchmark %s has no dataset_id: no .eval_results entry for it", row["key"])
            continue
        source_url = None
        if repo_id:
            path = f"eval/{row['predictions_file']}" if row["predictions_file"] else "eval/eval_results.json"
            source_url = f"https://huggingface.co/{repo_id}/blob/main/{path}"
        entry = EvalResultEntry(
            dataset_id=row["dataset_id"],
            task_id=str(
                run.eval_results["benchmarks"][row["key"]].get("task_id") or row["split"] or row["key"]
            ),
            value=float(percent(row["grpo_ex"])),
            date=created,
            source_url=source_url,
            source_name="slmsql eval: per-question predictions and verdicts" if source_url else None,
            notes=(
                f"execution accuracy (EX, %) of the GRPO adapter, {row['mode']} semantics, greedy decoding, "
                f"n = {row['n']}; SFT adapter {percent(row['sft_ex'])}; {row['summary']}"
            ),
        )
        files[f"{row['key']}.yaml"] = eval_result_entries_to_yaml([entry])
    return files


def card_data(run: RunFiles, options: CardOptions | None = None) -> ModelCardData:
    """The card's metadata: ``base_model`` (+ ``base_model_relation: adapter``), ``library_name: peft``,
    ``pipeline_tag``, tags (``negative-result`` when the outcome is null), datasets, license and the
    ``model-index`` with the GRPO adapter's EX per benchmark.

    Example:

    ```python
    >>> from slmsql_hub.card import card_data
    >>> callable(card_data)  # needs a run folder: see tests/test_card.py
    True

    ```
    """
    from huggingface_hub import EvalResult, ModelCardData

    options = options or CardOptions()
    rows = _results(run)
    outcome = is_significant_outcome(
        {"significant": r["significant"], "delta_ex": r["delta_ex"]} for r in rows
    )
    tags = list(BASE_TAGS) + ([NULL_TAG] if outcome == "null" else [])
    base = _base_info(run, options)
    datasets = []
    for item in [*(r["dataset_id"] for r in rows), *options.datasets]:
        if item and item not in datasets:
            datasets.append(item)
    source_url = f"https://huggingface.co/{options.repo_id}" if options.repo_id else None
    results = [
        EvalResult(
            task_type="text-generation",
            task_name="Text-to-SQL",
            dataset_type=r["dataset_id"],
            dataset_name=f"{r['benchmark']} {r['split']}".strip(),
            dataset_split=r["split"] or None,
            metric_type="execution_accuracy",
            metric_name=f"EX ({r['mode']}, %)",
            metric_value=float(percent(r["grpo_ex"])),
            source_name="Model card" if source_url else None,
            source_url=source_url,
        )
        for r in rows
        if r["dataset_id"]
    ]
    data = ModelCardData(
        base_model=base["hub_id"],
        datasets=datasets or None,
        eval_results=results or None,
        library_name="peft",
        license=options.license or project_license(),
        model_name=_model_name(run, options),
        pipeline_tag="text-generation",
        tags=tags,
    )
    if base["hub_id"]:
        data.base_model_relation = "adapter"
    return data


def card_context(
    run: RunFiles,
    options: CardOptions | None = None,
    plots: Iterable[str] = (),
    files: Sequence[str] = (),
    configs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every value the template renders, computed from the run's files.

    Args:
        run: the run's files.
        options: see :class:`CardOptions`.
        plots: the plot file stems drawn (``plots/<stem>.png``).
        files: the card folder's top-level entries (for the files table).
        configs: stage name -> the shipped config file (``configs/<stage>.yaml``) the commands run.

    Example:

    ```python
    >>> from slmsql_hub.card import card_context
    >>> callable(card_context)  # needs a run folder: see tests/test_card.py
    True

    ```
    """
    options = options or CardOptions()
    rows = _results(run)
    outcome = is_significant_outcome(
        {"significant": r["significant"], "delta_ex": r["delta_ex"]} for r in rows
    )
    mechanism = _mechanism(run)
    base = _base_info(run, options)
    shipped = run.shipped
    eval_config = run.eval_results.get("config") or {}
    max_new_tokens = eval_config.get("max_new_tokens") or shipped.config.get("max_completion_length")
    folder = options.card_path or str(run.root / CARD_DIR)
    if base["hub_id"]:
        base_load = f'"{base["hub_id"]}"'
    elif base["ships"]:
        # Not `from_pretrained(repo, subfolder="base")`: transformers then finds the adapter_config.json at the
        # repo's root and loads the base named there (a local path of the training machine) instead.
        base_load = 'f"{folder}/base"'
    else:
        base_load = f'"{base["recorded"]}"'
    prompt = shipped.summary.get("prompt") or {}
    first_row = rows[0]
    context = {
        "model_name": _model_name(run, options),
        "repo_id": options.repo_id,
        "outcome": outcome,
        "is_null": outcome == "null",
        "tldr": _tldr(rows, mechanism),
        "results": rows,
        **_results_context(rows),
        "rule": first_row.get("rule"),
        "resamples": first_row.get("resamples"),
        "bootstrap_seed": first_row.get("seed"),
        "null_bounds": _null_context(rows),
        **mechanism,
        "filter": _filter_context(run),
        "plots": {stem: f"{PLOTS_DIR}/{stem}.png" for stem in plots},
        "base": base,
        "lineage": _lineage(run, base),
        "training": _training_context(run),
        "limits": _limits_context(run),
        "guards": _guards_context(run),
        "failed_guards": [g for g in _guards_context(run) if g["status"] == "FAIL"],
        "max_new_tokens": max_new_tokens,
        "usage": {
            "folder": folder,
            "base_load": base_load,
            "sample_rows": prompt.get("sample_rows", 3),
            "max_value_chars": prompt.get("max_value_chars", 40),
            "max_new_tokens": max_new_tokens,
        },
        "benchmarks_text": ", ".join(f"{r['benchmark']} {r['split']}".strip() for r in rows),
        "world": run.world is not None or any(r["benchmark"] == "world" for r in rows),
        "commands": _reproduce(run, options, configs or {}),
        "files": [{"name": name, "description": FILE_DESCRIPTIONS.get(name, "")} for name in files],
        "citations": _citations(run),
        "project_url": _project_url(),
        "eval_created_at": run.eval_results.get("created_at"),
        "slmsql_hub_version": run.eval_results.get("slmsql_hub_version"),
    }
    return context


# ------------------------------------------------------------------------------------------------------------
# Rendering and assembling the folder
# ------------------------------------------------------------------------------------------------------------


def default_template_path() -> Path:
    """The card template: ``model_card/model_card.md`` of the clone, else the wheel's copy."""
    return card_templates.template_path(card_templates.MODEL_CARD)


def render_card(
    run: RunFiles,
    options: CardOptions | None = None,
    template_path: str | os.PathLike | None = None,
    **context_args: Any,
) -> ModelCard:
    """Render the card with ``ModelCard.from_template`` from the Jinja template.

    Args:
        run: the run's files.
        options: see :class:`CardOptions`.
        template_path: the template (default: :func:`default_template_path`).
        **context_args: ``plots``, ``files``, ``configs`` for :func:`card_context`.

    Returns:
        The ``huggingface_hub.ModelCard``.

    Raises:
        UsageError: the template is missing.
        ValueError: the template uses a variable the context does not define (it would render empty).

    Example:

    ```python
    >>> from slmsql_hub.card import render_card
    >>> callable(render_card)  # needs a run folder: see tests/test_card.py
    True

    ```
    """
    from huggingface_hub import ModelCard

    options = options or CardOptions()
    path = template_path if template_path else default_template_path()
    return card_templates.render(ModelCard, card_data(run, options), path, **card_context(run, options, **context_args))


@dataclass
class CardBuild:
    """What :func:`build_card` wrote.

    Args:
        folder: the card folder (the model repo folder).
        readme: its ``README.md``.
        plots: file stem -> PNG path.
        eval_results: the ``.eval_results/*.yaml`` files.
        outcome: ``null``, ``improved``, ``regressed`` or ``mixed``.
        files: every file in the folder, relative to it.
    """

    folder: Path
    readme: Path
    plots: dict[str, Path]
    eval_results: list[Path]
    outcome: str
    files: list[str]


def _check_replaceable(out: Path) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"--out {out} is a file; choose a folder for the card")
    foreign = sorted(p.name for p in out.iterdir() if p.name not in _CARD_ENTRIES)
    if foreign:
        raise UsageError(
            f"--out {out} holds files a card folder does not ({', '.join(foreign[:5])}); it is not replaced. "
            "Choose an empty or new folder (the card folder is separate from TRL's output folders)"
        )


def _check_not_a_stage(run: RunFiles, out: Path) -> None:
    """Refuse a card folder that is the run folder or one of its stage folders (TRL's output folders among them)."""
    stages = [run.root, *(a.folder for a in run.attempts), *(s.folder for s in run.stages.values())]
    stages += [run.root / name for name in ("eval", "filter", "world", "sft")]
    target = out.resolve()
    if any(target == folder.resolve() for folder in stages):
        raise UsageError(
            f"--out {out} is a folder of the run itself; the card folder must be separate (TRL rewrites README.md "
            f"in its output folders): use the default {run.root / CARD_DIR} or a new folder"
        )


def _copy_files(source: Path, names: Iterable[str], target: Path) -> list[str]:
    copied = []
    for name in names:
        if (source / name).is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)
            copied.append(name)
    return copied


def _write_yaml(path: Path, data: Any, header: str = "") -> None:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def build_card(
    run_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    options: CardOptions | None = None,
    template_path: str | os.PathLike | None = None,
) -> CardBuild:
    """Assemble the model repo folder of a run: card, plots, ``.eval_results``, adapter and run files.

    The folder is built next to ``out_dir`` and swapped in at the end, so a failure leaves the previous card
    intact; an existing ``out_dir`` is replaced only when it holds nothing but card files.

    Args:
        run_dir: the run folder.
        out_dir: the card folder (default ``<run_dir>/card``).
        options: see :class:`CardOptions`.
        template_path: the Jinja template (default ``model_card/model_card.md``).

    Returns:
        A :class:`CardBuild`.

    Raises:
        UsageError: the run lacks a file the card needs, or ``out_dir`` holds other files.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.card import build_card
    >>> build_card(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: no GRPO run in ...

    ```
    """
    from .plots import write_card_plots

    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else run.root / CARD_DIR
    options = options or CardOptions()
    if options.card_path is None:
        options = CardOptions(**{**options.__dict__, "card_path": str(out)})
    _check_not_a_stage(run, out)
    _check_replaceable(out)
    staging = out.with_name(f".{out.name}.building")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        shipped = run.shipped
        _copy_files(shipped.folder, ADAPTER_FILES, staging)
        if not (staging / "adapter_config.json").is_file():
            raise UsageError(
                f"{shipped.folder} has no adapter_config.json: the GRPO run did not save its adapter"
            )
        _copy_files(shipped.folder, RUN_FILES, staging)
        eval_dir = run.root / "eval"
        _copy_files(eval_dir, ["eval_results.json"], staging / "eval")
        for row in _results(run):
            if row["predictions_file"] and (eval_dir / row["predictions_file"]).is_file():
                target = staging / "eval" / row["predictions_file"]
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(eval_dir / row["predictions_file"], target)
        for attempt in run.attempts:
            if not attempt.shipped:
                _copy_files(attempt.folder, RUN_FILES, staging / attempt.name)
        if run.filter_report is not None:
            _copy_files(run.root / "filter", ["filter_report.json"], staging / "filter")
        base = _base_info(run, options)
        if base["ships"]:
            _copy_files(base["local"], BASE_FILES, staging / "base")
        header = (
            "# Resolved configuration of this run's stage, as it ran; rerun with --config on this file.\n"
        )
        configs = {}
        for name, config in _stage_configs(run).items():
            _write_yaml(staging / "configs" / f"{name}.yaml", config, header)
            configs[name] = f"configs/{name}.yaml"
        plots = write_card_plots(
            {
                f"{a.label}: {_describe_data(run, a, with_count=False).replace('`', '')}": a.records
                for a in run.attempts
            },
            run.filter_report,
            staging / PLOTS_DIR,
        )
        written = []
        for name, entries in eval_result_entries(run, options.repo_id).items():
            _write_yaml(staging / EVAL_RESULTS_DIR / name, entries)
            written.append(name)
        top = sorted({p.name for p in staging.iterdir()} | {"README.md"}, key=lambda n: (n != "README.md", n))
        card = render_card(run, options, template_path, plots=list(plots), files=top, configs=configs)
        card.save(staging / "README.md")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    outcome = (
        "null"
        if NULL_TAG in (card.data.tags or [])
        else is_significant_outcome(
            {"significant": r["significant"], "delta_ex": r["delta_ex"]} for r in _results(run)
        )
    )
    logger.info("model card: %s (%s; %d files)", out / "README.md", outcome, len(files))
    return CardBuild(
        folder=out,
        readme=out / "README.md",
        plots={stem: out / PLOTS_DIR / path.name for stem, path in plots.items()},
        eval_results=[out / EVAL_RESULTS_DIR / name for name in written],
        outcome=outcome,
        files=files,
    )
