"""The world's tiny base model and the two-stage SFT LoRA adapter, end to end on a small stand-in world.

The stand-in world (two SQLite databases, templated questions, the five splits saved with ``save_to_disk``) is
built here so these tests run in seconds; ``test_smoke_recipes_run_end_to_end_on_the_world`` (slow) runs the
smoke recipes on the real embedded world.
"""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _helpers import REPO, trackio_logs
from datasets import Dataset

from slmsql_hub.data.prompts import PromptConfig, format_answer
from slmsql_hub.errors import UsageError
from slmsql_hub.training.base import build_corpus, build_tiny_model, pack_blocks, train_base
from slmsql_hub.training.common import drop_too_long, load_datasets, to_prompt_completion
from slmsql_hub.training.configs import (
    BaseScriptArguments,
    BaseTrainingConfig,
    ModelArguments,
    SFTScriptArguments,
    SFTTrainingConfig,
    TinyModelArguments,
)
from slmsql_hub.training.sft import train_sft
from slmsql_hub.world.tokenizer import CHAT_TEMPLATE, train_tokenizer

SPLITS = ("foundation", "grounding", "rl_pool", "dev", "test")
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
}


def build_stand_in_world(root: Path, n: int = 60, seed: int = 0) -> Path:
    """Two databases and templated questions, split like the embedded world (db_path relative to the world)."""
    rng = random.Random(seed)
    specs = {
        "pets": ("pet", ("name", "species", "age"), ("cat", "dog", "fish")),
        "shop": ("item", ("title", "category", "price"), ("food", "toy", "tool")),
    }
    for db, (table, (label, kind, number), kinds) in specs.items():
        path = root / "databases" / db / f"{db}.sqlite"
        path.parent.mkdir(parents=True)
        con = sqlite3.connect(path)  # building the test's databases, not querying them
        con.execute(
            f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, {label} TEXT, {kind} TEXT, {number} INTEGER)"
        )
        rows = [(i, f"{table}{i}", rng.choice(kinds), rng.randint(1, 30)) for i in range(1, 21)]
        con.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?)", rows)
        con.commit()
        con.close()
    records = []
    for k in range(n):
        db = sorted(specs)[k % 2]
        table, (label, kind, number), kinds = specs[db]
        value, category = rng.randint(2, 25), rng.choice(kinds)
        question, sql = [
            (
                f"How many {table}s have {number} above {value}?",
                f"SELECT count(*) FROM {table} WHERE {number} > {value}",
            ),
            (
                f"List the {label} of every {table} of {kind} {category}.",
                f"SELECT {label} FROM {table} WHERE {kind} = '{category}'",
            ),
            (f"What is the largest {number} of {table}s?", f"SELECT max({number}) FROM {table}"),
        ][k % 3]
        records.append(
            {
                "question_id": f"q{k}",
                "question": question,
                "evidence": "",
                "db_id": db,
                "db_path": f"databases/{db}/{db}.sqlite",
                "gold_sql": sql,
                "difficulty": "easy",
                "benchmark": "world",
            }
        )
    bounds = [0, n // 3, n // 2, 2 * n // 3, 5 * n // 6, n]
    for split, start, stop in zip(SPLITS, bounds, bounds[1:]):
        Dataset.from_list(records[start:stop]).save_to_disk(str(root / "datasets" / split))
    return root


QUIET_CPU_RUN = dict(logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True)
"""Training settings every run of these tests shares: log each step, save nothing, report nowhere, CPU only."""


def base_args(world: Path, out: Path, **training):
    script = BaseScriptArguments(world_dir=str(world), vocab_size=400, prompt_sample_rows=1, num_threads=1)
    config = dict(
        output_dir=str(out), max_length=64, max_steps=4, learning_rate=3e-3, per_device_train_batch_size=4
    )
    return script, TinyModelArguments(**TINY), BaseTrainingConfig(**{**QUIET_CPU_RUN, **config, **training})


def sft_args(world: Path, base: Path, out: Path, stage: int, adapter: Path | None = None, **training):
    split = "foundation" if stage == 1 else "grounding"
    script = SFTScriptArguments(
        dataset_paths=[str(world / "datasets" / split)], prompt_sample_rows=1, num_threads=1
    )
    model = ModelArguments(model_name_or_path=str(base), lora_dropout=0.0)
    adapter_path = str(adapter) if adapter else None
    config = dict(output_dir=str(out), stage=stage, adapter_path=adapter_path, max_length=512)
    config.update(per_device_train_batch_size=4, max_steps=3, learning_rate=5e-3)
    return script, model, SFTTrainingConfig(**{**QUIET_CPU_RUN, **config, **training})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_stand_in_world(tmp_path_factory.mktemp("world"))


@pytest.fixture(scope="module")
def trained(world, tmp_path_factory):
    """Base, stage 1 and stage 2, each a few steps."""
    out = tmp_path_factory.mktemp("runs")
    base = train_base(*base_args(world, out / "base"))
    stage1 = train_sft(*sft_args(world, out / "base", out / "sft1", stage=1))
    stage2 = train_sft(*sft_args(world, out / "base", out / "sft2", stage=2, adapter=out / "sft1"))
    return {"out": out, "base": base, "sft1": stage1, "sft2": stage2}


# ---------------------------------------------------------------------------------------------------------
# Tokenizer and tiny model
# ---------------------------------------------------------------------------------------------------------


def test_saved_tokenizer_has_qwen_special_tokens_and_chat_template(trained):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(trained["out"] / "base")
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert tok.chat_template == CHAT_TEMPLATE
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "How many pets?"}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert (
        rendered
        == "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nHow many pets?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tok.apply_chat_template(messages, tokenize=False).endswith("<|im_end|>\n")
    text = "SELECT name FROM pet WHERE age > 3"
    assert tok.decode(tok(text)["input_ids"]) == text


def test_prompt_tokens_are_a_prefix_of_prompt_plus_answer(trained):
    """TRL's completion mask starts where the two tokenizations diverge: it must be at the answer."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(trained["out"] / "base")
    prompt = PromptConfig(sample_rows=0).messages(
        "How many pets are older than 12?", "CREATE TABLE pet (age INT);"
    )
    answer = [{"role": "assistant", "content": format_answer("SELECT count(*) FROM pet WHERE age > 12")}]
    prompt_ids = tok.apply_chat_template(prompt, add_generation_prompt=True, return_dict=True)["input_ids"]
    full_ids = tok.apply_chat_template(prompt + answer, return_dict=True)["input_ids"]
    assert full_ids[: len(prompt_ids)] == prompt_ids
    assert tok.decode(full_ids[len(prompt_ids) :]) == answer[0]["content"] + "<|im_end|>\n"


def test_tiny_model_is_a_qwen2_with_the_lora_target_modules(trained):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(trained["out"] / "base")
    assert type(model).__name__ == "Qwen2ForCausalLM"
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} <= names
    assert model.config.eos_token_id == 2 and model.config.pad_token_id == 0
    assert set(model.generation_config.eos_token_id) == {0, 2}


def test_copy_circuit_makes_the_untrained_model_continue_a_repeat():
    tok = train_tokenizer([f"SELECT c{i} FROM t{i} WHERE v = {i}" for i in range(200)], vocab_size=600)

    def repeat_accuracy(circuit: bool) -> float:
        model = build_tiny_model(TinyModelArguments(**TINY, copy_circuit=circuit), tok).eval()
        first = torch.randint(3, len(tok), (4, 30), generator=torch.Generator().manual_seed(1))
        tokens = torch.cat([first, first], dim=1)
        with torch.no_grad():
            guess = model(input_ids=tokens).logits[:, 30:-1].argmax(-1)
        return (guess == tokens[:, 31:]).float().mean().item()

    assert repeat_accuracy(True) > 0.8
    assert repeat_accuracy(False) < 0.2


def test_pack_blocks_makes_full_blocks_ending_documents_with_endoftext():
    tok = train_tokenizer(["SELECT a FROM t", "How many t?"] * 20, vocab_size=300)
    blocks = pack_blocks(["SELECT a FROM t", "How many t?"] * 5, tok, block_length=6)
    assert blocks and all(len(b) == 6 for b in blocks)
    flat = [t for b in blocks for t in b]
    assert flat.count(tok.pad_token_id) >= len(blocks) - 1


# ---------------------------------------------------------------------------------------------------------
# Base model
# ---------------------------------------------------------------------------------------------------------


def test_base_corpus_never_shows_dev_test_or_the_grpo_pool_nor_a_chat_pair(world):
    documents, counts = build_corpus(BaseScriptArguments(world_dir=str(world), prompt_sample_rows=1))
    text = "\n".join(documents)
    held_out = load_datasets([world / "datasets" / s for s in ("dev", "test", "rl_pool")])
    train = load_datasets([world / "datasets" / s for s in ("foundation", "grounding")])
    train_questions = set(train["question"])
    for question in held_out["question"]:
        if question not in train_questions:  # templated questions can repeat across splits
            assert question not in text
    assert counts["paired_documents"] == len(train)
    assert counts["question_documents"] == counts["sql_documents"] == 0
    assert counts["prompt_documents"] == 2 * 4  # two databases x corpus_repeats
    for doc in documents:
        if "<|im_start|>user" in doc:
            assert "<|im_start|>assistant" not in doc and "```sql\nSELECT" not in doc


def test_base_run_saves_model_tokenizer_config_and_summary(trained):
    base_dir = trained["out"] / "base"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "config.yaml", "run_summary.json"):
        assert (base_dir / name).is_file(), name
    summary = json.loads((base_dir / "run_summary.json").read_text())
    assert summary["kind"] == "base" and summary["steps"] == 4
    assert math.isfinite(summary["final_loss"])
    assert summary["parameters"]["total"] == sum(
        p.numel() for p in build_tiny_model(TinyModelArguments(**TINY), _tokenizer(base_dir)).parameters()
    )
    assert summary["corpus"]["blocks"] >= 4 and summary["wall_seconds"] > 0


def _tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def test_base_refuses_a_missing_world(tmp_path):
    with pytest.raises(UsageError, match="slmsql world build"):
        train_base(*base_args(tmp_path / "nowhere", tmp_path / "out"))


def test_base_refuses_blocks_longer_than_the_model_positions(world, tmp_path):
    script, model, training = base_args(world, tmp_path / "out", max_length=64)
    model.max_position_embeddings = 32
    with pytest.raises(UsageError, match="exceeds max_position_embeddings"):
        train_base(script, model, training)


# ---------------------------------------------------------------------------------------------------------
# SFT
# ---------------------------------------------------------------------------------------------------------


def test_prompt_completion_rows_read_the_schema_through_relative_db_paths(world):
    rows = load_datasets([world / "datasets" / "foundation"])
    data = to_prompt_completion(rows, PromptConfig(sample_rows=1))
    first = data[0]
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert "CREATE TABLE" in first["prompt"][1]["content"]
    assert rows[0]["question"] in first["prompt"][1]["content"]
    assert first["completion"] == [{"role": "assistant", "content": format_answer(rows[0]["gold_sql"])}]


def test_sft_loss_covers_the_answer_only(trained, world):
    """Built as SFTTrainer sees it: labels are -100 on every prompt token and the answer + <|im_end|> is scored."""
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    base_dir = trained["out"] / "base"
    tok = _tokenizer(base_dir)
    data = to_prompt_completion(
        load_datasets([world / "datasets" / "foundation"]).select(range(2)), PromptConfig(1)
    )
    _, _, config = sft_args(world, base_dir, trained["out"] / "unused", stage=1)
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(base_dir),
        args=config,
        train_dataset=data,
        processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    example = trainer.train_dataset[0]
    scored = [t for t, label in zip(example["input_ids"], example["labels"]) if label != -100]
    assert tok.decode(scored) == data[0]["completion"][0]["content"] + "<|im_end|>\n"


def test_stage_one_saves_the_studys_adapter_and_a_summary(trained):
    stage1 = trained["out"] / "sft1"
    adapter = json.loads((stage1 / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"]) == (32, 64)
    assert {name.rsplit(".", 1)[-1] for name in adapter["target_modules"]} == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    for name in ("adapter_model.safetensors", "tokenizer.json", "config.yaml", "run_summary.json"):
        assert (stage1 / name).is_file(), name
    summary = trained["sft1"]
    assert summary["stage"] == 1 and summary["steps"] == 3
    assert summary["data"]["rows"] == summary["data"]["trained_on"] == 20
    assert summary["prompt"] == PromptConfig(sample_rows=1).record()  # every prompt field, the texts included
    assert 0 < summary["parameters"]["trainable"] < summary["parameters"]["total"]
    assert math.isfinite(summary["final_loss"])


def test_stage_two_continues_the_same_adapter_and_changes_it(trained):
    from safetensors.torch import load_file

    first = load_file(trained["out"] / "sft1" / "adapter_model.safetensors")
    second = load_file(trained["out"] / "sft2" / "adapter_model.safetensors")
    assert first.keys() == second.keys()  # the same adapter, not a second one stacked on top
    changed = [k for k in first if not torch.equal(first[k], second[k])]
    assert len(changed) == len(first)  # every LoRA matrix kept training
    summary = trained["sft2"]
    assert summary["stage"] == 2 and summary["adapter_path"] == str(trained["out"] / "sft1")
    assert summary["parameters"]["trainable"] == trained["sft1"]["parameters"]["trainable"] > 0


def test_each_stage_records_the_questions_of_its_adapters_lineage(trained, world):
    from datasets import load_from_disk

    from slmsql_hub.data.sft_record import question_key, read_sft_record

    def keys(split):
        rows = load_from_disk(str(world / "datasets" / split))
        return {question_key(r["db_id"], r["question"], r["gold_sql"]) for r in rows}

    one, two = read_sft_record(trained["out"] / "sft1"), read_sft_record(trained["out"] / "sft2")
    assert one.keys == keys("foundation") and one.complete
    assert two.keys == keys("foundation") | keys("grounding") and two.complete  # stage 1's carried forward
    assert [(s["stage"], s["questions"]) for s in two.stages] == [
        (1, len(keys("foundation"))),
        (2, len(keys("grounding"))),
    ]
    # and the databases each stage's questions are on (the Space names a database no stage trained on)
    databases = {
        split: sorted(set(load_from_disk(str(world / "datasets" / split))["db_id"]))
        for split in ("foundation", "grounding")
    }
    assert [s["databases"] for s in two.stages] == [databases["foundation"], databases["grounding"]]
    assert two.databases == sorted(set(databases["foundation"]) | set(databases["grounding"]))
    assert trained["sft2"]["sft_questions"] == {
        "file": "sft_questions.json",
        "questions": len(two.keys),
        "complete": True,
        "stage_questions": len(keys("grounding")),
    }
    on_disk = json.loads((trained["out"] / "sft2" / "run_summary.json").read_text())
    assert on_disk["sft_questions"]["file"] == "sft_questions.json"


def test_the_record_lists_only_the_examples_trained_on(trained, world, tmp_path):
    from slmsql_hub.data.sft_record import read_sft_record

    out = tmp_path / "sft"
    args = sft_args(world, trained["out"] / "base", out, stage=1, max_steps=1)
    args[0].max_train_samples = 4
    summary = train_sft(*args)
    assert len(read_sft_record(out).keys) == summary["data"]["trained_on"] == 4 < summary["data"]["rows"]


@pytest.mark.slow  # two fresh interpreters (~10 s)
def test_report_to_trackio_logs_each_step_offline(trained, world, tmp_path):
    """``report_to: trackio`` with no Space: a local Trackio project (``TRACKIO_DIR``), read back through
    Trackio's own storage, holds every step's loss; its last equals the run's ``final_loss``. A subprocess, since
    Trackio reads ``TRACKIO_DIR`` when it is imported."""
    out, tracked = tmp_path / "sft", tmp_path / "trackio"
    recipe = {
        **QUIET_CPU_RUN,
        "report_to": ["trackio"],
        "project": "slmsql-test",
        "run_name": "stage1",
        "dataset_paths": [str(world / "datasets" / "foundation")],
        "prompt_sample_rows": 1,
        "num_threads": 1,
        "model_name_or_path": str(trained["out"] / "base"),
        "lora_dropout": 0.0,
        "output_dir": str(out),
        "stage": 1,
        "max_length": 512,
        "per_device_train_batch_size": 4,
        "max_steps": 2,
    }
    path = tmp_path / "sft.yaml"
    path.write_text(json.dumps(recipe))  # JSON is YAML
    command = [sys.executable, "-m", "slmsql_hub.cli", "train", "sft", "--config", str(path)]
    env = {**os.environ, "TRACKIO_DIR": str(tracked), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = trackio_logs(tracked, "slmsql-test")["stage1"]
    losses = {row["train/global_step"]: row["train/loss"] for row in rows if "train/loss" in row}
    assert sorted(losses) == [1, 2]
    summary = json.loads((out / "run_summary.json").read_text())
    assert losses[2] == pytest.approx(summary["final_loss"])


def test_resolved_config_of_a_run_reruns_it(trained):
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import SFT_ARGUMENTS

    script, model, training = parse_recipe(SFT_ARGUMENTS, trained["out"] / "sft2" / "config.yaml")
    assert (training.stage, training.adapter_path, training.max_steps) == (2, str(trained["out"] / "sft1"), 3)
    assert model.model_name_or_path == str(trained["out"] / "base")


def test_stage_two_without_a_stage_one_adapter_names_the_fix(trained, world, tmp_path):
    args = sft_args(world, trained["out"] / "base", tmp_path / "o", stage=2, adapter=tmp_path / "missing")
    with pytest.raises(UsageError, match="run stage 1 first"):
        train_sft(*args)


def test_sft_refuses_a_missing_base_model_and_dataset(world, tmp_path):
    with pytest.raises(UsageError, match="slmsql train base"):
        train_sft(*sft_args(world, tmp_path / "no_base", tmp_path / "o", stage=1))
    script, model, training = sft_args(world, tmp_path / "no_base", tmp_path / "o", stage=1)
    script.dataset_paths = [str(tmp_path / "no_data")]
    model.model_name_or_path = str(Path(__file__).parent / "fixtures" / "run" / "base")  # whole; the data is next
    with pytest.raises(UsageError, match="dataset folder not found"):
        train_sft(script, model, training)


def test_examples_longer_than_max_length_are_dropped_not_truncated(trained, world):
    tok = _tokenizer(trained["out"] / "base")
    data = to_prompt_completion(
        load_datasets([world / "datasets" / "foundation"]), PromptConfig(sample_rows=1)
    )
    lengths = [
        len(tok.apply_chat_template(p + c, return_dict=True)["input_ids"])
        for p, c in zip(data["prompt"], data["completion"])
    ]
    cut = sorted(lengths)[len(lengths) // 2]
    kept, dropped = drop_too_long(data, tok, cut)
    assert dropped == sum(n > cut for n in lengths) and len(kept) == len(data) - dropped
    assert drop_too_long(data, tok, None) == (data, 0)


@pytest.mark.slow
def test_smoke_recipes_run_end_to_end_on_the_world(tmp_path):
    """The three smoke recipes through the CLI on a small embedded world, each well under 60 s."""
    repo = Path(__file__).resolve().parents[1]
    world = tmp_path / "world"
    sizes = ["--foundation", "60", "--grounding", "40", "--rl-pool", "10", "--dev", "10", "--test", "10"]
    run = [sys.executable, "-m", "slmsql_hub.cli"]
    subprocess.run([*run, "world", "build", "--out", str(world), *sizes], check=True, cwd=repo)
    out = tmp_path / "runs"
    steps = [
        ("base", "base_smoke.yaml", ["--world_dir", str(world), "--output_dir", str(out / "base")]),
        (
            "sft",
            "sft_stage1_smoke.yaml",
            [
                "--model_name_or_path",
                str(out / "base"),
                "--dataset_paths",
                str(world / "datasets" / "foundation"),
                "--output_dir",
                str(out / "sft1"),
            ],
        ),
        (
            "sft",
            "sft_stage2_smoke.yaml",
            [
                "--model_name_or_path",
                str(out / "base"),
                "--dataset_paths",
                str(world / "datasets" / "grounding"),
                "--adapter_path",
                str(out / "sft1"),
                "--output_dir",
                str(out / "sft2"),
            ],
        ),
    ]
    for kind, recipe, overrides in steps:
        done = subprocess.run(
            [*run, "train", kind, "--config", str(repo / "recipes" / "world" / recipe), *overrides],
            check=True,
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
        )
        headline = json.loads(done.stdout.strip().splitlines()[-1])
        assert headline["wall_seconds"] < 60, (recipe, headline)
    summary = json.loads((out / "sft2" / "run_summary.json").read_text())
    assert summary["stage"] == 2 and summary["parameters"]["trainable"] > 0
