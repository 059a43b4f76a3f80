"""What a finding may say about a table of pooled paired comparisons (the ablation study's ``report.json``):
:func:`claims` computes the facts (which variants learnt the training band, generalised, moved other slices;
whether the controls held) from Holm-adjusted p-values, so every word of a finding follows from the table.
``slmsql ablate`` writes the table; the report and the model card's "Ablations" section both state its claims."""

from __future__ import annotations

from typing import Any

from .stats import ALPHA

SLICES = ("band_train", "band_heldout", "world_dev", "world_test")
"""The world study's slices, in report order (the transfer slices are the recipe's ``transfer`` keys)."""

GROUPS = ("seen_dbs", "held_out_db")
"""The breakdown of the world slices: the databases GRPO trained on, and the world's held-out database."""


def slice_names(entries: list[dict]) -> list[str]:
    """The slices of ``entries`` in report order: :data:`SLICES` first, then any other transfer slice."""
    found = list(dict.fromkeys(name for e in entries for name in e["slices"]))
    return [n for n in SLICES if n in found] + [n for n in found if n not in SLICES]


def _significant(entry: dict, positive: bool) -> bool:
    return entry["p_holm"] < ALPHA and (entry["delta"] > 0 if positive else entry["delta"] != 0)


OLD_TEST = (
    "exact McNemar test on the pairs, seeds pooled as extra pairs (a report from before the question became the unit)"
)
"""What a pooled entry without a ``test`` field was tested with."""


def tested_with(pooled: list[dict]) -> str:
    """The test behind the pooled entries' raw p: their ``test`` field, :data:`OLD_TEST` for an older report.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.findings import tested_with
    >>> tested_with([{"slices": {"band_train": {"p": 0.5, "test": "sign-flip permutation"}}}])
    'sign-flip permutation'

    ```
    """
    names = {e.get("test", OLD_TEST) for row in pooled for e in row["slices"].values()}
    return " / ".join(sorted(names)) or OLD_TEST


def claims(pooled: list[dict]) -> dict[str, Any]:
    """The finding's facts, computed from the pooled table: which variants learnt band_train, generalised to
    band_heldout, moved dev/test; whether the two controls held."""
    learnt = [
        p for p in pooled if "band_train" in p["slices"] and _significant(p["slices"]["band_train"], True)
    ]
    frozen = next((p for p in pooled if p["name"] == "frozen"), None)
    moved = {
        name: [p for p in pooled if name in p["slices"] and _significant(p["slices"][name], False)]
        for name in slice_names(pooled)
        if name != "band_train"
    }
    others = [name for name in slice_names(pooled) if name != "band_train"]
    return {
        "test": tested_with(pooled),
        "raw_only": {
            name: [p for p in pooled if name in p["slices"] and p not in moved[name] and p["slices"][name]["p"] < ALPHA]
            for name in others
        },
        "smallest_p": {name: min((p["slices"][name]["p"] for p in pooled if name in p["slices"]), default=1.0)
                       for name in others},  # fmt: skip
        "learnt": learnt,
        "generalised": [
            p
            for p in learnt
            if "band_heldout" in p["slices"] and _significant(p["slices"]["band_heldout"], True)
        ],  # fmt: skip
        "moved": moved,
        "frozen": frozen,
        "negative_control": None
        if frozen is None
        else (
            all(
                s["delta"] == 0 and all(s.get(g, {"delta": 0})["delta"] == 0 for g in GROUPS)
                for s in frozen["slices"].values()
            )
            and frozen["adapter_update"]["relative_norm"] == 0
            and all(p["delta"] == 0 for points in frozen.get("passk", {}).values() for p in points)
        ),  # fmt: skip
        "positive_control": bool(learnt),
        "n_variants": len(pooled),
    }
