"""``report.json``, ``report.md`` and the plots: every finished (variant, seed) folder under the output folder.

Holm's correction runs per slice across the variants (per-seed entries form one family, pooled entries
another). Seeds pool as extra pairs: each seed's answers against the same SFT answers, concatenated; a
question then counts once per seed, so a pooled CI is narrower than the questions alone warrant. The finding
paragraph is filled from computed claims only (:func:`~slmsql_hub.evaluation.findings.claims`), so every word of it follows from the table.
"""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any

from ..evaluation.findings import GROUPS, claims, slice_names
from ..evaluation.stats import ALPHA, holm
from ..render.templates import load_template
from ..run.files import read_jsonl, write_atomic
from ..run.layout import FOREST_PLOT, REPORT_JSON, REPORT_MD, TELEMETRY
from .evaluate import comparison_entry, in_group
from .grid import RESULT_FILE

logger = logging.getLogger(__name__)

TEMPLATE = "ablation_report.md"
CURVES_PLOT = "plots/sql_correct_rate.png"


def _slice_keys(entry: dict) -> list[tuple[str, str | None]]:
    return [(name, group) for name in slice_names([entry])
            for group in (None, *GROUPS) if group is None or group in entry["slices"][name]]  # fmt: skip


def _get(entry: dict, name: str, group: str | None) -> dict:
    return entry["slices"][name] if group is None else entry["slices"][name][group]


def add_holm(entries: list[dict]) -> None:
    """Set ``p_holm`` on every slice (and group) of ``entries``: Holm across the entries, per slice."""
    keys = {key for entry in entries for key in _slice_keys(entry)}
    for name, group in keys:
        holders = [_get(e, name, group) for e in entries if (name, group) in _slice_keys(e)]
        for holder, adjusted in zip(holders, holm([h["p"] for h in holders])):
            holder["p_holm"] = adjusted


def _pooled_slice(
    out: Path, runs: list[dict], name: str, group: str | None, held_out: str | None
) -> dict | None:
    sft = read_jsonl(out / "sft" / f"{name}.jsonl")
    a, b = [], []
    for run in runs:
        answers = read_jsonl(Path(run["folder"]) / "answers" / f"{name}.jsonl")
        for x, y in zip(sft, answers):
            if in_group(x["db_id"], held_out, group):
                a.append(x["correct"])
                b.append(y["correct"])
    if not a:
        return None
    return comparison_entry(a, b)


def pool_variants(out: Path, entries: list[dict], held_out: dict[str, str | None]) -> list[dict]:
    """One entry per variant: the seeds' pairs pooled per slice, mean ``relative_norm``."""
    pooled = []
    for name in dict.fromkeys(e["name"] for e in entries):
        runs = [e for e in entries if e["name"] == name]
        slices: dict[str, dict] = {}
        for slice_name, group in _slice_keys(runs[0]):
            value = _pooled_slice(out, runs, slice_name, group, held_out.get(slice_name))
            if value is None:
                continue
            if group is None:
                slices[slice_name] = {**value, **slices.get(slice_name, {})}
            else:
                slices.setdefault(slice_name, {})[group] = value
        norms = [
            r["adapter_update"]["relative_norm"]
            for r in runs
            if r["adapter_update"]["relative_norm"] is not None
        ]
        pooled.append({"name": name, "hypothesis": runs[0]["hypothesis"], "overrides": runs[0]["overrides"],
                       "seeds": [r["seed"] for r in runs], "slices": slices,
                       "adapter_update": {"relative_norm": sum(norms) / len(norms) if norms else None}})  # fmt: skip
    add_holm(pooled)
    return pooled


def collect(out: Path) -> list[dict]:
    """Every finished entry under ``out/runs`` (sorted by variant order of appearance, then seed)."""
    entries = []
    for path in sorted((out / "runs").glob(f"*/{RESULT_FILE}")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        entry["folder"] = str(path.parent)
        entries.append(entry)
    return entries


def write_report(
    out: str | Path, order: list[str] | None = None, config: dict | None = None
) -> dict[str, Any]:
    """Merge the finished folders into ``report.json``, ``report.md`` and ``plots/``; return the report.

    ``order`` lists variant names in the recipe's order (others follow, by name).
    """
    from ..render.plots import plot_curves, plot_forest
    from ..training.telemetry import read_telemetry

    out = Path(out)
    entries = collect(out)
    if not entries:
        raise FileNotFoundError(f"no finished (variant, seed) under {out / 'runs'}")
    rank = {name: i for i, name in enumerate(order or [])}
    entries.sort(key=lambda e: (rank.get(e["name"], len(rank)), e["name"], e["seed"]))
    add_holm(entries)
    band = json.loads((out / "band" / "band.json").read_text(encoding="utf-8"))
    held_out = {k: v for e in entries for k, v in (e.get("held_out_dbs") or {}).items()}
    pooled = pool_variants(out, entries, held_out)
    facts = claims(pooled)
    names = slice_names(entries)
    plot_forest(pooled, names, out / FOREST_PLOT)
    plot_curves({f"{e['name']} s{e['seed']}": read_telemetry(Path(e["folder"]) / "grpo" / TELEMETRY)
                 for e in entries}, "sql/correct_rate", out / CURVES_PLOT)  # fmt: skip
    report = {
        "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config": config,
        "band": {k: v for k, v in band.items() if not k.endswith("_ids")},
        "variants": [{k: v for k, v in e.items() if k != "folder"} for e in entries],
        "pooled": pooled,
        "controls": {"negative": facts["negative_control"], "positive": facts["positive_control"]},
        "plots": {"forest": FOREST_PLOT, "sql_correct_rate": CURVES_PLOT},
    }
    write_atomic(out / REPORT_JSON, json.dumps(report, indent=2) + "\n")
    write_atomic(out / REPORT_MD, render_markdown(report, facts, names))
    return report


def render_markdown(report: dict, facts: dict, names: list[str]) -> str:
    """``report.md`` from :data:`TEMPLATE`: the table, the plots, ``relative_norm``, the finding."""
    grouped = [n for n in names if any(g in p["slices"].get(n, {}) for p in report["pooled"] for g in GROUPS)]
    return load_template(TEMPLATE).render(
        report=report, facts=facts, slices=names, grouped=grouped, groups=GROUPS, alpha=ALPHA
    )
