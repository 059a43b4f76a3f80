"""The pass-rate filter: config validation, class rules, per-question seeded sampling, outputs, resume."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from _helpers import music_spider
from _tiny_model import build_model, build_tokenizer, train_to_answer

from slmsql_hub import filtering
from slmsql_hub.cli import main as cli_main
from slmsql_hub.data.prompts import PromptConfig
from slmsql_hub.errors import UsageError
from slmsql_hub.filtering import (
    FilterConfig,
    KeyedSampler,
    classify,
    generate_keyed_samples,
    load_filter_config,
    read_results,
    run_filter,
    sample_seed,
    summary_line,
)
from slmsql_hub.filtering import run as filter_run
from slmsql_hub.generation import GenerationConfig, generate
from slmsql_hub.sql import Sandbox

REPO = Path(__file__).resolve().parents[1]
PROMPT = PromptConfig(sample_rows=0)

# (question, gold SQL, what the tiny policy is trained to answer: None = nothing, garbage comes out)
QUESTIONS = [
    ("How many singers?", "SELECT count(*) FROM singer", ["SELECT count(*) FROM singer"]),
    ("Names of singers?", "SELECT name FROM singer", ["SELECT name FROM singer", "SELECT age FROM singer"]),
    ("Oldest age?", "SELECT max(age) FROM singer", ["SELECT min(age) FROM singer"]),
    ("Broken gold?", "SELECT x FROM nowhere", None),
] + [(f"Filler question {i}?", "SELECT 1", None) for i in range(8)]
EXPECTED = {  # question_id -> class with K=8 at temperature 1 (the policy is near-deterministic on these)
    "spider-dev-0": "all_pass",
    "spider-dev-1": "band",  # trained on a right and a wrong answer: about half the samples are right
    "spider-dev-2": "all_fail",
    "spider-dev-3": "unscorable",
}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def spider_root(tmp_path_factory):
    """A one-database Spider-layout pool of 12 questions (one broken gold)."""
    return music_spider(tmp_path_factory.mktemp("pool"), [(q, gold) for q, gold, _ in QUESTIONS])


@pytest.fixture(scope="module")
def policy(spider_root):
    """A tiny Qwen2 trained to answer the first three questions (one of them two ways), on the filter's prompts."""
    with Sandbox(workers=1) as sandbox:
        schema = PROMPT.schema(spider_root / "database" / "music" / "music.sqlite", sandbox)
    tokenizer = build_tokenizer()
    pairs = [
        (PROMPT.messages(q, schema), f"```sql\n{sql}\n```<|im_end|>")
        for q, _, answers in QUESTIONS
        for sql in answers or []
    ]
    return train_to_answer(build_model(tokenizer), tokenizer, pairs, steps=80), tokenizer


@pytest.fixture(scope="module")
def policy_dir(policy, tmp_path_factory):
    model, tokenizer = policy
    folder = tmp_path_factory.mktemp("policy") / "base"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_config(spider_root, out, limit=None, **overrides):
    return FilterConfig(**config_values(spider_root, out, limit, **overrides))


def config_values(spider_root, out, limit=None, **overrides):
    values = dict(
        model_name_or_path="unused-when-a-policy-is-passed",
        benchmarks=["spider:dev" + (f":{limit}" if limit else "")],
        spider_root=str(spider_root),
        num_samples=8,
        temperature=1.0,
        max_new_tokens=24,
        batch_size=4,
        prompt_sample_rows=0,
        sandbox_workers=1,
        output_dir=str(out),
    )
    values.update(overrides)
    return values


def rows_of(out):
    return {
        row["question_id"]: row
        for row in map(json.loads, (Path(out) / "results.jsonl").read_text().splitlines())
    }


# ------------------------------------------------------------------------------------------------------
# Config and recipes
# ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"pass_rate_low": 0.8, "pass_rate_high": 0.2}, "must be below pass_rate_high"),
        ({"pass_rate_low": 0.5, "pass_rate_high": 0.5}, "must be below pass_rate_high"),
        ({"pass_rate_high": 1.5}, "pass_rate_high must be a number in [0, 1]"),
        ({"pass_rate_low": -0.1}, "pass_rate_low must be a number in [0, 1]"),
        ({"num_samples": 1}, "num_samples (K) must be an integer >= 2"),
        ({"num_samples": 3, "pass_rate_low": 0.4, "pass_rate_high": 0.6}, "the band would always be empty"),
        ({"temperature": 0.0}, "temperature must be > 0"),
        ({"keep_distinct": True}, "keep_distinct only applies to compare_mode spider"),
        ({"benchmarks": ["world:dev"]}, "held out for evaluation"),
        ({"benchmarks": ["world:test:20"]}, "held out for evaluation"),
        ({"output_dir": None}, "output_dir is not set"),
        ({"world_root": None}, "needs world_root"),
        ({"benchmarks": []}, "must name ONE pool"),
        ({"benchmarks": ["world:rl_pool", "synsql:train"], "synsql_root": "s"}, "must name ONE pool"),
        ({"benchmarks": ["wikisql:train"]}, "unknown benchmark 'wikisql'"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"backend": "onnx"}, "backend must be 'transformers' or 'vllm'"),
        ({"key_namespace": "study:passk"}, "key_namespace must be a non-empty name without ':'"),
        ({"key_namespace": ""}, "key_namespace must be a non-empty name without ':'"),
    ],
)
def test_invalid_config_is_one_usage_error_naming_the_fix(tmp_path, overrides, message):
    values = dict(model_name_or_path="m", benchmarks=["world:rl_pool"], world_root="w", output_dir=str(tmp_path))
    values.update(overrides)
    with pytest.raises(UsageError) as err:
        FilterConfig(**values)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "recipe",
    [
        "recipes/world/filter.yaml",
        "recipes/world/filter_smoke.yaml",
        "recipes/qwen2.5-coder-1.5b/filter_synsql.yaml",
    ],
)
def test_filter_recipes_parse_and_validate_offline(recipe):
    config = load_filter_config(REPO / recipe)
    assert (config.pass_rate_low, config.pass_rate_high) == (0.2, 0.8)
    assert config.temperature > 0 and config.num_samples >= 4
    if config.pool.name == "world":
        assert config.pool.split == "rl_pool"


def test_synsql_recipe_is_the_studys_setup():
    config = load_filter_config(REPO / "recipes/qwen2.5-coder-1.5b/filter_synsql.yaml")
    assert config.model_name_or_path == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert config.adapter_path == "Anurich/slmsql-qwen2.5-coder-1.5b"
    assert (config.pool.name, config.num_samples, config.pool.limit) == ("synsql", 8, 1367)


def test_command_line_overrides_win_over_the_recipe():
    config = load_filter_config(
        REPO / "recipes/world/filter.yaml", ["--num_samples", "4", "--pass_rate_low", "0.1"]
    )
    assert (config.num_samples, config.pass_rate_low, config.pass_rate_high) == (4, 0.1, 0.8)


def test_backend_is_part_of_the_config_and_reaches_the_generation_settings():
    values = dict(model_name_or_path="m", benchmarks=["world:rl_pool"], world_root="w", output_dir="o")
    assert FilterConfig(**values).generation_config().backend == "transformers"
    assert FilterConfig(**values, backend="vllm").backend == "vllm"


def test_unknown_override_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown argument"):
        load_filter_config(REPO / "recipes/world/filter.yaml", ["--band_width", "4"])


# ------------------------------------------------------------------------------------------------------
# Class rules
# ------------------------------------------------------------------------------------------------------


def test_band_is_strict_on_both_thresholds():
    # K=5 puts pass rates exactly on 0.2 and 0.8: both fall outside the band.
    assert [classify(n, 5) for n in range(6)] == [
        "all_fail",
        "all_fail",
        "band",
        "band",
        "all_pass",
        "all_pass",
    ]


def test_pass_rate_counts_scorable_samples_only():
    assert classify(3, 4, 0.2, 0.8) == "band"  # 3/4, not 3/8
    assert classify(0, 0) == "unscorable"


def test_every_count_pair_falls_in_exactly_one_class():
    for k in (2, 4, 8):
        for n_scorable in range(k + 1):
            for n_correct in range(n_scorable + 1):
                assert classify(n_correct, n_scorable) in filtering.CLASSES


def test_summary_line_names_every_class_and_the_pool():
    line = summary_line({"band": 2, "all_fail": 3, "all_pass": 1})
    assert line == "2 band / 3 all-fail / 1 all-pass / 0 unscorable of 6"


# ------------------------------------------------------------------------------------------------------
# Seeded sampling
# ------------------------------------------------------------------------------------------------------


def test_keyed_sampler_draws_from_the_softmax():
    logits = torch.tensor([1.0, 2.0, 0.0, -1.0])
    rows = 4000
    sampler = KeyedSampler(range(rows))
    picks = sampler(None, logits.expand(rows, -1).clone()).argmax(-1)
    freq = torch.bincount(picks, minlength=4).float() / rows
    assert torch.allclose(freq, logits.softmax(-1), atol=0.03)


def test_keyed_sampler_top_k_and_top_p_restrict_the_choices():
    logits = torch.tensor([1.0, 2.0, 0.0, -1.0]).expand(500, -1).clone()
    top2 = KeyedSampler(range(500), top_k=2)(None, logits).argmax(-1)
    assert set(top2.tolist()) == {0, 1}
    # softmax is about [0.24, 0.64, 0.09, 0.03]: top_p=0.8 keeps tokens 1 and 0 only.
    nucleus = KeyedSampler(range(500), top_p=0.8)(None, logits).argmax(-1)
    assert set(nucleus.tolist()) == {0, 1}


def _hand_written_keyed_sample(seeds, scores, temperature, top_k, top_p):
    """The sampler as it was before transformers' warpers took temperature and top-k (kept to compare)."""
    scores = scores.float() / temperature
    vocab = scores.shape[-1]
    if 0 < top_k < vocab:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
        probs = sorted_scores.softmax(dim=-1)
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p
        scores = scores.masked_fill(torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted), float("-inf"))
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    uniform = torch.stack([torch.rand(vocab, generator=g) for g in generators])
    tiny = torch.finfo(uniform.dtype).tiny
    return scores - torch.log(-torch.log(uniform.clamp(min=tiny, max=1.0 - 1e-7)))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
@pytest.mark.parametrize("top_k", [0, 1, 5, 50])
@pytest.mark.parametrize("top_p", [1.0, 0.9, 0.3])
def test_keyed_sampler_with_library_warpers_is_bit_identical_to_the_hand_written_one(temperature, top_k, top_p):
    generator = torch.Generator().manual_seed(7)
    for trial in range(20):
        scores = torch.randn(6, 50, generator=generator) * 3
        if trial % 2:
            scores = scores.round()  # ties at the top-k and top-p boundaries
        seeds = [sample_seed(trial, "q", j) for j in range(6)]
        new = KeyedSampler(seeds, temperature=temperature, top_k=top_k, top_p=top_p)(None, scores)
        assert torch.equal(new, _hand_written_keyed_sample(seeds, scores, temperature, top_k, top_p))


def test_top_k_one_sampling_is_greedy_decoding(policy):
    model, tokenizer = policy
    prompts = [PROMPT.messages(q, "CREATE TABLE singer (name TEXT)") for q, _, _ in QUESTIONS[:4]]
    config = GenerationConfig(do_sample=True, num_samples=2, top_k=1, max_new_tokens=16, seed=3)
    sampled = generate_keyed_samples(model, tokenizer, prompts, ["a", "b", "c", "d"], config)
    greedy = generate(model, tokenizer, prompts, GenerationConfig(max_new_tokens=16), progress=False)
    assert [group[0].text for group in sampled] == [group[0] for group in greedy]
    assert all(group[0].text == group[1].text for group in sampled)


def test_a_questions_samples_do_not_depend_on_its_batch(policy):
    model, tokenizer = policy
    prompts = [PROMPT.messages(q, "CREATE TABLE singer (name TEXT)") for q, _, _ in QUESTIONS[:5]]
    keys = [f"q{i}" for i in range(5)]
    config = GenerationConfig(do_sample=True, num_samples=4, max_new_tokens=16, seed=0)
    together = generate_keyed_samples(model, tokenizer, prompts, keys, config)
    alone = [
        generate_keyed_samples(model, tokenizer, [p], [k], config)[0]
        for p, k in zip(prompts[::-1], keys[::-1])
    ]
    assert [[c.text for c in g] for g in together] == [[c.text for c in g] for g in alone[::-1]]
    # ...while the seed and the key both change them.
    reseeded = generate_keyed_samples(
        model,
        tokenizer,
        prompts,
        keys,
        GenerationConfig(do_sample=True, num_samples=4, max_new_tokens=16, seed=1),
    )
    rekeyed = generate_keyed_samples(model, tokenizer, prompts, [k + "'" for k in keys], config)
    texts = [[c.text for c in g] for g in together]
    assert texts != [[c.text for c in g] for g in reseeded]
    assert texts != [[c.text for c in g] for g in rekeyed]


# ------------------------------------------------------------------------------------------------------
# Runs
# ------------------------------------------------------------------------------------------------------


def test_filter_splits_the_pool_and_counts_add_up(policy, spider_root, tmp_path):
    import datasets

    report = run_filter(make_config(spider_root, tmp_path), policy=policy, progress=False)
    rows = rows_of(tmp_path)
    assert {qid: rows[qid]["class"] for qid in EXPECTED} == EXPECTED
    assert sum(report["counts"].values()) == report["pool"] == len(QUESTIONS) == len(rows)
    assert report["summary"] == filtering.summary_line(report["counts"])
    assert report["counts"]["unscorable"] == 1 and report["counts"]["band"] >= 1
    assert (
        rows["spider-dev-3"]["pass_rate"] is None and "gold SQL failed" in rows["spider-dev-3"]["gold_error"]
    )
    assert sum(report["histogram"]["questions_by_n_correct"]) == len(QUESTIONS) - 1

    band = datasets.load_from_disk(str(tmp_path / "band"))
    assert len(band) == report["counts"]["band"]
    assert {
        "question_id",
        "question",
        "gold_sql",
        "db_path",
        "pass_rate",
        "samples",
        "sample_correct",
    } <= set(band.column_names)
    row = band[0]
    assert 0.2 < row["pass_rate"] < 0.8 and len(row["samples"]) == len(row["sample_correct"]) == 8
    assert row["pass_rate"] == sum(row["sample_correct"]) / 8
    on_disk = json.loads((tmp_path / "filter_report.json").read_text())
    assert on_disk["counts"] == report["counts"] and on_disk["num_samples"] == 8
    assert on_disk["limits"] == dataclasses.asdict(make_config(spider_root, tmp_path).sql_limits())


def test_the_filter_judges_under_the_recipes_limits_and_a_resume_must_keep_them(policy, spider_root, tmp_path):
    # The limits decide verdicts (a gold over sql_max_rows is unscorable), so they are part of what a resume
    # must match, and the report records them for the GRPO and eval stages to be compared with.
    report = run_filter(make_config(spider_root, tmp_path, limit=3, sql_max_rows=2), policy=policy, progress=False)
    assert report["limits"]["max_rows"] == 2 and report["limits"]["max_ops"] == 1_000_000_000
    with pytest.raises(UsageError, match="sql_max_rows: 2 there, 100000 now"):
        run_filter(make_config(spider_root, tmp_path, limit=3), policy=policy, progress=False)


def test_results_do_not_depend_on_the_batch_size(policy, spider_root, tmp_path):
    run_filter(make_config(spider_root, tmp_path / "a", batch_size=5), policy=policy, progress=False)
    run_filter(make_config(spider_root, tmp_path / "b", batch_size=1), policy=policy, progress=False)
    a, b = rows_of(tmp_path / "a"), rows_of(tmp_path / "b")
    assert {q: r["samples"] for q, r in a.items()} == {q: r["samples"] for q, r in b.items()}


def test_resume_with_other_sampling_settings_is_refused(policy, spider_root, tmp_path):
    run_filter(make_config(spider_root, tmp_path, limit=3), policy=policy, progress=False)
    with pytest.raises(UsageError, match="temperature: 1.0 there, 0.5 now"):
        run_filter(
            make_config(spider_root, tmp_path, limit=3, temperature=0.5), policy=policy, progress=False
        )


def test_new_thresholds_reclassify_saved_samples_without_sampling_again(policy, spider_root, tmp_path):
    first = run_filter(make_config(spider_root, tmp_path), policy=policy, progress=False)
    again = run_filter(
        make_config(spider_root, tmp_path, pass_rate_low=0.0, pass_rate_high=1.0), policy=None, progress=False
    )
    assert again["time"]["questions_sampled"] == 0 and again["time"]["questions_resumed"] == len(QUESTIONS)
    # Every question solved at least once but not always is now in the band.
    rows = rows_of(tmp_path)
    assert again["counts"]["band"] == sum(1 for r in rows.values() if 0 < r["n_correct"] < r["n_scorable"])
    assert sum(again["counts"].values()) == sum(first["counts"].values())


def test_an_empty_band_is_saved_loadable_with_its_columns(policy, spider_root, tmp_path):
    import datasets

    run_filter(make_config(spider_root, tmp_path), policy=policy, progress=False)
    taken = {r["n_correct"] for r in rows_of(tmp_path).values() if r["n_scorable"] == 8}
    j = next(j for j in range(1, 8) if j not in taken)  # a pass rate no question has
    report = run_filter(
        make_config(spider_root, tmp_path, pass_rate_low=(j - 0.5) / 8, pass_rate_high=(j + 0.5) / 8),
        policy=None,
        progress=False,
    )
    assert report["counts"]["band"] == 0
    band = datasets.load_from_disk(str(tmp_path / "band"))  # datasets cannot reload a zero-shard save
    assert len(band) == 0 and {"question", "gold_sql", "db_path", "pass_rate"} <= set(band.column_names)


def test_overwrite_samples_every_question_again_instead_of_resuming(policy, spider_root, tmp_path):
    run_filter(make_config(spider_root, tmp_path, limit=2), policy=policy, progress=False)
    report = run_filter(
        make_config(spider_root, tmp_path, limit=2, overwrite=True), policy=policy, progress=False
    )
    assert report["time"]["questions_sampled"] == 2


# ------------------------------------------------------------------------------------------------------
# SFT questions are left out of the pool
# ------------------------------------------------------------------------------------------------------


def sft_adapter(folder, keys, *, continued=None):
    """An adapter folder whose run_summary.json names its SFT question record, as `slmsql train sft` writes it."""
    from slmsql_hub.data.sft_record import write_sft_record

    record = write_sft_record(folder, keys, stage=2 if continued else 1, continued=continued)
    summary = {"kind": "sft", "sft_questions": {**record.summary(), "file": record.path.name}}
    (folder / "run_summary.json").write_text(json.dumps(summary))
    return folder


def test_filter_leaves_the_adapters_sft_questions_out_before_drawing_its_pool(policy, spider_root, tmp_path):
    from slmsql_hub.data.benchmarks import load_benchmark, seeded_subset
    from slmsql_hub.data.sft_record import row_keys

    # The bug: SFT drew 8 of the split with seed 0, and the filter's 3 with seed 0 are the same draw's prefix.
    assert set(seeded_subset(len(QUESTIONS), 3, 0)) <= set(seeded_subset(len(QUESTIONS), 8, 0))
    sft_rows = load_benchmark("spider", spider_root, "dev", limit=8, seed=0)
    adapter = sft_adapter(tmp_path / "sft", row_keys(sft_rows))
    config = make_config(spider_root, tmp_path / "out", adapter_path=str(adapter), limit=3)
    report = run_filter(config, policy=policy, progress=False)
    pool = set(rows_of(tmp_path / "out"))
    assert len(pool) == report["pool"] == 3 and not pool & set(sft_rows["question_id"])
    assert (report["excluded_sft"], report["sft_overlap"]) == (8, 0)
    assert report["sft_record"] == {
        "file": str(adapter / "sft_questions.json"),
        "questions": 8,
        "complete": True,
    }
    on_disk = json.loads((tmp_path / "out" / "filter_report.json").read_text())
    assert (on_disk["excluded_sft"], on_disk["sft_overlap"]) == (8, 0)


def test_a_grpo_adapter_carrying_its_sft_record_draws_the_same_pool_as_its_sft_parent(
    policy, spider_root, tmp_path
):
    from slmsql_hub.data.benchmarks import load_benchmark
    from slmsql_hub.data.sft_record import carry_sft_record, row_keys

    sft = sft_adapter(tmp_path / "sft", row_keys(load_benchmark("spider", spider_root, "dev", limit=8, seed=0)))
    grpo = tmp_path / "grpo"  # as `slmsql train grpo` leaves it: the copy, named in its run_summary.json
    record = carry_sft_record(sft, grpo)
    summary = {"kind": "grpo", "sft_questions": {**record.summary(), "file": record.path.name}}
    (grpo / "run_summary.json").write_text(json.dumps(summary))
    pools, reports = {}, {}
    for name, adapter in (("sft", sft), ("grpo", grpo), ("none", None)):
        config = make_config(spider_root, tmp_path / name / "out", adapter_path=adapter and str(adapter), limit=3)
        reports[name] = run_filter(config, policy=policy, progress=False)
        pools[name] = rows_of(tmp_path / name / "out")
    assert set(pools["grpo"]) == set(pools["sft"]) != set(pools["none"])  # without the record: another draw
    assert reports["grpo"]["excluded_sft"] == reports["sft"]["excluded_sft"] == 8
    assert reports["grpo"]["sft_overlap"] == 0


def _study_sampler(spider_root, tmp_path):
    """The study's sampler (``sampler_settings``) over a filter recipe of :func:`make_config`'s settings."""
    import yaml

    from slmsql_hub.study.sampled import sampler_settings

    recipe = tmp_path / "filter.yaml"
    recipe.write_text(yaml.safe_dump(config_values(spider_root, tmp_path / "unused")))
    study = SimpleNamespace(passk_samples=8, base_path="unused-when-a-policy-is-passed", model_revision=None,
                            num_threads=None, band=SimpleNamespace(filter_recipe=str(recipe)))  # fmt: skip
    return sampler_settings(study, tmp_path / "passk")


def test_the_studys_pass_at_k_draws_fresh_samples_not_the_ones_that_put_a_question_into_the_band(
    policy, spider_root, tmp_path
):
    from slmsql_hub.run.files import read_jsonl
    from slmsql_hub.study.diagnostics import sample_completions
    from slmsql_hub.study.sampled import sample_counts

    config = make_config(spider_root, tmp_path / "filter")
    run_filter(config, policy=policy, progress=False)
    band = [r for r in rows_of(tmp_path / "filter").values() if r["class"] == "band"]
    assert band
    rows = {"band_train": [{k: v for k, v in row.items() if not k.startswith(("n_", "sample", "pass_rate", "gold_error"))}
                           for row in band]}  # fmt: skip
    # The filter's own keys give back the very draws that selected each question (2..6 of 8 correct), so SFT's
    # pass@8 on the band is 1 by construction: the winner's curse.
    own = sample_counts(config, "unused", rows, tmp_path / "passk", policy=policy)
    assert [(c["n"], c["c"]) for c in own["band_train"]] == [(r["n_scorable"], r["n_correct"]) for r in band]
    assert all(c["c"] > 0 for c in own["band_train"])
    sample_completions(config, policy, rows, tmp_path / "again")
    assert [s["texts"] for s in read_jsonl(tmp_path / "again" / "band_train.jsonl")] == [r["samples"] for r in band]

    # The study's sampler: the same decoding, fresh keys; no band question's samples are the filter's.
    study = _study_sampler(spider_root, tmp_path)
    sample_completions(study, policy, rows, tmp_path / "fresh")
    fresh = read_jsonl(tmp_path / "fresh" / "band_train.jsonl")
    assert [len(s["texts"]) for s in fresh] == [8] * len(band)
    assert all(s["texts"] != r["samples"] for s, r in zip(fresh, band))
    ids = [r["question_id"] for r in band]
    assert not {sample_seed(study.seed, q, j, study.key_namespace) for q in ids for j in range(8)} & {
        sample_seed(config.seed, q, j) for q in ids for j in range(8)
    }

    # Counts drawn with the filter's keys are not reused (tmp_path/passk holds them): drawn again, and an
    # unchanged adapter (frozen) gives exactly SFT's counts on the fresh keys, whatever the batch.
    sft = sample_counts(study, "unused", rows, tmp_path / "passk", policy=policy)
    frozen = sample_counts(dataclasses.replace(study, batch_size=1), "unused", rows, tmp_path / "frozen", policy=policy)
    assert sft == frozen
    assert json.loads((tmp_path / "passk" / "keys.json").read_text()) == {"namespace": "study-passk", "seed": study.seed}


@pytest.mark.parametrize("record", ["none", "incomplete"])
def test_an_adapter_without_a_full_record_is_warned_about_and_its_overlap_is_unknown(
    policy, spider_root, tmp_path, caplog, record
):
    from slmsql_hub.data.benchmarks import load_benchmark
    from slmsql_hub.data.sft_record import row_keys

    adapter = "Org/hub-adapter"  # a Hub id: no run_summary.json to read
    if record == "incomplete":  # stage 2 of a Hub adapter: its own questions only
        sft_rows = load_benchmark("spider", spider_root, "dev", limit=2, seed=0)
        adapter = str(sft_adapter(tmp_path / "sft", row_keys(sft_rows), continued="Org/hub-adapter"))
    config = make_config(spider_root, tmp_path / "out", adapter_path=adapter, limit=2)
    with caplog.at_level(logging.WARNING, logger="slmsql_hub"):
        report = run_filter(config, policy=policy, progress=False)
    assert report["sft_overlap"] is None and report["pool"] == 2
    assert report["excluded_sft"] == (0 if record == "none" else 2)
    assert f"has {'no' if record == 'none' else 'an incomplete'} SFT question record" in caplog.text
    assert json.loads((tmp_path / "out" / "filter_report.json").read_text())["sft_overlap"] is None


def test_resuming_after_the_sft_record_changed_is_refused(policy, spider_root, tmp_path):
    from slmsql_hub.data.sft_record import row_keys

    rows = {"db_id": ["music"] * 2, "question": [q for q, _, _ in QUESTIONS[:2]]}
    rows["gold_sql"] = [gold for _, gold, _ in QUESTIONS[:2]]
    adapter = sft_adapter(tmp_path / "sft", row_keys(rows)[:1])
    config = make_config(spider_root, tmp_path / "out", adapter_path=str(adapter), limit=3)
    run_filter(config, policy=policy, progress=False)
    sft_adapter(tmp_path / "sft", row_keys(rows))  # the adapter's record now leaves out another question
    with pytest.raises(UsageError, match="sft_record_sha256"):
        run_filter(config, policy=policy, progress=False)


def test_torn_last_line_is_dropped_and_a_corrupt_middle_line_is_an_error(tmp_path):
    log = tmp_path / "results.jsonl"
    log.write_text('{"question_id": "a"}\n{"question_id": "b"}\n{"question_id": "c", "sam')
    assert sorted(read_results(log)) == ["a", "b"]
    assert log.read_text() == '{"question_id": "a"}\n{"question_id": "b"}\n'
    log.write_text('{"question_id": "a"}\nnot json\n{"question_id": "c"}\n')
    with pytest.raises(UsageError, match="not result rows"):
        read_results(log)


def test_prompts_longer_than_the_models_context_are_warned_about(caplog):
    model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=512))
    with caplog.at_level(logging.WARNING, logger="slmsql_hub.filtering"):
        filter_run._warn_if_too_long(model, {"a": 300, "b": 450, "c": 500}, max_new_tokens=100)
    assert "2 of 3 prompts plus max_new_tokens=100 exceed the model's 512 positions" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="slmsql_hub.filtering"):
        filter_run._warn_if_too_long(model, {"a": 300}, max_new_tokens=100)
    assert caplog.text == ""


def write_recipe(path, spider_root, policy_dir, out, **extra):
    lines = {
        "model_name_or_path": str(policy_dir),
        "benchmarks": ["spider:dev"],
        "spider_root": str(spider_root),
        "num_samples": 8,
        "temperature": 1.0,
        "max_new_tokens": 24,
        "batch_size": 1,
        "prompt_sample_rows": 0,
        "sandbox_workers": 1,
        "device": "cpu",
        "dtype": "float32",
        "num_threads": 1,
        "output_dir": str(out),
        **extra,
    }
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in lines.items()))
    return path


_SLOW_CHILD = """
import sys, time
from slmsql_hub.filtering import run as filter_run
real = filter_run.generate_keyed_samples
def slow(*args, **kwargs):
    out = real(*args, **kwargs)
    time.sleep(0.4)
    return out
filter_run.generate_keyed_samples = slow
from slmsql_hub.cli import main
sys.exit(main(["filter", "--config", sys.argv[1]]))
"""


@pytest.mark.slow
def test_kill_9_then_resume_skips_finished_questions_and_matches_an_uninterrupted_run(
    policy, policy_dir, spider_root, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "killed"
    recipe = write_recipe(tmp_path / "filter.yaml", spider_root, policy_dir, out)
    child = subprocess.Popen(
        [sys.executable, "-c", _SLOW_CHILD, str(recipe)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = out / "results.jsonl"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and child.poll() is None:
            if log.is_file() and log.read_text().count("\n") >= 3:
                break
            time.sleep(0.05)
        assert child.poll() is None, "the filter finished (or died) before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    before = read_results(log)
    assert 3 <= len(before) < len(QUESTIONS)
    with log.open("a") as handle:  # and a write cut short by the kill
        handle.write('{"question_id": "spider-dev-11", "samp')

    sampled: list[str] = []
    real = filter_run.generate_keyed_samples

    def spy(model, tokenizer, prompts, keys, config):
        sampled.extend(keys)
        return real(model, tokenizer, prompts, keys, config)

    monkeypatch.setattr(filter_run, "generate_keyed_samples", spy)
    assert cli_main(["filter", "--config", str(recipe)]) == 0
    assert sorted(sampled) == sorted(set(rows_of(out)) - set(before))  # finished questions were not redone
    printed = capsys.readouterr().out
    resumed = json.loads((out / "filter_report.json").read_text())
    assert resumed["summary"] in printed and resumed["time"]["questions_resumed"] == len(before)

    monkeypatch.setattr(filter_run, "generate_keyed_samples", real)
    fresh = run_filter(
        make_config(spider_root, tmp_path / "fresh", batch_size=4), policy=policy, progress=False
    )
    assert resumed["counts"] == fresh["counts"]
    assert {q: r["samples"] for q, r in rows_of(out).items()} == {
        q: r["samples"] for q, r in rows_of(tmp_path / "fresh").items()
    }


def test_cli_bad_recipe_is_one_line_and_exit_code_2(tmp_path, capsys):
    assert cli_main(["filter", "--config", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("slmsql filter: error: recipe not found") and "\n" not in err


# ------------------------------------------------------------------------------------------------------
# The vLLM backend
# ------------------------------------------------------------------------------------------------------


def _fake_vllm(monkeypatch, tokenizer):
    """A stand-in for the vllm package that records each request and answers with its seed."""
    import types

    from slmsql_hub.generation import VLLMPolicy

    calls = []

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LoRARequest:
        def __init__(self, name, int_id, path):
            self.name, self.int_id, self.path = name, int_id, path

    class LLM:
        def get_tokenizer(self):
            return tokenizer

        def generate(self, texts, params, lora_request=None, use_tqdm=False):
            calls.append((list(texts), list(params), lora_request))
            out = types.SimpleNamespace
            return [
                out(outputs=[out(text=f"seed {p.seed}", token_ids=[1, 2], finish_reason="stop")]) for p in params
            ]

    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = SamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    return VLLMPolicy(llm=LLM(), lora_paths={"default": "sft/stage2"}, active_adapter="default"), calls


def test_vllm_filter_sends_one_request_per_sample_seeded_with_its_own_seed_and_the_adapter_by_name(
    policy, monkeypatch
):
    _, tokenizer = policy
    model, calls = _fake_vllm(monkeypatch, tokenizer)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(  # "vllm is installed"
        importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real_find_spec(name, *a)
    )
    config = GenerationConfig(do_sample=True, num_samples=3, temperature=0.5, seed=4, backend="vllm")
    prompts = [PROMPT.messages(q, "CREATE TABLE singer (name TEXT)") for q, _, _ in QUESTIONS[:2]]
    groups = generate_keyed_samples(model, None, prompts, ["q1", "q2"], config)
    assert [[c.text for c in g] for g in groups] == [
        [f"seed {sample_seed(4, key, j)}" for j in range(3)] for key in ("q1", "q2")
    ]
    (texts, params, lora), = calls
    assert len(texts) == 6 and texts[0] == texts[2] != texts[3]
    assert {p.n for p in params} == {1} and {p.temperature for p in params} == {0.5}
    assert (lora.name, lora.int_id, lora.path) == ("default", 1, "sft/stage2")
    with pytest.raises(UsageError, match="does not match the policy"):
        generate_keyed_samples(policy[0], tokenizer, prompts, ["q1", "q2"], config)


def test_vllm_filter_draws_the_same_samples_whatever_else_is_in_the_call(policy_dir):
    pytest.importorskip("vllm")
    from slmsql_hub.generation import load_policy

    model = load_policy(policy_dir, backend="vllm", dtype="float32")
    config = GenerationConfig(do_sample=True, num_samples=3, max_new_tokens=8, seed=0, backend="vllm")
    prompts = [PROMPT.messages(q, "CREATE TABLE singer (name TEXT)") for q, _, _ in QUESTIONS[:3]]
    together = generate_keyed_samples(model, None, prompts, ["a", "b", "c"], config)
    alone = generate_keyed_samples(model, None, prompts[1:2], ["b"], config)
    assert [c.text for c in together[1]] == [c.text for c in alone[0]]


def test_a_pool_smaller_than_its_limit_is_a_warning_and_a_line_in_the_report(policy, spider_root, tmp_path, caplog):
    asked = len(QUESTIONS) + 10
    with caplog.at_level(logging.WARNING, logger="slmsql_hub.filtering"):
        report = run_filter(make_config(spider_root, tmp_path, limit=asked), policy=policy, progress=False)
    said = f"the pool holds {len(QUESTIONS)} questions, fewer than the {asked} spider:dev:{asked} asked"
    assert report["dataset"]["shortfall"] == said  # today: nothing said, anywhere
    assert any(said in record.getMessage() for record in caplog.records)
    on_disk = json.loads((tmp_path / "filter_report.json").read_text())
    assert on_disk["dataset"]["shortfall"] == said
