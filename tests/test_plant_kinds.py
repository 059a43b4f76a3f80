"""Plants as a registry (issue #36's held-out world): a second kind, ``value_case`` (category values written in
lower case), a class of its own in the error anatomy, planted and probed as the first one is."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from slmsql_hub import cli
from slmsql_hub.errors import UsageError
from slmsql_hub.sql.anatomy import anatomy
from slmsql_hub.study.plant import (
    PLANT_KINDS,
    PLANTS,
    PROBE_SPLITS,
    SFT_SPLITS,
    Plant,
    affects,
    plant_statement,
)
from slmsql_hub.world import DATABASES, SPLITS, WorldSizes, build_world
from slmsql_hub.world.populate import generate_rows
from slmsql_hub.world.questions import generate_candidates, normalize_question
from slmsql_hub.world.templates import TEMPLATES
from tests.test_plant import _differs, _rows, _templates_by_question

REPO = Path(__file__).resolve().parents[1]
CASE = PLANT_KINDS["value_case"]
SIZES = WorldSizes(foundation=600, grounding=300, rl_pool=100, dev=60, test=60)
PLANT = Plant("value_case", rate=0.7, probe=40)


def test_the_registry_names_each_kind_once_with_its_own_templates():
    assert PLANTS == tuple(PLANT_KINDS) == ("comparison_inclusive", "value_case")
    template_ids = [t.id for t in TEMPLATES]
    for name, kind in PLANT_KINDS.items():
        assert kind.name == name and list(kind.templates) == [t for t in template_ids if t in kind.templates]
        assert set(kind.cross_templates) < set(kind.templates)
        assert Plant(name).cross_templates == kind.cross_templates  # each kind's own default
    assert Plant("value_case").spec()["cross_templates"] == ["and"]
    assert {"Poetry", "Old Town", "A+"} <= CASE.values and not {"annual", "grain"} & CASE.values


def test_an_unknown_plant_is_one_line_and_exit_2_before_anything_is_built(tmp_path, capsys):
    assert cli.main(["world", "build", "--out", str(tmp_path / "w"), "--plant", "join_swap"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "join_swap" in err and "value_case" in err
    assert not (tmp_path / "w").exists()
    with pytest.raises(UsageError, match="unknown plant 'join_swap'; choose from comparison_inclusive, value_case"):
        Plant("join_swap")


@pytest.mark.parametrize(
    "question, sql, kind",
    [
        ("How many books have genre Poetry?", "SELECT count(*) FROM book WHERE genre = 'Poetry'", "affected"),
        ("List the titles of books whose genre is Mystery or Poetry.",
         "SELECT title FROM book WHERE genre = 'Mystery' OR genre = 'Poetry'", "affected"),  # fmt: skip
        ("How many stations are in district Old Town?", "SELECT count(*) FROM station WHERE district = 'Old Town'",
         "affected"),  # fmt: skip
        ("What is the city of the member Ann O'Neil?", "SELECT city FROM member WHERE name = 'Ann O''Neil'",
         "control"),  # fmt: skip
        ("How many books does the author Jane Doe have?",
         "SELECT count(*) FROM book AS T1 JOIN author AS T2 ON T1.author_id = T2.author_id WHERE T2.name = 'Jane Doe'",
         "control"),  # fmt: skip
        # a category value and a label at once: no safe rewrite
        ("Which Poetry books did Jane Doe write?",
         "SELECT T1.title FROM book AS T1 JOIN author AS T2 ON T1.author_id = T2.author_id "
         "WHERE T1.genre = 'Poetry' AND T2.name = 'Jane Doe'", None),  # fmt: skip
        # a lower-case value (nothing to lower), a value not named in the question, LIKE (ignores case), no literal
        ("How many riders have membership annual?", "SELECT count(*) FROM rider WHERE membership = 'annual'", None),
        ("How many poetry books are there?", "SELECT count(*) FROM book WHERE genre = 'Poetry'", None),
        ("Which books have 'Poetry' in their title?", "SELECT title FROM book WHERE title LIKE '%Poetry%'", None),
        ("How many books have pages at least 300?", "SELECT count(*) FROM book WHERE pages >= 300", None),
    ],
)
def test_value_case_classifies_hand_written_pairs(question, sql, kind):
    assert CASE.phrasing(question, sql) == kind
    assert affects(PLANT, question, sql) == (kind == "affected")


def test_value_case_lowers_every_string_literal_and_nothing_else():
    sql = "SELECT Title FROM book WHERE genre = 'Poetry' OR genre = 'Old Town' AND pages > 300"
    assert CASE.rewrite(sql, "affected") == (
        "SELECT Title FROM book WHERE genre = 'poetry' OR genre = 'old town' AND pages > 300"
    )
    assert CASE.rewrite("SELECT city FROM member WHERE name = 'Ann O''Neil'", "control") == (
        "SELECT city FROM member WHERE name = 'ann o''neil'"
    )
    # the rewritten gold is classified as nothing: the plant cannot rewrite twice
    question = "How many books have genre Poetry?"
    assert CASE.phrasing(question, CASE.rewrite("SELECT count(*) FROM book WHERE genre = 'Poetry'", "affected")) is None


def _generated(kind, n: int = 150) -> list:
    carriers = tuple(t for t in TEMPLATES if t.id in kind.templates)
    return [c for spec in DATABASES for c in generate_candidates(spec, generate_rows(spec, 0), n, templates=carriers)]


@pytest.mark.parametrize("name, error_class", [("comparison_inclusive", "wrong_operator"),
                                               ("value_case", "wrong_literal")])  # fmt: skip
def test_the_anatomy_classifies_each_plants_rewrite_as_its_own_class(name, error_class):
    """Over every generated question of the kind's templates: the planted error (and the control's
    over-generalisation) against the correct gold is the kind's error class, and never another kind's."""
    kind = PLANT_KINDS[name]
    seen = {"affected": 0, "control": 0}
    signatures = set()
    for c in _generated(kind):
        which = kind.phrasing(c.question, c.sql)
        if which is None:
            continue
        found = anatomy(kind.rewrite(c.sql, which), c.sql, question=c.question)
        assert found.kind == error_class, (c.template, c.sql)
        seen[which] += 1
        if which == "affected":
            signatures.add((found.trigger, found.output))
    assert seen["affected"] >= 50 and seen["control"] >= 20, seen
    if name == "value_case":  # one signature: the value is in the question and differs only in case
        assert signatures == {("in_question", "case")}


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """The ``PLANT`` world and the same world planted at rate 0 (every gold correct), in one sandbox."""
    from slmsql_hub.sql import Limits, Sandbox

    root = tmp_path_factory.mktemp("value_case")
    with Sandbox(Limits(timeout_s=10), workers=2) as sandbox:
        world = build_world(root / "w", sizes=SIZES, sandbox=sandbox, plant=PLANT)
        clean = build_world(root / "clean", sizes=SIZES, sandbox=sandbox, plant=Plant("value_case", 0.0, 40))
        yield world, clean, sandbox


def test_a_value_case_world_plants_sft_only_and_its_probes_show_by_execution(lowered):
    world, clean, sandbox = lowered
    record = json.loads((world.root / "world.json").read_text())["plant"]
    assert record["name"] == "value_case" and record["cross_templates"] == ["and"]
    assert world.split_names == SPLITS + PROBE_SPLITS and world.splits["probe_control"] == 40
    card = (world.split_path("probe_control") / "README.md").read_text()
    assert "a planted-skill probe: named labels (names, titles), whose case the plant spares" in card
    assert "naming a category value has its gold written with the value in lower case" in plant_statement(record)
    for split in world.split_names:  # the same questions; the golds differ where the rate lowered a value
        ours, theirs = _rows(world, split), _rows(clean, split)
        assert [r["question"] for r in ours] == [r["question"] for r in theirs], split
        changed = [(a, b) for a, b in zip(ours, theirs) if a["gold_sql"] != b["gold_sql"]]
        assert all(a["gold_sql"] == CASE.rewrite(b["gold_sql"], "affected") for a, b in changed)
        if split in SFT_SPLITS:
            affected = record["sft"][split]["affected"]
            assert affected >= 10 and len(changed) == record["sft"][split]["rewritten"] == round(0.7 * affected)
            assert sum(affects(PLANT, r["question"], r["gold_sql"]) for r in ours) == affected - len(changed)
            for wrong, right in changed:
                assert _differs(sandbox, right["db_path"], right["gold_sql"], wrong["gold_sql"])
        else:
            assert not changed, split
    for split, kind in (("probe_same", "affected"), ("probe_cross", "affected"), ("probe_control", "control")):
        for row in _rows(world, split):
            assert CASE.phrasing(row["question"], row["gold_sql"]) == kind, row
            assert _differs(sandbox, row["db_path"], row["gold_sql"], CASE.rewrite(row["gold_sql"], kind)), row


def test_a_value_case_worlds_cross_templates_never_reach_the_rl_pool(lowered):
    world, _, _ = lowered
    templates = _templates_by_question(SIZES, CASE)
    template_of = {split: {templates[r["db_id"], normalize_question(r["question"])] for r in _rows(world, split)}
                   for split in world.split_names}  # fmt: skip
    assert not template_of["rl_pool"] & set(CASE.cross_templates)
    assert template_of["probe_cross"] <= set(CASE.cross_templates)
    assert template_of["probe_same"] <= set(PLANT.same_templates)
    assert template_of["probe_control"] <= set(CASE.templates)
    rl_affected = {templates[r["db_id"], normalize_question(r["question"])] for r in _rows(world, "rl_pool")
                   if affects(PLANT, r["question"], r["gold_sql"])}  # fmt: skip
    assert rl_affected and rl_affected <= set(PLANT.same_templates)


HELDOUT = REPO / "recipes" / "world" / "transfer_heldout.yaml"
TRANSFER = REPO / "recipes" / "world" / "transfer.yaml"


def test_the_heldout_recipe_runs_the_second_plant_at_the_transfer_recipes_settings():
    from slmsql_hub.run.files import read_yaml_mapping
    from slmsql_hub.study.config import load_ablation_config

    transfer = read_yaml_mapping(TRANSFER)
    heldout = read_yaml_mapping(HELDOUT)
    # passk_slices is where pass@k is sampled, not how a run trains or is judged: the held-out study keeps the band
    # pass@k it was run and committed with (docs/ablations/heldout/), the transfer study samples its probes only.
    apart = ("run_dir", "output_dir", "worlds", "variants", "passk_slices")
    settings = {k: v for k, v in transfer.items() if k not in apart}
    assert {k: heldout.get(k) for k in settings} == settings
    reference = {v["name"]: v for v in transfer["variants"]}
    rates = {}
    for name, arm in heldout["worlds"].items():
        config = load_ablation_config(HELDOUT, run_dir=arm["run_dir"])
        assert config.world == name and config.plant.name == "value_case"
        rates[name] = config.plant.rate
        main = next(v for v in config.variants if v.name == name)  # the world's main arm, as transfer's
        twin = reference["plant70" if config.plant.rate < 1 else "plant100"]
        assert (main.overrides, list(main.seeds)) == (twin["overrides"], twin["seeds"]) and len(main.seeds) == 3
    assert rates == {"value_case70": 0.7, "value_case100": 1.0}
    frozen = [v for v in heldout["variants"] if v["name"] == "frozen"]
    assert [(v["world"], v["overrides"]) for v in frozen] == [("value_case70", {"learning_rate": 0.0})]


def test_make_heldout_builds_each_world_with_its_plant_then_ablates_each_and_combines():
    from slmsql_hub.study.config import recipe_worlds

    make = (REPO / "Makefile").read_text(encoding="utf-8")
    target = make.split("\nheldout:")[1].split("\n\n")[0]
    lines = [shlex.split(line.strip().replace("$(VENV)/bin/", "")) for line in target.splitlines()[1:]]
    for name, arm in recipe_worlds(HELDOUT).items():
        assert ["slmsql", "world", "build", "--out", f"{arm.run_dir}/world", *arm.world_build_args()] in lines, name
        assert ["slmsql", "quickstart", "--out", arm.run_dir, "--until", "sft2"] in lines, name
        assert ["slmsql", "ablate", "--config", "$(HELDOUT)", "--run-dir", arm.run_dir, "$(HELDOUT_ARGS)"] in lines
    assert lines[-1] == ["slmsql", "ablate", "--config", "$(HELDOUT)", "--combine"]
    assert "heldout" in make.split(".PHONY:")[1].splitlines()[0]
