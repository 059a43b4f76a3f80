"""The embedded world: databases, generated questions, splits, determinism and the `slmsql world` command."""

from __future__ import annotations

import sqlite3
from collections import Counter

import datasets
import pytest

from slmsql_hub import cli
from slmsql_hub.data.benchmarks import BENCHMARK_COLUMNS
from slmsql_hub.errors import UsageError
from slmsql_hub.sql import Limits, Sandbox
from slmsql_hub.world import DATABASES, HELD_OUT_DB, SPLITS, WorldManifest, WorldSizes, build_world
from slmsql_hub.world.populate import generate_rows
from slmsql_hub.world.questions import generate_candidates, normalize_question, normalize_sql
from slmsql_hub.world.schemas import FK, ID, LABEL, Column, DatabaseSpec, Table
from slmsql_hub.world.templates import TEMPLATES

SMALL = WorldSizes(foundation=500, grounding=200, rl_pool=60, dev=80, test=80)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(Limits(timeout_s=10), workers=2) as sb:
        yield sb


@pytest.fixture(scope="module")
def world(tmp_path_factory, sandbox):
    return build_world(tmp_path_factory.mktemp("world") / "w", seed=0, sizes=SMALL, sandbox=sandbox)


def _splits(manifest: WorldManifest) -> dict[str, datasets.Dataset]:
    return {split: datasets.load_from_disk(str(manifest.split_path(split))) for split in SPLITS}


def _readonly(path):
    # test baseline: inspect the built schema directly, read-only
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def test_world_has_at_least_five_databases_with_foreign_keys_that_hold(world):
    assert len(world.databases) >= 5
    for db_id in world.databases:
        con = _readonly(world.db_path(db_id))
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            assert 2 <= len(tables) <= 6
            foreign_keys = [fk for t in tables for fk in con.execute(f"PRAGMA foreign_key_list({t})")]
            assert foreign_keys, f"{db_id} has no foreign keys"
            assert con.execute("PRAGMA foreign_key_check").fetchall() == []
            rows = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)
            assert 50 <= rows <= 800
        finally:
            con.close()


def test_splits_have_the_requested_sizes_and_standard_columns(world):
    splits = _splits(world)
    for split, data in splits.items():
        assert len(data) == getattr(SMALL, split) == world.splits[split]
        assert list(data.column_names) == list(BENCHMARK_COLUMNS)
        assert set(data["benchmark"]) == {"world"}
        assert len(set(data["question_id"])) == len(data)
        assert (world.split_path(split) / "README.md").read_text().count("|") > 10
    assert WorldManifest.read(world.root).splits == world.splits


def test_every_gold_executes_in_the_sandbox_and_almost_all_return_rows(world, sandbox):
    for split, data in _splits(world).items():
        results = sandbox.execute_many(list(zip(data["db_path"], data["gold_sql"])))
        failures = [(sql, r.error) for sql, r in zip(data["gold_sql"], results) if not r.ok]
        assert failures == [], split
        non_empty = sum(1 for r in results if r.rows)
        assert non_empty >= 0.95 * len(results), split


def test_held_out_database_appears_only_in_dev_and_test(world):
    splits = _splits(world)
    for split, data in splits.items():
        dbs = set(data["db_id"])
        if split in ("dev", "test"):
            assert HELD_OUT_DB in dbs and len(dbs) >= 3
            assert Counter(data["db_id"])[HELD_OUT_DB] == round(0.4 * len(data))
        else:
            assert HELD_OUT_DB not in dbs


def test_no_question_or_gold_repeats_within_or_across_splits(world):
    questions, golds = set(), set()
    for data in _splits(world).values():
        for db_id, question, gold in zip(data["db_id"], data["question"], data["gold_sql"]):
            key_q, key_s = (db_id, normalize_question(question)), (db_id, normalize_sql(gold))
            assert key_q not in questions and key_s not in golds
            questions.add(key_q)
            golds.add(key_s)


def test_the_filter_finds_no_sft_question_in_the_rl_pool(world, tmp_path):
    """The world's pool is held out from both SFT stages: the filter excludes none and reports overlap 0."""
    import json

    from _tiny_model import build_model, build_tokenizer

    from slmsql_hub.data.sft_record import row_keys, write_sft_record
    from slmsql_hub.filtering import FilterConfig, run_filter

    splits = _splits(world)
    write_sft_record(tmp_path / "sft1", row_keys(splits["foundation"]), stage=1)
    (tmp_path / "sft1" / "run_summary.json").write_text('{"sft_questions": {"file": "sft_questions.json"}}')
    stage2 = write_sft_record(
        tmp_path / "sft2", row_keys(splits["grounding"]), stage=2, continued=tmp_path / "sft1"
    )
    (tmp_path / "sft2" / "run_summary.json").write_text(json.dumps({"sft_questions": stage2.summary()}))
    assert stage2.complete and not stage2.keys & set(row_keys(splits["rl_pool"]))
    config = FilterConfig(
        model_name_or_path="a-policy-is-passed",
        adapter_path=str(tmp_path / "sft2"),
        benchmarks=["world:rl_pool:3"],
        world_root=str(world.root),
        num_samples=2,
        max_new_tokens=2,
        prompt_sample_rows=0,
        sandbox_workers=1,
        output_dir=str(tmp_path / "filter"),
    )
    tokenizer = build_tokenizer()
    report = run_filter(config, policy=(build_model(tokenizer), tokenizer), progress=False)
    assert (report["excluded_sft"], report["sft_overlap"], report["pool"]) == (0, 0, 3)
    assert report["sft_record"]["questions"] == len(stage2.keys) > 0


def test_hardness_spread_covers_easy_to_extra(world):
    for split in ("foundation", "grounding", "dev"):
        spread = world.difficulty[split]
        assert all(spread[level] > 0 for level in ("easy", "medium", "hard", "extra")), (split, spread)
        assert max(spread.values()) <= 0.5 * sum(spread.values())


def test_foundation_has_no_evidence_but_grounding_does(world):
    splits = _splits(world)
    assert not any(splits["foundation"]["evidence"])
    evidence = [e for e in splits["grounding"]["evidence"] if e]
    assert evidence and all(" refers to " in e for e in evidence)


def test_same_seed_gives_identical_questions_and_database_bytes(tmp_path, world, sandbox):
    again = build_world(tmp_path / "again", seed=0, sizes=SMALL, sandbox=sandbox)
    for split in SPLITS:
        first = datasets.load_from_disk(str(world.split_path(split))).remove_columns("db_path").to_list()
        second = datasets.load_from_disk(str(again.split_path(split))).remove_columns("db_path").to_list()
        assert first == second, split
    for db_id in world.databases:
        assert world.db_path(db_id).read_bytes() == again.db_path(db_id).read_bytes()
    assert again.to_json() == world.to_json()


def test_another_seed_gives_other_data_and_questions(tmp_path, world, sandbox):
    other = build_world(tmp_path / "other", seed=1, sizes=SMALL, sandbox=sandbox)
    assert other.db_path("library").read_bytes() != world.db_path("library").read_bytes()
    ours = set(datasets.load_from_disk(str(world.split_path("dev")))["question"])
    theirs = set(datasets.load_from_disk(str(other.split_path("dev")))["question"])
    assert len(ours & theirs) < 0.5 * len(ours)


def test_rebuilding_reuses_a_complete_world_and_refuses_a_different_one(tmp_path, sandbox):
    sizes = WorldSizes(foundation=40, grounding=20, rl_pool=10, dev=20, test=20)
    out = tmp_path / "w"
    build_world(out, seed=0, sizes=sizes, sandbox=sandbox)
    stamp = (out / "world.json").stat().st_mtime_ns
    reused = build_world(out, seed=0, sizes=sizes, sandbox=sandbox)
    assert reused.splits == {s: getattr(sizes, s) for s in SPLITS}
    assert (out / "world.json").stat().st_mtime_ns == stamp
    with pytest.raises(UsageError, match="seed 0 .asked 5.*--overwrite"):
        build_world(out, seed=5, sizes=sizes, sandbox=sandbox)
    rebuilt = build_world(out, seed=5, sizes=sizes, sandbox=sandbox, overwrite=True)
    assert rebuilt.seed == 5 and WorldManifest.read(out).seed == 5
    assert not [p for p in tmp_path.iterdir() if p.name != "w"]  # no temporary build folders left behind


def test_build_refuses_a_folder_holding_something_else(tmp_path, sandbox):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a built world"):
        build_world(
            tmp_path, sizes=WorldSizes(foundation=10, grounding=5, rl_pool=5, dev=5, test=5), sandbox=sandbox
        )
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_sizes_beyond_what_the_generator_makes_are_a_usage_error(tmp_path, sandbox):
    tiny = DatabaseSpec(
        "tiny",
        (
            Table(
                "shelf", 3, (Column("shelf_id", ID), Column("name", LABEL, ("fixed", ("Top", "Mid", "Low"))))
            ),
            Table("box", 4, (Column("box_id", ID), Column("shelf_id", FK, (0.0,), references="shelf"))),
        ),
    )
    sizes = WorldSizes(foundation=10, grounding=5, rl_pool=5, dev=100, test=100)
    with pytest.raises(
        UsageError, match="held-out database has [0-9]+ usable questions left, dev asks for 40"
    ):
        build_world(
            tmp_path / "w", sizes=sizes, databases=(DATABASES[0], tiny), held_out_db="tiny", sandbox=sandbox
        )
    assert not (tmp_path / "w").exists()
    with pytest.raises(UsageError, match="'nowhere' is not one of the world's databases"):
        build_world(tmp_path / "w", sizes=sizes, held_out_db="nowhere", sandbox=sandbox)


def test_generator_covers_every_template_family_with_learnable_wording():
    spec = DATABASES[0]
    candidates = generate_candidates(spec, generate_rows(spec), 600)
    assert {c.family for c in candidates} == {t.family for t in TEMPLATES}
    assert len({c.template for c in candidates}) >= 0.9 * len(TEMPLATES)
    for c in candidates:
        # every table a gold reads is named in the question (singular noun)
        tables = {t.name for t in spec.tables if f" {t.name} " in f" {c.sql} " or f"{t.name} AS" in c.sql}
        assert all(t.replace("_", " ") in c.question.lower() for t in tables), c


def test_cli_world_build_prints_counts_per_split(tmp_path, capsys):
    out = tmp_path / "w"
    args = ["world", "build", "--out", str(out), "--foundation", "30", "--grounding", "20"]
    args += ["--rl-pool", "10", "--dev", "20", "--test", "20"]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "foundation" in printed and "   30 questions" in printed and "rl_pool" in printed
    assert cli.main(["world", "build", "--out", str(out), "--seed", "9"]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_cli_output_folder_the_machine_refuses_is_one_line_exit_1_and_loses_nothing(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("keep me\n")
    args = ["world", "build", "--out", str(blocker / "world"), "--foundation", "30", "--grounding", "20"]
    assert cli.main(args) == 1  # the machine refused (exit 1), not bad usage (exit 2)
    err = capsys.readouterr().err.strip()
    assert err.startswith("slmsql world: error: ") and "a_file" in err and "-v" in err and "\n" not in err
    assert blocker.read_text() == "keep me\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
    with pytest.raises(OSError):
        cli.main(["-v", *args])  # -v: the traceback, for whoever debugs it
