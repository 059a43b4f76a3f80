"""The diagnosis (``slmsql diagnose``, issue #36) on the model card and in the pushed model repo: a run folder with
``diagnosis/`` gets a "Diagnosis" section and ships the report in the card folder; one without gets neither. The
report is written by the diagnosis's own writer from hand-made records (:mod:`_diagnosis_report`); the push goes
to the local Hub server (:mod:`hub_server`) with the real client."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _diagnosis_report import EXPECTED, write_diagnosis
from _helpers import TESTS, hub_client_env, slmsql
from hub_server import HubServer

from slmsql_hub.card import build_card
from slmsql_hub.card.diagnosis import diagnosis_section

TOKEN = "hf_test_diagnosis"


def _section(text: str) -> str:
    start = text.index("## Diagnosis\n")
    return text[start : text.index("\n## ", start + 1)]


@pytest.fixture
def run(tmp_path) -> Path:
    """A copy of the fixture run with a diagnosis in ``diagnosis/``."""
    run = tmp_path / "run"
    shutil.copytree(TESTS / "fixtures" / "run", run)
    write_diagnosis(run / "diagnosis")
    return run


def test_a_card_for_a_run_with_a_diagnosis_has_its_section_and_ships_the_report(run):
    report = json.loads((run / "diagnosis" / "report.json").read_text(encoding="utf-8"))
    card = build_card(run).folder
    section = _section((card / "README.md").read_text(encoding="utf-8"))
    for name, (n, greedy, passk, maj, all_fail) in EXPECTED.items():
        assert f"| {name} | {n} | {greedy} | {passk} | {maj} | {all_fail} |" in section
    assert report["prediction"]["sentence"] in section
    assert "| 1 | `wrong_operator` | +33.3 points | world_dev +25.0, world_test +50.0 |" in section
    assert "(diagnosis/report.md)" in section and "(diagnosis/diagnosis.png)" in section
    source, shipped = run / "diagnosis", card / "diagnosis"
    assert sorted(p.relative_to(shipped).as_posix() for p in shipped.rglob("*") if p.is_file()) == sorted(
        p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()
    )
    assert (shipped / "report.json").read_bytes() == (source / "report.json").read_bytes()

    shutil.rmtree(source)  # no diagnosis: no section, nothing shipped
    card = build_card(run).folder
    assert "## Diagnosis" not in (card / "README.md").read_text(encoding="utf-8")
    assert not (card / "diagnosis").exists()


def test_nothing_qualifies_gives_the_unlikely_to_move_sentence_and_no_ranking(tmp_path):
    report = write_diagnosis(tmp_path / "diagnosis", training=False)
    section = diagnosis_section(tmp_path / "diagnosis")
    assert report["prediction"]["ranked"] == []
    assert "GRPO on this data is unlikely to move EX here, because wrong_operator (3 questions)" in section
    assert "| rank |" not in section


def test_push_ships_the_diagnosis_in_the_model_repo(run, tmp_path):
    card = build_card(run).folder
    with HubServer({TOKEN: "alice"}) as hub:
        env = hub_client_env(hub.endpoint, tmp_path / "home", TOKEN)
        done = slmsql(["push", str(run), "--repo-id", "alice/diagnosed", "--what", "model"], env)
        assert done.returncode == 0, done.stderr
        stored = hub.files("model", "alice/diagnosed")
    for name in ("report.json", "report.md", "diagnosis.png", "questions/world_dev.jsonl"):
        assert stored[f"diagnosis/{name}"] == (card / "diagnosis" / name).read_bytes()
