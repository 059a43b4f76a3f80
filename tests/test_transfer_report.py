"""`slmsql ablate --combine` (slmsql_hub.study.transfer): the transfer report across the worlds of
recipes/world/transfer.yaml, built from tiny world folders that the real writer (`write_report`) reports on; the
card's plant statement and transfer section; the Space's Ablations tab."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slmsql_hub.cli import main
from slmsql_hub.study.evaluate import comparison_entry
from slmsql_hub.study.report import write_report
from slmsql_hub.study.sampled import passk_entry
from slmsql_hub.study.transfer import PROBES, write_transfer_report

REPO = Path(__file__).resolve().parents[1]
TRANSFER = REPO / "recipes" / "world" / "transfer.yaml"
N = 60  # questions per slice; SFT answers every other one right
WORLD_SLICES = {
    "plant70": ["band_train", "band_heldout", "world_dev", *PROBES],
    "plant100": ["band_train", "band_heldout", "world_dev", *PROBES],
    "natural": ["band_train", "band_heldout", "world_dev"],
}


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _recipe(tmp_path: Path) -> Path:
    """transfer.yaml with every world's run and output folder under ``tmp_path``."""
    text = TRANSFER.read_text(encoding="utf-8")
    text = re.sub(
        r"(?m)^(\s*\w+_recipe: )(\S+)", lambda m: m.group(1) + str(TRANSFER.parent / m.group(2)), text
    )
    text = re.sub(r"outputs/(transfer/worlds/\w+|quickstart)", lambda m: str(tmp_path / m.group(0)), text)
    text = re.sub(r"(output_dir: )outputs/", lambda m: m.group(1) + str(tmp_path / "outputs") + "/", text)
    path = tmp_path / "transfer.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _world(out: Path, slices: list[str]) -> None:
    """A prepared world output folder: band.json and SFT's answers (and sampled counts on the probes)."""
    (out / "sft" / "passk").mkdir(parents=True)
    (out / "band").mkdir()
    (out / "band" / "band.json").write_text(json.dumps(
        {"band": 2 * N, "band_train": N, "band_heldout": N, "seed": 0, "pool": {"source": "run"}}))  # fmt: skip
    for name in slices:
        rows = [{"question_id": f"{name}-{i}", "db_id": "db", "correct": i % 2} for i in range(N)]
        (out / "sft" / f"{name}.jsonl").write_text(_lines(rows))
        if name in PROBES:
            counts = [{"question_id": r["question_id"], "n": 4, "c": 2 * r["correct"]} for r in rows]
            (out / "sft" / "passk" / f"{name}.jsonl").write_text(_lines(counts))


def _finished(out: Path, name: str, seed: int, flips: dict[str, int], overrides: dict, norm: float) -> None:
    """A finished (variant, seed): per slice, ``flips[slice]`` wrong SFT answers turned right (negative: right
    ones turned wrong), the stats by the study's own ``comparison_entry``."""
    folder = out / "runs" / f"{name}-seed{seed}"
    (folder / "answers").mkdir(parents=True)
    (folder / "grpo").mkdir()
    (folder / "passk").mkdir()
    (folder / "grpo" / "telemetry.jsonl").write_text(
        _lines([{"step": s, "sql/correct_rate": 0.5} for s in (1, 2)])
    )
    slices, sft_counts, run_counts = {}, {}, {}
    for path in sorted((out / "sft").glob("*.jsonl")):
        sft = [json.loads(line) for line in path.read_text().splitlines()]
        left, answers = flips.get(path.stem, 0), []
        for x in sft:
            turn = left != 0 and x["correct"] == (0 if left > 0 else 1)
            left -= (1 if left > 0 else -1) if turn else 0
            answers.append({**x, "correct": 1 - x["correct"] if turn else x["correct"]})
        (folder / "answers" / path.name).write_text(_lines(answers))
        slices[path.stem] = comparison_entry([x["correct"] for x in sft], [a["correct"] for a in answers])
        if path.stem in PROBES:
            counts = [
                {"question_id": a["question_id"], "n": 4, "c": (2 if a == x else 4) * a["correct"]}
                for a, x in zip(answers, sft)
            ]  # an unchanged answer: SFT's counts
            (folder / "passk" / path.name).write_text(_lines(counts))
            sft_counts[path.stem] = [json.loads(line) for line in (out / "sft" / "passk" / path.name).open()]
            run_counts[path.stem] = counts
    entry = {"name": name, "seed": seed, "hypothesis": name, "overrides": overrides,
             "adapter_update": {"relative_norm": norm}, "telemetry": {"mean": {}, "trend": {}}, "steps": 2,
             "slices": slices, "held_out_dbs": {}, "time": {"train_s": 1.0, "eval_s": 1.0}}  # fmt: skip
    if sft_counts:  # a world with probes samples them (the study's own pass@k of the counts)
        entry["passk"] = passk_entry(sft_counts, run_counts)
    (folder / "result.json").write_text(json.dumps(entry))


LR = {"learning_rate": 2.0e-4}
MAIN = {"band_train": 20, "world_probe_same": 18, "world_probe_cross": 16, "world_probe_control": -1}


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """Three world folders, each reported by the real `write_report`; seed 0 only (seed 1 is missing)."""
    recipe = _recipe(tmp_path)
    grids = {
        "plant70": [("plant70", MAIN, LR, 0.01), ("frozen", {}, {"learning_rate": 0.0}, 0.0),
                    ("plant70_random_reward", {"band_train": 1}, {**LR, "reward_funcs": ["random"]}, 0.01)],
        "plant100": [("plant100", {"band_train": 15}, LR, 0.01)],
        "natural": [("natural", {"band_train": 17}, LR, 0.01)],
    }  # fmt: skip
    for world, runs in grids.items():
        out = tmp_path / "outputs" / "transfer" / world
        _world(out, WORLD_SLICES[world])
        for name, flips, overrides, norm in runs:
            _finished(out, name, 0, flips, overrides, norm)
        write_report(out, [r[0] for r in runs], {"passk_samples": 4})
    return recipe


def test_holm_across_worlds_is_never_below_each_worlds_and_keeps_absent_slices_absent(study, tmp_path):
    report = write_transfer_report(study)
    out = tmp_path / "outputs" / "transfer"  # the folder above the worlds' output folders
    assert report["path"] == str(out / "report.md") and (out / "report.json").is_file()
    rows = {r["label"]: r for r in report["rows"]}
    assert set(rows) == {"plant70/plant70", "plant70/frozen", "plant70/plant70_random_reward",
                         "plant100/plant100", "natural/natural"}  # fmt: skip
    for row in rows.values():
        for value in row["slices"].values():
            assert value["p_holm"] >= value["p_holm_world"] >= value["p"]
    assert not set(PROBES) & set(rows["natural/natural"]["slices"])
    assert set(PROBES) <= set(rows["plant100/plant100"]["slices"])
    # band_train: five rows in one family across worlds, against three in plant70's own
    band = rows["plant70/plant70"]["slices"]["band_train"]
    assert band["p_holm"] > band["p_holm_world"]
    # a probe's family holds the planted worlds' four rows only
    probe = [r["slices"]["world_probe_same"]["p"] for r in rows.values() if "world_probe_same" in r["slices"]]
    assert len(probe) == 4
    assert (out / "plots" / "forest.png").is_file() and report["plots"]["passk"] == "plots/passk.png"
    assert (out / "plots" / "passk.png").is_file()


def test_the_finding_follows_the_numbers(study, tmp_path):
    report = write_transfer_report(study)
    assert report["claims"] == {"main_transferred": True, "support_negative_held": True,
                                "random_reward_held": True, "negative_control": True, "positive_control": True,
                                "transferred": ["plant70/plant70"]}  # fmt: skip
    text = (tmp_path / "outputs" / "transfer" / "report.md").read_text(encoding="utf-8")
    same = report["rows"][0]["slices"]["world_probe_same"]
    assert (
        f"The main arm transferred: `plant70/plant70` raised world_probe_same +{100 * same['delta']:.1f}"
        in text
    )
    assert "The support-negative control held" in text and "The random-reward control held" in text
    assert "The negative control held" in text
    assert "Not yet in this report: plant70 (18 of 21 runs missing: plant70 s1, plant70 s2, plant70_lr1e-6 s0" in text
    assert "| plant70 | `plant70` | 0 |" in text and "@4 50.0 → 80.0" in text

    # the cross-template probe no longer rises: the main arm did not transfer; without `frozen` the negative
    # control was not run
    import shutil

    plant70 = tmp_path / "outputs" / "transfer" / "plant70"
    shutil.rmtree(plant70 / "runs")
    _finished(plant70, "plant70", 0, {**MAIN, "world_probe_cross": 0}, LR, 0.01)
    write_report(plant70, ["plant70"], {"passk_samples": 4})
    report = write_transfer_report(study)
    assert report["claims"]["main_transferred"] is False and report["claims"]["negative_control"] is None
    text = (tmp_path / "outputs" / "transfer" / "report.md").read_text(encoding="utf-8")
    assert "The main arm did NOT transfer" in text and "world_probe_cross 0.0 [" in text
    assert "p_holm 1.00)" in text
    assert "The negative control (`frozen`) was not run." in text


def test_each_worlds_drift_from_sft_is_one_table(study, tmp_path):
    """The worlds' pooled ``divergence`` (their diagnostics step) reaches the report as written, per world."""
    path = tmp_path / "outputs" / "transfer" / "plant70" / "report.json"
    world = json.loads(path.read_text(encoding="utf-8"))
    drift = {"tokens": 812, "kl": 0.0123, "entropy_sft": 0.456, "entropy_grpo": 0.321, "runs": 1}
    world["pooled"][0]["divergence"] = {"world_probe_cross": drift}
    path.write_text(json.dumps(world), encoding="utf-8")
    report = write_transfer_report(study)
    assert report["rows"][0]["divergence"]["world_probe_cross"] == drift
    text = (tmp_path / "outputs" / "transfer" / "report.md").read_text(encoding="utf-8")
    assert "| plant70 | `plant70` | world_probe_cross | 812 | 0.0123 | 0.456 → 0.321 |" in text
    section = text.split("## Drift from SFT")[1].split("![")[0]
    assert section.count("\n| plant") + section.count("\n| natural") == 1  # the other rows had no diagnostics


def test_a_missing_world_is_reported_not_raised(study, tmp_path):
    import shutil

    shutil.rmtree(tmp_path / "outputs" / "transfer" / "natural")
    # seed 1 of plant100 finished after its world's report was written: said, not pooled
    _finished(tmp_path / "outputs" / "transfer" / "plant100", "plant100", 1, {"band_train": 15}, LR, 0.01)
    report = write_transfer_report(study, tmp_path / "combined")
    assert report["worlds"]["plant100"]["unreported"] == [["plant100", 1]]
    assert [r["seeds"] for r in report["rows"] if r["world"] == "plant100"] == [[0]]
    assert report["worlds"]["natural"]["report"] is None
    assert all(r["world"] != "natural" for r in report["rows"])
    text = (tmp_path / "combined" / "report.md").read_text(encoding="utf-8")
    assert "natural (no report.json in" in text
    assert "Finished but not yet in its world's report.json" in text and "plant100 (plant100 s1)." in text


def test_combine_bad_input_is_one_line_and_exit_2(study, tmp_path, capsys):
    ablations = REPO / "recipes" / "world" / "ablations.yaml"
    cases = [
        (["--config", str(study), "--combine", "--variants", "plant70"], "does not go with --variants"),
        (["--config", str(study), "--combine", "--shard", "0/2"], "does not go with --shard"),
        (["--config", str(ablations), "--combine"], "has no `worlds`"),
        (["--config", str(tmp_path / "nope.yaml"), "--combine"], "nope.yaml"),
    ]
    for args, said in cases:
        assert main(["ablate", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and said in err, err
    (tmp_path / "empty").mkdir()
    empty = _recipe(tmp_path / "empty")
    assert main(["ablate", "--config", str(empty), "--combine"]) == 2
    assert "no world has a report.json yet" in capsys.readouterr().err
    assert main(["ablate", "--config", str(study), "--combine", "--output-dir", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "the main arm transferred: yes" in out and "missing: plant70 (18 of 21 runs)" in out


def _card_run(at: Path, plant: dict | None) -> Path:
    """The fixture run copied to ``at``, its world.json given ``plant`` (``None``: the natural world) and its
    ``foundation`` dataset card the plant's statement, as a planted world's build writes them."""
    import shutil

    from slmsql_hub.study.plant import plant_statement

    shutil.copytree(REPO / "tests" / "fixtures" / "run", at)
    manifest = at / "world" / "world.json"
    world = json.loads(manifest.read_text())
    if plant is not None:
        world["plant"] = plant
        card = at / "world" / "datasets" / "foundation" / "README.md"
        card.parent.mkdir(parents=True)
        card.write_text(f"# a planted world\n\n{plant_statement(plant)}\n\nQuestions with evidence: 0.\n")
    manifest.write_text(json.dumps(world))
    return at


PLANT = {"name": "comparison_inclusive", "rate": 0.7, "probe": 40, "cross_templates": ["having", "in_subquery"],
         "same_templates": ["where_number"], "sft": {"foundation": {"rewritten": 7, "affected": 10}}}  # fmt: skip


def test_a_card_in_a_planted_world_states_the_plant_and_the_transfer_finding(study, tmp_path):
    from slmsql_hub.card import build_card

    run = _card_run(tmp_path / "outputs" / "transfer" / "worlds" / "plant70", PLANT)  # the plant70 world's run
    write_transfer_report(study)
    build_card(run)
    text = (run / "card" / "README.md").read_text(encoding="utf-8")
    assert "> **Planted world** (`comparison_inclusive`, rate 0.7)" in text
    assert "(foundation 7 of 10)" in text and "`having`, `in_subquery`" in text
    assert text.index("Planted world") < text.index("## Results")  # stated before any number
    # the world's ablation report (found through the transfer report) with its pass@k plot, and the finding
    assert "## Ablations" in text and "ablations/plots/passk.png" in text
    assert "### Transfer across worlds" in text and "The main arm transferred: `plant70/plant70`" in text
    assert "ablations/transfer/plots/passk.png" in text
    shipped = run / "card" / "ablations"
    assert (shipped / "plots" / "passk.png").is_file() and (
        shipped / "transfer" / "plots" / "passk.png"
    ).is_file()
    assert json.loads((shipped / "transfer" / "report.json").read_text())["card_world"] == "plant70"


def test_a_card_in_the_natural_world_says_nothing_of_a_plant(tmp_path):
    from slmsql_hub.card import build_card

    run = _card_run(tmp_path / "run", None)
    build_card(run)
    text = (run / "card" / "README.md").read_text(encoding="utf-8")
    assert "Planted world" not in text and "planted" not in text.lower()
    assert "## Ablations" not in text and "Transfer across worlds" not in text


def _space_ablations(run: Path) -> tuple[list[str], list[str]]:
    """The Space's Ablations tab for ``run``: its markdown texts and its images' labels."""
    import importlib.util
    import sys

    demo_dir = REPO / "spaces" / "demo"
    sys.path.insert(0, str(demo_dir))
    from space_backend import ComparisonSpace, SpaceSettings

    spec = importlib.util.spec_from_file_location("slmsql_demo_app", demo_dir / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    with ComparisonSpace(SpaceSettings(run_dir=str(run))) as space:
        blocks = list(app.build_demo(space).blocks.values())
    texts = [b.value for b in blocks if isinstance(getattr(b, "value", None), str)]
    images = [b.label for b in blocks if type(b).__name__ == "Image" and b.value]
    return texts, [label for label in images if "ΔEX" in label or "pass@k" in label]  # the Ablations tab's


def test_the_space_shows_the_pass_at_k_plot_and_the_transfer_finding_the_card_shipped(study, tmp_path):
    import shutil

    from slmsql_hub.card import build_card

    run = _card_run(tmp_path / "outputs" / "transfer" / "worlds" / "plant70", PLANT)
    write_transfer_report(study)
    build_card(run)
    texts, images = _space_ablations(run)
    assert any(
        "Transfer across worlds (this run: `plant70`)" in t and "The main arm transferred" in t for t in texts
    )
    assert images == [
        "ΔEX per variant and slice (95% CI)",
        "Sampled pass@k per run and slice: SFT dashed, GRPO solid",  # the world's own report's plot
        "Sampled pass@k on the probes per world and variant: SFT dashed, GRPO solid",
    ]
    shutil.rmtree(run / "card" / "ablations" / "transfer")  # a card that shipped no transfer report
    texts, images = _space_ablations(run)
    assert any(t.startswith("No transfer study covers this run") for t in texts) and len(images) == 2


def test_the_finding_names_only_the_conditions_an_arm_varied_with_raw_and_holm_p(study, tmp_path):
    """A condition enters the finding only when an arm varied it against the main arm, naming that arm; every
    effect carries its CI, its raw p and its Holm p, and the test behind p is named."""
    report = write_transfer_report(study)
    text = (tmp_path / "outputs" / "transfer" / "report.md").read_text(encoding="utf-8")
    finding = text.split("## Finding", 1)[1].split("## ", 1)[0]
    varied = finding.split("What the arms varied", 1)[1].split("\n", 1)[0]
    # the fixture varies the learning rate (frozen at 0), the reward and the world's plant; nothing else
    for condition, arm in [("learning_rate", "plant70/frozen"), ("reward", "plant70/plant70_random_reward"),
                           ("plant rate", "plant100/plant100"), ("plant rate", "natural/natural")]:  # fmt: skip
        assert f"**{condition}**" in varied and f"`{arm}`" in varied
    assert "max_train_samples" not in finding and "dose" not in finding
    assert "`plant100/plant100` (1.0) did not transfer" in varied
    assert "`natural/natural` (nothing planted) did not transfer" in varied
    assert "Every p below is the sign-flip permutation on per-question mean differences" in finding
    rows = {r["label"]: r for r in report["rows"]}
    e = rows["plant70/plant70_random_reward"]["slices"]["band_train"]
    assert f"band_train {100 * e['delta']:+.1f} [" in finding and f"p_holm {e['p_holm']:.2f}" in finding
    # a random reward's effect is reported as measured, even when it "held"
    assert "The random-reward control held after Holm; as measured: `plant70/plant70_random_reward`" in finding


def test_a_control_that_moves_at_raw_p_is_said_so_even_when_holm_keeps_it(study, tmp_path):
    plant70 = tmp_path / "outputs" / "transfer" / "plant70"
    import shutil

    shutil.rmtree(plant70 / "runs")
    for name, flips, overrides in [("plant70", MAIN, LR), ("frozen", {}, {"learning_rate": 0.0}),
                                   ("plant70_random_reward", {"world_probe_cross": 6},
                                    {**LR, "reward_funcs": ["random"]})]:  # fmt: skip
        _finished(plant70, name, 0, flips, overrides, 0.01)
    write_report(plant70, ["plant70", "frozen", "plant70_random_reward"], {"passk_samples": 4})
    report = write_transfer_report(study)
    row = next(r for r in report["rows"] if r["label"] == "plant70/plant70_random_reward")
    cross = row["slices"]["world_probe_cross"]
    assert cross["p"] < 0.05 <= cross["p_holm"], cross
    text = (tmp_path / "outputs" / "transfer" / "report.md").read_text(encoding="utf-8")
    assert "not significant after Holm, but raw p < 0.05 on world_probe_cross" in text


def test_an_arm_trained_without_the_affected_prompts_is_a_condition_the_finding_names(study, tmp_path):
    """The dose control differs from the main arm only in ``drop_affected`` (no override): the finding names it
    as what that arm varied, and the report's rows carry the flag."""
    import shutil

    plant70 = tmp_path / "outputs" / "transfer" / "plant70"
    shutil.rmtree(plant70 / "runs")
    for name, flips, drop in [("plant70", MAIN, False), ("plant70_no_affected", {}, True)]:
        _finished(plant70, name, 0, flips, LR, 0.01)
        result = plant70 / "runs" / f"{name}-seed0" / "result.json"
        result.write_text(json.dumps({**json.loads(result.read_text()), "drop_affected": drop}))
    write_report(plant70, ["plant70", "plant70_no_affected"], {"passk_samples": 4})
    report = write_transfer_report(study)
    assert {r["label"]: r["drop_affected"] for r in report["rows"] if r["world"] == "plant70"} == {
        "plant70/plant70": False, "plant70/plant70_no_affected": True}
    text = (tmp_path / "outputs" / "transfer" / "report.md").read_text(encoding="utf-8")
    varied = text.split("What the arms varied", 1)[1].split("\n", 1)[0]
    assert "**drop_affected**: `plant70/plant70` (False) transferred" in varied
    assert "`plant70/plant70_no_affected` (True) did not transfer" in varied
