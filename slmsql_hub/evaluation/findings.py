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
    return {
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
