"""Did the diagnosis predict what the study measured? The validation table of issue #36.

``slmsql diagnose`` (:mod:`slmsql_hub.diagnosis`) predicts, from the SFT policy alone, which error classes GRPO
could fix on held-out questions, each with an EX ceiling per slice (``report.json``'s ``prediction.ranked``). A
study (``slmsql ablate``) measured what GRPO did, per variant, seeds pooled per question. This module scores the
one against the other, slice by slice, for every variant that learnt its band.

Definitions (each stated once, here, and written into ``validation.json``):

- **learnt** (:data:`LEARNT`): the variant's pooled ``band_train`` entry has ΔEX > 0 and raw p < 0.05 (before
  Holm). The entry is the study's own (:func:`~slmsql_hub.study.report.pool_variants`): each question's GRPO
  correctness averaged over the seeds against SFT's one answer, the sign-flip test on the per-question
  differences (:func:`~slmsql_hub.evaluation.stats.question_comparison`; with one seed, exact McNemar). A variant
  that did not learn is listed apart: the prediction does not apply to it.
- **predicted** (:data:`PREDICTED`): on a slice, ``up`` when the ranked classes' ceilings on that slice sum to
  more than 0, else ``none``; the ceiling is that sum, capped at the slice's sharpening headroom (pass@K −
  greedy EX: the classes may share questions, so the sum is an upper bound).
- **measured**: ``up`` / ``down`` when the pooled ΔEX is significant (the study's rule,
  :func:`~slmsql_hub.evaluation.stats.is_significant`: the 95% CI excludes 0 and p < 0.05) with that sign, else
  ``none``.
- **held** (:data:`HELD`): the measured direction is the predicted one and, when it is ``up``, the measured ΔEX
  is at most the ceiling. ``band_train`` is the learnt criterion, not a prediction; a study slice the diagnosis
  did not sample is shown as ``not diagnosed`` and not counted.

One table scores several studies, each against its own world's diagnosis (the grid and the transfer worlds
and a held-out world): a section per study and the counts in all. A study marked ``development`` holds data the
rule was revised on; the table also counts held of scored over the others alone (``test``). It records, per study,
the commit of the rule (the diagnosis report's ``rule_commit`` if it has one, else the commit that last changed
``slmsql_hub/diagnosis/analysis.py``) and, once, this scorer's. Outputs: ``validation.json`` and
``validation.md`` (``model_card/validation_report.md``), written atomically into a folder outside the inputs.

Example:

```python
>>> from slmsql_hub.study.validation import learnt
>>> learnt({"slices": {"band_train": {"delta": 0.2, "p": 0.01}}}), learnt({"slices": {"band_train": {"delta": 0.2, "p": 0.2}}})
(True, False)

```
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..evaluation.stats import ALPHA, is_significant
from ..render.templates import load_template
from ..run.files import last_commit, read_json_object, write_atomic
from ..run.guard import check_output, output_lock

logger = logging.getLogger(__name__)

VALIDATION_JSON, VALIDATION_MD, TEMPLATE = "validation.json", "validation.md", "validation_report.md"
TRAIN_SLICE = "band_train"
RULE_FILE = "slmsql_hub/diagnosis/analysis.py"
LEARNT = (
    f"{TRAIN_SLICE} greedy ΔEX > 0 with raw p < {ALPHA} (before Holm), seeds pooled per question "
    "(sign-flip test on per-question mean differences; exact McNemar with one seed)"
)
PREDICTED = (
    "up when the ranked classes' EX ceilings on the slice sum to more than 0, else none; ceiling: that sum, "
    "capped at the slice's headroom (pass@K - greedy EX)"
)
HELD = (
    "the measured direction (up / down: significant, the 95% CI excludes 0 and p < 0.05; else none) is the "
    "predicted one and, when up, the measured ΔEX is at most the ceiling"
)


def learnt(entry: dict) -> bool:
    """Whether a pooled variant entry learnt its band (:data:`LEARNT`)."""
    train = entry["slices"].get(TRAIN_SLICE)
    return train is not None and train["delta"] > 0 and train["p"] < ALPHA


def slice_prediction(diagnosis: dict, name: str) -> dict | None:
    """The prediction that applies to slice ``name`` (:data:`PREDICTED`): ``{direction, ceiling, classes}``
    (``classes``: the ranked classes with a ceiling > 0 there), ``None`` when the diagnosis has no such slice.

    Example:

    ```python
    >>> diagnosis = {"slices": {"s": {"headroom": 0.1}},
    ...              "prediction": {"ranked": [{"class": "a", "ceiling_by_slice": {"s": 0.04}},
    ...                                        {"class": "b", "ceiling_by_slice": {"s": 0.08}}]}}
    >>> slice_prediction(diagnosis, "s"), slice_prediction(diagnosis, "t")
    ({'direction': 'up', 'ceiling': 0.1, 'classes': ['a', 'b']}, None)

    ```
    """
    summary = diagnosis["slices"].get(name)
    if summary is None:
        return None
    ceilings = {r["class"]: r.get("ceiling_by_slice", {}).get(name) or 0.0 for r in diagnosis["prediction"]["ranked"]}
    classes = [c for c, value in ceilings.items() if value > 0]
    total = sum(ceilings[c] for c in classes)
    if summary.get("headroom") is not None:
        total = min(total, summary["headroom"])
    return {"direction": "up" if classes else "none", "ceiling": total, "classes": classes}


def measured_direction(entry: dict) -> str:
    """``up`` / ``down`` for a significant pooled ΔEX of that sign, else ``none``."""
    if not is_significant(tuple(entry["ci"]), entry["p"]):
        return "none"
    return "up" if entry["delta"] > 0 else "down"


def score_variant(diagnosis: dict, entry: dict) -> list[dict]:
    """One row per evaluation slice of a pooled variant entry (every slice but ``band_train``)."""
    rows = []
    for name, measured in entry["slices"].items():
        if name == TRAIN_SLICE:
            continue
        predicted = slice_prediction(diagnosis, name)
        row = {"slice": name, "predicted": predicted, "delta": measured["delta"], "ci": measured["ci"],
               "p": measured["p"], "n": measured["n"], "measured": measured_direction(measured)}  # fmt: skip
        if predicted is not None:
            direction_right = row["measured"] == predicted["direction"]
            row["held"] = direction_right and (row["measured"] != "up" or measured["delta"] <= predicted["ceiling"])
        rows.append(row)
    return rows


def score(diagnosis: dict, pooled: list[dict]) -> dict[str, Any]:
    """The table: ``variants`` (learnt, each with its ``rows``), ``not_learnt`` (with their band_train entry)
    and the count ``held`` of ``scored`` rows."""
    variants, apart = [], []
    for entry in pooled:
        train = entry["slices"].get(TRAIN_SLICE)
        kept = {"name": entry["name"], "seeds": entry["seeds"],
                "band_train": None if train is None else {k: train[k] for k in ("delta", "ci", "p", "n")}}  # fmt: skip
        if learnt(entry):
            variants.append({**kept, "rows": score_variant(diagnosis, entry)})
        else:
            apart.append(kept)
    scored = [row for v in variants for row in v["rows"] if "held" in row]
    return {"variants": variants, "not_learnt": apart, "held": sum(row["held"] for row in scored),
            "scored": len(scored)}  # fmt: skip


def ranked_classes(diagnosis: dict) -> list[dict]:
    """The diagnosis's ranked classes with what the issue checks of each: support, where, questions affected
    per slice and in training."""
    stats = {c["class"]: c for c in diagnosis.get("classes", [])}
    keys = ("support", "where", "training", "affected_by_slice", "consistency", "signature")
    return [{**r, **{k: stats.get(r["class"], {}).get(k) for k in keys}} for r in diagnosis["prediction"]["ranked"]]


def _check_report(diagnosis: str | Path) -> Path:
    report = Path(diagnosis).expanduser()
    report = report / "report.json" if report.is_dir() else report
    content = read_json_object(report, "run slmsql diagnose first (it writes report.json)")
    prediction = content.get("prediction")
    if not isinstance(prediction, dict) or "ranked" not in prediction or "slices" not in content:
        raise UsageError(f"{report} is not a diagnosis report (no prediction.ranked or slices)")
    return report


def _check_study(study: str | Path) -> Path:
    folder = Path(study).expanduser()
    if folder.is_file():
        if folder.suffix != ".json":
            raise UsageError(f"{folder}: name a study folder (runs/, sft/) or its report.json")
    elif not (folder / "runs").is_dir() or not (folder / "sft").is_dir():
        raise UsageError(
            f"{folder} is no study folder (no runs/ or sft/): name slmsql ablate's output folder"
        )
    return folder


def check_inputs(
    pairs: Sequence[tuple[str | Path, str | Path]],
    output_dir: str | Path,
    development: Sequence[str | Path] = (),
) -> tuple[list[tuple[Path, Path]], Path, set[Path]]:
    """``(pairs, out, development)`` after the checks that need no loading: each pair is a diagnosis
    ``report.json`` (or its folder) holding a prediction and the study it is scored against (a folder with
    ``runs/`` and ``sft/``, or a study ``report.json`` with ``pooled`` entries); ``development`` names studies
    among them; ``output_dir`` is outside every input. UsageError (one line) otherwise."""
    if not pairs:
        raise UsageError("--validate needs at least one study and its diagnosis")
    checked = [(_check_report(diagnosis), _check_study(study)) for diagnosis, study in pairs]
    studies = {study.resolve() for _, study in checked}
    if len(studies) < len(checked):
        raise UsageError("--validate names a study twice: score each study once, against one diagnosis")
    marked = {Path(d).expanduser().resolve() for d in development}
    if not marked <= studies:
        raise UsageError(
            f"--development {sorted(str(m) for m in marked - studies)[0]} is not one of the --validate studies"
        )
    out = check_output(output_dir, [path for pair in checked for path in pair], "--validation-dir")
    return checked, out, marked


def read_pooled(study: Path) -> tuple[list[dict], list[str]]:
    """The study's pooled variant entries and its finished runs (``name sSEED``): a study ``report.json``'s
    ``pooled``, or a study folder's finished runs pooled as its report pools them."""
    from .report import collect, pool_variants

    if study.is_file():
        content = read_json_object(study, "name a study folder (runs/, sft/) or its report.json")
        if "pooled" not in content:
            raise UsageError(f"{study} is not a study report (no pooled entries)")
        return content["pooled"], [f"{v['name']} s{v['seed']}" for v in content.get("variants", [])]
    entries = sorted(collect([study]), key=lambda e: (e["name"], e["seed"]))
    if not entries:
        raise UsageError(f"no finished run under {study / 'runs'}: nothing to validate against")
    held_out = {k: v for e in entries for k, v in (e.get("held_out_dbs") or {}).items()}
    return pool_variants(study, entries, held_out), [f"{e['name']} s{e['seed']}" for e in entries]


def _scored_study(report_path: Path, study_path: Path, development: bool) -> dict[str, Any]:
    report = json.loads(report_path.read_text(encoding="utf-8"))
    pooled, runs = read_pooled(study_path)
    return {
        "study": str(study_path),
        "diagnosis": str(report_path),
        "role": "development" if development else "test",
        "runs": runs,
        "rule_commit": report.get("rule_commit") or last_commit(RULE_FILE),
        "prediction": {"sentence": report["prediction"]["sentence"], "ranked": ranked_classes(report)},
        **score(report, pooled),
    }


def validate(
    pairs: Sequence[tuple[str | Path, str | Path]],
    output_dir: str | Path,
    development: Sequence[str | Path] = (),
) -> dict[str, Any]:
    """Score each ``(diagnosis, study)`` pair and write one ``validation.json`` and ``validation.md`` into
    ``output_dir`` (module docstring): a section per study and the counts held of scored, in all and for the
    studies that are not ``development`` data of the rule (``test``). Returns the table."""
    checked, out, marked = check_inputs(pairs, output_dir, development)
    with output_lock(out):
        return _write_table(checked, out, marked)


def _write_table(checked: list[tuple[Path, Path]], out: Path, marked: set[Path]) -> dict[str, Any]:
    studies = [_scored_study(report, study, study.resolve() in marked) for report, study in checked]
    tests = [s for s in studies if s["role"] == "test"]
    table = {
        "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "rule_commits": sorted({s["rule_commit"] or "unknown" for s in studies}),
        "scorer_commit": last_commit(__file__),
        "definitions": {"learnt": LEARNT, "predicted": PREDICTED, "held": HELD},
        "studies": studies,
        "held": sum(s["held"] for s in studies),
        "scored": sum(s["scored"] for s in studies),
        "test_held": sum(s["held"] for s in tests),
        "test_scored": sum(s["scored"] for s in tests),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / VALIDATION_JSON, json.dumps(table, indent=2) + "\n")
    write_atomic(out / VALIDATION_MD, load_template(TEMPLATE).render(table=table))
    logger.info("validation: held %d of %d; %s", table["held"], table["scored"], out / VALIDATION_MD)
    return table
