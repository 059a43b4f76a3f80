"""The training stages' data preparation made faster for issue #39 gives what the old path gave."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from datasets import Dataset
from transformers import AutoTokenizer

from slmsql_hub.data.prompts import PromptConfig
from slmsql_hub.training.common import chat_lengths, drop_too_long, to_prompt_completion

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "tests" / "fixtures" / "run" / "base"  # a world tokenizer with its chat template


def _bench():
    spec = importlib.util.spec_from_file_location("bench_training_prep", REPO / "benchmarks" / "bench_training_prep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def examples():
    schema = "CREATE TABLE pet (pet_id INTEGER PRIMARY KEY, name TEXT, age INTEGER);"
    questions = [f"How many pets are older than {n}?" * (1 + n % 4) for n in range(12)]
    sqls = [f"SELECT count(*) FROM pet WHERE age > {n}" + " AND name IS NOT NULL" * (n % 3) for n in range(12)]
    rows = Dataset.from_dict({"question": questions, "gold_sql": sqls, "schema": [schema] * 12})
    return to_prompt_completion(rows, PromptConfig(sample_rows=0))


@pytest.mark.parametrize("kind", ["sft examples", "grpo prompts"])
def test_batched_chat_lengths_equal_one_call_per_row(examples, kind):
    tokenizer = AutoTokenizer.from_pretrained(BASE)
    data = examples if kind == "sft examples" else examples.remove_columns(["completion"])
    lengths = chat_lengths(data, tokenizer)
    assert lengths == _bench().old_chat_lengths(data, tokenizer)
    assert len(set(lengths)) > 3  # the rows differ, so a mix-up of rows would show
    if kind == "grpo prompts":  # measured with the generation prompt, which adds tokens
        with_completion = chat_lengths(examples, tokenizer)
        assert all(p < e for p, e in zip(lengths, with_completion))


def test_drop_too_long_keeps_the_rows_the_old_lengths_keep(examples):
    tokenizer = AutoTokenizer.from_pretrained(BASE)
    old = _bench().old_chat_lengths(examples, tokenizer)
    cut = sorted(old)[len(old) // 2]
    kept, dropped = drop_too_long(examples, tokenizer, cut)
    assert dropped == sum(n > cut for n in old) > 0
    assert kept["completion"] == [c for c, n in zip(examples["completion"], old) if n <= cut]
