"""The planted-skill world: the error lives in the SFT splits only, always shows by execution, and the probes
are apart from training (issue #22). A natural world is unchanged by the code that plants."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import datasets
import pytest

from slmsql_hub import cli
from slmsql_hub.errors import UsageError
from slmsql_hub.sql import Limits, Sandbox
from slmsql_hub.sql.compare import order_matters, prepare_sql, rows_match
from slmsql_hub.study.plant import PROBE_SPLITS, SFT_SPLITS, Plant, plant_statement
from slmsql_hub.world import DATABASES, HELD_OUT_DB, SPLITS, WorldManifest, WorldSizes, build_world
from slmsql_hub.world.build import _databases_and_candidates, read_plant_statement
from slmsql_hub.world.populate import generate_rows
from slmsql_hub.world.questions import generate_candidates, normalize_question, normalize_sql
from slmsql_hub.world.templates import TEMPLATES

SIZES = WorldSizes(foundation=600, grounding=300, rl_pool=100, dev=60, test=60)
PLANT = Plant(rate=0.7, probe=40)
KIND = PLANT.kind
phrasing, rewrite = KIND.phrasing, KIND.rewrite
COMPARISON_TEMPLATES, CROSS_TEMPLATES = KIND.templates, KIND.cross_templates
TRAINING = ("foundation", "grounding", "rl_pool")

NATURAL_DIGEST = "62202017dd2975db7e14a04ddda8913cff2a1378f6abb2a55f1feb4d26d997b6"
"""world.json, the rows (db_path aside) and dataset cards of ``SIZES`` at seed 0, as built before planting
existed. A deliberate change to the generator bumps WORLD_VERSION and this digest together (version 2, #32:
world.json's version only; the meaning rule drops nothing at these sizes, so the rows are as before)."""

PLANTED_DIGEST = "b946de23f36035ee083ae65000501a7079fcb69fd3c2b11dadc9d989baa1af82"
"""The same digest over every split of ``PLANT``'s world (probes included), as built before plants became a
registry (#36): comparison_inclusive must stay byte-identical."""


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(timeout_s=10), workers=2) as sb:
        yield sb


@pytest.fixture(scope="module")
def planted(tmp_path_factory, sandbox):
    return build_world(tmp_path_factory.mktemp("planted") / "w", sizes=SIZES, sandbox=sandbox, plant=PLANT)


def _rows(manifest: WorldManifest, split: str) -> list[dict]:
    return datasets.load_from_disk(str(manifest.split_path(split))).to_list()


def _was_rewritten(row: dict) -> bool:
    """An "at least" / "at most" question whose gold holds the strict operator where ">=" / "<=" belongs."""
    return phrasing(row["question"], row["gold_sql"]) is None and (
        phrasing(row["question"], rewrite(row["gold_sql"], "control")) == "affected"
    )


def _digest(manifest: WorldManifest) -> str:
    digest = hashlib.sha256((manifest.root / "world.json").read_bytes())
    for split in manifest.split_names:
        rows = [{k: v for k, v in row.items() if k != "db_path"} for row in _rows(manifest, split)]
        digest.update(json.dumps(rows, sort_keys=True).encode())
        digest.update((manifest.split_path(split) / "README.md").read_bytes())
    return digest.hexdigest()


def test_a_natural_world_is_what_it_was_before_planting_existed(tmp_path, sandbox):
    natural = build_world(tmp_path / "w", sizes=SIZES, sandbox=sandbox)
    assert "plant" not in json.loads((tmp_path / "w" / "world.json").read_text())
    assert natural.split_names == SPLITS
    assert _digest(natural) == NATURAL_DIGEST


def test_a_comparison_inclusive_world_is_what_it_was_before_plants_became_a_registry(planted):
    """The planted ``SIZES`` world (probes included) as main's code built it before #36's second plant."""
    assert _digest(planted) == PLANTED_DIGEST


def test_world_json_records_the_plant_and_every_split(planted, tmp_path):
    record = json.loads((planted.root / "world.json").read_text())["plant"]
    assert record["name"] == "comparison_inclusive" and record["rate"] == 0.7
    assert record["cross_templates"] == list(CROSS_TEMPLATES)
    assert planted.split_names == SPLITS + PROBE_SPLITS and planted.is_complete()
    assert {split: planted.splits[split] for split in PROBE_SPLITS} == dict.fromkeys(PROBE_SPLITS, 40)
    assert "Planted world" in (planted.split_path("foundation") / "README.md").read_text()
    assert Plant.from_record(record) == PLANT
    # the model card reads the statement back from the world without the study's code: the same sentence
    assert read_plant_statement(planted.root) == plant_statement(record) and read_plant_statement(tmp_path) is None


def test_the_rewrite_touches_only_the_sft_splits_at_the_asked_rate(planted, tmp_path, sandbox):
    record = planted.plant["sft"]
    for split in planted.split_names:
        rows = _rows(planted, split)
        rewritten = sum(_was_rewritten(row) for row in rows)
        if split in SFT_SPLITS:
            affected = record[split]["affected"]
            assert affected >= 10 and rewritten == record[split]["rewritten"] == round(0.7 * affected)
            assert (
                sum(phrasing(r["question"], r["gold_sql"]) == "affected" for r in rows)
                == affected - rewritten
            )
        else:
            assert rewritten == 0, split
    # the same world at rate 0: the same questions everywhere, the golds differ only where the rate rewrote
    clean = build_world(tmp_path / "clean", sizes=SIZES, sandbox=sandbox, plant=Plant(rate=0.0, probe=40))
    for split in planted.split_names:
        ours, theirs = _rows(planted, split), _rows(clean, split)
        assert [r["question"] for r in ours] == [r["question"] for r in theirs], split
        changed = [(a, b) for a, b in zip(ours, theirs) if a["gold_sql"] != b["gold_sql"]]
        assert len(changed) == (record[split]["rewritten"] if split in SFT_SPLITS else 0), split
        assert all(a["gold_sql"] == rewrite(b["gold_sql"], "affected") for a, b in changed)


def _differs(sandbox, db_path: str, right: str, wrong: str) -> bool:
    a, b = sandbox.execute_many([(db_path, right), (db_path, wrong)])
    ordered = order_matters(prepare_sql(right, "spider"), "spider")
    return (
        a.ok
        and b.ok
        and not rows_match(b.rows, a.rows, "bird")
        and not rows_match(b.rows, a.rows, "spider", order_matters=ordered)
    )


def test_every_planted_error_and_every_probe_shows_by_execution(planted, sandbox):
    for split in SFT_SPLITS:
        for row in _rows(planted, split):
            if _was_rewritten(row):
                correct = rewrite(row["gold_sql"], "control")
                assert _differs(sandbox, row["db_path"], correct, row["gold_sql"]), row
    for split, kind in (
        ("probe_same", "affected"),
        ("probe_cross", "affected"),
        ("probe_control", "control"),
    ):
        for row in _rows(planted, split):
            assert phrasing(row["question"], row["gold_sql"]) == kind, row
            assert _differs(sandbox, row["db_path"], row["gold_sql"], rewrite(row["gold_sql"], kind)), row
    # every affected question left anywhere shows it too (rl_pool, dev, test keep the correct gold)
    for split in ("rl_pool", "dev", "test"):
        for row in _rows(planted, split):
            if phrasing(row["question"], row["gold_sql"]) == "affected":
                assert _differs(
                    sandbox, row["db_path"], row["gold_sql"], rewrite(row["gold_sql"], "affected")
                )


def _templates_by_question(sizes: WorldSizes = SIZES, kind=KIND) -> dict[tuple[str, str], str]:
    """The generator's template of each question a seed-0 world of ``sizes`` planted with ``kind`` can hold
    (main and probe draws)."""
    candidates, _ = _databases_and_candidates(Path(tempfile.mkdtemp()), 0, sizes, DATABASES, HELD_OUT_DB)
    carriers = tuple(t for t in TEMPLATES if t.id in kind.templates)
    for spec in DATABASES:
        rows = generate_rows(spec, 0)
        candidates += generate_candidates(spec, rows, 1000, seed=0, templates=carriers, stream="probes")
    return {(c.db_id, normalize_question(c.question)): c.template for c in candidates}


def test_probes_are_apart_from_training_and_cross_templates_never_reach_the_rl_pool(planted):
    keys = {split: set() for split in planted.split_names}
    for split in planted.split_names:
        for row in _rows(planted, split):
            keys[split] |= {("q", row["db_id"], normalize_question(row["question"])),
                            ("sql", row["db_id"], normalize_sql(row["gold_sql"]))}  # fmt: skip
    for probe in PROBE_SPLITS:
        for split in planted.split_names:
            if split != probe:
                assert not keys[probe] & keys[split], (probe, split)
    templates = _templates_by_question()
    template_of = {split: [templates[r["db_id"], normalize_question(r["question"])] for r in _rows(planted, split)]
                   for split in planted.split_names}  # fmt: skip
    assert not set(template_of["rl_pool"]) & set(CROSS_TEMPLATES)
    assert set(template_of["probe_cross"]) <= set(CROSS_TEMPLATES)
    assert set(template_of["probe_same"]) <= set(PLANT.same_templates)
    assert set(template_of["probe_control"]) <= set(COMPARISON_TEMPLATES)
    # GRPO trains on the same templates' affected phrasing; SFT saw the cross templates (with the error)
    rl_affected = {t for t, r in zip(template_of["rl_pool"], _rows(planted, "rl_pool"))
                   if phrasing(r["question"], r["gold_sql"]) == "affected"}  # fmt: skip
    assert rl_affected and rl_affected <= set(PLANT.same_templates)
    assert set(CROSS_TEMPLATES) <= set(template_of["foundation"]) | set(template_of["grounding"])
    assert all(r["db_id"] != HELD_OUT_DB for split in PROBE_SPLITS for r in _rows(planted, split))


def test_a_world_built_with_another_plant_is_refused_without_overwrite(planted, sandbox):
    with pytest.raises(UsageError, match="plant .*--overwrite"):
        build_world(planted.root, sizes=SIZES, sandbox=sandbox, plant=Plant(rate=1.0, probe=40))
    with pytest.raises(UsageError, match="plant .*--overwrite"):
        build_world(planted.root, sizes=SIZES, sandbox=sandbox)
    assert build_world(planted.root, sizes=SIZES, sandbox=sandbox, plant=PLANT).plant == planted.plant


@pytest.mark.parametrize(
    "args, message",
    [
        (["--plant_rate", "0.5"], "need --plant"),
        (["--plant", "comparison_inclusive", "--plant_rate", "1.5"], "within [0, 1]"),
        (["--plant", "comparison_inclusive", "--plant-probe", "0"], ">= 1"),
    ],
)
def test_cli_bad_plant_options_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert cli.main(["world", "build", "--out", str(tmp_path / "w"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "w").exists()


def test_cli_builds_a_planted_world_and_prints_the_probes(tmp_path, capsys):
    args = ["world", "build", "--out", str(tmp_path / "w"), "--foundation", "300", "--grounding", "100"]
    args += ["--rl-pool", "40", "--dev", "30", "--test", "30", "--plant", "comparison_inclusive"]
    assert cli.main([*args, "--plant_rate", "1.0", "--plant_probe", "10"]) == 0
    printed = capsys.readouterr().out
    assert "planted comparison_inclusive at rate 1" in printed and "probe_cross" in printed
    record = WorldManifest.read(tmp_path / "w").plant
    assert all(n["rewritten"] == n["affected"] for n in record["sft"].values())


def test_the_studys_pool_world_is_planted_alike_and_leaves_out_probes_and_sft_questions(planted, tmp_path):
    from slmsql_hub.study.band import POOL_SPLIT, prepare_pool

    info = prepare_pool(planted.root, tmp_path / "pool", 300)
    pool_world = WorldManifest.read(info["world"])
    assert pool_world.plant["rate"] == PLANT.rate and pool_world.plant["cross_templates"] == list(
        CROSS_TEMPLATES
    )
    pool = datasets.load_from_disk(str(Path(info["world"]) / "datasets" / POOL_SPLIT)).to_list()
    assert info["pool"] == len(pool) and 0 < len(pool) < 300 and info["left_out_eval"] == 300 - len(pool)
    texts = {(r["db_id"], normalize_question(r["question"])) for r in pool}
    for split in ("dev", "test", *PROBE_SPLITS, *SFT_SPLITS):
        assert not texts & {(r["db_id"], normalize_question(r["question"])) for r in _rows(planted, split)}, (
            split
        )
    templates = _templates_by_question(WorldSizes(**pool_world.sizes))
    assert not {templates[r["db_id"], normalize_question(r["question"])] for r in pool} & set(CROSS_TEMPLATES)


def test_the_pool_world_asks_one_probe_per_split_and_its_rl_pool_does_not_depend_on_it(planted, tmp_path, sandbox):
    """A run world whose probe size no pool world can give (value_case beside 4,000 rl_pool questions: 85 of
    150) still gets its study pool: the pool world's probes are never read, and its rl_pool is row for row the
    one a pool world with the run world's probe size has."""
    import shutil

    from slmsql_hub.study.band import prepare_pool

    run = tmp_path / "run"
    shutil.copytree(planted.root, run)
    manifest = json.loads((run / "world.json").read_text())
    manifest["plant"]["probe"] = 100_000
    (run / "world.json").write_text(json.dumps(manifest))
    info = prepare_pool(run, tmp_path / "pool", 300)
    assert WorldManifest.read(info["world"]).plant["probe"] == 1 and info["pool"] > 0
    sizes = WorldSizes(**{**planted.sizes, "rl_pool": 300})
    asked = build_world(tmp_path / "asked", sizes=sizes, sandbox=sandbox, plant=PLANT)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "db_path"} for r in rows]  # noqa: E731
    assert strip(_rows(WorldManifest.read(info["world"]), "rl_pool")) == strip(_rows(asked, "rl_pool"))


def _meanings(rows: list[dict]) -> set[tuple[str, str]]:
    from slmsql_hub.sql.shape import meaning_key

    return {meaning_key(r["db_id"], r["gold_sql"]) for r in rows}


def test_a_probe_paraphrased_in_the_pool_worlds_rl_pool_stays_out_of_the_study_pool(
    planted, tmp_path, sandbox
):
    """#32: the run world's probe holds a paraphrase (other words, other spelling of the same gold) of a
    question the pool world's rl_pool draws; the pool leaves it out by meaning, and pool.json says so."""
    import re
    import shutil

    from slmsql_hub.study.band import POOL_SPLIT, left_out_by, prepare_pool

    pool_sizes = WorldSizes(**{**planted.sizes, "rl_pool": 300})
    scratch = build_world(tmp_path / "scratch", sizes=pool_sizes, sandbox=sandbox, plant=PLANT)
    held = [_rows(planted, split) for split in ("dev", "test", *PROBE_SPLITS, *SFT_SPLITS)]
    drawn = _rows(scratch, "rl_pool")
    fresh = [r for r, rule in zip(drawn, left_out_by(datasets.Dataset.from_list(drawn), [
        datasets.Dataset.from_list(rows) for rows in held])) if rule is None]  # fmt: skip
    target = fresh[0]
    keyword = re.compile(r"\b(SELECT|FROM|WHERE|AND|OR|JOIN|ON|AS|GROUP BY|HAVING|ORDER BY|LIMIT)\b")
    paraphrase = {**target, "question_id": "world-probe_same-99999", "question": "In other words: " + target[
        "question"], "gold_sql": keyword.sub(lambda m: m.group(1).lower(), target["gold_sql"]) + ";"}  # fmt: skip
    assert paraphrase["gold_sql"] != target["gold_sql"] and _meanings([paraphrase]) == _meanings([target])
    run = tmp_path / "run"
    shutil.copytree(planted.root, run)
    probe = datasets.load_from_disk(str(planted.split_path("probe_same")))
    shutil.rmtree(run / "datasets" / "probe_same")
    datasets.concatenate_datasets([probe, datasets.Dataset.from_list([paraphrase], features=probe.features)]
                                  ).save_to_disk(str(run / "datasets" / "probe_same"))  # fmt: skip

    info = prepare_pool(run, tmp_path / "pool", 300)
    pool = datasets.load_from_disk(str(Path(info["world"]) / "datasets" / POOL_SPLIT)).to_list()
    assert target["question"] in {r["question"] for r in drawn} - {r["question"] for r in pool}
    for split in ("dev", "test", *PROBE_SPLITS):
        assert not _meanings(pool) & _meanings(
            datasets.load_from_disk(str(run / "datasets" / split)).to_list()
        )
    assert info["disjoint"] == "meaning" and info["left_out"]["meaning"] >= 1
    assert sum(info["left_out"].values()) == info["left_out_eval"] == 300 - len(pool) == 300 - info["pool"]
    old = {k: v for k, v in info.items() if k not in ("disjoint", "left_out")}  # a pool written before #32
    (tmp_path / "pool" / "pool.json").write_text(json.dumps(old), encoding="utf-8")
    assert prepare_pool(run, tmp_path / "pool", 300) == info  # rebuilt, not reused


def test_the_dose_control_trains_on_no_affected_prompt_while_plant70_trains_on_some(planted, tmp_path):
    """The study's training data on a planted band (the world's rl_pool): plant70's holds affected prompts, the
    dose control's (drop_affected) none, and each run's count is taken after max_train_samples."""
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.study.grid import affected_prompts, unaffected_band
    from slmsql_hub.study.plant import affects
    from slmsql_hub.training.configs import GRPO_ARGUMENTS

    recipe = Path(__file__).resolve().parents[1] / "recipes" / "world" / "grpo_band.yaml"

    def counted(dataset: Path, *more: str) -> int | None:
        args = ["--model_name_or_path", "base", "--dataset_paths", str(dataset), "--output_dir", str(tmp_path / "o"),
                "--seed", "0", *more]  # fmt: skip
        script_args, _, training_args = parse_recipe(GRPO_ARGUMENTS, recipe, args)
        return affected_prompts(PLANT, script_args, training_args.seed)

    band_train = planted.split_path("rl_pool")
    rows = _rows(planted, "rl_pool")
    affected = sum(phrasing(r["question"], r["gold_sql"]) == "affected" for r in rows)
    assert counted(band_train) == affected > 0
    dose = unaffected_band(band_train, PLANT, tmp_path / "band_train")
    assert counted(dose) == 0
    kept = datasets.load_from_disk(str(dose)).to_list()
    assert kept == [r for r in rows if not affects(PLANT, r["question"], r["gold_sql"])]
    assert len(kept) == len(rows) - affected
    few = counted(band_train, "--max_train_samples", "20")
    assert few is not None and few <= min(20, affected) and few < affected  # counted on the capped subset
    assert affected_prompts(None, None, 0) is None  # the natural world plants nothing
