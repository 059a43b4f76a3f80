"""From question records to the diagnosis: support and headroom per slice, statistics per error class, and the
ranked prediction. Pure functions of the records (:mod:`.sample`); the definitions are in the package docstring.

Example:

```python
>>> from slmsql_hub.diagnosis.analysis import slice_summary
>>> rows = [{"scorable": True, "greedy": 0, "n": 4, "c": 1, "maj": 0, "greedy_anatomy": {"kind": "wrong_literal"}},
...         {"scorable": True, "greedy": 1, "n": 4, "c": 4, "maj": 1, "greedy_anatomy": None}]
>>> s = slice_summary(rows)
>>> s["greedy_ex"], s["maj_at_k"], s["pass_at_k"][-1], s["all_pass"], s["mixed"], s["ceiling"]
(0.5, 0.5, {'k': 4, 'value': 1.0}, 0.5, 0.5, 1.0)

```
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ..evaluation.passk import pass_at_k_matrix
from ..sql.anatomy import ERROR_CLASSES, SPIDER_COMPONENT

Records = Sequence[Mapping[str, Any]]


def _mean(values: list) -> float | None:
    return sum(values) / len(values) if values else None


def slice_summary(records: Records) -> dict[str, Any]:
    """One slice: greedy EX, pass@k for k = 1, 2, 4, ... and K, maj@K, the shares all-fail / all-pass / mixed
    at K, the sharpening ceiling (pass@K: greedy EX can rise at most to it) and the greedy failures by class."""
    scored = [r for r in records if r["scorable"] and r["n"] > 0]
    most = min((r["n"] for r in scored), default=0)
    ks = sorted({k for k in (1, 2, 4, 8, 16, 32, 64) if k <= most} | ({most} if most else set()))
    matrix = pass_at_k_matrix([r["n"] for r in scored], [r["c"] for r in scored], ks) if ks else None
    passk = [{"k": k, "value": float(matrix[:, i].mean())} for i, k in enumerate(ks)] if scored else []
    greedy = [r["greedy"] for r in scored if r["greedy"] is not None]
    share = (lambda test: sum(map(test, scored)) / len(scored)) if scored else (lambda test: None)
    failures = Counter(r["greedy_anatomy"]["kind"] for r in scored if r.get("greedy_anatomy"))
    ceiling = passk[-1]["value"] if passk else None
    greedy_ex = _mean(greedy)
    return {
        "n": len(records),
        "n_scorable": len(scored),
        "greedy_ex": greedy_ex,
        "pass_at_k": passk,
        "maj_at_k": _mean([r["maj"] for r in scored if r["maj"] is not None]),
        "all_fail": share(lambda r: r["c"] == 0),
        "all_pass": share(lambda r: r["c"] == r["n"]),
        "mixed": share(lambda r: 0 < r["c"] < r["n"]),
        "ceiling": ceiling,
        "headroom": None if ceiling is None or greedy_ex is None else ceiling - greedy_ex,
        "greedy_failures": dict(failures.most_common()),
    }


def _signatures(record: Mapping[str, Any], kind: str) -> list[tuple]:
    shapes = [s["anatomy"] for s in record["samples"] if s.get("anatomy")]
    if record.get("greedy_anatomy"):
        shapes.append(record["greedy_anatomy"])
    return [(a["trigger"], a["output"]) for a in shapes if a["kind"] == kind]


def _modal(signatures: list[tuple]) -> tuple:
    """The commonest signature, the first seen among equals (Counter keeps insertion order)."""
    return Counter(signatures).most_common(1)[0][0]


def consistency(modal: Sequence[tuple]) -> float:
    """Does the same trigger give the same wrong output across questions: over the affected questions' commonest
    ``(trigger, output)`` pairs, the share whose output is their trigger's commonest output. A trigger met on one
    question only, or an output that names nothing (``None``, ``""``), is no rule and counts against it. Two rules
    kept everywhere (``>=`` -> ``>`` and ``<=`` -> ``<``) are as consistent as one.

    Example:

    ```python
    >>> from slmsql_hub.diagnosis.analysis import consistency
    >>> consistency([(">=", ">"), (">=", ">"), ("<=", "<"), ("<=", "<")])
    1.0
    >>> consistency([(">=", ">"), (">=", ">"), (">=", "<"), ("<=", "<")])   # one other output, one lone trigger
    0.5
    >>> consistency([("where", None), ("where", None)])
    0.0

    ```
    """
    by_trigger: dict[Any, Counter] = defaultdict(Counter)
    for trigger, output in modal:
        by_trigger[trigger][output] += 1
    kept = 0
    for outputs in by_trigger.values():
        output, count = outputs.most_common(1)[0]
        kept += count if count >= 2 and output not in (None, "") else 0
    return kept / len(modal) if modal else 0.0


def class_stats(
    slices: Mapping[str, Records], training: Records | None, min_consistency: float = 0.5
) -> list[dict[str, Any]]:
    """Per error class that occurs anywhere: questions affected (per evaluation slice and in training with
    0 < pass rate < 1), consistency and its commonest signature, support, where, the EX ceiling on the pooled
    evaluation slices, details, families, Spider's component, and whether it qualifies for the prediction."""
    evaluated = [r for records in slices.values() for r in records if r["scorable"] and r["n"] > 0]
    varied = [r for r in training or [] if r["scorable"] and 0 < r["c"] < r["n"]]
    stats = []
    for kind in ERROR_CLASSES:
        hit = [r for r in evaluated if _signatures(r, kind)]
        trained = [r for r in varied if _signatures(r, kind)]
        if not hit and not trained:
            continue
        modal = [_modal(_signatures(r, kind)) for r in [*hit, *trained]]
        top = Counter(modal).most_common(1)[0][0]
        fixable = [r for r in hit if r["greedy"] == 0 and r["c"] > 0]  # the pooled ceiling; per slice below
        details = Counter(s["anatomy"]["detail"] for r in hit for s in r["samples"]
                          if s.get("anatomy") and s["anatomy"]["kind"] == kind and s["anatomy"]["detail"])  # fmt: skip
        entry = {
            "class": kind,
            "spider_component": SPIDER_COMPONENT[kind],
            "affected": len(hit),
            "affected_by_slice": {name: sum(1 for r in records if r["scorable"] and _signatures(r, kind))
                                  for name, records in slices.items()},  # fmt: skip
            "training": len(trained),
            "where": _where(len(trained), len(hit)),
            "consistency": consistency(modal),
            "signature": {"trigger": top[0], "output": top[1]},
            "support": sum(1 for r in hit if r["c"] > 0) / len(hit) if hit else None,
            "ceiling": len(fixable) / len(evaluated) if evaluated else None,
            "ceiling_by_slice": {name: _ceiling(records, kind) for name, records in slices.items()},
            "details": {str(d): n for d, n in details.most_common()},
            "families": dict(Counter(r["family"] for r in hit).most_common()),
        }
        entry["reasons"] = _failed_conditions(entry, training is not None, min_consistency)
        entry["qualifies"] = not entry["reasons"]
        stats.append(entry)
    return stats


def _ceiling(records: Records, kind: str) -> float | None:
    """The share of a slice's scorable questions whose greedy answer is wrong, that ``kind`` affects, and that
    have a correct sample."""
    scored = [r for r in records if r["scorable"] and r["n"] > 0]
    fixable = [r for r in scored if r["greedy"] == 0 and r["c"] > 0 and _signatures(r, kind)]
    return len(fixable) / len(scored) if scored else None


def _where(training: int, evaluation: int) -> str:
    return {(True, True): "both", (True, False): "training", (False, True): "evaluation"}.get(
        (training > 0, evaluation > 0), "neither"
    )


def _failed_conditions(entry: Mapping[str, Any], have_training: bool, min_consistency: float) -> list[str]:
    """Why a class cannot be predicted fixable on held-out questions (empty: it qualifies)."""
    reasons = []
    if entry["affected"] == 0:
        reasons.append("it does not occur in the evaluation slices")
    elif not entry["support"]:
        reasons.append("it is out of support (no sample of an affected question is right)")
    if not have_training:
        reasons.append("no training band was given to show it in GRPO's data")
    elif entry["training"] == 0:
        reasons.append("it does not occur in the training band with 0 < pass rate < 1")
    if entry["consistency"] < min_consistency:
        reasons.append(f"it is not rule-like (consistency {entry['consistency']:.2f} < {min_consistency})")
    return reasons


def prediction(stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ranked list of classes GRPO could fix on held-out questions (largest EX ceiling first), or a plain
    sentence saying why nothing qualifies.

    Example:

    ```python
    >>> stats = [{"class": "wrong_literal", "affected": 9, "qualifies": False, "ceiling": 0.2,
    ...           "reasons": ["it is out of support (no sample of an affected question is right)"]}]
    >>> print(prediction(stats)["sentence"])
    GRPO on this data is unlikely to move EX here, because wrong_literal (9 questions): it is out of support (no sample of an affected question is right).

    ```
    """
    ranked = sorted((s for s in stats if s["qualifies"]), key=lambda s: (-s["ceiling"], -s["affected"]))
    if ranked:
        listed = "; ".join(f"{s['class']} (EX ceiling +{100 * s['ceiling']:.1f} points)" for s in ranked)
        sentence = f"GRPO could fix, on held-out questions: {listed}."
    else:
        common = sorted((s for s in stats if s["affected"]), key=lambda s: -s["affected"])[:3]
        why = "; ".join(f"{s['class']} ({s['affected']} questions): {', and '.join(s['reasons'])}" for s in common)
        sentence = "GRPO on this data is unlikely to move EX here, because " + (
            why or "no question of the evaluation slices is wrong in any sample"
        ) + "."
    return {
        "ranked": [{"class": s["class"], "ceiling": s["ceiling"], "ceiling_by_slice": s.get("ceiling_by_slice", {})}
                   for s in ranked],
        "sentence": sentence,
    }  # fmt: skip
