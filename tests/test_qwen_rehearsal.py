"""The GPU path, rehearsed on CPU: every recipe in ``recipes/qwen2.5-coder-1.5b/`` runs end to end through the
``slmsql`` command, with only the model swapped for a tiny local Qwen2.

The chain is the study's: ``sft_stage1_synsql`` -> ``sft_stage2_bird_spider`` -> ``filter_synsql`` ->
``grpo_band`` (and ``grpo_band_lora_lr``), ``grpo_spider``, then ``eval_bird_spider`` on the SFT and GRPO
adapters. The data are tiny benchmarks in the releases' own layouts (:mod:`_benchmark_layouts`).

Each run is the real recipe file plus the command-line overrides in :data:`OVERRIDES`, and nothing else: that
table is the whole difference from a GPU run. The commands run in a folder laid out as the recipes expect
(``data/synsql``, ``data/bird``, ``data/spider``; outputs under ``outputs/qwen2.5-coder-1.5b/``), so the
recipes' own paths chain the stages, as they do for a GPU user. The overrides, by kind:

- ``model``: the tiny Qwen2 instead of Qwen2.5-Coder-1.5B-Instruct (its pinned ``model_revision`` stays and is
  ignored for a local folder), and the chain's own SFT adapter instead of the Hub's (``adapter_path``,
  ``sft_adapter``), which the tiny model cannot load;
- ``length``: ``max_steps: 1`` instead of 400 (GRPO only; the SFT fixtures fill one step of 32 examples), and
  maj@2 instead of maj@8 in the evaluation (``self_consistency: 2``);
- ``data``: SFT stage 1 takes 8 of the fixture's 16 SynSQL questions (``benchmarks: [synsql:train:8]`` instead of 100,000
  of 2.5M), so the filter, which leaves out the adapter's SFT questions, has a held-out pool to draw from;
- ``precision``: ``bf16: true`` with ``use_cpu: true`` for training (``bf16: null`` resolves to true on a GPU with
  bfloat16; on CPU ``use_cpu`` is what allows it) and ``dtype: bfloat16`` for sampling and evaluation (what
  ``dtype: auto`` resolves to on such a GPU), so the CPU runs the GPU's number formats;
- ``cores``: one thread and one sandbox worker, for a 2-core machine shared with other jobs.

Everything else (LoRA shape, batch shapes, 8 generations, 512-token completions, activation checkpointing, the
rewards, the prompts' 3 sample rows, the filter's K and band, every path) is the recipe's. The whole chain takes
about a minute of one core.

The study (``ablations.yaml``, ``slmsql ablate``) runs its smoke grid on the chain's SFT adapter and band. Its
command takes no ``--field`` overrides, so it runs on copies of ``ablations.yaml`` and of the GRPO and eval
recipes it names, each with the fields of :data:`STUDY_OVERRIDES` changed (the same kinds), and the grid chosen
on the command line (:data:`STUDY_GRID`: ``--max_steps 1`` is a length override, as are 2 samples per question
for sampled pass@k and the diagnostics instead of 16 and 4).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
from pathlib import Path

import pytest
import yaml
from _benchmark_layouts import build_benchmarks, save_tiny_policy

from slmsql_hub.cli import main as slmsql
from slmsql_hub.commands._recipe import load_recipe, recipe_kind
from slmsql_hub.data.prompts import PromptConfig
from slmsql_hub.recipes import config_to_dict
from slmsql_hub.study.sampled import KEYS_FILE, STUDY_KEYS

QWEN = Path(__file__).resolve().parents[1] / "recipes" / "qwen2.5-coder-1.5b"

SFT_STAGE2 = "outputs/qwen2.5-coder-1.5b/sft/stage2"  # sft_stage2_bird_spider.yaml's output_dir
TRAIN = {"bf16": "true", "use_cpu": "true"}

OVERRIDES: dict[str, dict[str, dict[str, str]]] = {
    "sft_stage1_synsql.yaml": {
        "model": {"model_name_or_path": "{tiny}"},
        "data": {"benchmarks": "synsql:train:8"},
        "precision": TRAIN,
        "cores": {"num_threads": "1"},
    },
    "sft_stage2_bird_spider.yaml": {
        "model": {"model_name_or_path": "{tiny}"},
        "precision": TRAIN,
        "cores": {"num_threads": "1"},
    },
    "filter_synsql.yaml": {
        "model": {"model_name_or_path": "{tiny}", "adapter_path": SFT_STAGE2},
        "precision": {"dtype": "bfloat16"},
        "cores": {"num_threads": "1", "sandbox_workers": "1"},
    },
    **{
        name: {
            "model": {"model_name_or_path": "{tiny}", "adapter_path": SFT_STAGE2},
            "length": {"max_steps": "1"},
            "precision": TRAIN,
            "cores": {"num_threads": "1", "sandbox_workers": "1"},
        }
        for name in ("grpo_band.yaml", "grpo_band_lora_lr.yaml", "grpo_spider.yaml")
    },
    "eval_bird_spider.yaml": {
        "model": {"model_name_or_path": "{tiny}", "sft_adapter": SFT_STAGE2},
        "length": {"self_consistency": "2"},
        "precision": {"dtype": "bfloat16"},
        "cores": {"num_threads": "1", "sandbox_workers": "1"},
    },
    "diagnose.yaml": {
        "model": {"model_name_or_path": "{tiny}", "adapter_path": SFT_STAGE2},
        "length": {"num_samples": "4"},
        "precision": {"dtype": "bfloat16"},
        "cores": {"num_threads": "1", "sandbox_workers": "1"},
    },
}
"""Per recipe, by kind, every override the rehearsal passes (``{tiny}`` is the tiny model's folder)."""

STUDY_GRID = ["--variants", "frozen", "high_lr", "--seeds", "0", "--max_steps", "1"]
"""The smoke grid: the negative control, the positive one, one seed, one GRPO step."""

STUDY_OVERRIDES: dict[str, dict[str, dict[str, str]]] = {
    "ablations.yaml": {
        "model": {"model_name_or_path": "{tiny}", "sft_adapter": SFT_STAGE2},
        "length": {"passk_samples": "2", "diagnostic_samples": "2"},
        "cores": {"num_threads": "1"},
    },
    # The study gives these three the model, the adapter and the length; the rest is their own rehearsal's
    # (the filter's recipe is the sampler of the sampled pass@k and the diagnostics).
    **{
        name: {kind: OVERRIDES[name][kind] for kind in ("precision", "cores")}
        for name in ("grpo_band.yaml", "eval_bird_spider.yaml", "filter_synsql.yaml")
    },
}
"""Per recipe the study reads, every field its rehearsal changes (``ablations.yaml`` also names the copies,
``band.filter_recipe`` included)."""

TABLES = ("ablations.yaml", "study.yaml")
"""The study's tables: what ``slmsql ablate`` and ``slmsql quickstart`` read, not one stage's recipe."""

RUN_FOLDERS = {
    "grpo_band.yaml": "grpo",
    "grpo_spider.yaml": "grpo_attempt1",
    "grpo_band_lora_lr.yaml": "grpo_band_lora_lr",
}
"""Where each GRPO recipe writes in the run folder: attempt #2 (``grpo/``), attempt #1, and the lr variant beside."""

COMMANDS = {"sft": ["train", "sft"], "grpo": ["train", "grpo"], "filter": ["filter"], "eval": ["eval"],
            "diagnose": ["diagnose"]}  # fmt: skip


def _fields(groups: dict[str, dict[str, str]], tiny: Path) -> dict[str, str]:
    """One table entry's fields, every kind together, ``{tiny}`` filled in."""
    return {key: value.format(tiny=tiny) for group in groups.values() for key, value in group.items()}


def _overrides(name: str, tiny: Path) -> dict[str, str]:
    return _fields(OVERRIDES[name], tiny)


def _argv(name: str, tiny: Path) -> list[str]:
    argv = [*COMMANDS[recipe_kind(name)], "--config", str(QWEN / name)]
    for key, value in _overrides(name, tiny).items():
        argv += [f"--{key}", value]
    return argv


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Fixture benchmarks and the tiny policy; stages run on demand, each once, in the chain's order."""
    root = tmp_path_factory.mktemp("qwen_rehearsal")
    tiny = save_tiny_policy(root / "tiny", build_benchmarks(root / "data"))
    done: dict[str, int] = {}
    needs = {
        "sft_stage2_bird_spider.yaml": ["sft_stage1_synsql.yaml"],
        "filter_synsql.yaml": ["sft_stage2_bird_spider.yaml"],
        "grpo_band.yaml": ["filter_synsql.yaml"],
        "grpo_band_lora_lr.yaml": ["filter_synsql.yaml"],
        "grpo_spider.yaml": ["sft_stage2_bird_spider.yaml"],
        "eval_bird_spider.yaml": ["grpo_band.yaml"],
        "diagnose.yaml": ["filter_synsql.yaml"],
    }

    def run(name: str) -> int:
        for earlier in needs.get(name, []):
            assert run(earlier) == 0, f"{earlier} failed, so {name} cannot run"
        if name not in done:
            with contextlib.chdir(root):  # the recipes' relative data/ and outputs/ paths
                done[name] = slmsql(_argv(name, tiny))
        return done[name]

    run.tiny, run.out, run.root = tiny, root / "outputs" / "qwen2.5-coder-1.5b", root
    return run


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _pinned(name: str) -> str:
    return yaml.safe_load((QWEN / name).read_text(encoding="utf-8"))["model_revision"]


def _study_recipes(root: Path, tiny: Path) -> Path:
    """Copies of the study's recipes under ``root/study_recipes``, overridden by :data:`STUDY_OVERRIDES`, the copy
    of ``ablations.yaml`` naming the other two copies; returns that copy."""
    folder = root / "study_recipes"
    folder.mkdir(exist_ok=True)
    for name, groups in STUDY_OVERRIDES.items():
        data = yaml.safe_load((QWEN / name).read_text(encoding="utf-8"))
        data.update({key: yaml.safe_load(value) for key, value in _fields(groups, tiny).items()})
        if name == "ablations.yaml":
            data.update({key: str(folder / Path(data[key]).name) for key in ("grpo_recipe", "eval_recipe")})
            data["band"]["filter_recipe"] = str(folder / Path(data["band"]["filter_recipe"]).name)
        (folder / name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder / "ablations.yaml"


def test_every_qwen_recipe_is_rehearsed_with_only_these_kinds_of_override():
    assert sorted(OVERRIDES) == sorted(p.name for p in QWEN.glob("*.yaml") if p.name not in TABLES)
    study = yaml.safe_load((QWEN / "ablations.yaml").read_text(encoding="utf-8"))
    named = {Path(study[key]).name for key in ("grpo_recipe", "eval_recipe")} | {
        study["band"]["filter_recipe"]
    }
    assert named == set(STUDY_OVERRIDES) - {
        "ablations.yaml"
    }  # the GRPO, eval and filter recipes it reads are copied
    for name, groups in [*OVERRIDES.items(), *STUDY_OVERRIDES.items()]:
        assert set(groups) <= {"model", "length", "data", "precision", "cores"}, name
        keys = [key for group in groups.values() for key in group]
        assert len(keys) == len(set(keys)), f"{name} overrides a field twice"


def test_the_study_copies_differ_from_the_recipes_only_by_the_table(tmp_path):
    copy = _study_recipes(tmp_path, tmp_path / "tiny").parent
    for name, groups in STUDY_OVERRIDES.items():
        recipe = yaml.safe_load((QWEN / name).read_text(encoding="utf-8"))
        copied = yaml.safe_load((copy / name).read_text(encoding="utf-8"))
        differ = {key for key in recipe if recipe[key] != copied[key]} | (set(copied) - set(recipe))
        named = {"grpo_recipe", "eval_recipe", "band"} if name == "ablations.yaml" else set()
        assert differ - named == set(_fields(groups, tmp_path)), name


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sft_stage1_synsql.yaml", "sft_stage2_bird_spider.yaml"])
def test_sft_stages_run_from_the_release_layouts(chain, name, capsys):
    assert chain(name) == 0, capsys.readouterr().err[-3000:]
    out = chain.out / "sft" / ("stage1" if "stage1" in name else "stage2")
    summary = _json(out / "run_summary.json")
    assert summary["steps"] == 1 and summary["data"]["trained_on"] == 8
    assert summary["prompt"] == PromptConfig().record()  # every prompt field, the texts included
    assert (out / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_the_filter_finds_a_band_on_synsql_for_grpo(chain, capsys):
    assert chain("filter_synsql.yaml") == 0, capsys.readouterr().err[-3000:]
    report = _json(chain.out / "filter" / "filter_report.json")
    assert report["pool"] == 8 and report["num_samples"] == 8
    assert (report["excluded_sft"], report["sft_overlap"]) == (8, 0)  # stage 1's 8 questions were left out
    assert report["counts"]["band"] > 0
    assert report["generation"]["max_new_tokens"] == 512 and report["prompt"]["sample_rows"] == 3
    assert report["policy"]["model_revision"] == _pinned("filter_synsql.yaml")
    assert report["policy"]["adapter_sha256"]  # the local adapter's weights stand in for a commit


@pytest.mark.slow
@pytest.mark.parametrize("name", ["grpo_band.yaml", "grpo_band_lora_lr.yaml", "grpo_spider.yaml"])
def test_grpo_recipes_train_one_step_and_change_the_adapter(chain, name, capsys):
    assert chain(name) == 0, capsys.readouterr().err[-3000:]
    out = chain.out / RUN_FOLDERS[name]
    summary = _json(out / "run_summary.json")
    assert summary["status"] == "completed" and summary["steps"] == 1
    assert summary["adapter_checksum"]["changed"] is True and summary["fresh_adapter"] is False
    assert summary["guards"]["failed"] == []
    assert summary["rewards"]["funcs"] == ["execution", "format"]
    assert summary["revisions"]["model_revision"] == _pinned(name)  # recorded (a local folder has no commit)
    assert summary["revisions"]["model_commit"] is None
    # The resolved config is the recipe's but for the overrides: the difference from a GPU run is the table.
    recipe = config_to_dict(*load_recipe(QWEN / name))
    resolved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    overridden = set(_overrides(name, chain.tiny))
    # Filled in from other fields: TRL's from the output folder and batch shape; pin memory is off with use_cpu.
    derived = {"logging_dir", "run_name", "generation_batch_size", "dataloader_pin_memory"}
    differ = {key for key in recipe if recipe[key] != resolved.get(key)}
    assert differ - derived <= overridden, sorted(differ - derived - overridden)


@pytest.mark.slow
def test_eval_compares_sft_and_grpo_on_bird_and_spider_dev(chain, capsys):
    assert chain("eval_bird_spider.yaml") == 0, capsys.readouterr().err[-3000:]
    results = _json(chain.out / "eval" / "eval_results.json")
    assert sorted(results["benchmarks"]) == ["bird_dev", "spider_dev"]
    for key, n, mode in (("bird_dev", 4, "bird"), ("spider_dev", 2, "spider")):
        slice_ = results["benchmarks"][key]
        assert (slice_["n"], slice_["n_scorable"], slice_["mode"]) == (n, n, mode)
        assert set(slice_["policies"]) == {"sft", "grpo"}
        voted = slice_["self_consistency"]  # maj@K beside greedy EX, with its paired comparison
        assert voted["k"] == 2 and voted["comparison"]["n"] == n and set(voted["policies"]) == {"sft", "grpo"}
    assert (results["self_consistency"]["k"], results["self_consistency"]["temperature"]) == (2, 0.7)
    assert results["policies"]["grpo"]["adapter"] == "outputs/qwen2.5-coder-1.5b/grpo"  # the recipe's
    assert results["prompt"]["sft"] == PromptConfig().record()
    for policy in results["policies"].values():
        assert policy["model_revision"] == _pinned("eval_bird_spider.yaml") and policy["model_commit"] is None
    # The recipes run by hand fill the run layout, so the folder cards as the quickstart's does, both attempts too.
    assert chain("grpo_spider.yaml") == 0, capsys.readouterr().err[-3000:]
    with contextlib.chdir(chain.root):
        assert slmsql(["card", "--run-dir", str(chain.out)]) == 0, capsys.readouterr().err[-3000:]
    card = (chain.out / "card" / "README.md").read_text(encoding="utf-8")
    assert "attempt #1" in card and "recipes/world" not in card


@pytest.mark.slow
def test_diagnose_reads_the_synsql_band_and_bird_and_spider_dev(chain, capsys):
    assert chain("diagnose.yaml") == 0, capsys.readouterr().err[-3000:]
    report = _json(chain.out / "diagnosis" / "report.json")
    assert set(report["slices"]) == {"bird_dev", "spider_dev", "band"}
    assert (report["slices"]["bird_dev"]["mode"], report["slices"]["spider_dev"]["mode"]) == ("bird", "spider")
    band = _json(chain.out / "filter" / "filter_report.json")["counts"]["band"]
    assert report["training"]["questions"] == band and report["sampler"]["num_samples"] == 4
    assert report["policy"]["base_revision"] == _pinned("diagnose.yaml")
    assert (chain.out / "diagnosis" / "report.md").read_text(encoding="utf-8").startswith("# Will GRPO help")


@pytest.mark.slow
def test_the_study_runs_its_smoke_grid_on_the_band_and_frozen_answers_exactly_as_sft(chain, caplog, capsys):
    assert chain("filter_synsql.yaml") == 0, capsys.readouterr().err[-3000:]
    argv = ["ablate", "--config", str(_study_recipes(chain.root, chain.tiny)), *STUDY_GRID]
    with contextlib.chdir(chain.root), caplog.at_level(logging.WARNING, logger="slmsql_hub.study"):
        assert slmsql(argv) == 0, capsys.readouterr().err[-3000:]
    out = chain.out / "ablations"  # the recipe's output_dir
    report = _json(out / "report.json")
    band = report["band"]
    assert band["source"] == "outputs/qwen2.5-coder-1.5b/filter/band"  # the recipe's band_dir
    assert band["band"] == _json(chain.out / "filter" / "filter_report.json")["counts"]["band"] < 200
    assert f"the band holds {band['band']} questions, under the study's 200" in caplog.text  # warned, went on
    assert report["config"]["transfer"] == ["bird:dev:149", "spider:dev:200"]
    entries = {entry["name"]: entry for entry in report["variants"]}
    assert sorted(entries) == ["frozen", "high_lr"] and {e["seed"] for e in entries.values()} == {0}
    sizes = {**{half: band[half] for half in ("band_train", "band_heldout")}, "bird_dev": 4, "spider_dev": 2}
    for entry in entries.values():
        assert {name: s["n"] for name, s in entry["slices"].items()} == sizes and entry["steps"] == 1
    frozen = entries["frozen"]
    assert frozen["adapter_update"]["relative_norm"] == 0.0 and report["controls"]["negative"] is True
    for name, slice_ in frozen["slices"].items():
        assert slice_["delta"] == 0.0 and slice_["discordant"] == {"a_only": 0, "b_only": 0}, name
        # the same SQL, not only the same verdicts
        assert (out / "runs" / "frozen-seed0" / "answers" / f"{name}.jsonl").read_text() == (
            out / "sft" / f"{name}.jsonl"
        ).read_text()
    assert entries["high_lr"]["adapter_update"]["relative_norm"] > 0
    # The diagnostics: KL and entropy on band_heldout (frozen: KL 0), ΔEX per template family on every slice.
    pooled = {p["name"]: p for p in report["pooled"]}
    assert pooled["frozen"]["divergence"]["band_heldout"]["kl"] == 0.0
    assert pooled["high_lr"]["divergence"]["band_heldout"]["tokens"] > 0
    assert set(pooled["high_lr"]["families"]) == set(sizes)
    # #32's fixes hold on the Qwen recipe: SFT and every run sample the band slices with the study's fresh keys
    # (never the filter's), and the question is the unit, with per-seed McNemar rows, raw and Holm p beside it.
    fresh = {"namespace": STUDY_KEYS, "seed": 0}
    assert _json(out / "sft" / "passk" / KEYS_FILE) == fresh
    for entry in entries.values():
        assert entry["passk_keys"] == {"band_train": fresh, "band_heldout": fresh}
    for name, slice_ in pooled["high_lr"]["slices"].items():
        assert slice_["unit"] == "question" and {"p", "p_holm"} <= set(slice_), name
        assert [(row["seed"], row["test"]) for row in slice_["per_seed"]] == [(0, "McNemar exact")], name
    assert "support" not in report  # BIRD and Spider dev name no held-out database
    # The GRPO runs are the copy of grpo_band.yaml with the study's per-run fields and the variant's override.
    recipe = config_to_dict(*load_recipe(chain.root / "study_recipes" / "grpo_band.yaml"))
    resolved = yaml.safe_load((out / "runs/high_lr-seed0/grpo/config.yaml").read_text(encoding="utf-8"))
    per_run = {"model_name_or_path", "adapter_path", "dataset_paths", "output_dir", "seed", "save_strategy",
               "max_steps", "num_threads", "learning_rate"}  # fmt: skip
    derived = {"logging_dir", "run_name", "generation_batch_size", "dataloader_pin_memory"}
    assert {key for key in recipe if recipe[key] != resolved.get(key)} - derived <= per_run

    # A rerun reuses both finished folders and trains nothing.
    capsys.readouterr()
    finished = (out / "runs" / "high_lr-seed0" / "result.json").stat().st_mtime_ns
    with contextlib.chdir(chain.root):
        assert slmsql(argv) == 0
    assert capsys.readouterr().out.count("finished earlier, reused") == 2
    assert (out / "runs" / "high_lr-seed0" / "result.json").stat().st_mtime_ns == finished


# ----------------------------------------------------------------------------------------------------------
# The chain as one command, from the Hub to the Hub: `slmsql quickstart --recipes recipes/qwen2.5-coder-1.5b`
# ----------------------------------------------------------------------------------------------------------
HUB_TOKEN = "hf_test_alice"


def _quickstart_recipes(folder: Path, hub: dict[str, tuple[str, str]]) -> Path:
    """Copies of the Qwen recipes under ``folder`` with every override of :data:`OVERRIDES` but the ``model``
    kind (the quickstart passes the run's base and adapters), and of ``study.yaml`` with the Hub stages of
    ``hub`` (stage name -> repo id, revision) in place of the study's: the tiny model pushed to the local Hub."""
    folder.mkdir(parents=True)
    for name, groups in OVERRIDES.items():
        data = yaml.safe_load((QWEN / name).read_text(encoding="utf-8"))
        data.update(
            {
                key: yaml.safe_load(value)
                for kind, group in groups.items()
                if kind != "model"
                for key, value in group.items()
            }
        )
        (folder / name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    study = yaml.safe_load((QWEN / "study.yaml").read_text(encoding="utf-8"))
    for stage in study["stages"]:
        if stage["name"] in hub:
            stage["hub"] = dict(zip(("repo_id", "revision"), hub[stage["name"]], strict=True))
    (folder / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False), encoding="utf-8")
    return folder


def _slmsql(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """``slmsql ARGS`` in a fresh interpreter (offline switches off, the local Hub's endpoint); its stdout."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "slmsql_hub.cli", *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, f"slmsql {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def _python_blocks(markdown: str, section: str) -> list[str]:
    """The ```` ```python ```` blocks of ``markdown``'s ``## section`` up to the next heading of any level, in order
    (a block ends at a line ```` ``` ````)."""
    body = re.split(r"\n#+ ", markdown.split(f"## {section}\n", 1)[1], maxsplit=1)[0]
    blocks, current = [], None
    for line in body.splitlines():
        if current is None and line.strip() == "```python":
            current = []
        elif current is not None and line.strip() == "```":
            blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def _from_the_hub_after_a_new_base_commit(endpoint: str, tmp_path: Path, chain, base_sha: str) -> None:
    """After ``push --what all`` of ``alice/qwen-grpo``, a new commit to the base; then each check from an empty
    cache and an empty folder, in fresh processes: the adapter loads the pinned base's weights, the metric Space's
    README snippet runs as written, and the demo Space downloaded alone answers ``/compare`` on a Spider database
    it was shipped with (from ``alice/qwen-grpo-demo-data`` at the commit its ``space_config.json`` pins)."""
    from _helpers import REPO, commit_moved_weights, hub_client_env, load_adapter_base, python_json

    pinned_weights = chain.tiny / "model.safetensors"
    commit_moved_weights(hub_client_env(endpoint, tmp_path / "home", HUB_TOKEN), tmp_path, pinned_weights,
                         "alice/tiny-qwen")  # fmt: skip

    def fresh(name: str) -> tuple[dict[str, str], Path]:  # an empty cache and an empty folder
        (tmp_path / name / "cwd").mkdir(parents=True)
        return hub_client_env(endpoint, tmp_path / name / "home", HUB_TOKEN), tmp_path / name / "cwd"

    # (a) The adapter names the base at the commit the run loaded, and gets those weights, not the new commit's.
    env, cwd = fresh("adapter")
    loaded = load_adapter_base(env, cwd, pinned_weights, "alice/qwen-grpo")
    assert (loaded["revision"], loaded["same"]) == (base_sha, True) and loaded["compared"] > 0, loaded

    # (b) The metric Space's "How to Use" snippet, as pushed. Only its `pip install` line is not run: slmsql-hub
    # comes from this checkout on PYTHONPATH (what the wheel installs). The snippet's database is made where it
    # says, relative to the folder it runs in.
    env, cwd = fresh("metric")
    readme = python_json(
        """
        import json, sys
        from huggingface_hub import hf_hub_download
        print(json.dumps({"text": open(hf_hub_download("alice/ex", "README.md", repo_type="space")).read()}))
        """,
        env, cwd,
    )["text"]  # fmt: skip
    [snippet] = _python_blocks(readme, "How to Use")
    assert 'evaluate.load("alice/ex")' in snippet
    db = re.search(r'db_path=\["([^"]+)"\]', snippet).group(1)
    (cwd / db).parent.mkdir(parents=True)  # a `singer` table: the snippet's gold and prediction count its rows
    with sqlite3.connect(cwd / db) as conn:
        conn.execute("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()
    assert python_json(snippet, env, cwd) == 1.0  # what the snippet prints, as its comment says

    # (c) The demo Space, downloaded alone, then started from that folder in another process: the /compare handler.
    env, cwd = fresh("demo")
    python_json(
        """
        import sys
        from huggingface_hub import snapshot_download
        snapshot_download("alice/qwen-grpo-demo", repo_type="space", local_dir=sys.argv[1])
        print("{}")
        """,
        env, cwd, str(cwd / "space"),
    )  # fmt: skip
    env["PYTHONPATH"] = str(REPO)  # slmsql_hub only (what the Space's wheel installs); the Space's own modules
    answered = python_json(  # come from the downloaded folder
        """
        import json, os, sys
        sys.path.insert(0, os.getcwd())  # as the Hub runs `python app.py`
        import app, space_compare
        assert os.path.dirname(app.__file__) == os.getcwd()
        settings, _, _ = app.parse_args([])
        space = app.ComparisonSpace(settings)
        assert space.preload()
        spider, key = sorted(key for key in space.data.databases if key.startswith("spider/")), sys.argv[1]
        example = space.examples(key)[0]
        *_, details = space_compare._compare_handler(space)(key, example.question)
        print(json.dumps({"databases": spider, "path": str(space.database(key).path),
                          "gold": details["gold_status"], "gold_rows": details["gold_rows"],
                          "judged": [details[name]["status"] for name in ("sft", "grpo")]}))
        space.close()
        """,
        env, cwd / "space", "spider/spider_dev",  # Spider dev's database (BIRD dev's is shipped beside it)
    )  # fmt: skip
    config = json.loads((cwd / "space" / "space_config.json").read_text(encoding="utf-8"))
    assert config["benchmark_data"]["repo_id"] == "alice/qwen-grpo-demo-data"
    assert re.fullmatch(r"[0-9a-f]{40}", config["benchmark_data"]["revision"])
    assert config["base_model"] == {"repo_id": "alice/tiny-qwen", "revision": base_sha}
    assert "spider/spider_dev" in answered["databases"], answered
    assert "qwen-grpo-demo-data" in answered["path"], answered  # the shipped database, not the run's
    assert (answered["gold"], answered["gold_rows"]) == ("ok", 1), answered  # the example's gold ran there
    assert all(status in ("matches_gold", "wrong", "error", "timeout", "too_large", "refused", "no_sql") for status in answered["judged"])


@pytest.mark.slow
def test_the_chain_runs_from_hub_ids_into_one_run_folder_that_cards_and_pushes(chain, tmp_path):
    """The tiny base is pushed to a local Hub and named by id: ``slmsql quickstart`` trains both SFT stages on it,
    filters, trains GRPO and evaluates into one run folder. Its SFT adapter is then pushed too and a second run
    takes it from the Hub (the study's default), which ``slmsql card`` cards and ``slmsql push --what all``
    publishes; from a fresh cache the GRPO repo loads with ``AutoPeftModelForCausalLM`` by its id alone. Then the
    base gets a new commit, and what was pushed still runs as it was (:func:`_from_the_hub_after_a_new_base_commit`:
    issue #35's "Done when")."""
    from _helpers import hub_client_env, python_json, upload_folder
    from hub_server import HubServer

    from slmsql_hub.run.read import load_run
    from slmsql_hub.study.config import load_ablation_config

    with HubServer({HUB_TOKEN: "alice"}) as server:
        env = hub_client_env(server.endpoint, tmp_path / "home", HUB_TOKEN)
        base_sha = upload_folder(env, chain.tiny, "alice/tiny-qwen")
        flags = ["--attempt1", "never", "--repo-id", "alice/qwen-grpo"]

        # 1. Everything trained here but the base, which comes from the Hub by id and revision.
        trained = tmp_path / "runs" / "trained"
        recipes = _quickstart_recipes(tmp_path / "recipes_trained", {"base": ("alice/tiny-qwen", base_sha)})
        _slmsql(["quickstart", "--recipes", str(recipes), "--out", str(trained), "--from-hub", "none", *flags],
                env, chain.root)  # fmt: skip
        assert _json(trained / "base" / "hub.json") == {"repo_id": "alice/tiny-qwen", "revision": base_sha}
        assert not list((trained / "base").glob("*.safetensors"))  # an id and a revision, no weights
        assert _json(trained / "sft" / "stage2" / "run_summary.json")["revisions"]["model_commit"] == base_sha
        grpo = _json(trained / "grpo" / "run_summary.json")
        assert (grpo["base_model"], grpo["revisions"]["model_commit"]) == ("alice/tiny-qwen", base_sha)
        assert grpo["adapter_path"] == str(trained / "sft" / "stage2")

        # 2. The study's way: the SFT adapter from the Hub too; stage 1, which only feeds it, is skipped.
        sft_sha = upload_folder(env, trained / "sft" / "stage2", "alice/tiny-qwen-sft")
        run = tmp_path / "runs" / "hub"
        recipes = _quickstart_recipes(
            tmp_path / "recipes_hub",
            {"base": ("alice/tiny-qwen", base_sha), "sft2": ("alice/tiny-qwen-sft", sft_sha)},
        )
        printed = _slmsql(
            ["quickstart", "--recipes", str(recipes), "--out", str(run), *flags], env, chain.root
        )
        assert "sft1: skipped" in printed and not (run / "sft" / "stage1").exists()
        assert _json(run / "sft" / "stage2" / "hub.json") == {
            "repo_id": "alice/tiny-qwen-sft",
            "revision": sft_sha,
        }
        policy = _json(run / "filter" / "filter_report.json")["policy"]
        assert (policy["adapter"], policy["adapter_commit"]) == ("alice/tiny-qwen-sft", sft_sha)
        sft_policy = _json(run / "eval" / "eval_results.json")["policies"]["sft"]
        assert (sft_policy["adapter"], sft_policy["adapter_commit"]) == ("alice/tiny-qwen-sft", sft_sha)
        read = load_run(run)  # the one reader: the Hub stages by id, the rest from the folder
        assert {name: (ref.name, ref.revision) for name, ref in read.hub_stages.items()} == {
            "base": ("alice/tiny-qwen", base_sha), "sft_stage2": ("alice/tiny-qwen-sft", sft_sha)
        }  # fmt: skip
        study = load_ablation_config(QWEN / "ablations.yaml", run_dir=str(run))
        assert (study.base_path, study.model_revision) == ("alice/tiny-qwen", base_sha)
        assert (study.sft_path, study.sft_adapter_revision) == ("alice/tiny-qwen-sft", sft_sha)

        # 3. A rerun reuses every stage; then the card and the push, as the README says.
        again = _slmsql(["quickstart", "--recipes", str(recipes), "--out", str(run), *flags], env, chain.root)
        assert (
            again.count(": reused") == 7 and again.count(": skipped") == 2
        )  # 9 stages: sft1, grpo_attempt1 skipped
        _slmsql(["card", "--run-dir", str(run), "--repo-id", "alice/qwen-grpo", "--overwrite"], env, chain.root)
        card = (run / "card" / "README.md").read_text(encoding="utf-8")
        assert "base_model: alice/tiny-qwen" in card and "recipes/world" not in card
        pushed = _slmsql(["push", str(run), "--repo-id", "alice/qwen-grpo", "--what", "all"], env, chain.root)
        for what in ("model", "dataset", "metric-space", "demo-space"):
            assert f"{what} -> " in pushed, pushed

        result = python_json(  # a fresh cache: only the Hub id
            """
            import json, torch
            from peft import AutoPeftModelForCausalLM
            from transformers import AutoTokenizer

            model = AutoPeftModelForCausalLM.from_pretrained("alice/qwen-grpo").eval()
            tokenizer = AutoTokenizer.from_pretrained("alice/qwen-grpo")
            ids = tokenizer("SELECT count(*) FROM", return_tensors="pt").input_ids
            with torch.no_grad():
                out = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=tokenizer.pad_token_id)
            print(json.dumps({"base": model.peft_config["default"].base_model_name_or_path,
                              "new_tokens": int(out.shape[1] - ids.shape[1])}))
            """,
            hub_client_env(server.endpoint, tmp_path / "fresh", HUB_TOKEN),
            tmp_path,
        )
        assert result == {"base": "alice/tiny-qwen", "new_tokens": 6}
        _from_the_hub_after_a_new_base_commit(server.endpoint, tmp_path, chain, base_sha)
