"""The study's band: an enlarged pool, its pass-rate filter, and the seeded-hash train / held-out split.

The quickstart filters the world's 400-question ``rl_pool`` into a band of ~70, too few for a held-out half
that can show an effect. The study instead builds a second world in its own folder (same seed and databases,
a larger ``rl_pool``), leaves out every question of the run world's dev and test (by key, by question
text, and by meaning: database and normalised gold, :func:`~slmsql_hub.sql.shape.meaning_key`, so a
paraphrase of a dev question is left out too), and runs the quickstart's filter on it; the filter itself
leaves out what the SFT adapter trained on.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..run.guard import save_dataset
from ..run.layout import WORLD_MANIFEST

logger = logging.getLogger(__name__)

POOL_SPLIT = "study_pool"
"""The split the study writes into its pool world: ``rl_pool`` less the run world's dev and test."""

_LEAVE_OUT_RULES: tuple[str, ...] = ("key", "text", "meaning")
"""The rules :func:`left_out_by` applies, in order: the same question and gold (``question_key``), the same
question text on the same database, the same :func:`~slmsql_hub.sql.shape.meaning_key`."""

_POOL_DISJOINT = "meaning"
"""``pool.json``'s ``disjoint``: a pool folder written without it (text and key only) is rebuilt."""


@dataclass(frozen=True)
class BandSplit:
    """The band and its two halves (rows as the filter saved them), plus where they came from."""

    train: list[dict]
    heldout: list[dict]
    source: str
    seed: int

    def record(self) -> dict[str, Any]:
        """What ``report.json`` says about the band under ``band``."""
        return {
            "source": self.source,
            "seed": self.seed,
            "rule": "band_heldout when int(sha256(f'{seed}:{question_id}')[:8], 16) / 2**32 < heldout_share",
            "band": len(self.train) + len(self.heldout),
            "band_train": len(self.train),
            "band_heldout": len(self.heldout),
            "band_train_ids": [row["question_id"] for row in self.train],
            "band_heldout_ids": [row["question_id"] for row in self.heldout],
        }


def _heldout_fraction(seed: int, question_id: str) -> float:
    """A question's place in [0, 1), from a seeded hash of its id (stable across runs, machines and order).

    Example:

    ```python
    >>> from slmsql_hub.study.band import _heldout_fraction
    >>> _heldout_fraction(0, "world-rl_pool-00001") == _heldout_fraction(0, "world-rl_pool-00001")
    True
    >>> 0.0 <= _heldout_fraction(1, "q") < 1.0
    True

    ```
    """
    digest = hashlib.sha256(f"{seed}:{question_id}".encode()).hexdigest()
    return int(digest[:8], 16) / 2**32


def split_band(rows: list[dict], seed: int, heldout_share: float = 0.5) -> tuple[list[dict], list[dict]]:
    """Split band rows into (train, heldout) by :func:`_heldout_fraction`, keeping their order.

    Example:

    ```python
    >>> from slmsql_hub.study.band import split_band
    >>> rows = [{"question_id": f"q{i}"} for i in range(200)]
    >>> train, heldout = split_band(rows, seed=0)
    >>> len(train) + len(heldout), 80 < len(heldout) < 120
    (200, True)

    ```
    """
    train, heldout = [], []
    for row in rows:
        (heldout if _heldout_fraction(seed, row["question_id"]) < heldout_share else train).append(row)
    return train, heldout


def _row_ids(columns: Mapping[str, Sequence]) -> list[tuple[str, tuple, tuple]]:
    """Per row: its ``question_key``, ``(db_id, normalised question)`` and ``meaning_key``."""
    from ..data.sft_record import row_databases, row_keys
    from ..sql.shape import meaning_key
    from ..world.questions import normalize_question

    dbs = row_databases(columns)
    texts = [(db, normalize_question(q)) for db, q in zip(dbs, columns["question"])]
    meanings = [meaning_key(db, sql) for db, sql in zip(dbs, columns["gold_sql"])]
    return list(zip(row_keys(columns), texts, meanings))


def left_out_by(rows: Mapping[str, Sequence], held: Iterable[Mapping[str, Sequence]]) -> list[str | None]:
    """Per row of ``rows`` (columns ``question``, ``gold_sql``, ``db_id``; a ``datasets.Dataset`` works): the
    first of :data:`_LEAVE_OUT_RULES` by which some ``held`` split holds it, ``None`` when none does.

    Example:

    ```python
    >>> from slmsql_hub.study.band import left_out_by
    >>> dev = {"db_id": ["pets"], "question": ["Pets named Rex or Tom?"],
    ...        "gold_sql": ["SELECT id FROM pet WHERE name = 'Rex' OR name = 'Tom'"]}
    >>> pool = {"db_id": ["pets"] * 3, "question": ["Pets named Rex or Tom?", "Pets named Tom or Rex?", "Cats?"],
    ...         "gold_sql": [dev["gold_sql"][0], "select id from pet where name='Tom' or name='Rex'", "SELECT 1"]}
    >>> left_out_by(pool, [dev])
    ['key', 'meaning', None]

    ```
    """
    taken: tuple[set, set, set] = (set(), set(), set())
    for split in held:
        for ids in _row_ids(split):
            for seen, one in zip(taken, ids):
                seen.add(one)
    return [
        next((rule for rule, seen, one in zip(_LEAVE_OUT_RULES, taken, ids) if one in seen), None)
        for ids in _row_ids(rows)
    ]


def prepare_pool(run_world: Path, pool_dir: Path, rl_pool: int) -> dict[str, Any]:
    """Build the pool world under ``pool_dir/world`` and write its :data:`POOL_SPLIT`: its ``rl_pool`` less
    every question :func:`left_out_by` finds in the run world's dev and test (a planted run world: its probe
    splits and its SFT splits too, whose rewritten golds the filter's SFT record does not match). A planted
    run world gives a pool world planted alike (its cross templates stay out of the pool). Reused when
    ``pool.json`` records the same ``rl_pool`` and :data:`_POOL_DISJOINT`; otherwise rebuilt.

    Returns ``{"world", "rl_pool", "disjoint", "left_out", "left_out_eval", "pool"}``: the pool world, its
    ``rl_pool`` size, :data:`_POOL_DISJOINT`, the questions left out per :data:`_LEAVE_OUT_RULES`, in all, and
    the pool's size.
    """
    import dataclasses

    import datasets

    from ..world import WorldSizes, build_world
    from .plant import PROBE_SPLITS, SFT_SPLITS, Plant

    manifest = json.loads((run_world / WORLD_MANIFEST).read_text(encoding="utf-8"))
    sizes = {k: v for k, v in manifest["sizes"].items()}
    sizes["rl_pool"] = rl_pool
    world = pool_dir / "world"
    split_dir = world / "datasets" / POOL_SPLIT
    info_file = pool_dir / "pool.json"
    if split_dir.is_dir() and info_file.is_file():
        info = json.loads(info_file.read_text(encoding="utf-8"))
        if info.get("rl_pool") == rl_pool and info.get("disjoint") == _POOL_DISJOINT:
            return info
    plant = Plant.from_record(manifest.get("plant"))
    if plant is not None:
        # Only the pool world's rl_pool is read, drawn before its probes and whatever their size; one probe per
        # split keeps the plant's template exclusions without asking, beside 4,000 rl_pool questions, for probes
        # the templates cannot spare (value_case: 85 of 150 observable).
        plant = dataclasses.replace(plant, probe=1)
    build_world(world, seed=int(manifest["seed"]), sizes=WorldSizes(**sizes), plant=plant, overwrite=True)
    held = ("dev", "test", *(PROBE_SPLITS + SFT_SPLITS if plant else ()))
    stored = datasets.load_from_disk(str(world / "datasets" / "rl_pool"))
    rules = left_out_by(stored, (datasets.load_from_disk(str(run_world / "datasets" / s)) for s in held))
    keep = [i for i, rule in enumerate(rules) if rule is None]
    save_dataset(stored.select(keep), split_dir)
    info = {
        "world": str(world),
        "rl_pool": rl_pool,
        "disjoint": _POOL_DISJOINT,
        "left_out": {rule: rules.count(rule) for rule in _LEAVE_OUT_RULES},
        "left_out_eval": len(stored) - len(keep),
        "pool": len(keep),
    }
    info_file.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    logger.info(
        "study pool: %d of %d rl_pool questions (%s left out: the run world's %s hold them)",
        len(keep),
        len(stored),
        ", ".join(f"{n} by {rule}" for rule, n in info["left_out"].items()),
        "/".join(held),
    )
    return info


def run_pool_filter(filter_recipe: str, values: dict[str, Any]) -> dict[str, Any]:
    """Run (or resume) the pass-rate filter on the pool: :func:`~slmsql_hub.filtering.run_filter` as is, with the
    recipe's fields set to ``values``."""
    from ..filtering import load_filter_config, run_filter

    return run_filter(load_filter_config(filter_recipe, values=values))


def load_band(band: Any, source: str, seed: int, heldout_share: float, min_band: int) -> BandSplit:
    """Split the band dataset :func:`~slmsql_hub.filtering.report.read_band` returned (``source``: where it
    came from); warn (naming its size) when it is under ``min_band``."""
    rows = [dict(row) for row in band]
    if len(rows) < min_band:
        logger.warning(
            "the band holds %d questions, under the study's %d: band_heldout gets ~%d, too few to show small "
            "effects",
            len(rows),
            min_band,
            round(len(rows) * heldout_share),
        )
    train, heldout = split_band(rows, seed, heldout_share)
    if not train or not heldout:
        raise UsageError(f"the band at {source} ({len(rows)} questions) is too small to split")
    return BandSplit(train=train, heldout=heldout, source=source, seed=seed)
