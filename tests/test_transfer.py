"""The transfer study's recipe (issue #22): its worlds, arms and controls parse and validate, one world at a
time; `make transfer` builds each world the way the recipe says; the random-reward control is a reward."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from slmsql_hub.cli import main
from slmsql_hub.commands.study import load_study
from slmsql_hub.errors import UsageError
from slmsql_hub.evaluation import BenchmarkSpec
from slmsql_hub.rewards import RandomReward
from slmsql_hub.run.files import read_yaml_mapping
from slmsql_hub.study.config import load_ablation_config
from slmsql_hub.study.plant import PROBE_SPLITS, Plant

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "world" / "transfer.yaml"


def _worlds() -> dict[str, dict]:
    return read_yaml_mapping(RECIPE)["worlds"]


def test_each_world_loads_alone_with_its_own_variants_output_and_slices():
    seen = []
    for name, arm in _worlds().items():
        config = load_ablation_config(RECIPE, run_dir=arm["run_dir"])
        assert config.world == name and config.output_dir == arm["output_dir"]
        assert config.variants and all(v.world == name for v in config.variants)
        assert config.seeds == [0, 1] and config.run_inputs() == ["base", "sft/stage2", "world/world.json"]
        for text in config.transfer:
            BenchmarkSpec.parse(text)  # an evaluation slice the world has
        probes = {f"world:{split}" for split in PROBE_SPLITS}
        assert probes <= set(config.transfer) if arm.get("plant") else not probes & set(config.transfer)
        seen += [v.name for v in config.variants]
    every = [v["name"] for v in read_yaml_mapping(RECIPE)["variants"]]
    assert sorted(seen) == sorted(every)  # every variant runs in exactly one world
    assert load_ablation_config(RECIPE).world == "plant70"  # the recipe's run_dir: the main arm


@pytest.mark.parametrize("recipe", sorted((REPO / "recipes").rglob("*.yaml")), ids=lambda p: p.name)
def test_no_world_reads_a_run_inside_a_study_output_folder(recipe):
    """`slmsql ablate` refuses an output folder that contains its inputs (#34), but only once the run exists: a
    recipe whose world runs sit inside a study's output (``outputs/transfer/plant70/run`` once did) fails only when
    `make transfer` reaches ablate, after the world and its SFT were built."""
    worlds = (read_yaml_mapping(recipe).get("worlds") or {}).values()
    for arm in worlds:
        run = Path(arm["run_dir"])
        for other in worlds:
            out = Path(other["output_dir"])
            assert not (run == out or out in run.parents or run in out.parents), (arm["run_dir"], other["output_dir"])


def test_the_arms_the_issue_asks_for_are_there():
    worlds = _worlds()
    rates = {name: (arm.get("plant") or {}).get("rate") for name, arm in worlds.items()}
    assert sorted(rates.values(), key=str) == [0.7, 1.0, None]
    for arm in worlds.values():
        if arm.get("plant"):
            Plant(arm["plant"]["name"], arm["plant"]["rate"])
    variants = read_yaml_mapping(RECIPE)["variants"]
    main_arm = next(name for name, rate in rates.items() if rate == 0.7)
    natural = next(name for name, rate in rates.items() if rate is None)
    for world in (main_arm, natural):  # the data-scale axis: three sizes at the same steps
        sizes = {v["overrides"].get("max_train_samples") for v in variants if v["world"] == world}
        assert {16, 32, None} <= sizes
    random_arm = [v for v in variants if v["overrides"].get("reward_funcs") == ["random"]]
    assert [v["world"] for v in random_arm] == [main_arm]
    frozen = [v for v in variants if v["name"] == "frozen"]
    assert frozen and frozen[0]["overrides"]["learning_rate"] == 0.0
    rates_tried = {v["overrides"]["learning_rate"] for v in variants if v["world"] == main_arm
                   and set(v["overrides"]) == {"learning_rate"} and not v.get("drop_affected")}  # fmt: skip
    assert rates_tried == {1e-6, 1e-5, 2e-4, 0.0}
    dose = [v for v in variants if v.get("drop_affected")]
    assert [(v["world"], v["overrides"]) for v in dose] == [(main_arm, {"learning_rate": 2e-4})]


def _make_dry_run(target: str) -> list[list[str]]:
    """The ``slmsql`` commands ``make -n TARGET`` prints (recursive makes expanded), as argument lists."""
    import subprocess

    done = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=REPO, capture_output=True, text=True,
                          check=True, env={**os.environ, "MAKEFLAGS": ""})  # fmt: skip
    commands = []
    for line in done.stdout.replace("\\\n", " ").splitlines():
        if ".venv/bin/slmsql " in line:
            command = line.split(".venv/bin/", 1)[1].split(" 2>&1")[0].split(" | ")[0]
            commands.append(shlex.split(command))
    return commands


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_transfer_builds_each_world_as_the_recipe_says_and_runs_ablate_on_each():
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    lines = _make_dry_run("transfer")
    built = {line[line.index("--out") + 1]: line[line.index("--out") + 2 :] for line in lines if line[:3] == ["slmsql", "world", "build"]}  # fmt: skip
    ablate = [line for line in lines if line[:2] == ["slmsql", "ablate"]]
    ablated = [line[line.index("--run-dir") + 1] for line in ablate if "--run-dir" in line]
    assert lines[-1] == ablate[-1] and "--combine" in lines[-1]  # one report across the worlds, last
    assert all(line[line.index("--config") + 1] == str(RECIPE.relative_to(REPO)) for line in ablate)
    config = load_ablation_config(RECIPE, run_dir=_worlds()["plant70"]["run_dir"])
    for name, arm in config.worlds.items():
        assert arm.run_dir in ablated, name
        if arm.plant:
            assert built[f"{arm.run_dir}/world"] == arm.world_build_args(), name
            quick = [line for line in lines if line[:2] == ["slmsql", "quickstart"] and arm.run_dir in line]
            assert len(quick) == 1, name
            assert lines.index(quick[0]) < lines.index(ablate[0]), name  # every world built before any ablate
            stages = [s.name for s in load_study(REPO / "recipes" / "world").stages]
            until = quick[0][quick[0].index("--until") + 1] if "--until" in quick[0] else stages[-1]
            assert stages.index(until) >= stages.index("sft2"), name  # ablate reads base, SFT 2 and the world
    assert len(ablated) == len(config.worlds)
    assert "transfer" in re.search(r"\.PHONY:.*", make).group(0)


def _recipe(tmp_path: Path, text: str) -> Path:
    base = RECIPE.read_text(encoding="utf-8").split("worlds:")[0]
    # the copy lives elsewhere: its references to other recipes point back at the originals
    base = re.sub(
        r"(?m)^(\s*\w+_recipe: )(\S+)", lambda m: m.group(1) + str(RECIPE.parent / m.group(2)), base
    )
    path = tmp_path / "transfer.yaml"
    path.write_text(base + text, encoding="utf-8")
    return path


ARM = "worlds:\n  a: {run_dir: runs/a, output_dir: out/a, plant: {name: comparison_inclusive, rate: 0.5}}\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (ARM + "variants:\n  - {name: x, overrides: {}}\n", "every variant must name one of the worlds"),
        (ARM + "variants:\n  - {name: x, world: b, overrides: {}}\n", "unknown: b"),
        ("variants:\n  - {name: x, world: a, overrides: {}}\n", "has no `worlds`"),
        (ARM.replace("0.5", "1.5") + "variants:\n  - {name: x, world: a}\n", "within \\[0, 1\\]"),
        (
            ARM.replace("comparison_inclusive", "typo") + "variants:\n  - {name: x, world: a}\n",
            "unknown plant",
        ),
        (
            ARM.replace("output_dir: out/a, ", "") + "variants:\n  - {name: x, world: a}\n",
            "run_dir and an output_dir",
        ),
        (
            ARM + "variants:\n  - {name: x, world: a, overrides: {max_train_samples: 0}}\n",
            "max_train_samples",
        ),
        (ARM + "variants:\n  - {name: x, world: a, seeds: []}\n", "seeds must be a list of distinct"),
        (ARM + "variants:\n  - {name: x, world: a, seeds: [0, 0]}\n", "seeds must be a list of distinct"),
        (ARM + "variants:\n  - {name: x, world: a, seeds: [-1]}\n", "seeds must be a list of distinct"),
        (ARM + "variants:\n  - {name: x, world: a, seeds: 3}\n", "seeds must be a list of distinct"),
        (ARM + "variants:\n  - {name: x, world: a, drop_affected: yes please}\n", "drop_affected must be true or false"),
        (
            ARM + "variants:\n  - {name: x, world: a, drop_affected: true, overrides: {dataset_paths: [d]}}\n",
            "trains on its own dataset_paths",
        ),
        (
            ARM.replace(", plant: {name: comparison_inclusive, rate: 0.5}", "")
            + "variants:\n  - {name: x, world: a, drop_affected: true}\n",
            "its world plants nothing",
        ),
    ],
)
def test_a_bad_world_or_variant_is_one_line(tmp_path, text, message):
    with pytest.raises(UsageError, match=message):
        load_ablation_config(_recipe(tmp_path, text), run_dir="runs/a")


def test_a_bad_variant_seed_list_is_one_line_and_exit_2_before_anything_runs(tmp_path, capsys):
    recipe = _recipe(tmp_path, ARM + "variants:\n  - {name: x, world: a, seeds: [0, 0]}\n")
    assert main(["ablate", "--config", str(recipe), "--run_dir", "runs/a"]) == 2
    err = capsys.readouterr().err.strip()
    assert "seeds must be a list of distinct" in err and len(err.splitlines()) == 1


def test_each_variant_runs_its_own_seeds_and_the_command_line_filters_them():
    plant70 = _worlds()["plant70"]["run_dir"]
    config = load_ablation_config(RECIPE, run_dir=plant70)
    pairs = [(v.name, seed) for v, seed in config.grid(config.variants)]
    three = ["plant70", "plant70_lr1e-6", "plant70_lr1e-5", "plant70_no_affected", "plant70_random_reward"]
    assert pairs == [(v.name, s) for v in config.variants for s in ((0, 1, 2) if v.name in three else (0, 1))]
    # --seeds keeps those of a variant's own seeds, and stands for the recipe's `seeds` elsewhere (as before)
    config = load_ablation_config(RECIPE, run_dir=plant70, seeds=[1, 2])
    assert [(v.name, s) for v, s in config.grid(config.variants)] == [
        (v.name, s) for v in config.variants for s in (1, 2)
    ]
    config = load_ablation_config(RECIPE, run_dir=plant70, seeds=[3])
    assert [(v.name, s) for v, s in config.grid(config.variants)] == [
        (v.name, 3) for v in config.variants if v.name not in three
    ]
    natural = load_ablation_config(RECIPE, run_dir=_worlds()["natural"]["run_dir"])
    assert [(v.name, s) for v, s in natural.grid(natural.variants)] == [
        ("natural", 0), ("natural", 1), ("natural", 2), ("natural_n16", 0), ("natural_n16", 1),
        ("natural_n32", 0), ("natural_n32", 1),
    ]  # fmt: skip
    plant100 = load_ablation_config(RECIPE, run_dir=_worlds()["plant100"]["run_dir"])
    assert plant100.plant == Plant("comparison_inclusive", 1.0) and natural.plant is None


def test_a_run_dir_of_no_world_is_one_line_and_exit_2(capsys):
    assert main(["ablate", "--config", str(RECIPE), "--run_dir", "outputs/elsewhere"]) == 2
    err = capsys.readouterr().err.strip()
    assert "one world at a time" in err and "plant100" in err and len(err.splitlines()) == 1


def test_the_random_reward_is_a_seeded_bernoulli_whatever_the_completion():
    completions = ["```sql\nSELECT 1\n```"] * 400
    draws = RandomReward(p=0.5, seed=3)(completions=completions)
    assert set(draws) == {0.0, 1.0} and 0.4 < sum(draws) / 400 < 0.6
    assert draws == RandomReward(p=0.5, seed=3)(completions=["nonsense"] * 400)
    assert draws != RandomReward(p=0.5, seed=4)(completions=completions)
    assert set(RandomReward(p=0.0)(completions=completions)) == {0.0}
    with pytest.raises(ValueError):
        RandomReward(p=1.5)


def test_the_recipe_names_the_random_reward_through_the_grpo_registry():
    from slmsql_hub.training.configs import GRPOTrainingConfig
    from slmsql_hub.training.grpo_rewards import build_reward_funcs

    args = GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, reward_funcs=["random"], seed=7)
    (reward,) = build_reward_funcs(args)
    assert reward.__name__ == "random" and reward.func.judging is not None
    assert reward.func.rng.random() == RandomReward(seed=7).rng.random()
    reward.close()
