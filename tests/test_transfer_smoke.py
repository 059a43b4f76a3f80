"""The transfer study's smoke (slow): a planted world, base and SFT from the smoke recipes, then `slmsql ablate`
with the recipe's main arm and its random-reward control for one step, evaluated on the probes too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from slmsql_hub.cli import main
from slmsql_hub.commands.study import load_study
from slmsql_hub.run.files import read_yaml_mapping

REPO = Path(__file__).resolve().parents[1]
WORLD = REPO / "recipes" / "world"
STAGES = load_study(WORLD).stages


def _planted_run(tmp_path: Path) -> Path:
    """A planted world (f = 0.7), base and SFT stages 1-2 from the smoke recipes, and a stand-in band."""
    import datasets

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for smoke in WORLD.glob("*_smoke.yaml"):
        shutil.copy(smoke, recipes / smoke.name.replace("_smoke", ""))
    out = tmp_path / "run"
    plant = ["--plant", "comparison_inclusive", "--plant_rate", "0.7", "--plant_probe", "20"]
    assert main(["world", "build", "--out", str(out / "world"), *plant]) == 0
    for stage in STAGES[1:4]:  # base, sft1, sft2 on the planted world
        assert main(stage.argv(out, recipes, "me/model")) == 0, stage.name
    pool = datasets.load_from_disk(str(out / "world" / "datasets" / "rl_pool"))
    pool.select(range(40)).save_to_disk(str(out / "filter" / "band"))
    return out


@pytest.mark.slow
def test_transfer_smoke_trains_the_main_arm_and_the_random_reward_and_scores_the_probes(tmp_path, capsys):
    run = _planted_run(tmp_path)
    recipe = read_yaml_mapping(WORLD / "transfer.yaml")
    arm = dict(recipe["worlds"]["plant70"], run_dir=str(run), output_dir=str(tmp_path / "transfer"))
    smoke = {
        "run_dir": str(run),
        "grpo_recipe": str(WORLD / "grpo_band_smoke.yaml"),
        "eval_recipe": str(WORLD / "eval_smoke.yaml"),
        "transfer": ["world:dev:10", *(f"world:probe_{p}:10" for p in ("same", "cross", "control"))],
        "seeds": [0],
        "max_steps": 1,
        "num_threads": 1,
        "band": {"pool_rl_pool": None, "min_band": 200, "filter_recipe": str(WORLD / "filter_smoke.yaml")},
        "diagnostic_samples": 2,  # the diagnostics' sampler: the filter's
        "support_samples": 2,
        "worlds": {"plant70": arm},
        # seed 0 only: the recipe gives the arms that carry a claim three seeds of their own
        "variants": [{**v, "seeds": [0]} for v in recipe["variants"] if v["name"] in ("plant70", "plant70_random_reward")],
    }
    path = tmp_path / "transfer_smoke.yaml"
    path.write_text(yaml.safe_dump(smoke, sort_keys=False), encoding="utf-8")
    assert main(["ablate", "--config", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "variant 1/2 plant70 seed 0" in printed and "variant 2/2 plant70_random_reward seed 0" in printed
    report = json.loads((tmp_path / "transfer" / "report.json").read_text())
    entries = {v["name"]: v for v in report["variants"]}
    assert set(entries) == {"plant70", "plant70_random_reward"}
    for entry in entries.values():
        assert {"world_probe_same", "world_probe_cross", "world_probe_control"} <= set(entry["slices"])
        assert entry["slices"]["world_probe_cross"]["n"] == 10
    telemetry = (
        tmp_path / "transfer" / "runs" / "plant70_random_reward-seed0" / "grpo" / "telemetry.jsonl"
    ).read_text()
    assert '"rewards/random/mean"' in telemetry and '"sql/correct_rate"' in telemetry
    # The diagnostics: KL and entropy on the held-out prompts (band_heldout and every probe), families on every
    # slice, SFT's pass@k on world dev's held-out database.
    for pooled in report["pooled"]:
        assert set(pooled["divergence"]) == {"band_heldout", "world_probe_same", "world_probe_cross",
                                             "world_probe_control"}  # fmt: skip
        assert all(d["tokens"] > 0 and d["kl"] >= 0 for d in pooled["divergence"].values())
        assert set(pooled["families"]) == set(entries["plant70"]["slices"])
    assert set(report["support"]) == {"world_dev"} and len(report["support"]["world_dev"]["passk"]) == 2
