"""What a finding may say about a table of pooled paired comparisons (the ablation study's ``report.json``):
:func:`claims` computes the facts (which variants learnt the training band, generalised, moved other slices;
whether the controls held) from Holm-adjusted p-values, so every word of a finding follows from the table.
``slmsql ablate`` writes the table; the report and the model card's "Ablations" section both state its claims.
:func:`transfer_claims` and :func:`render_finding` do the same for a transfer report across worlds (``slmsql ablate
--combine``, :mod:`slmsql_hub.study.transfer`): the study writes it, the card and the Space read it here."""

from __future__ import annotations

from typing import Any

from .stats import ALPHA

SLICES = ("band_train", "band_heldout", "world_dev", "world_test")
"""The world study's slices, in report order (the transfer slices are the recipe's ``transfer`` keys)."""

GROUPS = ("seen_dbs", "held_out_db")
"""The breakdown of the world slices: the databases GRPO trained on, and the world's held-out database."""

_TRANSFER_FINDING = "transfer_finding.md"  # under model_card/
KIND = "transfer"
"""A transfer report's ``report.json`` ``kind`` (``slmsql ablate --combine``): what tells it from a world's
ablation report."""
PROBES = ("world_probe_same", "world_probe_cross", "world_probe_control")
"""A planted world's probe slices in a transfer report."""


def slice_names(entries: list[dict]) -> list[str]:
    """The slices of ``entries`` in report order: :data:`SLICES` first, then any other transfer slice."""
    found = list(dict.fromkeys(name for e in entries for name in e["slices"]))
    return [n for n in SLICES if n in found] + [n for n in found if n not in SLICES]


def _significant(entry: dict, positive: bool) -> bool:
    return entry["p_holm"] < ALPHA and (entry["delta"] > 0 if positive else entry["delta"] != 0)


_OLD_TEST = (
    "exact McNemar test on the pairs, seeds pooled as extra pairs (a report from before the question became the unit)"
)
"""What a pooled entry without a ``test`` field was tested with."""


def _tested_with(pooled: list[dict]) -> str:
    """The test behind the pooled entries' raw p: their ``test`` field, :data:`_OLD_TEST` for an older report.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.findings import _tested_with
    >>> _tested_with([{"slices": {"band_train": {"p": 0.5, "test": "sign-flip permutation"}}}])
    'sign-flip permutation'

    ```
    """
    names = {e.get("test", _OLD_TEST) for row in pooled for e in row["slices"].values()}
    return " / ".join(sorted(names)) or _OLD_TEST


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
        "test": _tested_with(pooled),
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


def _moved(row: dict, name: str) -> str | None:
    """``rose``, ``fell`` or ``held`` (no significant move) on slice ``name``; ``None`` when the row lacks it."""
    entry = row["slices"].get(name)
    if entry is None:
        return None
    if entry["p_holm"] < ALPHA and entry["delta"] != 0:
        return "rose" if entry["delta"] > 0 else "fell"
    return "held"


def role(row: dict, plant: dict | None) -> str:
    """``frozen``, ``random_reward`` (controls by their overrides), else the world's: ``main`` (planted at a rate
    below 1), ``support_negative`` (planted at rate 1) or ``natural``.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.findings import role
    >>> plant = {"name": "comparison_inclusive", "rate": 0.7}
    >>> [role({"name": n, "overrides": o}, plant) for n, o in
    ...  [("a", {}), ("b", {"reward_funcs": ["random"]}), ("frozen", {"learning_rate": 0.0})]]
    ['main', 'random_reward', 'frozen']
    >>> role({"name": "a", "overrides": {}}, {"rate": 1.0}), role({"name": "a", "overrides": {}}, None)
    ('support_negative', 'natural')

    ```
    """
    overrides = row.get("overrides") or {}
    if row["name"] == "frozen" or overrides.get("learning_rate") == 0:
        return "frozen"
    if "random" in (overrides.get("reward_funcs") or []):
        return "random_reward"
    if not plant:
        return "natural"
    return "main" if float(plant["rate"]) < 1 else "support_negative"


def transfer_claims(rows: list[dict], plants: dict[str, dict | None]) -> dict[str, Any]:
    """The finding's facts from the cross-world rows (``plants``: world -> its plant record, ``None``: natural).

    ``main`` / ``support_negative`` / ``random_reward``: the rows of that role with their probe verdicts
    (``same``, ``cross``, ``control``, ``band_train``: rose / fell / held / ``None``); ``transferred``: the main
    rows that transferred; ``main_transferred`` / ``support_negative_held`` / ``random_reward_held``: ``None``
    when the study has no such row (or, for the main arm, no probe); ``negative_control`` and
    ``positive_control`` as :func:`claims` across every row.
    """
    verdicts: dict[str, list[dict]] = {}
    for row in rows:
        entry = {"row": row, "same": _moved(row, PROBES[0]), "cross": _moved(row, PROBES[1]),
                 "control": _moved(row, PROBES[2]), "band_train": _moved(row, "band_train")}  # fmt: skip
        verdicts.setdefault(role(row, plants.get(row["world"])), []).append(entry)
    main = [v for v in verdicts.get("main", []) if v["same"] is not None and v["cross"] is not None]
    transferred = [v for v in main if v["same"] == v["cross"] == "rose" and v["control"] != "fell"]
    negative = verdicts.get("support_negative", [])
    random = verdicts.get("random_reward", [])
    base = claims(rows)
    return {
        "conditions": _varied_conditions(verdicts, plants),
        "test": _tested_with(rows),
        "main": main,
        "transferred": transferred,
        "main_transferred": bool(transferred) if main else None,
        "support_negative": negative,
        "support_negative_held": all("rose" not in (v["same"], v["cross"]) for v in negative)
        if negative
        else None,
        "random_reward": random,
        "random_reward_held": all("rose" not in (v["band_train"], v["same"], v["cross"]) for v in random)
        if random
        else None,
        "negative_control": base["negative_control"],
        "frozen": base["frozen"],
        "positive_control": base["positive_control"],
        "learnt": base["learnt"],
    }


_REWARD_KEYS = frozenset({"reward_funcs", "reward_weights"})
"""Override keys that name one condition together (the reward), so an arm that swaps them varies one thing."""


def _condition(keys: set[str]) -> str | None:
    """The one condition a set of differing override keys varies (``None``: none, or more than one)."""
    if keys and keys <= _REWARD_KEYS:
        return "reward"
    return next(iter(keys)) if len(keys) == 1 else None


def _settings(row: dict) -> dict:
    """What a row varied: its overrides, and ``drop_affected`` (its training data without the prompts the plant
    affects) as one more setting, ``False`` where a report predates it."""
    return {**(row.get("overrides") or {}), "drop_affected": bool(row.get("drop_affected"))}


def _reference(main: list[dict]) -> dict | None:
    """The main arm's reference row: the main-role row that changes the fewest settings (recipe order breaks
    ties)."""
    return min(main, key=lambda v: len(v["row"].get("overrides") or {}) + bool(v["row"].get("drop_affected")),
               default=None)  # fmt: skip


def _varied_conditions(verdicts: dict[str, list[dict]], plants: dict[str, dict | None]) -> list[dict]:
    """What the study's arms varied, each against the main arm's reference row (:func:`_reference`): one entry
    per condition, ``{"condition", "reference", "arms": [{"label", "value", "verdict"}, ...]}``, the reference
    first. An arm counts only when it differs from the reference in exactly one condition: one override key
    (the reward's keys as one) or ``drop_affected`` (:func:`_settings`), or, at the same settings, the world's
    plant (``plant rate``; ``nothing planted`` for the natural world). A finding may state a condition only when
    an entry here varied it.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.findings import _varied_conditions
    >>> row = lambda label, world, o: {"row": {"label": label, "world": world, "overrides": o}}
    >>> verdicts = {"main": [row("p/a", "p", {"learning_rate": 2e-4}), row("p/b", "p", {"learning_rate": 1e-5}),
    ...                      row("p/c", "p", {"learning_rate": 2e-4, "max_train_samples": 16, "beta": 0.1})],
    ...             "support_negative": [row("q/a", "q", {"learning_rate": 2e-4})]}
    >>> [(c["condition"], [a["value"] for a in c["arms"]]) for c in
    ...  _varied_conditions(verdicts, {"p": {"rate": 0.7}, "q": {"rate": 1.0}})]
    [('learning_rate', [0.0002, 1e-05]), ('plant rate', [0.7, 1.0])]

    ```
    """
    reference = _reference(verdicts.get("main", []))
    if reference is None:
        return []
    ref_row = reference["row"]
    ref_over = _settings(ref_row)
    found: dict[str, dict] = {}
    for entry in (v for group in verdicts.values() for v in group):
        row = entry["row"]
        over = _settings(row)
        if row is ref_row:
            continue
        if row["world"] != ref_row["world"]:
            if over != ref_over:
                continue
            plant = plants.get(row["world"])
            name, value = "plant rate", (plant or {}).get("rate", "nothing planted")
            ref_value = (plants.get(ref_row["world"]) or {}).get("rate")
        else:
            name = _condition({k for k in set(over) | set(ref_over) if over.get(k) != ref_over.get(k)})
            if name is None:
                continue
            keys = sorted(_REWARD_KEYS) if name == "reward" else [name]
            value = over.get(keys[0]) if len(keys) == 1 else over.get("reward_funcs", "default")
            ref_value = ref_over.get(keys[0]) if len(keys) == 1 else ref_over.get("reward_funcs", "default")
        condition = found.setdefault(name, {"condition": name, "reference": ref_row["label"], "arms": [
            {"label": ref_row["label"], "value": ref_value, "verdict": reference}]})  # fmt: skip
        condition["arms"].append({"label": row["label"], "value": value, "verdict": entry})
    return list(found.values())


def render_finding(report: dict) -> str:
    """The finding paragraph (markdown, ``model_card/transfer_finding.md``) of a transfer ``report.json``."""
    from ..render.templates import load_template

    plants = {name: world["plant"] for name, world in report["worlds"].items()}
    facts = transfer_claims(report["rows"], plants)
    return load_template(_TRANSFER_FINDING).render(report=report, facts=facts, alpha=ALPHA, probes=PROBES)
