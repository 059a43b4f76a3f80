"""`slmsql diagnose --validate` (slmsql_hub.study.validation): a hand-made diagnosis report scored against a tiny
study folder whose runs the study's own reader pools; held, not held, did not learn, and bad inputs (one line,
exit 2, before any run is read)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _diagnosis_report import write_diagnosis

from slmsql_hub.cli import main
from slmsql_hub.run.files import last_commit
from slmsql_hub.study.evaluate import comparison_entry
from slmsql_hub.study.validation import score, slice_prediction

N = 60  # questions per slice; SFT answers every other one right
SLICES = ("band_train", "band_heldout", "world_dev", "world_probe_same", "world_probe_cross")


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _finished(out: Path, name: str, seed: int, flips: dict[str, int]) -> None:
    """A finished (variant, seed) folder: per slice, the first ``flips[slice]`` wrong SFT answers turned right."""
    folder = out / "runs" / f"{name}-seed{seed}"
    (folder / "answers").mkdir(parents=True)
    slices = {}
    for slice_name in SLICES:
        sft = [json.loads(line) for line in (out / "sft" / f"{slice_name}.jsonl").read_text().splitlines()]
        left, answers = flips.get(slice_name, 0), []
        for x in sft:
            turn = left > 0 and x["correct"] == 0
            left -= turn
            answers.append({**x, "correct": 1 if turn else x["correct"]})
        (folder / "answers" / f"{slice_name}.jsonl").write_text(_lines(answers))
        slices[slice_name] = comparison_entry([x["correct"] for x in sft], [a["correct"] for a in answers])
    entry = {"name": name, "seed": seed, "hypothesis": name, "overrides": {}, "adapter_update": {"relative_norm": 0.01},
             "slices": slices, "held_out_dbs": {}}  # fmt: skip
    (folder / "result.json").write_text(json.dumps(entry))


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """``learner`` (two seeds) learns band_train and gains on band_heldout and probe_same; ``idle`` does not."""
    out = tmp_path / "study"
    (out / "sft").mkdir(parents=True)
    for slice_name in SLICES:
        rows = [{"question_id": f"{slice_name}-{i}", "db_id": "db", "correct": i % 2} for i in range(N)]
        (out / "sft" / f"{slice_name}.jsonl").write_text(_lines(rows))
    gains = {"band_train": 20, "band_heldout": 20, "world_probe_same": 10}
    _finished(out, "learner", 0, gains)
    _finished(out, "learner", 1, gains)
    _finished(out, "idle", 0, {"band_train": 1, "world_probe_same": 10})
    return out


def _diagnosis(tmp_path: Path) -> Path:
    """A diagnosis that predicts wrong_operator fixable: +10 points on band_heldout, +30 on probe_same, none on
    dev; probe_cross was not diagnosed."""
    report = {
        "slices": {"band_heldout": {"headroom": 0.5}, "world_probe_same": {"headroom": 0.5},
                   "world_dev": {"headroom": 0.2}},
        "classes": [{"class": "wrong_operator", "support": 0.8, "where": "both", "training": 12,
                     "affected_by_slice": {"world_probe_same": 40}, "consistency": 0.9,
                     "signature": {"trigger": ">=", "output": ">"}}],
        "prediction": {"sentence": "GRPO could fix, on held-out questions: wrong_operator.",
                       "ranked": [{"class": "wrong_operator", "ceiling": 0.2,
                                   "ceiling_by_slice": {"band_heldout": 0.1, "world_probe_same": 0.3,
                                                        "world_dev": 0.0}}]},
    }  # fmt: skip
    path = tmp_path / "diagnosis" / "report.json"
    path.parent.mkdir()
    path.write_text(json.dumps(report))
    return path


def test_the_table_says_held_not_held_and_lists_the_variant_that_did_not_learn_apart(study, tmp_path, capsys):
    report = _diagnosis(tmp_path)
    before = sorted(p for p in study.rglob("*"))
    out = tmp_path / "validation"
    code = main(["diagnose", "--validate", str(study), "--report", str(report), "--validation-dir", str(out)])
    assert code == 0
    assert "held 2 of 3" in capsys.readouterr().out
    table = json.loads((out / "validation.json").read_text())
    (section,) = table["studies"]
    (learner,) = section["variants"]
    assert learner["name"] == "learner" and learner["seeds"] == [0, 1]
    rows = {r["slice"]: r for r in learner["rows"]}
    assert "band_train" not in rows  # the learnt criterion, not a prediction
    assert rows["world_probe_same"]["predicted"] == {"direction": "up", "ceiling": 0.3, "classes": ["wrong_operator"]}
    assert rows["world_probe_same"]["measured"] == "up" and rows["world_probe_same"]["held"] is True
    assert rows["world_probe_same"]["delta"] == pytest.approx(10 / N)  # seeds pooled per question
    assert rows["band_heldout"]["measured"] == "up" and rows["band_heldout"]["held"] is False  # over +10 points
    assert rows["world_dev"]["predicted"]["direction"] == "none" and rows["world_dev"]["held"] is True
    assert rows["world_probe_cross"]["predicted"] is None and "held" not in rows["world_probe_cross"]
    assert [v["name"] for v in section["not_learnt"]] == ["idle"]  # its probe gain is not scored
    assert (table["held"], table["scored"]) == (section["held"], section["scored"]) == (2, 3)
    assert (table["test_held"], table["test_scored"]) == (2, 3) and section["role"] == "test"
    assert section["rule_commit"] == last_commit("slmsql_hub/diagnosis/analysis.py")  # the report has none
    assert section["runs"] == ["idle s0", "learner s0", "learner s1"]
    text = (out / "validation.md").read_text()
    assert "**Held 2 of 3**" in text and "| band_heldout | up | +10.0 |" in text and "**no**" in text
    assert "`idle` (seeds 0): band_train ΔEX +1.7" in text and table["definitions"]["learnt"] in text
    assert sorted(p for p in study.rglob("*")) == before  # nothing written into the study


def test_the_diagnosis_writers_own_report_is_scored_and_its_rule_commit_cited(study, tmp_path):
    from slmsql_hub.study.validation import validate

    if last_commit("slmsql_hub/diagnosis/analysis.py") is None:
        pytest.skip("not a git checkout: no commit to cite")
    report = write_diagnosis(tmp_path / "diagnosis")  # the operator class, fixable: +25 points on world_dev
    assert re.fullmatch(r"[0-9a-f]{40}", report["rule_commit"] or "")
    assert report["rule_commit"] == last_commit("slmsql_hub/diagnosis/analysis.py")
    table = validate([(tmp_path / "diagnosis", study)], tmp_path / "validation")
    assert table["studies"][0]["rule_commit"] == report["rule_commit"] and table["rule_commits"] == [report["rule_commit"]]
    rows = {r["slice"]: r for r in table["studies"][0]["variants"][0]["rows"]}
    assert rows["world_dev"]["predicted"] == {"direction": "up", "ceiling": 0.25, "classes": ["wrong_operator"]}
    assert rows["world_dev"]["measured"] == "none" and rows["world_dev"]["held"] is False  # dev did not move
    assert rows["band_heldout"]["predicted"] is None  # this diagnosis did not sample it
    assert (table["held"], table["scored"]) == (0, 1)


def test_a_significant_drop_where_none_was_predicted_does_not_hold():
    diagnosis = {"slices": {"s": {"headroom": 0.0}}, "prediction": {"ranked": []}}
    assert slice_prediction(diagnosis, "s") == {"direction": "none", "ceiling": 0.0, "classes": []}
    pooled = [{"name": "v", "seeds": [0], "slices": {
        "band_train": {"delta": 0.3, "ci": [0.2, 0.4], "p": 0.001, "n": 50},
        "s": {"delta": -0.2, "ci": [-0.3, -0.1], "p": 0.002, "n": 50}}}]  # fmt: skip
    table = score(diagnosis, pooled)
    assert table["variants"][0]["rows"][0]["measured"] == "down" and (table["held"], table["scored"]) == (0, 1)


def test_several_studies_make_one_table_and_development_data_is_counted_apart(study, tmp_path, capsys):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(study, other)
    shutil.rmtree(other / "runs" / "learner-seed1")
    report = _diagnosis(tmp_path)
    out = tmp_path / "validation"
    args = ["diagnose", "--validate", str(study), str(other), "--report", str(report), str(report.parent),
            "--development", str(study), "--validation-dir", str(out)]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    table = json.loads((out / "validation.json").read_text())
    assert [s["study"] for s in table["studies"]] == [str(study), str(other)]
    assert [s["role"] for s in table["studies"]] == ["development", "test"]
    assert table["scored"] == sum(s["scored"] for s in table["studies"]) == 6
    assert table["held"] == sum(s["held"] for s in table["studies"])
    second = table["studies"][1]
    assert (table["test_held"], table["test_scored"]) == (second["held"], second["scored"])
    assert second["runs"] == ["idle s0", "learner s0"]  # one seed: exact McNemar, its own numbers
    assert f"outside the rule's development data {second['held']} of 3" in printed
    text = (out / "validation.md").read_text()
    assert len(re.findall(r"^## `", text, flags=re.M)) == 2 and f"| `{other}` | `{report.parent / 'report.json'}` | test | 2 |" in text


@pytest.mark.parametrize(
    "case, message",
    [
        ("no_report", "not found; run slmsql diagnose first"),
        ("not_a_diagnosis", "is not a diagnosis report"),
        ("not_a_study", "is no study folder"),
        ("out_in_study", "is inside the input"),
        ("out_is_diagnosis", "contains the input"),
        ("with_config", "does not go with --config"),
        ("no_dir", "--validate needs --report"),
        ("unpaired", "give one report per study"),
        ("twice", "names a study twice"),
        ("development_elsewhere", "is not one of the --validate studies"),
        ("development_alone", "go with --validate STUDY"),
    ],
)
def test_bad_inputs_are_one_line_exit_2_before_any_run_is_read(study, tmp_path, capsys, monkeypatch, case, message):
    import slmsql_hub.study.report as reader

    monkeypatch.setattr(reader, "pool_variants", lambda *a, **k: pytest.fail("a run was read"))
    report = _diagnosis(tmp_path)
    args = {"--validate": str(study), "--report": str(report), "--validation-dir": str(tmp_path / "v")}
    if case == "no_report":
        args["--report"] = str(tmp_path / "missing" / "report.json")
    elif case == "not_a_diagnosis":
        report.write_text(json.dumps({"pooled": []}))
    elif case == "not_a_study":
        args["--validate"] = str(tmp_path)
    elif case == "out_in_study":
        args["--validation-dir"] = str(study / "validation")
    elif case == "out_is_diagnosis":
        args["--validation-dir"] = str(report.parent)
    elif case == "with_config":
        args["--config"] = "recipes/world/diagnose.yaml"
    elif case == "no_dir":
        del args["--validation-dir"]
    elif case == "unpaired":
        args["--report"] = [str(report), str(report)]
    elif case == "twice":
        args["--validate"], args["--report"] = [str(study), str(study) + "/"], [str(report), str(report)]
    elif case == "development_elsewhere":
        args["--development"] = str(tmp_path)
    elif case == "development_alone":
        args = {"--development": str(study), "--config": "recipes/world/diagnose.yaml"}
    flat = [y for key, value in args.items() for y in [key, *(value if isinstance(value, list) else [value])]]
    assert main(["diagnose", *flat]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and "Traceback" not in err
    assert not (tmp_path / "v").exists()
