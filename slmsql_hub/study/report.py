"""``report.json``, ``report.md`` and the plots: every finished (variant, seed) folder under the output folder.

Holm's correction runs per slice across the variants (per-seed entries form one family, pooled entries
another). The QUESTION is the unit of a pooled entry (:func:`~slmsql_hub.evaluation.stats.question_comparison`):
each question's GRPO correctness is averaged over the seeds against SFT's one answer, the p is a sign-flip
permutation test on those per-question differences and the CI a paired bootstrap over questions, so a second
seed adds evidence about the same questions, never new questions (``n`` counts questions). Each pooled slice
keeps its seeds' own entries (exact McNemar on that seed's pairs, Holm across the per-seed entries) as
``per_seed``; where ``sft/shapes.json`` gives each question's template family, ``ci_template`` is the CI with
whole families resampled. Pooled pass@k averages each question's pass@k over the seeds. The finding paragraph
is filled from computed claims only (:func:`~slmsql_hub.evaluation.findings.claims`), so every word of it
follows from the table.

Churn (:func:`churn_by_bucket`) splits each pooled slice's discordant answers into answers GRPO fixed and broke,
by the question's SFT pass rate in the filter's K samples (band.json's ``sft_pass_rates``; ``unknown`` off the
band): a gain that only fixes questions SFT already half-solved is sharpening, not new skill. Churn counts
ANSWERS, summed over the seeds (a question fixed by both seeds counts twice; ``n`` is questions x seeds): a
descriptive table, not a test. The diagnostics' entries (template families, divergence, SFT's support on the
held-out database) are :mod:`.diagnostics`'. A sharded grid's report is :func:`merge_shards` of its shards'
folders.
"""

from __future__ import annotations

import datetime
import json
import logging
from pathlib import Path
from typing import Any

from ..evaluation.findings import GROUPS, claims, slice_names
from ..evaluation.stats import ALPHA, holm, question_comparison
from ..render.templates import load_template
from ..run.files import read_jsonl, write_atomic
from ..run.layout import FOREST_PLOT, REPORT_JSON, REPORT_MD, TELEMETRY
from ..runtime import code_commit
from .diagnostics import DIAGNOSTICS_DIR, read_shapes, read_support, significant_families, variant_diagnostics
from .evaluate import in_group
from .grid import PASS_RATES, RESULT_FILE
from .sampled import PASSK_DIR, passk_entry, read_keys

logger = logging.getLogger(__name__)

TEMPLATE = "ablation_report.md"
_CURVES_PLOT = "plots/sql_correct_rate.png"
PASSK_PLOT = "plots/passk.png"


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


_PER_SEED_TEST = "McNemar exact"
_PER_SEED_KEYS = ("delta", "ci", "p", "p_holm", "n", "discordant")


def _per_seed(runs: list[dict], name: str, group: str | None) -> list[dict]:
    """Each run's own entry of the slice (its pairs, McNemar), as one row per seed."""
    rows = []
    for run in runs:
        entry = run["slices"].get(name)
        entry = entry if entry is None or group is None else entry.get(group)
        if entry is not None:
            kept = {k: entry[k] for k in _PER_SEED_KEYS if k in entry}
            rows.append({"seed": run["seed"], "test": _PER_SEED_TEST, **kept})
    return rows


def _pooled_comparison(sft: list[dict], seeds: list[list[dict]], clusters: list[str] | None = None) -> dict:
    """A pooled slice entry from SFT's answers and each seed's (same question order), the question the unit:
    ``{sft_ex, grpo_ex, delta, ci, p, n, seeds, test, unit, discordant, discordant_per_seed}`` (``discordant``
    summed over the seeds), with ``ci_template`` and ``templates`` when ``clusters`` names two or more."""
    grpo = [[y["correct"] for y in answers] for answers in seeds]
    clusters = clusters if clusters and len(set(clusters)) > 1 else None
    result = question_comparison([x["correct"] for x in sft], grpo, clusters=clusters)
    entry = {"sft_ex": result.ex_a, "grpo_ex": result.ex_b, "delta": result.delta, "ci": list(result.ci95),
             "p": result.p, "n": result.n, "seeds": result.seeds, "test": result.test, "unit": "question",
             "discordant": {key: sum(d[key] for d in result.discordant) for key in ("a_only", "b_only")},
             "discordant_per_seed": result.discordant}  # fmt: skip
    if result.ci_cluster is not None:
        entry.update(ci_template=list(result.ci_cluster), templates=len(set(clusters or ())))
    return entry


def _pooled_slice(
    out: Path, runs: list[dict], name: str, group: str | None, held_out: str | None,
    shapes: dict[str, str] | None,
) -> dict | None:
    sft = read_jsonl(out / "sft" / f"{name}.jsonl")
    keep = [in_group(x["db_id"], held_out, group) for x in sft]
    if not any(keep):
        return None
    seeds = [[y for y, k in zip(read_jsonl(Path(run["folder"]) / "answers" / f"{name}.jsonl"), keep) if k]
             for run in runs]  # fmt: skip
    sft = [x for x, k in zip(sft, keep) if k]
    clusters = [shapes.get(x["question_id"], "unparsed") for x in sft] if shapes and group is None else None
    return {**_pooled_comparison(sft, seeds, clusters), "per_seed": _per_seed(runs, name, group)}


BAND_SLICES = ("band_train", "band_heldout")
"""The slices whose questions the filter sampled (band.json's pass rates are theirs)."""
_BUCKETS = ("0", "(0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1)", "1", "unknown")
"""The SFT pass-rate buckets of the churn table, in order; ``unknown``: a question the filter did not sample."""


def pass_rate_bucket(rate: float | None) -> str:
    """The :data:`_BUCKETS` entry of an SFT pass rate (the filter's, over its K samples).

    Example:

    ```python
    >>> from slmsql_hub.study.report import pass_rate_bucket
    >>> [pass_rate_bucket(r) for r in (0.0, 0.125, 0.5, 0.875, 1.0, None)]
    ['0', '(0, 0.25)', '[0.5, 0.75)', '[0.75, 1)', '1', 'unknown']

    ```
    """
    if rate is None:
        return "unknown"
    if rate <= 0 or rate >= 1:
        return "0" if rate <= 0 else "1"
    return _BUCKETS[1 + min(3, int(rate * 4))]


def churn_by_bucket(sft: list[bool], grpo: list[bool], rates: list[float | None]) -> list[dict]:
    """Paired answers split by the question's SFT pass-rate bucket: per bucket present, ``n``, ``fixed`` (SFT
    wrong, GRPO right) and ``broken`` (SFT right, GRPO wrong), in :data:`_BUCKETS` order.

    Example:

    ```python
    >>> from slmsql_hub.study.report import churn_by_bucket
    >>> churn_by_bucket([False, True, True, False], [True, False, True, False], [0.1, 0.1, 0.9, None])
    [{'bucket': '(0, 0.25)', 'n': 2, 'fixed': 1, 'broken': 1}, {'bucket': '[0.75, 1)', 'n': 1, 'fixed': 0, 'broken': 0}, {'bucket': 'unknown', 'n': 1, 'fixed': 0, 'broken': 0}]

    ```
    """
    counts: dict[str, dict] = {}
    for a, b, rate in zip(sft, grpo, rates):
        bucket = pass_rate_bucket(rate)
        entry = counts.setdefault(bucket, {"bucket": bucket, "n": 0, "fixed": 0, "broken": 0})
        entry["n"] += 1
        entry["fixed"] += int(b and not a)
        entry["broken"] += int(a and not b)
    return [counts[b] for b in _BUCKETS if b in counts]


def _churn(out: Path, runs: list[dict], name: str, rates: dict[str, float]) -> list[dict]:
    """:func:`churn_by_bucket` of every seed's answers against SFT's, summed over the seeds (answers)."""
    sft = read_jsonl(out / "sft" / f"{name}.jsonl")
    a, b, r = [], [], []
    for run in runs:
        answers = read_jsonl(Path(run["folder"]) / "answers" / f"{name}.jsonl")
        for x, y in zip(sft, answers):
            a.append(x["correct"])
            b.append(y["correct"])
            r.append(rates.get(x["question_id"]))
    return churn_by_bucket(a, b, r)


def _pooled_passk(out: Path, runs: list[dict]) -> dict[str, list[dict]]:
    """Paired pass@k per sampled slice, each question's GRPO pass@k averaged over the seeds that sampled it
    (bootstrap over questions); every point records ``unit`` and ``seeds``."""
    sft_dir = out / "sft" / PASSK_DIR
    pooled: dict[str, list[dict]] = {}
    sampled = {name for run in runs for name in run.get("passk") or {}}  # the slices the runs sampled
    for path in sorted(sft_dir.glob("*.jsonl")) if sft_dir.is_dir() else []:
        if path.stem not in sampled:  # a slice an earlier recipe sampled
            continue
        theirs = [Path(run["folder"]) / PASSK_DIR / path.name for run in runs]
        theirs = [read_jsonl(p) for p in theirs if p.is_file()]
        if theirs:
            points = passk_entry({path.stem: read_jsonl(path)}, [{path.stem: rows} for rows in theirs])
            pooled.update({name: [{**p, "unit": "question", "seeds": len(theirs)} for p in value]
                           for name, value in points.items()})  # fmt: skip
    return pooled


def pool_variants(
    out: Path, entries: list[dict], held_out: dict[str, str | None], rates: dict[str, float] | None = None
) -> list[dict]:
    """One entry per variant: per slice the question-level :func:`_pooled_comparison` of its seeds (with their
    ``per_seed`` rows), mean ``relative_norm``, and ``churn`` (per slice, :func:`churn_by_bucket` of every seed's
    answers, summed, by the filter's SFT pass rate ``rates``)."""
    pooled = []
    shapes = read_shapes(out) or {}
    for name in dict.fromkeys(e["name"] for e in entries):
        runs = [e for e in entries if e["name"] == name]
        slices: dict[str, dict] = {}
        for slice_name, group in _slice_keys(runs[0]):
            value = _pooled_slice(
                out, runs, slice_name, group, held_out.get(slice_name), shapes.get(slice_name)
            )
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
        band_rates = rates or {}
        churn = {s: _churn(out, runs, s, band_rates if s in BAND_SLICES else {}) for s in slice_names(runs)}
        pooled.append({"name": name, "hypothesis": runs[0]["hypothesis"], "overrides": runs[0]["overrides"],
                       "seeds": [r["seed"] for r in runs], "slices": slices, "churn": churn,
                       "affected_prompts": [r.get("affected_prompts") for r in runs],
                       "drop_affected": bool(runs[0].get("drop_affected")),
                       "adapter_update": {"relative_norm": sum(norms) / len(norms) if norms else None}})  # fmt: skip
        passk = _pooled_passk(out, runs)
        if passk:
            pooled[-1]["passk"] = passk
            pooled[-1]["passk_keys"] = runs[0].get("passk_keys")
        pooled[-1].update(variant_diagnostics(out, runs))
    add_holm(pooled)
    return pooled


def collect(roots: list[Path]) -> list[dict]:
    """Every finished entry under each ``root/runs`` (sorted by run folder name, then root); one line when two
    roots hold the same (variant, seed)."""
    from ..errors import UsageError

    entries: dict[tuple[str, int], dict] = {}
    for root in roots:
        for path in sorted((root / "runs").glob(f"*/{RESULT_FILE}")):
            entry = json.loads(path.read_text(encoding="utf-8"))
            entry["folder"] = str(path.parent)
            key = (entry["name"], entry["seed"])
            if key in entries:
                raise UsageError(
                    f"{key[0]} seed {key[1]} is finished in both {entries[key]['folder']} and {path.parent}; "
                    "merge shards of one grid (each run in one shard)"
                )
            entries[key] = entry
    return list(entries.values())


def _band_identity(folder: Path) -> dict:
    """band.json without ``pool`` (whose paths name the folder it was prepared in)."""
    band = json.loads((folder / "band" / "band.json").read_text(encoding="utf-8"))
    return {k: v for k, v in band.items() if k != "pool"}


def merge_shards(
    shards: list[str | Path], out: str | Path, order: list[str] | None = None, config: dict | None = None
) -> dict[str, Any]:
    """The one report of a sharded grid (``slmsql ablate --merge``): check that every shard folder prepared the
    same band (its split's ids) and the same SFT answers, copy that band and those answers into ``out``, and
    write the report of every shard's finished runs there (as :func:`write_report`).

    Raises:
        UsageError: a folder that is no prepared shard, shards that disagree, a run finished in two shards.
    """
    import shutil

    from ..errors import UsageError

    folders = [Path(s) for s in dict.fromkeys(str(Path(s).resolve()) for s in shards)]
    for folder in folders:
        if not (folder / "band" / "band.json").is_file() or not (folder / "sft").is_dir():
            raise UsageError(f"{folder} is not a prepared shard folder (no band/band.json or sft/)")
    first = folders[0]
    band = _band_identity(first)
    answers = {p.name: p.read_bytes() for p in sorted((first / "sft").glob("*.jsonl"))}
    for folder in folders[1:]:
        if _band_identity(folder) != band:
            raise UsageError(f"{folder} and {first} prepared different bands; shards must share one band")
        theirs = {p.name: p.read_bytes() for p in sorted((folder / "sft").glob("*.jsonl"))}
        differ = sorted(name for name in set(answers) | set(theirs) if answers.get(name) != theirs.get(name))
        if differ:
            raise UsageError(
                f"{folder} and {first} hold different SFT answers ({', '.join(differ)}); shards must share them"
            )
    out = Path(out)
    if out.resolve() != first.resolve():
        for part in ("band", "sft"):
            if (out / part).exists():
                shutil.rmtree(out / part)
            shutil.copytree(first / part, out / part, ignore=shutil.ignore_patterns("band_train", "band_heldout"))
    return write_report(out, order, config, roots=folders)


def write_report(
    out: str | Path,
    order: list[str] | None = None,
    config: dict | None = None,
    roots: list[Path] | None = None,
) -> dict[str, Any]:
    """Merge the finished folders into ``report.json``, ``report.md`` and ``plots/``; return the report.

    ``order`` lists variant names in the recipe's order (others follow, by name); ``roots`` are the folders
    whose ``runs/`` hold the entries (default: ``out`` itself; :func:`merge_shards` gives the shards').
    """
    from ..render.plots import plot_curves, plot_forest, plot_passk
    from ..training.telemetry import read_telemetry

    out = Path(out)
    roots = roots or [out]
    entries = collect(roots)
    if not entries:
        where = ", ".join(str(root / "runs") for root in roots)
        raise FileNotFoundError(f"no finished (variant, seed) under {where}")
    rank = {name: i for i, name in enumerate(order or [])}
    entries.sort(key=lambda e: (rank.get(e["name"], len(rank)), e["name"], e["seed"]))
    add_holm(entries)
    band = json.loads((out / "band" / "band.json").read_text(encoding="utf-8"))
    held_out = {k: v for e in entries for k, v in (e.get("held_out_dbs") or {}).items()}
    pooled = pool_variants(out, entries, held_out, band.get(PASS_RATES))
    facts = claims(pooled)
    names = slice_names(entries)
    plot_forest(pooled, names, out / FOREST_PLOT)
    plot_curves({f"{e['name']} s{e['seed']}": read_telemetry(Path(e["folder"]) / "grpo" / TELEMETRY)
                 for e in entries}, "sql/correct_rate", out / _CURVES_PLOT)  # fmt: skip
    plots = {"forest": FOREST_PLOT, "sql_correct_rate": _CURVES_PLOT}
    curves: dict[str, dict] = {}
    for e in entries:
        for name, points in (e.get("passk") or {}).items():
            curves.setdefault(name, {})[f"{e['name']} s{e['seed']}"] = points
    if curves:
        plots["passk"] = str(plot_passk(curves, out / PASSK_PLOT).relative_to(out))
    report = {
        "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "code_commit": code_commit(),
        "config": config,
        "band": {k: v for k, v in band.items() if not k.endswith("_ids") and k != PASS_RATES},
        "variants": [{k: v for k, v in e.items() if k != "folder"} for e in entries],
        "pooled": pooled,
        "controls": {"negative": facts["negative_control"], "positive": facts["positive_control"]},
        "plots": plots,
    }
    support = read_support(out)
    if support:
        report["support"] = support
    diagnostic_keys = read_keys(out / "sft" / DIAGNOSTICS_DIR)
    if diagnostic_keys:
        report["diagnostic_keys"] = diagnostic_keys
    write_atomic(out / REPORT_JSON, json.dumps(report, indent=2) + "\n")
    write_atomic(out / REPORT_MD, _render_markdown(report, facts, names))
    return report


def _render_markdown(report: dict, facts: dict, names: list[str]) -> str:
    """``report.md`` from :data:`TEMPLATE`: the table, the plots, ``relative_norm``, the finding."""
    grouped = [n for n in names if any(g in p["slices"].get(n, {}) for p in report["pooled"] for g in GROUPS)]
    found = {c["bucket"] for p in report["pooled"] for rows in p.get("churn", {}).values() for c in rows}
    families, other_families = significant_families(report["pooled"], ALPHA)
    return load_template(TEMPLATE).render(
        report=report, facts=facts, slices=names, grouped=grouped, groups=GROUPS, alpha=ALPHA,
        buckets=[b for b in _BUCKETS if b in found], families=families, other_families=other_families,
    )  # fmt: skip
