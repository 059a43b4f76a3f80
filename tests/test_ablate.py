"""`slmsql ablate` (slmsql_hub.study): the recipe and its validation, the band split, Holm, and the report built
from finished folders. The grid itself (training) runs in tests/test_ablate_smoke.py (slow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slmsql_hub.cli import main
from slmsql_hub.errors import UsageError
from slmsql_hub.evaluation.stats import holm
from slmsql_hub.runtime import code_commit
from slmsql_hub.study.band import split_band
from slmsql_hub.study.config import load_ablation_config
from slmsql_hub.study.report import write_report

REPO = Path(__file__).resolve().parents[1]
WORLD = REPO / "recipes" / "world" / "ablations.yaml"
QWEN = REPO / "recipes" / "qwen2.5-coder-1.5b" / "ablations.yaml"
DEFAULT_GRID = ["frozen", "study_lr", "lora_lr", "world_lr", "high_lr", "binary_reward", "no_std_scaling",
                "clip_active", "kl", "unfiltered", "hot"]  # fmt: skip


def _recipe(tmp_path: Path, variants: str) -> Path:
    text = WORLD.read_text(encoding="utf-8").split("variants:")[0] + "variants:\n" + variants
    path = tmp_path / "ablations.yaml"
    # the copy lives elsewhere: its references to other recipes point back at the originals
    text = re.sub(r"(?m)^(\s*\w+_recipe: )(\S+)", lambda m: m.group(1) + str(WORLD.parent / m.group(2)), text)
    path.write_text(text, encoding="utf-8")
    return path


def test_world_recipe_holds_the_issues_default_grid_with_two_seeds():
    config = load_ablation_config(WORLD)
    assert [v.name for v in config.variants] == DEFAULT_GRID
    assert config.seeds == [0, 1] and all(v.hypothesis for v in config.variants)
    by_name = {v.name: v.overrides for v in config.variants}
    assert by_name["frozen"] == {"learning_rate": 0.0} and by_name["high_lr"] == {"learning_rate": 2.0e-4}
    assert by_name["unfiltered"]["dataset_paths"] == ["{run_dir}/world/datasets/grounding"]
    assert config.band.min_band == 200 and config.band.pool_rl_pool  # the study enlarges the pool


def _hub_run(root: Path) -> Path:
    """A run folder of the Qwen study's quickstart so far: its base and SFT adapter taken from the Hub."""
    for stage, record in (("base", {"repo_id": "Qwen/Qwen2.5-Coder-1.5B-Instruct", "revision": "2e1f"}),
                          ("sft/stage2", {"repo_id": "Anurich/slmsql-qwen2.5-coder-1.5b", "revision": None})):  # fmt: skip
        (root / stage).mkdir(parents=True)
        (root / stage / "hub.json").write_text(json.dumps(record))
    return root


def test_qwen_recipe_parses_and_validates_against_the_grpo_dataclasses(tmp_path):
    config = load_ablation_config(QWEN, run_dir=str(_hub_run(tmp_path / "run")))
    assert {"frozen", "study_lr", "high_lr"} <= {v.name for v in config.variants}
    assert config.transfer == ["bird:dev:149", "spider:dev:200"]
    # The run's Hub stages, read from its hub.json files: the base at its revision, the study's adapter.
    assert (config.base_path, config.model_revision) == ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "2e1f")
    assert (config.sft_path, config.sft_adapter_revision) == ("Anurich/slmsql-qwen2.5-coder-1.5b", None)


def test_the_qwen_study_reads_its_base_and_sft_from_the_run_and_needs_no_world(tmp_path):
    # Hub stages recorded in the run, BIRD/Spider for transfer, the filter's band_dir: no folder of weights needed.
    assert load_ablation_config(QWEN, run_dir=str(_hub_run(tmp_path / "run"))).run_inputs() == []
    trained = load_ablation_config(QWEN, run_dir=str(tmp_path / "trained"))  # SFT trained here: its folders
    assert trained.run_inputs() == ["base", "sft/stage2"]
    assert trained.sft_path == str(tmp_path / "trained" / "sft" / "stage2")
    assert load_ablation_config(WORLD).run_inputs() == ["base", "sft/stage2", "world/world.json"]


def test_a_misspelt_override_fails_before_training_naming_the_variant(tmp_path):
    path = _recipe(tmp_path, "  - name: typo\n    hypothesis: x\n    overrides: {learning_rte: 1.0e-4}\n")
    with pytest.raises(UsageError, match="variant 'typo': unknown GRPO field.*learning_rte"):
        load_ablation_config(path)


def test_a_bad_override_value_fails_with_the_grpo_configs_own_message(tmp_path):
    path = _recipe(tmp_path, "  - name: cold\n    hypothesis: x\n    overrides: {temperature: 0.0}\n")
    with pytest.raises(UsageError, match="variant 'cold': temperature must be > 0"):
        load_ablation_config(path)


def test_an_unknown_variant_on_the_command_line_is_one_line_and_exit_2(capsys):
    assert main(["ablate", "--config", str(WORLD), "--variants", "frozen", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown variant(s) nope" in err and "high_lr" in err


def test_band_split_is_seeded_disjoint_and_independent_of_order():
    rows = [{"question_id": f"world-rl_pool-{i:05d}"} for i in range(400)]
    train, heldout = split_band(rows, seed=0)
    assert {r["question_id"] for r in train}.isdisjoint(r["question_id"] for r in heldout)
    assert len(train) + len(heldout) == 400 and 160 < len(heldout) < 240
    again_train, _ = split_band(list(reversed(rows)), seed=0)
    assert {r["question_id"] for r in again_train} == {r["question_id"] for r in train}
    other_train, _ = split_band(rows, seed=1)
    assert {r["question_id"] for r in other_train} != {r["question_id"] for r in train}


def test_holm_adjusts_step_down_and_keeps_the_order():
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert holm([0.5, 0.001]) == [0.5, 0.002]
    assert holm([0.2, 0.01, 0.03]) == pytest.approx([0.2, 0.03, 0.06])
    assert holm([0.9, 0.8, 0.7]) == [1.0, 1.0, 1.0]  # capped at 1


def _finished_run(out: Path, name: str, seed: int, flips: int, relative_norm: float) -> None:
    """A finished (variant, seed) folder whose answers turn the first ``flips`` wrong SFT answers right."""
    folder = out / "runs" / f"{name}-seed{seed}"
    (folder / "answers").mkdir(parents=True)
    (folder / "grpo").mkdir()
    (folder / "grpo" / "telemetry.jsonl").write_text(
        "".join(json.dumps({"step": s, "kind": "train", "sql/correct_rate": 0.5}) + "\n" for s in range(1, 9))
    )
    slices = {}
    for slice_name in ("band_train", "band_heldout", "world_dev"):
        sft = [json.loads(line) for line in (out / "sft" / f"{slice_name}.jsonl").read_text().splitlines()]
        left = flips if slice_name == "band_train" else 0
        answers = []
        for x in sft:
            turned = left > 0 and x["correct"] == 0
            left -= turned
            answers.append({**x, "correct": 1 if turned else x["correct"]})
        (folder / "answers" / f"{slice_name}.jsonl").write_text(
            "".join(json.dumps(a) + "\n" for a in answers)
        )
        b = sum(a["correct"] for a in answers) - sum(x["correct"] for x in sft)
        slices[slice_name] = {"sft_ex": 0.5, "grpo_ex": 0.5 + b / len(sft), "delta": b / len(sft), "ci": [0.0, 0.0],
                              "p": 2 * 0.5 ** b if b else 1.0, "n": len(sft)}  # fmt: skip
    entry = {"name": name, "seed": seed, "hypothesis": f"{name} hypothesis", "overrides": {},
             "adapter_update": {"relative_norm": relative_norm}, "telemetry": {"mean": {}, "trend": {}},
             "steps": 8, "slices": slices, "held_out_dbs": {}, "time": {"train_s": 1.0, "eval_s": 1.0}}  # fmt: skip
    (folder / "result.json").write_text(json.dumps(entry))


@pytest.fixture
def finished_grid(tmp_path: Path) -> Path:
    out = tmp_path / "ablations"
    (out / "sft").mkdir(parents=True)
    (out / "band").mkdir()
    (out / "band" / "band.json").write_text(json.dumps(
        {"band": 200, "band_train": 100, "band_heldout": 100, "seed": 0, "pool": {"source": "run"}}))  # fmt: skip
    for slice_name in ("band_train", "band_heldout", "world_dev"):
        rows = [{"question_id": f"q{i}", "db_id": "db", "correct": i % 2} for i in range(100)]
        (out / "sft" / f"{slice_name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _finished_run(out, "frozen", 0, flips=0, relative_norm=0.0)
    _finished_run(out, "high_lr", 0, flips=20, relative_norm=0.01)
    _finished_run(out, "high_lr", 1, flips=15, relative_norm=0.012)
    return out


def test_report_merges_finished_folders_with_holm_pooled_entries_and_controls(finished_grid):
    report = write_report(finished_grid, ["frozen", "high_lr"])
    assert [(v["name"], v["seed"]) for v in report["variants"]] == [
        ("frozen", 0),
        ("high_lr", 0),
        ("high_lr", 1),
    ]
    for entry in report["variants"]:
        assert set(entry["slices"]) == {"band_train", "band_heldout", "world_dev"}
        assert all("p_holm" in s and s["p_holm"] >= s["p"] for s in entry["slices"].values())
    pooled = {p["name"]: p for p in report["pooled"]}
    band_train = pooled["high_lr"]["slices"]["band_train"]
    assert pooled["high_lr"]["seeds"] == [0, 1] and band_train["n"] == 100  # questions, not questions x seeds
    assert band_train["delta"] == pytest.approx(35 / 200)  # 15 questions fixed by both seeds, 5 by one: 17.5 / 100
    # all 20 non-zero per-question differences are positive: the sign-flip p is 2 of 2^20 sign vectors
    assert band_train["p"] == 2 * 0.5**20 and band_train["unit"] == "question" and "sign-flip" in band_train["test"]
    assert band_train["discordant_per_seed"] == [{"a_only": 0, "b_only": 20}, {"a_only": 0, "b_only": 15}]
    assert [(r["seed"], r["p"], r["test"]) for r in band_train["per_seed"]] == [
        (0, 2 * 0.5**20, "McNemar exact"), (1, 2 * 0.5**15, "McNemar exact")]  # fmt: skip
    assert report["controls"] == {"negative": True, "positive": True}
    assert report["code_commit"] == code_commit()  # the code that wrote the report, in the report
    assert (finished_grid / "plots" / "forest.png").is_file()
    assert (finished_grid / "plots" / "sql_correct_rate.png").is_file()


def test_report_finding_follows_from_the_table(finished_grid):
    write_report(finished_grid, ["frozen", "high_lr"])
    text = (finished_grid / "report.md").read_text(encoding="utf-8")
    assert "The negative control held" in text
    assert "GRPO learnt its training band in 1 of 2 variants: `high_lr` ΔEX +17.5 points" in text
    assert "It did not generalise to held-out band questions" in text
    assert "Nothing moved world_dev after Holm" in text and "Every p is the " in text
    assert "| `frozen` | 0 | 0 | 0.0 [0.0, 0.0] (1.00; 1.00) |" in text  # raw p; p_holm


def test_a_frozen_run_that_moved_fails_the_negative_control(finished_grid):
    path = finished_grid / "runs" / "frozen-seed0" / "result.json"
    entry = json.loads(path.read_text())
    entry["adapter_update"]["relative_norm"] = 1e-9
    path.write_text(json.dumps(entry))
    report = write_report(finished_grid, ["frozen", "high_lr"])
    assert report["controls"]["negative"] is False
    assert "The negative control FAILED" in (finished_grid / "report.md").read_text(encoding="utf-8")


def test_unfiltered_trains_on_attempt1_data_and_the_others_on_band_train():
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import GRPO_ARGUMENTS

    config = load_ablation_config(WORLD)
    attempt1 = parse_recipe(GRPO_ARGUMENTS, REPO / "recipes" / "world" / "grpo_attempt1.yaml")[0]
    for variant in config.variants:
        values = {**config.base_values(0, Path("o"), Path("band_train")),
                  **variant.override_values("outputs/quickstart")}  # fmt: skip
        script, _, training = parse_recipe(GRPO_ARGUMENTS, config.grpo_recipe, values=values)
        if variant.name == "unfiltered":  # attempt #1's split, inside the run's world
            assert [Path(p).name for p in script.dataset_paths] == [
                Path(p).name for p in attempt1.dataset_paths
            ]
            assert script.dataset_paths == ["outputs/quickstart/world/datasets/grounding"]
        else:
            assert script.dataset_paths == ["band_train"]
        assert training.max_steps == 150 and training.adapter_path == "outputs/quickstart/sft/stage2"


def test_the_card_section_and_folder_come_from_the_report(finished_grid, tmp_path):
    from slmsql_hub.card.ablations import card_section, copy_report
    from slmsql_hub.run.read import find_report

    (tmp_path / "run").mkdir()
    write_report(finished_grid, ["frozen", "high_lr"], config={"run_dir": str(tmp_path / "other")})
    assert find_report(tmp_path / "run") is None  # the folder beside the run is another run's study
    write_report(finished_grid, ["frozen", "high_lr"], config={"run_dir": str(tmp_path / "run")})
    moved = find_report(tmp_path / "run")  # `make ablations`' folder beside the run, naming it
    assert moved == finished_grid
    shipped = copy_report(moved, tmp_path / "card")
    assert {p.name for p in shipped.iterdir()} == {"report.json", "report.md", "plots"}
    section = card_section(moved)
    assert "negative (`frozen`, learning rate 0) held" in section and "positive" in section
    assert "| `high_lr` | 0.011 | +17.5 (< 0.001; < 0.001) |" in section  # raw p; p_holm


def test_slmsql_card_adds_an_ablations_section_and_ships_the_report(finished_grid, tmp_path):
    import shutil

    from slmsql_hub.card import build_card

    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "fixtures" / "run", run)
    write_report(finished_grid, ["frozen", "high_lr"], config={"run_dir": str(run)})
    build_card(run)
    card = run / "card"
    text = (card / "README.md").read_text(encoding="utf-8")
    assert "## Ablations" in text and "ablations/report.md" in text and "`high_lr`" in text
    assert (card / "ablations" / "report.json").is_file() and (
        card / "ablations" / "plots" / "forest.png"
    ).is_file()
    assert main(["push", str(run), "--repo-id", "me/model", "--what", "model", "--dry-run"]) == 0
    assert (
        run / "push_dry_run" / "model" / "ablations" / "report.md"
    ).is_file()  # published with the model repo
    shutil.rmtree(finished_grid)  # no study: no section
    build_card(run)
    assert "## Ablations" not in (card / "README.md").read_text(encoding="utf-8")


def test_an_unreadable_report_beside_a_run_is_not_its_study(tmp_path, caplog):
    from slmsql_hub.run.read import find_report, read_run

    (tmp_path / "run").mkdir()
    (tmp_path / "ablations").mkdir()
    (tmp_path / "ablations" / "report.json").write_text("{ half a report", encoding="utf-8")
    assert find_report(tmp_path / "run") is None
    assert "is not a readable report" in caplog.text
    assert read_run(tmp_path / "run").ablations is None


def test_jobs_below_one_is_one_line_and_exit_2(capsys):
    assert main(["ablate", "--config", str(WORLD), "--jobs", "0"]) == 2
    assert "argument --jobs: must be >= 1; got 0" in capsys.readouterr().err
    assert load_ablation_config(WORLD).jobs == 2 and load_ablation_config(QWEN).jobs == 1


def test_a_null_after_holm_still_names_the_variants_with_raw_p_under_alpha():
    """Holm across variants is the permissive direction for "nothing moved": the finding lists raw p < 0.05."""
    from slmsql_hub.evaluation.findings import claims

    def row(name, p, p_holm, delta):
        entry = {"delta": delta, "p": p, "p_holm": p_holm, "ci": [0.0, 0.02]}
        return {"name": name, "slices": {"band_train": entry, "world_dev": dict(entry)},
                "adapter_update": {"relative_norm": 0.1}}  # fmt: skip

    facts = claims([row("a", 0.016, 0.11, 0.012), row("b", 0.30, 0.60, 0.004), row("c", 0.07, 0.35, 0.016)])
    assert [p["name"] for p in facts["raw_only"]["world_dev"]] == ["a"]
    assert facts["moved"]["world_dev"] == [] and facts["smallest_p"]["world_dev"] == 0.016


def test_the_study_writes_band_heldout_beside_band_train_and_a_diagnosis_names_it_as_the_report_does(tmp_path):
    """``band/band_heldout`` holds exactly band.json's held-out ids, so ``slmsql diagnose --bands
    <study>/band/band_heldout`` samples the slice the study measured, under the study's own slice name."""
    import datasets

    from slmsql_hub.diagnosis.config import band_name
    from slmsql_hub.study.config import AblationConfig, BandSettings
    from slmsql_hub.study.grid import prepare_band

    rows = [{"question_id": f"q{i}", "question": f"q {i}?", "db_id": "db", "db_path": "/x.sqlite",
             "gold_sql": "SELECT 1", "pass_rate": 0.5} for i in range(40)]  # fmt: skip
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "filter" / "band"))
    out = tmp_path / "study"
    config = AblationConfig("g.yaml", "e.yaml", [], output_dir=str(out),
                            band=BandSettings(band_dir=str(tmp_path / "filter" / "band"), min_band=1))  # fmt: skip
    prepare_band(config)
    record = json.loads((out / "band" / "band.json").read_text())
    for split in ("band_train", "band_heldout"):
        saved = datasets.load_from_disk(str(out / "band" / split))["question_id"]
        assert saved == record[f"{split}_ids"] and saved
    assert band_name(str(out / "band" / "band_heldout")) == "band_heldout"
