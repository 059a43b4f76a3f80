"""The smoke grid (slow): a small run folder from the smoke recipes, then `slmsql ablate` with two variants, one
seed and a few steps. The negative control is acceptance: `frozen` answers exactly as SFT on every slice and its
adapter does not move."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slmsql_hub.cli import main
from slmsql_hub.commands.study import load_study

REPO = Path(__file__).resolve().parents[1]
STAGES = load_study(REPO / "recipes" / "world").stages


def _smoke_run(tmp_path: Path) -> Path:
    """world, base, SFT stages 1-2 from the smoke recipes, and a stand-in band: 40 rl_pool questions."""
    import datasets

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for smoke in (REPO / "recipes" / "world").glob("*_smoke.yaml"):
        shutil.copy(smoke, recipes / smoke.name.replace("_smoke", ""))
    out = tmp_path / "run"
    for stage in STAGES[:4]:  # world, base, sft1, sft2
        assert main(stage.argv(out, recipes, "me/model")) == 0, stage.name
    pool = datasets.load_from_disk(str(out / "world" / "datasets" / "rl_pool"))
    pool.select(range(40)).save_to_disk(str(out / "filter" / "band"))
    return out


def _smoke_recipe(tmp_path: Path, run: Path) -> Path:
    world = REPO / "recipes" / "world"
    text = (world / "ablations.yaml").read_text(encoding="utf-8").split("variants:")[1]
    recipe = tmp_path / "ablations_smoke.yaml"
    recipe.write_text(
        f"run_dir: {run}\noutput_dir: {tmp_path / 'ablations'}\n"
        f"grpo_recipe: {world / 'grpo_band_smoke.yaml'}\neval_recipe: {world / 'eval_smoke.yaml'}\n"
        "transfer: ['world:dev:20', 'world:test:20']\nseeds: [0]\nmax_steps: 2\nnum_threads: 1\n"
        "diagnostic_samples: 2\nsupport_samples: 2\n"
        f"band: {{filter_recipe: {world / 'filter_smoke.yaml'}, pool_rl_pool: null, min_band: 200}}\nvariants:" + text,
        encoding="utf-8",
    )
    return recipe


@pytest.mark.slow
def test_smoke_grid_frozen_answers_exactly_as_sft_and_runs_the_same_in_parallel(tmp_path, capsys, monkeypatch):
    run = _smoke_run(tmp_path)
    recipe = _smoke_recipe(tmp_path, run)
    assert main(["ablate", "--config", str(recipe), "--variants", "frozen", "high_lr"]) == 0
    printed = capsys.readouterr().out
    assert "variant 1/2 frozen seed 0" in printed and "variant 2/2 high_lr seed 0" in printed
    report = json.loads((tmp_path / "ablations" / "report.json").read_text())
    entries = {v["name"]: v for v in report["variants"]}
    assert set(entries) == {"frozen", "high_lr"}
    frozen = entries["frozen"]
    assert frozen["adapter_update"]["relative_norm"] == 0.0
    assert set(frozen["slices"]) == {"band_train", "band_heldout", "world_dev", "world_test"}
    for entry in frozen["slices"].values():
        assert entry["delta"] == 0.0 and entry["sft_ex"] == entry["grpo_ex"] and entry["p"] == 1.0
        for group in ("seen_dbs", "held_out_db"):
            assert entry.get(group, {"delta": 0.0})["delta"] == 0.0
    assert entries["high_lr"]["adapter_update"]["relative_norm"] > 0
    assert report["controls"]["negative"] is True
    assert report["band"]["band"] == 40  # under min_band: it ran, with a warning
    timing = entries["high_lr"]["time"]
    assert timing["generation_s"] > 0 and timing["train_s"] >= timing["generation_s"]

    # A rerun reuses both finished folders and trains nothing.
    assert main(["ablate", "--config", str(recipe), "--variants", "frozen", "high_lr"]) == 0
    assert capsys.readouterr().out.count("finished earlier, reused") == 2

    # Two at a time, each in its own process: the same numbers as one after the other. The sampled diagnostics
    # follow the runs in the grid's workers: after the grid this process samples and scores nothing.
    from slmsql_hub.study import diagnostics

    def loads_nothing(*args, **kwargs):
        raise AssertionError("the diagnostics were left for after the grid")

    monkeypatch.setattr(diagnostics, "load_sampler_policy", loads_nothing)
    monkeypatch.setattr(diagnostics, "_score_runs", loads_nothing)
    parallel = tmp_path / "parallel"
    argv = ["ablate", "--config", str(recipe), "--variants", "frozen", "high_lr", "--jobs", "2"]
    assert main([*argv, "--output_dir", str(parallel)]) == 0
    assert "2 runs, 2 at a time" in capsys.readouterr().out
    again = {v["name"]: v for v in json.loads((parallel / "report.json").read_text())["variants"]}
    for name, entry in entries.items():
        assert again[name]["slices"] == entry["slices"]
        assert again[name]["adapter_update"] == entry["adapter_update"]
    serial = tmp_path / "ablations"
    sampled = sorted(p.relative_to(serial) for p in serial.glob("runs/*/divergence.json")) + sorted(
        p.relative_to(serial) for p in (serial / "sft").rglob("*") if p.parent.name in ("diagnostics", "support"))
    assert len(sampled) >= 4 and (serial / "sft" / "support.json").is_file()
    for path in [*sampled, Path("sft") / "support.json"]:
        assert (parallel / path).read_bytes() == (serial / path).read_bytes(), path
