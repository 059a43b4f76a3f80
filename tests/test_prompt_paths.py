"""One row's prompt through every stage that builds one: SFT's dataset, GRPO's dataset, the filter, eval, the
study's greedy answers and sampler, and the Space. Each stage is driven through its own code up to the point
where the prompt leaves it (the model call is replaced by one that records the prompt and stops the stage), so
a stage that picked its columns or its prompt settings its own way would show here as a different string."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _tiny_model import build_tokenizer

from slmsql_hub.data.prompts import PromptConfig, build_prompts

DEMO_DIR = Path(__file__).resolve().parents[1] / "spaces" / "demo"
sys.path.insert(0, str(DEMO_DIR))

QUESTION = "How many pets are older than 3?"
EVIDENCE = "older refers to age > 3"
GOLD = "SELECT count(*) FROM pet WHERE age > 3"
RECIPE = {
    "prompt_system_prompt": "You write SQL.",
    "prompt_template": "Question: {question}\n{evidence}Schema:\n{schema}\nSQL:",
    "prompt_evidence_template": "Hint: {evidence}\n",
    "prompt_sample_rows": 1,
}


class _Prompted(Exception):
    """Raised by a stand-in model call once it has recorded the prompt."""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A one-table database and a saved dataset of one row whose ``db_path`` is relative to the world."""
    from datasets import Dataset

    root = tmp_path_factory.mktemp("prompt_world")
    (root / "databases").mkdir()
    db = root / "databases" / "pets.sqlite"
    with sqlite3.connect(db) as con:
        con.executescript("CREATE TABLE pet (id INTEGER, name TEXT, age INTEGER);"
                          "INSERT INTO pet VALUES (1, 'Rex', 4), (2, 'Tom', 2);")  # fmt: skip
    folder = root / "datasets" / "train"
    Dataset.from_dict(
        {"question": [QUESTION], "gold_sql": [GOLD], "evidence": [EVIDENCE],
         "db_path": ["databases/pets.sqlite"], "db_id": ["pets"]}
    ).save_to_disk(str(folder))  # fmt: skip
    row = {"question_id": "q1", "question": QUESTION, "evidence": EVIDENCE, "gold_sql": GOLD, "db_path": str(db),
           "db_id": "pets", "difficulty": "easy"}  # fmt: skip
    return SimpleNamespace(root=root, db=db, folder=folder, row=row)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def _sft_adapter(tmp_path: Path, script_args, prompt_config: PromptConfig) -> Path:
    """An adapter folder with the ``run_summary.json`` SFT writes (its summary of a stand-in one-step run)."""
    from slmsql_hub.training.common import write_run_summary
    from slmsql_hub.training.configs import ModelArguments
    from slmsql_hub.training.sft import _summary

    folder = tmp_path / "adapter"
    summary = _summary(
        script_args, ModelArguments(model_name_or_path="m"),
        SimpleNamespace(stage=1, adapter_path=None, output_dir=str(folder)),
        SimpleNamespace(state=SimpleNamespace(epoch=1.0, log_history=[])),
        SimpleNamespace(global_step=1, training_loss=0.0), revisions={}, data={},
        record=SimpleNamespace(summary=dict, path=folder / "sft_questions.json"), trained_keys=[],
        prompt_config=prompt_config, params={}, threads=1, seconds=(0.0, 0.0),
    )  # fmt: skip
    write_run_summary(folder, summary)
    return folder


def _capture(store: dict, key: str, pick):
    def fake(*args, **kwargs):
        store[key] = pick(*args, **kwargs)
        raise _Prompted

    return fake


def stage_prompts(world, tokenizer, monkeypatch, tmp_path, recipe: dict) -> dict[str, list[dict]]:
    """The row's prompt as each stage builds it: training stages with ``recipe``'s prompt fields, the stages
    that read an adapter (GRPO, eval, the study, the Space) from the SFT adapter's recorded prompt."""
    import slmsql_hub.evaluation as evaluation
    import slmsql_hub.filtering as filtering
    from slmsql_hub.evaluation.config import EvalConfig
    from slmsql_hub.evaluation.run import _evaluate_slices, _prompt_configs
    from slmsql_hub.filtering import run as filter_run
    from slmsql_hub.filtering.config import FilterConfig
    from slmsql_hub.study import evaluate as ablate_evaluate
    from slmsql_hub.study import sampled
    from slmsql_hub.training.configs import GRPOScriptArguments, SFTScriptArguments
    from slmsql_hub.training.grpo_data import build_prompt_dataset, load_prompt_rows
    from slmsql_hub.training.sft import _prompt_dataset

    prompts: dict[str, list[dict]] = {}
    sft_args = SFTScriptArguments(dataset_paths=[str(world.folder)], **recipe)
    sft_config, _ = sft_args.resolve_prompt_config(None)
    prompts["sft"] = _prompt_dataset(sft_args, SimpleNamespace(seed=0), sft_config)[0]["prompt"][0]
    adapter = _sft_adapter(tmp_path, sft_args, sft_config)  # every later stage reads its prompt from here

    grpo_args = GRPOScriptArguments(dataset_paths=[str(world.folder)])
    grpo_config, _ = grpo_args.resolve_prompt_config(adapter)
    prompts["grpo"] = build_prompt_dataset(load_prompt_rows(grpo_args), grpo_config, progress=False)[0]["prompt"]

    model, rows = SimpleNamespace(config=None), [dict(world.row)]
    filter_config = FilterConfig(model_name_or_path="m", world_root=str(world.root), benchmarks=["world:rl_pool"],
                                 output_dir=str(tmp_path / "filter"), adapter_path=str(adapter), sandbox_workers=1)  # fmt: skip
    monkeypatch.setattr(filter_run, "score_batch", _capture(prompts, "filter", lambda batch, chats, *a: chats[0]))
    with pytest.raises(_Prompted):
        filter_run._sample_and_judge(filter_config, list(rows), rows, {}, filter_config.resolve_prompt_config(adapter)[0],
                                     (model, tokenizer), tmp_path / "filter.jsonl", progress=False)  # fmt: skip

    eval_config = EvalConfig(model_name_or_path="m", sft_adapter=str(adapter), grpo_adapter=str(adapter),
                             output_dir=str(tmp_path / "eval"), world_root=str(world.root), sandbox_workers=1)  # fmt: skip
    monkeypatch.setattr(evaluation.run, "generate_and_judge",
                        _capture(prompts, "eval", lambda m, t, r, chats, *a, **k: chats["sft"][0]))  # fmt: skip
    piece = SimpleNamespace(rows=rows, spec=SimpleNamespace(key="world_dev", mode="bird"))
    with pytest.raises(_Prompted):
        _evaluate_slices(eval_config, [piece], _prompt_configs(eval_config), None, (model, tokenizer), tmp_path, False)

    monkeypatch.setattr(eval_config, "load_policy", lambda **kwargs: (model, tokenizer), raising=False)
    monkeypatch.setattr(evaluation, "generate_and_judge",
                        _capture(prompts, "ablate_greedy", lambda m, t, r, chats, *a, **k: chats["policy"][0]))  # fmt: skip
    with pytest.raises(_Prompted):
        ablate_evaluate.answer(adapter, {"dev": {"rows": rows, "mode": "bird"}}, eval_config, tmp_path / "greedy")

    monkeypatch.setattr(filtering, "score_batch", _capture(prompts, "ablate_sampled", lambda b, chats, *a: chats[0]))
    sampler = dataclasses.replace(filter_config, output_dir=str(tmp_path / "sampled"))
    with pytest.raises(_Prompted):
        sampled.sample_counts(sampler, adapter, {"dev": rows}, tmp_path / "sampled", policy=(model, tokenizer))

    from space_backend import ComparisonSpace, SpaceSettings
    from space_data import Database, Example, PolicySpec, SpaceData

    spec = PolicySpec("sft", str(adapter), str(adapter), evaluation.resolve_prompt_config(adapter))
    database = Database("world/pets", "pets", "world", world.db, "bird")
    with ComparisonSpace(SpaceSettings(run_dir=str(tmp_path / "run")), SpaceData(policies={"sft": spec})) as space:
        example = Example("q1", QUESTION, GOLD, evidence=EVIDENCE)
        prompts["space"] = space.prompt("sft", database, QUESTION, example)
    return prompts


def _assert_identical(prompts: dict[str, list[dict]], tokenizer) -> None:
    assert set(prompts) == {"sft", "grpo", "filter", "eval", "ablate_greedy", "ablate_sampled", "space"}
    rendered = {
        stage: tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        for stage, messages in prompts.items()
    }
    assert len(set(rendered.values())) == 1, {stage: text[:300] for stage, text in rendered.items()}
    assert all(messages == prompts["sft"] for messages in prompts.values())


def test_one_rows_prompt_is_byte_identical_through_every_stage(world, tokenizer, monkeypatch, tmp_path):
    prompts = stage_prompts(world, tokenizer, monkeypatch, tmp_path, {})
    _assert_identical(prompts, tokenizer)
    user = prompts["sft"][-1]["content"]
    assert prompts["sft"][0] == {"role": "system", "content": "You are a SQLite expert."}
    assert user.startswith("CREATE TABLE pet") and "/* sample rows of pet:" in user
    assert user.endswith(f"Evidence: {EVIDENCE}\nQuestion: {QUESTION}\nAnswer with one SQLite query in a ```sql block.")
    assert prompts["sft"] == build_prompts([world.row], PromptConfig())[0]


def test_a_recipes_template_system_prompt_and_evidence_line_reach_every_stage_and_the_summaries(
    world, tokenizer, monkeypatch, tmp_path
):
    from slmsql_hub.evaluation.config import EvalConfig
    from slmsql_hub.evaluation.run import _policy_records, _prompt_configs
    from slmsql_hub.training.configs import GRPOScriptArguments, GRPOTrainingConfig, ModelArguments
    from slmsql_hub.training.grpo_summary import start_summary

    prompts = stage_prompts(world, tokenizer, monkeypatch, tmp_path, RECIPE)
    _assert_identical(prompts, tokenizer)
    assert prompts["sft"][0] == {"role": "system", "content": "You write SQL."}
    user = prompts["sft"][1]["content"]
    assert user.startswith(f"Question: {QUESTION}\nHint: {EVIDENCE}\nSchema:\nCREATE TABLE pet")
    assert user.endswith("1 | Rex | 4\n*/\nSQL:") and "Tom" not in user  # one sample row

    adapter = tmp_path / "adapter"  # written by stage_prompts from SFT's prompt config
    recorded = json.loads((adapter / "run_summary.json").read_text())["prompt"]
    expected = {key.removeprefix("prompt_"): value for key, value in RECIPE.items()}
    assert {k: recorded[k] for k in expected} == expected and recorded["max_value_chars"] == 40
    eval_config = EvalConfig(model_name_or_path="m", sft_adapter=str(adapter), grpo_adapter=str(adapter),
                             output_dir=str(tmp_path / "eval"), world_root=str(world.root))  # fmt: skip
    assert _policy_records(eval_config, _prompt_configs(eval_config))["prompt"] == {"sft": recorded, "grpo": recorded}
    grpo_args = GRPOScriptArguments(dataset_paths=[str(world.folder)])
    training_args = GRPOTrainingConfig(output_dir=str(tmp_path / "grpo"), adapter_path=str(adapter), num_generations=2,
                                       per_device_train_batch_size=2, report_to="none", use_cpu=True)  # fmt: skip
    summary = start_summary(
        grpo_args, ModelArguments(model_name_or_path="m"), training_args, [], revisions={}, data={},
        prompt=grpo_args.resolve_prompt_config(adapter), parameters={}, threads=1, resumed_from=None,
    )  # fmt: skip
    assert summary["prompt"] == {**recorded, "source": "adapter"}
    from slmsql_hub.filtering.config import FilterConfig
    from slmsql_hub.filtering.report import _report
    from slmsql_hub.filtering.resume import _fingerprint

    filter_config = FilterConfig(model_name_or_path="m", world_root=str(world.root), benchmarks=["world:rl_pool"],
                                 output_dir=str(tmp_path / "filter"), adapter_path=str(adapter))  # fmt: skip
    prompt_config, _ = filter_config.resolve_prompt_config(adapter)
    counts = {"too_hard": 0, "in_band": 0, "too_easy": 0, "unscorable": 0}
    fingerprint = _fingerprint(filter_config, prompt_config, None)  # a resume must keep the prompt too
    assert {k: fingerprint[k] for k in RECIPE} == RECIPE
    assert _report(filter_config, [], counts, prompt_config, fingerprint, None)["prompt"] == recorded


def test_the_filters_resume_fingerprint_is_unchanged_for_the_default_prompt_text(world, tmp_path):
    from slmsql_hub.filtering.config import FilterConfig
    from slmsql_hub.filtering.resume import _fingerprint

    config = FilterConfig(model_name_or_path="m", world_root=str(world.root), benchmarks=["world:rl_pool"],
                          output_dir=str(tmp_path))  # fmt: skip
    fingerprint = _fingerprint(config, config.resolve_prompt_config(None)[0], None)
    assert (fingerprint["prompt_sample_rows"], fingerprint["prompt_max_value_chars"]) == (3, 40)
    assert not {"prompt_system_prompt", "prompt_template", "prompt_evidence_template"} & set(fingerprint)
