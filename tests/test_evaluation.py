"""``slmsql eval``: config and recipes, and end-to-end runs on tiny models.

Two end-to-end setups, both fast:

- a Spider-layout slice of six questions with a tiny base TRAINED to give the SFT answers and a GRPO LoRA
  adapter trained to give other answers, so every EX, verdict and paired count is known in advance;
- a tiny embedded world (dev and test) with a random base and two random LoRA adapters, through the CLI,
  checking the eval_results.json contract, the breakdowns and the held-out database.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from _helpers import music_spider, tiny_world, write_prompt_summary
from _tiny_model import (
    build_model,
    build_tokenizer,
    save_random_policy,
    save_trained_adapter,
    train_to_answer,
)

from slmsql_hub.cli import main as cli_main
from slmsql_hub.data.prompts import PromptConfig
from slmsql_hub.errors import UsageError
from slmsql_hub.evaluation import (
    BenchmarkSpec,
    EvalConfig,
    build_prompts,
    generate_and_judge,
    load_eval_config,
    load_slice,
    read_eval_results,
    resolve_prompt_config,
    run_eval,
)
from slmsql_hub.evaluation.stats import mcnemar_exact
from slmsql_hub.sql import Sandbox

REPO = Path(__file__).resolve().parents[1]
PROMPT = PromptConfig(sample_rows=0)
LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# (question, gold SQL, SFT answer, GRPO answer); "hello" is an answer without SQL.
QUESTIONS = [
    (
        "How many singers?",
        "SELECT count(*) FROM singer",
        "SELECT count(*) FROM singer",
        "SELECT count(*) FROM singer",
    ),
    ("Names of singers?", "SELECT name FROM singer", "SELECT age FROM singer", "SELECT name FROM singer"),
    (
        "Oldest age?",
        "SELECT max(age) FROM singer",
        "SELECT max(age) FROM singer",
        "SELECT min(age) FROM singer",
    ),
    (
        "Youngest age?",
        "SELECT min(age) FROM singer",
        "SELECT max(age) FROM singer",
        "SELECT min(age) FROM singer",
    ),
    ("Broken gold?", "SELECT x FROM nowhere", "SELECT 1", "SELECT 1"),
    ("Say hello?", "SELECT 1", "hello", "hello"),
]
# What the policies score on the five scorable questions (the broken gold is unscorable):
SFT_CORRECT = [1, 0, 1, 0, None, 0]
GRPO_CORRECT = [1, 1, 0, 1, None, 0]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def answer(text: str) -> str:
    return ("hello" if text == "hello" else f"```sql\n{text}\n```") + "<|im_end|>"


@pytest.fixture(scope="module")
def spider_root(tmp_path_factory):
    return music_spider(tmp_path_factory.mktemp("spider"), [(q, gold) for q, gold, _, _ in QUESTIONS])


@pytest.fixture(scope="module")
def trained_policy(spider_root, tmp_path_factory):
    """A base trained to give the SFT answers; the SFT adapter is an identity LoRA (B = 0), the GRPO adapter a
    LoRA trained to give the GRPO answers. Both adapters carry a run_summary.json with 0 sample rows."""
    with Sandbox(workers=1) as sandbox:
        schema = PROMPT.schema(spider_root / "database" / "music" / "music.sqlite", sandbox)
    tokenizer = build_tokenizer()
    prompts = [PROMPT.messages(q, schema) for q, _, _, _ in QUESTIONS]
    base = train_to_answer(
        build_model(tokenizer), tokenizer, [(p, answer(q[2])) for p, q in zip(prompts, QUESTIONS)], steps=60
    )
    root = tmp_path_factory.mktemp("trained")
    base.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    for name, column, steps in (("sft", 2, 0), ("grpo", 3, 80)):
        pairs = [(p, answer(q[column])) for p, q in zip(prompts, QUESTIONS)]
        save_trained_adapter(base, tokenizer, root / name, LORA_MODULES, pairs, steps=steps, lr=1e-2)
        write_prompt_summary(root / name, sample_rows=0)
    return root


def spider_config(trained_policy, spider_root, out, **overrides):
    values = dict(
        model_name_or_path=str(trained_policy / "base"),
        sft_adapter=str(trained_policy / "sft"),
        grpo_adapter=str(trained_policy / "grpo"),
        dtype="float32",
        device="cpu",
        benchmarks=["spider:dev"],
        spider_root=str(spider_root),
        max_new_tokens=24,
        batch_size=4,
        sandbox_workers=1,
        sql_timeout_s=10.0,
        sql_max_ops=200_000_000,
        output_dir=str(out),
    )
    values.update(overrides)
    return EvalConfig(**values)


@pytest.fixture(scope="module")
def spider_run(trained_policy, spider_root, tmp_path_factory):
    """One evaluation of the trained policy, counting how many times a base model is loaded."""
    import transformers

    out = tmp_path_factory.mktemp("spider_eval")
    original = transformers.AutoModelForCausalLM.from_pretrained
    loads = []

    def counting_from_pretrained(*args, **kwargs):
        loads.append(args[0] if args else kwargs.get("pretrained_model_name_or_path"))
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", counting_from_pretrained)
        results = run_eval(spider_config(trained_policy, spider_root, out), progress=False)
    return results, out, loads


# ------------------------------------------------------------------------------------------------------
# Config and recipes
# ------------------------------------------------------------------------------------------------------

BASE = dict(model_name_or_path="m", sft_adapter="a", grpo_adapter="b", output_dir="o", world_root="w")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sft_adapter": None}, "sft_adapter is not set"),
        ({"grpo_adapter": ""}, "grpo_adapter is not set"),
        ({"output_dir": None}, "output_dir is not set"),
        ({"benchmarks": []}, "benchmarks is empty"),
        ({"benchmarks": ["world"]}, "must be NAME:SPLIT or NAME:SPLIT:LIMIT"),
        ({"benchmarks": ["synsql:train"]}, "cannot evaluate on 'synsql' .a training pool"),
        ({"benchmarks": ["world:rl_pool"]}, "evaluate world on dev or test"),
        ({"benchmarks": ["spider:dev:0"], "spider_root": "s"}, "LIMIT must be a whole number >= 1"),
        ({"benchmarks": ["spider:dev:ten"], "spider_root": "s"}, "LIMIT must be a whole number >= 1"),
        ({"benchmarks": ["world:dev", "world:dev:20"]}, "are both world_dev"),
        ({"benchmarks": ["bird:dev:149"]}, "needs bird_root"),
        ({"bootstrap_resamples": 1000}, "bootstrap_resamples must be >= 10000"),
        ({"dataset_ids": ["bird:my/bird"]}, "must be benchmark=hub_id"),
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer"),
        ({"timeout_s": 0}, "timeout_s must be > 0"),
        ({"sql_max_rows": 0}, "sql_max_rows must be > 0"),
        ({"sql_max_ops": "many"}, "sql_max_ops must be a number"),
        ({"dtype": "int8"}, "dtype must be one of"),
        ({"self_consistency": -1}, r"self_consistency \(K\) must be 0 \(off\) or an integer >= 2"),
        ({"self_consistency": 1}, r"self_consistency \(K\) must be 0 \(off\) or an integer >= 2"),
        ({"self_consistency": 8, "temperature": 0}, "temperature must be > 0"),
        ({"self_consistency": 8, "top_p": 0}, "top_p must be in"),
    ],
)
def test_invalid_config_is_one_usage_error_naming_the_fix(overrides, message):
    with pytest.raises(UsageError, match=message):
        EvalConfig(**{**BASE, **overrides})


def test_benchmark_spec_reads_name_split_and_limit_and_picks_the_benchmarks_semantics():
    assert BenchmarkSpec.parse("bird:dev:149") == BenchmarkSpec("bird", "dev", 149)
    assert BenchmarkSpec.parse("World:test").key == "world_test"
    assert [BenchmarkSpec.parse(s).mode for s in ("spider:dev", "bird:dev", "world:dev")] == [
        "spider",
        "bird",
        "bird",
    ]


@pytest.mark.parametrize(
    "recipe",
    [
        "recipes/world/eval.yaml",
        "recipes/world/eval_smoke.yaml",
        "recipes/qwen2.5-coder-1.5b/eval_bird_spider.yaml",
    ],
)
def test_eval_recipes_parse_and_validate_offline(recipe):
    config = load_eval_config(REPO / recipe)
    assert config.bootstrap_resamples >= 10_000
    assert config.benchmark_specs()


def test_study_recipe_evaluates_149_bird_and_200_spider_questions():
    config = load_eval_config(REPO / "recipes/qwen2.5-coder-1.5b/eval_bird_spider.yaml")
    specs = {spec.key: spec for spec in config.benchmark_specs()}
    assert (specs["bird_dev"].limit, specs["bird_dev"].mode) == (149, "bird")
    assert (specs["spider_dev"].limit, specs["spider_dev"].mode) == (200, "spider")


def test_command_line_overrides_win_over_the_recipe():
    config = load_eval_config(
        REPO / "recipes/world/eval.yaml", ["--benchmarks", "world:dev:5", "--max_new_tokens", "32"]
    )
    assert config.benchmarks == ["world:dev:5"]
    assert config.max_new_tokens == 32


def test_dataset_ids_override_the_defaults():
    config = EvalConfig(**BASE, dataset_ids=["bird=my-org/bird-dev"])
    assert config.dataset_id_map()["bird"] == "my-org/bird-dev"
    assert config.dataset_id_map()["world"] is None  # published nowhere: the card names no dataset for it


SPIDER_DEV = Path(__file__).resolve().parents[1].parent / "shared/data/spider_dev"


def test_studys_200_question_spider_slice_is_seeded_and_skips_the_missing_database():
    if not (SPIDER_DEV / "dev.json").is_file():
        pytest.skip(f"Spider dev not available at {SPIDER_DEV}")
    config = EvalConfig(
        **{**BASE, "benchmarks": ["spider:dev:200"], "spider_root": str(SPIDER_DEV), "skip_missing_db": True}
    )
    (spec,) = config.benchmark_specs()
    first, again = load_slice(spec, config), load_slice(spec, config)
    assert len(first.rows) == 200
    assert [r["question_id"] for r in first.rows] == [r["question_id"] for r in again.rows]
    assert "wta_1" not in {r["db_id"] for r in first.rows}
    assert {r["difficulty"] for r in first.rows} <= {"easy", "medium", "hard", "extra", ""}
    assert first.dataset_id == "xlangai/spider" and spec.mode == "spider"


def test_prompt_settings_come_from_the_adapters_run_summary_unless_set(tmp_path):
    write_prompt_summary(tmp_path, sample_rows=1)
    assert resolve_prompt_config(tmp_path).sample_rows == 1
    assert resolve_prompt_config(tmp_path, sample_rows=5).sample_rows == 5
    assert resolve_prompt_config(tmp_path / "no-summary").sample_rows == 3


# ------------------------------------------------------------------------------------------------------
# End to end: trained tiny policy on a Spider-layout slice
# ------------------------------------------------------------------------------------------------------


def test_base_is_loaded_once_for_both_adapters(spider_run):
    _, _, loads = spider_run
    assert len(loads) == 1


def test_each_adapter_is_scored_on_its_own_answers_in_spider_semantics(spider_run):
    results, _, _ = spider_run
    bench = results["benchmarks"]["spider_dev"]
    assert (bench["benchmark"], bench["split"], bench["mode"]) == ("spider", "dev", "spider")
    sft, grpo = bench["policies"]["sft"], bench["policies"]["grpo"]
    assert (sft["correct"], sft["n_scorable"], sft["ex"]) == (2, 5, 0.4)
    assert (grpo["correct"], grpo["n_scorable"], grpo["ex"]) == (3, 5, 0.6)
    assert sft["verdicts"] == {"correct": 2, "wrong": 2, "no_sql": 1, "unscorable": 1}
    assert grpo["verdicts"] == {"correct": 3, "wrong": 1, "no_sql": 1, "unscorable": 1}


def test_unscorable_question_is_left_out_of_both_policies_and_the_paired_stats(spider_run):
    results, _, _ = spider_run
    bench = results["benchmarks"]["spider_dev"]
    assert (bench["n"], bench["n_scorable"], bench["n_unscorable"]) == (6, 5, 1)
    comparison = bench["comparison"]
    assert comparison["n"] == 5
    assert comparison["discordant"] == {"a_only": 1, "b_only": 2}
    assert comparison["delta_ex"] == pytest.approx(0.2)
    assert comparison["mcnemar_p"] == mcnemar_exact(1, 2) == 1.0
    assert comparison["significant"] is False
    assert comparison["summary"].startswith("no significant difference: ΔEX = +20.0 points, 95% CI [")
    assert comparison["summary"].endswith("p = 1.00, n = 5")


def test_predictions_file_holds_both_policies_outputs_sql_and_verdicts(spider_run):
    results, out, _ = spider_run
    bench = results["benchmarks"]["spider_dev"]
    lines = [json.loads(line) for line in (out / bench["predictions_file"]).read_text().splitlines()]
    assert [line["question"] for line in lines] == [q for q, _, _, _ in QUESTIONS]
    assert [line["sft_correct"] for line in lines] == SFT_CORRECT
    assert [line["grpo_correct"] for line in lines] == GRPO_CORRECT
    assert lines[1]["sft_sql"] == "SELECT age FROM singer"
    assert lines[1]["grpo_sql"] == "SELECT name FROM singer"
    assert lines[1]["sft_output"] == "```sql\nSELECT age FROM singer\n```"
    assert lines[4]["grpo_verdict"] == "unscorable"
    assert (lines[5]["sft_sql"], lines[5]["sft_verdict"]) == (None, "no_sql")
    assert lines[0]["difficulty"] == "easy"
    for key in ("question_id", "db_id", "gold_sql", "sft_verdict", "grpo_output"):
        assert key in lines[0]


def test_breakdown_by_hardness_adds_up_to_the_totals(spider_run):
    results, _, _ = spider_run
    for scores in results["benchmarks"]["spider_dev"]["policies"].values():
        groups = scores["by_difficulty"].values()
        assert sum(g["correct"] for g in groups) == scores["correct"]
        assert sum(g["n_scorable"] for g in groups) == scores["n_scorable"]
        assert scores["by_db"]["music"]["n"] == 6


def test_results_file_is_the_returned_results_with_policies_and_prompt(spider_run):
    results, out, _ = spider_run
    assert read_eval_results(out) == results
    assert results["policies"]["grpo"]["adapter"].endswith("grpo")
    assert results["prompt"]["sft"] == PromptConfig(sample_rows=0).record()  # run_summary.json, then the defaults
    assert results["config"]["benchmarks"] == ["spider:dev"]
    assert results["limits"] == {**results["limits"], "timeout_s": 10.0, "max_ops": 200_000_000, "max_rows": 100_000}
    assert results["slmsql_hub_version"]
    assert results["created_at"].endswith("Z")


def test_generate_and_judge_runs_the_base_alone_for_a_none_adapter(trained_policy, spider_root):
    from slmsql_hub.generation import load_policy
    from slmsql_hub.sql import Judge

    config = spider_config(trained_policy, spider_root, "unused")
    model, tokenizer = load_policy(
        config.model_name_or_path, adapters=config.adapters(), dtype="float32", device="cpu"
    )
    (spec,) = config.benchmark_specs()
    rows = load_slice(spec, config).rows
    with Sandbox(workers=1) as sandbox:
        prompts = build_prompts(rows, PROMPT, sandbox)
        judge = Judge(sandbox=sandbox, mode="spider")
        outputs = generate_and_judge(
            model,
            tokenizer,
            rows,
            {None: prompts, "grpo": prompts},
            judge,
            config.generation_config(),
            progress=False,
        )
    # the SFT adapter is an identity LoRA: the base alone answers as SFT does
    assert [o.judgement.correct for o in outputs[None]] == SFT_CORRECT
    assert [o.judgement.correct for o in outputs["grpo"]] == GRPO_CORRECT
    assert outputs[None][1].completion.text == "```sql\nSELECT age FROM singer\n```"
    assert outputs[None][1].completion.finished


def test_slice_whose_every_gold_fails_is_one_usage_error(trained_policy, tmp_path):
    from slmsql_hub.generation import load_policy

    root = tmp_path / "broken"
    db = root / "database" / "music" / "music.sqlite"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE singer (name TEXT)")
    conn.close()
    (root / "dev.json").write_text(json.dumps([{"db_id": "music", "question": "x?", "query": "SELECT nope"}]))
    config = spider_config(trained_policy, root, tmp_path / "out")
    policy = load_policy(config.model_name_or_path, adapters=config.adapters(), dtype="float32", device="cpu")
    with pytest.raises(UsageError, match="none of the 1 gold queries ran"):
        run_eval(config, policy=policy, progress=False)


# ------------------------------------------------------------------------------------------------------
# End to end: random tiny policy on a tiny world, through the CLI
# ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    return tiny_world(tmp_path_factory.mktemp("world") / "world", dev=10)


@pytest.fixture(scope="module")
def random_policy(tmp_path_factory):
    """A random tiny base and two random (non-zero) LoRA adapters."""
    return save_random_policy(tmp_path_factory.mktemp("random"), {"sft": 1, "grpo": 2})


def world_config(world_dir, random_policy, out, **overrides):
    values = dict(
        model_name_or_path=str(random_policy / "base"),
        sft_adapter=str(random_policy / "sft"),
        grpo_adapter=str(random_policy / "grpo"),
        world_root=str(world_dir),
        output_dir=str(out),
    )
    return EvalConfig(**{**values, **overrides})


def write_recipe(path, world_dir, random_policy, out):
    path.write_text(
        "\n".join(
            [
                f"model_name_or_path: {random_policy / 'base'}",
                f"sft_adapter: {random_policy / 'sft'}",
                f"grpo_adapter: {random_policy / 'grpo'}",
                "dtype: float32",
                "device: cpu",
                "benchmarks: [world:dev, world:test]",
                f"world_root: {world_dir}",
                "max_new_tokens: 8",
                "batch_size: 10",
                "sandbox_workers: 1",
                "prompt_sample_rows: 0",
                f"output_dir: {out}",
            ]
        )
        + "\n"
    )
    return path


def test_world_eval_through_the_cli_writes_the_shared_contract(world_dir, random_policy, tmp_path, capsys):
    out = tmp_path / "eval"
    recipe = write_recipe(tmp_path / "eval.yaml", world_dir, random_policy, out)
    (out / "predictions").mkdir(parents=True)
    (out / "predictions" / "spider_dev.jsonl").write_text("{}\n")  # an earlier run's slice
    assert cli_main(["eval", "--config", str(recipe), "--benchmarks", "world:dev", "world:test:6"]) == 0
    printed = capsys.readouterr().out
    assert "world_dev (10 questions, bird): sft EX" in printed
    assert "world_test (6 questions, bird)" in printed
    assert printed.count("ΔEX = ") == 2

    results = json.loads((out / "eval_results.json").read_text())
    manifest = json.loads((world_dir / "world.json").read_text())
    assert set(results["benchmarks"]) == {"world_dev", "world_test"}
    dev = results["benchmarks"]["world_dev"]
    assert (dev["dataset_id"], dev["mode"], dev["n"], dev["held_out_db"]) == (
        None,
        "bird",
        10,
        manifest["held_out_db"],
    )
    assert results["benchmarks"]["world_test"]["limit"] == 6
    predictions = (out / dev["predictions_file"]).read_text().splitlines()
    assert len(predictions) == 10
    assert sorted(p.name for p in (out / "predictions").iterdir()) == ["world_dev.jsonl", "world_test.jsonl"]
    rows = [json.loads(line) for line in predictions]
    for name, scores in dev["policies"].items():
        assert scores["correct"] == sum(row[f"{name}_correct"] or 0 for row in rows)
        held, seen = scores["held_out_db"], scores["seen_dbs"]
        assert held["db_id"] == manifest["held_out_db"]
        assert held["n"] == sum(row["db_id"] == manifest["held_out_db"] for row in rows) > 0
        assert held["n"] + seen["n"] == 10
        assert sum(group["n"] for group in scores["by_db"].values()) == 10
        assert set(scores["by_difficulty"]) <= {"easy", "medium", "hard", "extra"}
        assert sum(group["n"] for group in scores["by_difficulty"].values()) == 10
    # the adapters differ, so their answers do
    assert [row["sft_output"] for row in rows] != [row["grpo_output"] for row in rows]


def test_cli_bad_recipe_is_one_line_and_exit_code_2(tmp_path, capsys):
    recipe = tmp_path / "eval.yaml"
    recipe.write_text(
        "model_name_or_path: m\nsft_adapter: a\ngrpo_adapter: b\noutput_dir: o\nbenchmarks: [world:dev]\n"
    )
    assert cli_main(["eval", "--config", str(recipe)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("slmsql eval: error: benchmark world:dev needs world_root")


def test_missing_adapter_folder_is_one_usage_error(world_dir, random_policy, tmp_path):
    config = world_config(world_dir, random_policy, tmp_path / "out", grpo_adapter=str(tmp_path / "no-grpo-here"))
    with pytest.raises(UsageError, match="adapter 'grpo'.*does not exist"):
        run_eval(config, progress=False)


def test_vllm_backend_without_vllm_names_the_extra_to_install(world_dir, random_policy, tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    config = world_config(world_dir, random_policy, tmp_path / "out", backend="vllm")
    with pytest.raises(UsageError, match=r"pip install 'slmsql-hub\[vllm\]'"):
        run_eval(config, progress=False)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------------
# maj@K (self_consistency): execution-majority EX beside greedy EX
# ------------------------------------------------------------------------------------------------------


def test_temperature_zero_is_fine_while_self_consistency_is_off():
    assert EvalConfig(**BASE, temperature=0).self_consistency == 0


@pytest.mark.parametrize(("flag", "value"), [("--self_consistency", "-1"), ("--temperature", "0")])
def test_cli_bad_self_consistency_is_one_line_exit_2_before_any_model(tmp_path, capsys, flag, value):
    recipe = tmp_path / "eval.yaml"
    recipe.write_text(  # nothing named here exists: a line about them would mean something was loaded first
        f"model_name_or_path: {tmp_path / 'no-model'}\nsft_adapter: a\ngrpo_adapter: b\n"
        f"output_dir: {tmp_path / 'o'}\nworld_root: {tmp_path / 'no-world'}\nself_consistency: 8\n"
    )
    assert cli_main(["eval", "--config", str(recipe), flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert ("self_consistency (K) must be" if flag == "--self_consistency" else "temperature must be > 0") in err


@pytest.fixture(scope="module")
def sc_run(trained_policy, spider_root, tmp_path_factory):
    """The trained policy evaluated with maj@4 at a low temperature, where its trained answers dominate."""
    out = tmp_path_factory.mktemp("sc_eval")
    config = spider_config(trained_policy, spider_root, out, self_consistency=4, temperature=0.3)
    return run_eval(config, progress=False), out


def test_maj_at_k_votes_the_keyed_samples_of_each_policy_and_keeps_greedy_as_it_was(sc_run, spider_run):
    results, out = sc_run
    bench = results["benchmarks"]["spider_dev"]
    greedy = spider_run[0]["benchmarks"]["spider_dev"]
    assert (bench["policies"], bench["comparison"]) == (greedy["policies"], greedy["comparison"])
    rows = [json.loads(line) for line in (out / bench["predictions_file"]).read_text().splitlines()]
    # The trained answers win the vote: maj@K is each policy's greedy correctness, question for question, with
    # the unscorable gold left out and the answer without SQL wrong (nothing executed, so nothing voted).
    assert [row["sft_maj_correct"] for row in rows] == SFT_CORRECT
    assert [row["grpo_maj_correct"] for row in rows] == GRPO_CORRECT
    assert (rows[5]["sft_maj_voters"], rows[5]["sft_maj_sql"]) == (0, None)
    assert all(len(row[f"{name}_samples"]) == 4 for row in rows for name in ("sft", "grpo"))
    assert rows[1]["grpo_maj_sql"] == "SELECT name FROM singer"
    sc = bench["self_consistency"]
    assert sc["k"] == 4
    for name, expected in (("sft", SFT_CORRECT), ("grpo", GRPO_CORRECT)):
        scores = sc["policies"][name]
        assert (scores["correct"], scores["n_scorable"]) == (sum(c or 0 for c in expected), 5)
        assert scores["no_vote"] == sum(row[f"{name}_maj_voters"] == 0 for row in rows if row["gold_sql"] != QUESTIONS[4][1])
    # The paired statistics, recomputed from the per-question maj@K correctness in the predictions file.
    pairs = [(row["sft_maj_correct"], row["grpo_maj_correct"]) for row in rows if row["sft_maj_correct"] is not None]
    a_only, b_only = sum(a > b for a, b in pairs), sum(b > a for a, b in pairs)
    comparison = sc["comparison"]
    assert (comparison["a"], comparison["b"], comparison["n"]) == ("sft", "grpo", 5)
    assert comparison["discordant"] == {"a_only": a_only, "b_only": b_only} == {"a_only": 1, "b_only": 2}
    assert comparison["mcnemar_p"] == mcnemar_exact(a_only, b_only)
    assert comparison["delta_ex"] == pytest.approx((b_only - a_only) / 5)
    assert sc["versus_greedy"]["sft"]["discordant"] == {"a_only": 0, "b_only": 0}
    # What a reader compares: the maj@K pass's prompt and decoding.
    record = results["self_consistency"]
    assert (record["k"], record["temperature"], record["top_p"], record["top_k"]) == (4, 0.3, 1.0, 0)
    assert (record["key_namespace"], record["seed"], record["max_new_tokens"]) == ("eval-sc", 0, 24)
    assert record["prompt"] == results["prompt"]
    assert json.loads((out / "eval_results.json").read_text())["self_consistency"] == record
    assert "self_consistency" not in spider_run[0] and "self_consistency" not in greedy


# Per question (QUESTIONS' order), the four samples a stub sampler returns for it.
STUB_SAMPLES = [
    ["SELECT name FROM singer", "SELECT count(*) FROM singer", "SELECT count(*) FROM singer", "SELECT name FROM singer"],
    ["SELECT name FROM singer", "SELECT age FROM singer", "SELECT age FROM singer", "SELECT name FROM singer"],
    ["SELECT nme FROM singer", "hello", "SELECT max(age) FROM singer", "SELECT x FROM nowhere"],
    ["SELECT nme FROM singer", "hello", "hello", "SELECT"],
    ["SELECT 1", "SELECT 1", "SELECT 1", "SELECT 1"],
    ["SELECT 2", "SELECT 1", "SELECT 1", "SELECT 1"],
]
STUB_MAJ = [0, 1, 1, 0, None, 1]  # tie to the first group; one voter; no voter; unscorable; the larger group


def test_maj_at_k_in_eval_breaks_ties_to_the_earliest_sample_and_runs_each_sql_once(
    trained_policy, spider_root, tmp_path, monkeypatch
):
    import slmsql_hub.filtering as filtering
    from slmsql_hub.generation import Completion
    from slmsql_hub.sql.sandbox import Sandbox as SandboxClass

    calls, executed = [], []

    def stub(model, tokenizer, prompts, keys, config):  # a model is not the point here: the vote is
        calls.append((list(keys), config.key_namespace, config.num_samples, config.do_sample))
        index = [next(i for i, q in enumerate(QUESTIONS) if q[0] in str(p)) for p in prompts]
        return [[Completion(answer(text), 4, True) for text in STUB_SAMPLES[i]] for i in index]

    run_distinct = SandboxClass._run_distinct

    def counting(self, statements, *args, **kwargs):
        executed.extend(statements)
        return run_distinct(self, statements, *args, **kwargs)

    monkeypatch.setattr(filtering, "generate_keyed_samples", stub)
    monkeypatch.setattr(SandboxClass, "_run_distinct", counting)
    out = tmp_path / "eval"
    results = run_eval(spider_config(trained_policy, spider_root, out, self_consistency=4), progress=False)
    rows = [json.loads(line) for line in (out / "predictions" / "spider_dev.jsonl").read_text().splitlines()]
    assert [row["sft_maj_correct"] for row in rows] == STUB_MAJ == [row["grpo_maj_correct"] for row in rows]
    assert [row["sft_maj_votes"] for row in rows] == [2, 2, 1, 0, 0, 3]
    assert [row["sft_maj_sql"] for row in rows][:3] == ["SELECT name FROM singer"] * 2 + ["SELECT max(age) FROM singer"]
    sc = results["benchmarks"]["spider_dev"]["self_consistency"]
    assert sc["policies"]["sft"] == {"ex": 0.6, "correct": 3, "n_scorable": 5, "no_vote": 1, "mean_voters": 2.6}
    # maj@K against greedy on the same questions: greedy alone right on q0, the vote alone on q1 and q5.
    assert sc["versus_greedy"]["sft"]["discordant"] == {"a_only": 1, "b_only": 2}
    # K samples of batch_size prompts per call, keyed by question id in eval's own namespace, per policy.
    ids = [row["question_id"] for row in rows]
    assert [c[0] for c in calls] == [ids[:4], ids[4:]] * 2
    assert {c[1:] for c in calls} == {("eval-sc", 4, True)}
    # Every distinct (database, SQL) ran once over the whole evaluation, though 48 samples repeat a few texts.
    assert len(executed) == len(set(executed))
