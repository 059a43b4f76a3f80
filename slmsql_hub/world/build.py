"""Build the embedded world: databases, questions whose golds run in the sandbox, and the dataset splits.

Layout of a built world (Spider layout for the databases, so the Spider loader reads them too)::

    <out>/world.json                              manifest: version, seed, sizes, databases, split counts
    <out>/databases/<db>/<db>.sqlite
    <out>/datasets/<split>/                       datasets.Dataset.save_to_disk + README.md (dataset card)

Splits mirror the study's pipeline: ``foundation`` (stage-1 SFT, the SynSQL analogue, no evidence),
``grounding`` (stage-2 SFT, the BIRD + Spider analogue, with some evidence questions), ``rl_pool`` (GRPO's
pass-rate filter), ``dev`` and ``test``. One database (:data:`~slmsql_hub.world.schemas.HELD_OUT_DB`)
appears only in ``dev`` and ``test``. No question and no gold SQL repeats across splits, and no held-out
split (``dev``, ``test``, a planted world's probes) shares a question's meaning
(:func:`~slmsql_hub.sql.shape.meaning_key`: database and normalised gold) with a training split: a
training candidate that paraphrases a dev or test question is dropped before the training splits are cut.

A planted world (``plant``, any :class:`WorldPlant`: the study's :mod:`~slmsql_hub.study.plant`) adds the
:data:`PROBE_SPLITS` and one systematic error in the SFT splits; ``world.json`` records it under ``plant``. The
world never imports the study: the plant comes in through that hook. Without a plant the build takes none of
those code paths, so a natural world is the same, byte for byte, as before planting existed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from ..data.benchmarks import BENCHMARK_COLUMNS, benchmark_features
from ..errors import UsageError
from ..run.artifacts import check_json, check_sqlite
from ..run.guard import replace_folder
from ..run.layout import WORLD_MANIFEST
from .populate import generate_rows, write_database
from .questions import Candidate, generate_candidates, normalize_question, normalize_sql
from .schemas import DATABASES, HELD_OUT_DB, DatabaseSpec
from .templates import TEMPLATES

logger = logging.getLogger(__name__)

WORLD_VERSION = "2"
"""Bumped whenever a change to the generator changes what a seed builds."""

SPLITS: tuple[str, ...] = ("foundation", "grounding", "rl_pool", "dev", "test")
"""The world's splits, in the order of the pipeline."""

_TRAINING_SPLITS: tuple[str, ...] = ("foundation", "grounding", "rl_pool")
"""The splits something trains on; every other split (dev, test, probes) is held out from them by meaning."""

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard", "extra")

PROBE_SPLITS: tuple[str, ...] = ("probe_same", "probe_cross", "probe_control")
"""A planted world's extra splits (evaluation only), filled by :meth:`WorldPlant.probe_pools`."""


class WorldPlant(Protocol):
    """What :func:`build_world` asks of a plant (:class:`slmsql_hub.study.plant.Plant` is one): the templates
    whose questions it probes (``templates``, ``probe`` per split) and keeps out of ``rl_pool``
    (``cross_templates``), what ``world.json`` records as asked (``spec``), which candidates keep the error
    observable, the :data:`PROBE_SPLITS` pools, the rewrite of the SFT splits' golds (in place; returns the
    counts ``world.json`` records under ``sft``) and how the dataset cards word it."""

    templates: tuple[str, ...]
    cross_templates: tuple[str, ...]
    probe: int
    control_probe: str

    def spec(self) -> dict: ...
    def observable(self, candidates: list[Candidate], db_paths: dict, sandbox) -> list[Candidate]: ...
    def probe_pools(self, drawn: list[Candidate], kept: list[Candidate], db_paths: dict, sandbox) -> dict: ...
    def plant_errors(self, splits: dict[str, list[Candidate]], seed: int) -> dict: ...
    def statement(self, record: dict) -> str: ...


@dataclass(frozen=True)
class WorldSizes:
    """How many questions each split gets; ``held_out_share`` of ``dev`` and ``test`` come from the held-out
    database."""

    foundation: int = 3000
    grounding: int = 1200
    rl_pool: int = 400
    dev: int = 250
    test: int = 250
    held_out_share: float = 0.4

    def __post_init__(self) -> None:
        for name in SPLITS:
            if getattr(self, name) < 0:
                raise UsageError(f"WorldSizes.{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.held_out_share <= 1.0:
            raise UsageError(f"WorldSizes.held_out_share must be within [0, 1], got {self.held_out_share}")

    def held_out(self, split: str) -> int:
        """How many questions of ``split`` come from the held-out database."""
        return round(getattr(self, split) * self.held_out_share) if split in ("dev", "test") else 0


@dataclass
class WorldManifest:
    """What ``world.json`` records about a built world (all but ``root``, the world folder): the generator's
    :data:`WORLD_VERSION`, the seed, the asked :class:`WorldSizes` as a dict, questions per split and per split
    and hardness label; ``plant``, what a planted world planted (absent from a natural world's ``world.json``)."""

    root: Path
    version: str
    seed: int
    sizes: dict
    databases: list[str]
    held_out_db: str
    splits: dict[str, int] = field(default_factory=dict)
    difficulty: dict[str, dict[str, int]] = field(default_factory=dict)
    plant: dict | None = None

    @property
    def split_names(self) -> tuple[str, ...]:
        """:data:`SPLITS`, then a planted world's :data:`PROBE_SPLITS`."""
        return SPLITS + (PROBE_SPLITS if self.plant else ())

    def split_path(self, split: str) -> Path:
        """The ``save_to_disk`` folder of ``split`` (``datasets.load_from_disk`` reads it)."""
        return self.root / "datasets" / split

    def db_path(self, db_id: str) -> Path:
        """The SQLite file of ``db_id``."""
        return self.root / "databases" / db_id / f"{db_id}.sqlite"

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("root")
        if data["plant"] is None:
            data.pop("plant")
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, root: str | os.PathLike) -> WorldManifest:
        """Read ``<root>/world.json``; :class:`UsageError` when it is missing or not a world manifest."""
        root = Path(root)
        path = root / WORLD_MANIFEST
        if not path.is_file():
            raise UsageError(f"{root} is not a built world (no world.json)")
        data = check_json(path, "rebuild with --overwrite")
        try:
            return cls(root=root, **data)
        except TypeError as err:
            raise UsageError(f"{path} is not a world manifest ({err}); rebuild with --overwrite") from None

    def is_complete(self) -> bool:
        """Whether every database file and every split's dataset is on disk."""
        return all(self.db_path(db).is_file() for db in self.databases) and all(
            (self.split_path(s) / "state.json").is_file() for s in self.split_names
        )


def _shape(sql: str) -> str:
    """The SQL with literals masked: hardness depends only on this, so it is computed once per shape."""
    masked = re.sub(r"'(?:[^']|'')*'", "'v'", sql)
    return re.sub(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", "1", masked)


def _difficulties(candidates: list[Candidate]) -> list[str]:
    from ..sql.hardness import spider_hardness

    by_shape: dict[str, str] = {}
    labels = []
    for candidate in candidates:
        shape = _shape(candidate.sql)
        if shape not in by_shape:
            try:
                by_shape[shape] = spider_hardness(candidate.sql)
            except ValueError:
                by_shape[shape] = ""
        labels.append(by_shape[shape] or candidate.label)
    return labels


def _executable(candidates: list[Candidate], db_paths: dict[str, Path], sandbox) -> list[Candidate]:
    """Keep candidates whose gold runs ``ok`` in the sandbox and returns at least one non-NULL value."""
    results = sandbox.execute_many([(db_paths[c.db_id], c.sql) for c in candidates], progress="world golds")
    kept, failed, empty = [], Counter(), Counter()
    for candidate, result in zip(candidates, results):
        if not result.ok:
            failed[candidate.template] += 1
            logger.debug("gold failed (%s): %s: %s", result.status, candidate.sql, result.error)
        elif not any(value is not None for row in result.rows for value in row):
            empty[candidate.template] += 1
        else:
            kept.append(candidate)
    if failed:
        logger.warning("dropped %d golds that did not execute: %s", sum(failed.values()), dict(failed))
    logger.info(
        "dropped %d golds with empty results; kept %d of %d", sum(empty.values()), len(kept), len(candidates)
    )
    return kept


def _stratified(items: list[Candidate], rng: random.Random) -> list[Candidate]:
    """A random order in which every template (and database) is spread evenly, so that any contiguous slice
    holds them in about their overall proportions: the splits cut from it are stratified."""
    rng.shuffle(items)
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for item in items:
        groups.setdefault((item.template, item.db_id), []).append(item)
    keyed = [
        ((i + rng.random()) / len(group), item) for group in groups.values() for i, item in enumerate(group)
    ]
    keyed.sort(key=lambda pair: pair[0])
    return [item for _, item in keyed]


def _assign(
    train: list[Candidate],
    held: list[Candidate],
    sizes: WorldSizes,
    seed: int,
    rl_excluded: tuple[str, ...] = (),
) -> dict[str, list[Candidate]]:
    """The five splits cut from the stratified questions; ``rl_excluded`` templates never go to ``rl_pool``."""
    rng = random.Random(f"{seed}:splits")
    train = _stratified(train, rng)
    held = _stratified(held, rng)
    splits: dict[str, list[Candidate]] = {}
    for split in ("dev", "test"):
        n_held = sizes.held_out(split)
        if len(held) < n_held:
            raise UsageError(
                f"the held-out database has {len(held)} usable questions left, {split} asks for {n_held}; "
                "lower the dev/test sizes or held_out_share"
            )
        splits[split], held = held[:n_held], held[n_held:]
    for split in ("test", "dev", "rl_pool", "grounding"):
        if split == "rl_pool":  # dev and test are cut: nothing that trains may paraphrase them
            train = _apart(train, splits["dev"] + splits["test"])
        n_seen = getattr(sizes, split) - len(splits.get(split, []))
        eligible = [c for c in train if c.template not in rl_excluded] if split == "rl_pool" else train
        if len(eligible) < n_seen:
            raise UsageError(
                f"only {len(eligible)} usable questions left for {split} ({n_seen} asked); lower the sizes"
            )
        splits[split] = splits.get(split, []) + eligible[:n_seen]
        if eligible is train:
            train = train[n_seen:]
        else:
            taken = {id(c) for c in eligible[:n_seen]}
            train = [c for c in train if id(c) not in taken]
    foundation = [c for c in train if c.family != "evidence"]
    if len(foundation) < sizes.foundation:
        raise UsageError(
            f"only {len(foundation)} usable questions left for foundation ({sizes.foundation} asked); lower the sizes"
        )
    splits["foundation"] = foundation[: sizes.foundation]
    for split in ("dev", "test"):
        rng.shuffle(splits[split])
    return {split: splits[split] for split in SPLITS}


def _apart(train: list[Candidate], held: list[Candidate]) -> list[Candidate]:
    """``train`` without the candidates whose :func:`~slmsql_hub.sql.shape.meaning_key` some ``held``
    candidate has (a paraphrase with the same gold, the operands of an ``OR`` swapped...), order kept."""
    from ..sql.shape import meaning_key

    taken = {meaning_key(c.db_id, c.sql) for c in held}
    kept = [c for c in train if meaning_key(c.db_id, c.sql) not in taken]
    logger.info(
        "dropped %d training candidates that mean what a dev or test question means", len(train) - len(kept)
    )
    return kept


def _card(split: str, rows: list[dict], manifest: WorldManifest, plant: WorldPlant | None) -> str:
    per_db = Counter(r["db_id"] for r in rows)
    per_difficulty = Counter(r["difficulty"] for r in rows)
    with_evidence = sum(1 for r in rows if r["evidence"])
    control = plant.control_probe if plant is not None else None
    roles = {
        "foundation": "stage-1 SFT (the SynSQL-2.5M analogue: the largest split, no evidence questions)",
        "grounding": "stage-2 SFT (the BIRD + Spider analogue, including BIRD-style evidence questions)",
        "rl_pool": "the GRPO pass-rate filter's pool",
        "dev": "development evaluation (includes the held-out database)",
        "test": "final evaluation (includes the held-out database)",
        "probe_same": "a planted-skill probe: the affected phrasing in templates GRPO trains on",
        "probe_cross": "a planted-skill probe: the affected phrasing in templates kept out of rl_pool",
        "probe_control": f"a planted-skill probe: {control}",
    }
    lines = [
        f"# slmsql-hub embedded world: `{split}` split",
        "",
        f"{len(rows)} Text-to-SQL questions for {roles[split]}.",
        "",
        f"Generated by `slmsql_hub.world` (version {manifest.version}) with seed {manifest.seed}: "
        f"{len(TEMPLATES)} question templates (single-table filters and counts, aggregates, GROUP BY / HAVING, "
        "ORDER BY ... LIMIT, joins over two and three tables, nested subqueries, INTERSECT / EXCEPT / UNION, "
        "evidence questions), each with paraphrases and values drawn from the data. Every gold SQL executed in "
        "the slmsql-hub sandbox with a non-empty result. Difficulty is Spider's official hardness of the gold.",
        "",
        f"The database `{manifest.held_out_db}` appears only in `dev` and `test`. No question and no gold SQL "
        "repeats across splits.",
        "",
        *([plant.statement(manifest.plant), ""] if plant is not None else []),
        f"Questions with evidence: {with_evidence}.",
        "",
        "| database | questions |",
        "|---|---|",
        *[f"| {db} | {per_db[db]} |" for db in sorted(per_db)],
        "",
        "| difficulty | questions |",
        "|---|---|",
        *[f"| {d} | {per_difficulty[d]} |" for d in DIFFICULTIES if per_difficulty[d]],
        "",
        "Columns: " + ", ".join(f"`{c}`" for c in BENCHMARK_COLUMNS) + ".",
        "",
    ]
    return "\n".join(lines)


_PLANTED = "**Planted world**"
"""How a plant's statement opens (``model_card/planted_world.md``); :func:`read_plant_statement` looks for it."""


def read_plant_statement(root: str | os.PathLike) -> str | None:
    """What the world at ``root`` planted, as its plant's :meth:`WorldPlant.statement` wrote it into the dataset
    cards at build time (the world keeps no plant code to say it again); ``None`` when the card states no plant.

    Example: ``read_plant_statement("outputs/transfer/worlds/plant70/world")`` is ``"**Planted world** (...) ..."``.
    """
    card = Path(root) / "datasets" / SPLITS[0] / "README.md"
    lines = card.read_text(encoding="utf-8").splitlines() if card.is_file() else []
    return next((line for line in lines if line.startswith(_PLANTED)), None)


def _asked_plant(recorded: dict | None, plant: WorldPlant | None) -> dict | None:
    """The part of a recorded plant that was asked (its counts left out), comparable to ``plant.spec()``; all of
    it without ``plant`` (a planted world is never a natural one)."""
    if not recorded:
        return None
    return {key: recorded.get(key) for key in (plant.spec() if plant is not None else recorded)}


def _reuse(
    out: Path,
    seed: int,
    sizes: WorldSizes,
    overwrite: bool,
    plant: WorldPlant | None = None,
    databases: tuple[DatabaseSpec, ...] = DATABASES,
) -> WorldManifest | None:
    """The existing world at ``out`` when it can be reused; ``None`` when it must be (re)built."""
    if overwrite or not out.exists():
        return None
    if not (out / WORLD_MANIFEST).is_file():
        if any(out.iterdir()):
            raise UsageError(
                f"{out} exists and is not a built world; pick an empty folder or pass --overwrite"
            )
        return None
    manifest = WorldManifest.read(out)
    differences = [
        f"{what} {have!r} (asked {want!r})"
        for what, have, want in (
            ("seed", manifest.seed, seed),
            ("version", manifest.version, WORLD_VERSION),
            ("sizes", manifest.sizes, asdict(sizes)),
            ("plant", _asked_plant(manifest.plant, plant), plant.spec() if plant else None),
        )
        if have != want
    ]
    if differences:
        raise UsageError(
            f"{out} holds a world built with {'; '.join(differences)}; "
            "pass --overwrite to rebuild it or choose another --out"
        )
    if not manifest.is_complete():
        logger.warning("%s is an incomplete world; rebuilding it", out)
        return None
    tables = {spec.db_id: [t.name for t in spec.tables] for spec in databases}
    for db_id in manifest.databases:  # a damaged database is not reused: one line naming it
        check_sqlite(manifest.db_path(db_id), tables.get(db_id, ()), "pass --overwrite to rebuild the world")
    logger.info("reusing the world at %s (seed %d)", out, seed)
    return manifest


def build_world(
    out_dir: str | os.PathLike,
    seed: int = 0,
    sizes: WorldSizes | None = None,
    *,
    overwrite: bool = False,
    databases: tuple[DatabaseSpec, ...] = DATABASES,
    held_out_db: str = HELD_OUT_DB,
    sandbox=None,
    plant: WorldPlant | None = None,
) -> WorldManifest:
    """Build (or reuse) the embedded world under ``out_dir`` and return its manifest: deterministic in
    ``seed``, written to a temporary sibling folder and moved into place. A complete world with the same seed
    and sizes is reused unless ``overwrite``; golds run in ``sandbox`` (default: a temporary one). ``plant``
    builds a planted world (a :class:`WorldPlant`): probe splits, the error in the SFT splits.

    :class:`UsageError` when ``out_dir`` holds something else or a world built differently (without
    ``overwrite``), or the sizes ask for more questions than the generator makes.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.world import WorldSizes, build_world
    >>> sizes = WorldSizes(foundation=60, grounding=30, rl_pool=10, dev=20, test=20)
    >>> manifest = build_world(tempfile.mkdtemp() + "/world", seed=0, sizes=sizes)
    >>> manifest.splits["foundation"], manifest.held_out_db
    (60, 'farm_coop')

    ```
    """
    from ..sql import Limits, Sandbox

    sizes = sizes or WorldSizes()
    out = Path(out_dir).expanduser().resolve()
    reused = _reuse(out, seed, sizes, overwrite, plant, databases)
    if reused is not None:
        return reused
    if held_out_db not in {spec.db_id for spec in databases}:
        raise UsageError(f"held-out database {held_out_db!r} is not one of the world's databases")

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    own_sandbox = sandbox is None
    if own_sandbox:
        sandbox = Sandbox(Limits(timeout_s=10), workers=min(4, len(os.sched_getaffinity(0))))
    try:
        candidates, tmp_paths = _databases_and_candidates(tmp, seed, sizes, databases, held_out_db)
        kept = _executable(candidates, tmp_paths, sandbox)
        if plant is not None:
            kept = plant.observable(kept, tmp_paths, sandbox)
        train = [c for c in kept if c.db_id != held_out_db]
        held = [c for c in kept if c.db_id == held_out_db]
        splits = _assign(train, held, sizes, seed, plant.cross_templates if plant is not None else ())
        _check_disjoint(splits)
        if plant is not None:
            plant_record = _plant(plant, splits, kept, tmp_paths, sandbox, seed, databases, held_out_db)

        manifest = WorldManifest(
            root=out,
            version=WORLD_VERSION,
            seed=seed,
            sizes=asdict(sizes),
            databases=[spec.db_id for spec in databases],
            held_out_db=held_out_db,
            plant=plant_record if plant is not None else None,
        )
        for split, chosen in splits.items():
            _write_split(tmp / "datasets" / split, split, chosen, manifest, plant)
        (tmp / WORLD_MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
        replace_folder(tmp, out)
    finally:
        if own_sandbox:
            sandbox.close()
        if tmp.exists():
            shutil.rmtree(tmp)
    logger.info("built the world at %s: %s", out, manifest.splits)
    return manifest


def _databases_and_candidates(
    tmp: Path, seed: int, sizes: WorldSizes, databases: tuple[DatabaseSpec, ...], held_out_db: str
) -> tuple[list[Candidate], dict[str, Path]]:
    """Write every database under ``tmp`` and draw enough candidate questions from each (with a margin for
    golds that fail and for the held-out share)."""
    n_train_dbs = len(databases) - 1
    seen_needed = sum(getattr(sizes, s) for s in SPLITS) - sizes.held_out("dev") - sizes.held_out("test")
    per_train_db = math.ceil(1.3 * seen_needed / max(1, n_train_dbs)) + 20
    per_held_db = math.ceil(1.5 * (sizes.held_out("dev") + sizes.held_out("test"))) + 20
    candidates: list[Candidate] = []
    tmp_paths: dict[str, Path] = {}
    for spec in databases:
        rows = generate_rows(spec, seed)
        tmp_paths[spec.db_id] = write_database(
            spec, rows, tmp / "databases" / spec.db_id / f"{spec.db_id}.sqlite"
        )
        n = per_held_db if spec.db_id == held_out_db else per_train_db
        candidates.extend(generate_candidates(spec, rows, n, seed=seed))
    logger.info("generated %d candidate questions over %d databases", len(candidates), len(databases))
    return candidates, tmp_paths


def _plant(
    plant: WorldPlant,
    splits: dict[str, list[Candidate]],
    kept: list[Candidate],
    db_paths: dict[str, Path],
    sandbox,
    seed: int,
    databases: tuple[DatabaseSpec, ...],
    held_out_db: str,
) -> dict:
    """Add the probe splits to ``splits`` and plant the error in its SFT splits; return the ``plant`` record."""
    carriers = tuple(t for t in TEMPLATES if t.id in plant.templates)
    train_dbs = [spec for spec in databases if spec.db_id != held_out_db]
    per_db = math.ceil(25 * plant.probe / max(1, len(train_dbs))) + 100
    drawn = [
        c
        for spec in train_dbs
        for c in generate_candidates(
            spec, generate_rows(spec, seed), per_db, seed=seed, templates=carriers, stream="probes"
        )
    ]
    pools = plant.probe_pools(_executable(drawn, db_paths, sandbox), kept, db_paths, sandbox)
    rng = random.Random(f"{seed}:probes")
    for split, pool in pools.items():
        if len(pool) < plant.probe:
            raise UsageError(
                f"only {len(pool)} observable questions for {split} ({plant.probe} asked); lower the probe size"
            )
        splits[split] = _stratified(pool, rng)[: plant.probe]
    sft = plant.plant_errors(splits, seed)
    _check_disjoint(splits)  # the rewritten golds too
    return {**plant.spec(), "sft": sft, "probe_pool": {split: len(pool) for split, pool in pools.items()}}


def _write_split(
    split_dir: Path, split: str, chosen: list[Candidate], manifest: WorldManifest, plant: WorldPlant | None
) -> None:
    """Save one split (``datasets.save_to_disk`` + dataset card) and record its counts in ``manifest``."""
    import datasets

    difficulties = _difficulties(chosen)
    rows = [
        {
            "question_id": f"world-{split}-{i:05d}",
            "question": c.question,
            "evidence": c.evidence,
            "db_id": c.db_id,
            "db_path": str(manifest.db_path(c.db_id)),
            "gold_sql": c.sql,
            "difficulty": difficulty,
            "benchmark": "world",
        }
        for i, (c, difficulty) in enumerate(zip(chosen, difficulties))
    ]
    columns = {name: [r[name] for r in rows] for name in BENCHMARK_COLUMNS}
    datasets.Dataset.from_dict(columns, features=benchmark_features()).save_to_disk(str(split_dir))
    (split_dir / "README.md").write_text(_card(split, rows, manifest, plant), encoding="utf-8")
    manifest.splits[split] = len(rows)
    counts = Counter(difficulties)
    manifest.difficulty[split] = {d: counts[d] for d in DIFFICULTIES}


def _check_disjoint(splits: dict[str, list[Candidate]]) -> None:
    """Fail loudly if a question or a gold repeats across splits, or a held-out split shares a meaning key
    with one of :data:`_TRAINING_SPLITS` (a generator bug, never silently fixed)."""
    from ..sql.shape import meaning_key

    owner: dict[tuple, str] = {}
    for split, chosen in splits.items():
        for c in chosen:
            for key in (
                (c.db_id, "q", normalize_question(c.question)),
                (c.db_id, "sql", normalize_sql(c.sql)),
            ):
                if key in owner:
                    raise RuntimeError(f"world question repeated across {owner[key]} and {split}: {key}")
                owner[key] = split
    meanings = {split: {meaning_key(c.db_id, c.sql) for c in chosen} for split, chosen in splits.items()}
    for held in (split for split in splits if split not in _TRAINING_SPLITS):
        for train in (split for split in splits if split in _TRAINING_SPLITS):
            if shared := len(meanings[held] & meanings[train]):
                raise RuntimeError(
                    f"{shared} {held} questions share database and normalised gold with {train}"
                )
