"""The generated model card (``slmsql card``) against the fixture run in ``tests/fixtures/run/``.

Every number the card prints is parsed back from the rendered ``README.md`` and compared with the run's own
files (``eval_results.json``, ``telemetry.jsonl``, ``run_summary.json``, ``config.yaml``,
``filter_report.json``), computed here independently of the card's code. ``tests/fixtures/make_run.py``
regenerates the fixture; ``run_significant/eval/`` swaps in an evaluation where GRPO is significantly better.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from _helpers import add_maj_at_k
from huggingface_hub import ModelCard, constants, parse_eval_result_entries

from slmsql_hub import cli
from slmsql_hub.card import CardOptions, build_card, card_data, load_run, render_card
from slmsql_hub.errors import UsageError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RUN = FIXTURES / "run"
SIGNIFICANT_EVAL = FIXTURES / "run_significant" / "eval"
REPO_ID = "alice/slmsql-quickstart-grpo"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
METRICS = {
    "zero-variance groups (frac_reward_zero_std_exact)": ("frac_reward_zero_std_exact", 3),
    "TRL's frac_reward_zero_std": ("frac_reward_zero_std", 3),
    "reward_std": ("reward_std", 3),
    "grad_norm": ("grad_norm", 3),
    "completion length (tokens)": ("completions/mean_length", 1),
    "reward": ("reward", 3),
    "sql/correct_rate": ("sql/correct_rate", 3),
}


# ------------------------------------------------------------------------------------------------------------
# Reading the run files and the rendered card
# ------------------------------------------------------------------------------------------------------------


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _telemetry(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _num(text: str) -> float:
    """A number as the card prints it (U+2212 minus, thousands commas) as a float."""
    return float(text.strip().replace("\u2212", "-").replace(",", ""))


def _section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 3)
    return text[start : end if end != -1 else len(text)]


def _table(text: str, first_header: str) -> list[list[str]]:
    """The body rows of the first Markdown table whose header starts with ``| first_header |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        rows.append([cell.strip() for cell in cells])
    return rows


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    """The card folder of the fixture run (null result), built once for the module."""
    out = tmp_path_factory.mktemp("card") / "card"
    build = build_card(RUN, out, options=CardOptions(repo_id=REPO_ID))
    return build


WORLD_COPY = "alice/world-splits"
BAND_ID = f"{REPO_ID}-band"


@pytest.fixture(scope="module")
def published_run(tmp_path_factory) -> Path:
    """The fixture run evaluated as if the world's splits were published (``dataset_ids: [world=WORLD_COPY]``)."""
    run = tmp_path_factory.mktemp("published") / "run"
    shutil.copytree(RUN, run)
    path = run / "eval" / "eval_results.json"
    results = _json(path)
    for entry in results["benchmarks"].values():
        entry["dataset_id"] = WORLD_COPY
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def published_card(published_run, tmp_path_factory):
    """The card of :func:`published_run`, with the band's repository named as its published training data."""
    out = tmp_path_factory.mktemp("published-card") / "card"
    return build_card(published_run, out, options=CardOptions(repo_id=REPO_ID, datasets=(BAND_ID,)))


@pytest.fixture(scope="module")
def text(card):
    return card.readme.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def significant_card(tmp_path_factory):
    """The fixture run with the significant evaluation swapped in."""
    run = tmp_path_factory.mktemp("significant") / "run"
    shutil.copytree(RUN, run)
    shutil.rmtree(run / "eval")
    shutil.copytree(SIGNIFICANT_EVAL, run / "eval")
    return build_card(run, options=CardOptions(repo_id=REPO_ID))


def test_a_folder_without_a_grpo_run_gets_no_card(tmp_path):
    with pytest.raises(UsageError, match="no GRPO run in"):
        build_card(tmp_path)
    assert not (tmp_path / "card").exists()


# ------------------------------------------------------------------------------------------------------------
# Metadata
# ------------------------------------------------------------------------------------------------------------


def test_metadata_round_trips_through_model_card_load(card):
    loaded = ModelCard.load(card.readme)
    expected = card_data(load_run(RUN), CardOptions(repo_id=REPO_ID)).to_dict()
    assert loaded.data.to_dict() == expected
    data = loaded.data
    assert data.library_name == "peft"
    assert data.pipeline_tag == "text-generation"
    assert data.license == "apache-2.0"
    assert data.tags == ["text-to-sql", "grpo", "trl", "peft", "negative-result"]
    # The world is published nowhere and no training data was named: no dataset reference that cannot resolve.
    assert data.datasets is None and data.eval_results is None
    assert card.eval_results == [] and "Training data on the Hub" not in card.readme.read_text()


def test_datasets_name_the_published_training_data_never_the_evaluation_sets(published_card):
    data = ModelCard.load(published_card.readme).data
    assert data.datasets == [BAND_ID]  # not WORLD_COPY, which the eval results name
    text = published_card.readme.read_text()
    assert f"[`{BAND_ID}`](https://huggingface.co/datasets/{BAND_ID})" in text
    assert f"--dataset_paths {BAND_ID}" in text
    with pytest.raises(UsageError, match="--dataset 'not a repo' is not a Hub repository id"):
        card_data(load_run(RUN), CardOptions(datasets=("not a repo",)))


def test_an_attempt_trained_from_the_hub_names_the_dataset_repo():
    from slmsql_hub.card.context import describe_data
    from slmsql_hub.run.read import Attempt

    run = load_run(RUN)
    sources = [BAND_ID, "outputs/quickstart/world/datasets/grounding"]
    attempt = Attempt("grpo", 2, RUN / "grpo", {"data": {"source": sources, "prompts": 7}}, {}, [])
    assert describe_data(run, attempt) == f"the Hub dataset `{BAND_ID}` + `grounding` (7 prompts)"


def test_model_index_holds_the_grpo_adapters_ex_per_benchmark(published_run, published_card):
    card = published_card
    results = _json(published_run / "eval" / "eval_results.json")["benchmarks"]
    loaded = ModelCard.load(card.readme).data
    by_split = {r.dataset_split: r for r in loaded.eval_results}
    assert set(by_split) == {entry["split"] for entry in results.values()}
    for entry in results.values():
        result = by_split[entry["split"]]
        assert result.metric_value == round(100 * entry["policies"]["grpo"]["ex"], 1)
        assert result.dataset_type == entry["dataset_id"]
        assert result.metric_type == "execution_accuracy"
        assert result.task_type == "text-generation"
        assert result.source_url == f"https://huggingface.co/{REPO_ID}"


def test_local_base_model_stays_out_of_metadata_and_ships_in_the_folder(card):
    data = ModelCard.load(card.readme).data
    assert data.base_model is None  # outputs/quickstart/base is no Hub id: the Hub would reject it
    assert (card.folder / "base" / "config.json").is_file()
    assert (card.folder / "base" / "model.safetensors").read_bytes() == (
        RUN / "base" / "model.safetensors"
    ).read_bytes()


def test_hub_base_model_is_named_with_its_adapter_relation_and_not_shipped():
    run = load_run(RUN)
    data = card_data(run, CardOptions(base_model_id="Qwen/Qwen2.5-Coder-1.5B-Instruct")).to_dict()
    assert data["base_model"] == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert data["base_model_relation"] == "adapter"
    card = render_card(run, CardOptions(base_model_id="Qwen/Qwen2.5-Coder-1.5B-Instruct"))
    assert 'AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-Coder-1.5B-Instruct")' in card.text
    assert "ship in this repository's `base/`" not in card.text


# ------------------------------------------------------------------------------------------------------------
# Every number equals the run files
# ------------------------------------------------------------------------------------------------------------


def _p_text(p: float) -> float:
    return round(p, 3) if p < 0.1 else round(p, 2)


def test_results_table_numbers_equal_eval_results(text):
    results = _json(RUN / "eval" / "eval_results.json")["benchmarks"]
    rows = _table(_section(text, "Results"), "Benchmark")
    assert len(rows) == len(results)
    for row, entry in zip(rows, results.values()):
        bench, mode, n, sft, grpo, delta, ci, p, discordant, verdict = row
        comparison = entry["comparison"]
        assert bench == f"{entry['benchmark']} {entry['split']}"
        assert mode == entry["mode"]
        assert int(n) == comparison["n"] == entry["n_scorable"]
        assert _num(sft) == round(100 * entry["policies"]["sft"]["ex"], 1)
        assert _num(grpo) == round(100 * entry["policies"]["grpo"]["ex"], 1)
        assert _num(delta) == round(100 * comparison["delta_ex"], 1)
        low, high = ci.strip("[]").split(",")
        assert (_num(low), _num(high)) == tuple(round(100 * x, 1) for x in comparison["ci95"])
        assert _num(p) == _p_text(comparison["mcnemar_p"])
        a_only, b_only = (int(x) for x in discordant.split("/"))
        assert (a_only, b_only) == (comparison["discordant"]["a_only"], comparison["discordant"]["b_only"])
        assert verdict == comparison["verdict"]


def test_unscorable_counts_and_bootstrap_settings_come_from_eval_results(text):
    results = _json(RUN / "eval" / "eval_results.json")["benchmarks"]
    section = _section(text, "Results")
    for key, entry in results.items():
        if entry["n_unscorable"]:
            assert f"{key}: {entry['n_unscorable']} of {entry['n']} unscorable." in section
        comparison = entry["comparison"]
        assert (
            f"({comparison['bootstrap_resamples']} resamples, seed\n  {comparison['bootstrap_seed']})"
            in section
        )
        assert comparison["rule"] in section
    assert any(entry["n_unscorable"] for entry in results.values())  # the fixture exercises it


def test_difficulty_breakdown_equals_each_policys_groups(text):
    results = _json(RUN / "eval" / "eval_results.json")["benchmarks"]
    rows = _table(_section(text, "Results"), "Benchmark | Group")
    seen = 0
    for key, group, n, sft, grpo in rows:
        policies = results[key]["policies"]
        if group.startswith("held-out database"):
            source = {p: policies[p]["held_out_db"] for p in ("sft", "grpo")}
            assert group == f"held-out database ({source['sft']['db_id']})"
        elif group == "seen databases":
            source = {p: policies[p]["seen_dbs"] for p in ("sft", "grpo")}
        else:
            source = {p: policies[p]["by_difficulty"][group] for p in ("sft", "grpo")}
        assert int(n) == source["sft"]["n_scorable"]
        for cell, policy in ((sft, "sft"), (grpo, "grpo")):
            ex, correct = re.fullmatch(r"([\d.]+) \((\d+)\)", cell).groups()
            assert float(ex) == round(100 * source[policy]["ex"], 1)
            assert int(correct) == source[policy]["correct"]
        seen += 1
    assert seen == sum(len(e["policies"]["sft"]["by_difficulty"]) + 2 for e in results.values())


def test_tldr_quotes_each_verdict_and_the_telemetrys_zero_variance_share(text):
    results = _json(RUN / "eval" / "eval_results.json")["benchmarks"]
    tldr = next(line for line in text.splitlines() if line.startswith("> **TL;DR"))
    assert "No significant difference" in tldr
    for key, entry in results.items():
        comparison = entry["comparison"]
        assert f"{key}: {comparison['summary'].removeprefix(comparison['verdict'] + ': ')}" in tldr
        assert comparison["summary"].startswith(comparison["verdict"] + ": ΔEX = ")
    for folder in ("grpo", "grpo_attempt1"):
        values = [r["frac_reward_zero_std_exact"] for r in _telemetry(RUN / folder / "telemetry.jsonl")]
        assert f"{round(100 * sum(values) / len(values))}% " in tldr
    grad = [r["grad_norm"] for r in _telemetry(RUN / "grpo" / "telemetry.jsonl")]
    assert f"mean gradient norm was {sum(grad) / len(grad):.3f}" in tldr
    relative = _json(RUN / "grpo" / "run_summary.json")["adapter_update"]["relative_norm"]
    assert f"the adapter's weights changed (by {relative:.2e} of their norm)" in tldr


def test_attempts_table_equals_telemetry_and_run_summaries(text):
    section = _section(text, "What GRPO did")
    rows = {row[0]: row[1:] for row in _table(section, "Telemetry and run")}
    attempts = ("grpo_attempt1", "grpo")  # the columns: attempt #1, attempt #2
    summaries = [_json(RUN / a / "run_summary.json") for a in attempts]
    records = [_telemetry(RUN / a / "telemetry.jsonl") for a in attempts]
    for label, (key, decimals) in METRICS.items():
        cells = rows[f"{label}: mean (first → last step)"]
        for cell, lines in zip(cells, records):
            values = [r[key] for r in lines]
            mean, first, last = re.fullmatch(r"(\S+) \((\S+) → (\S+)\)", cell).groups()
            assert float(mean) == round(sum(values) / len(values), decimals), (label, cell)
            assert float(first) == round(values[0], decimals)
            assert float(last) == round(values[-1], decimals)
    for cell, summary, lines in zip(rows["steps (logged)"], summaries, records):
        assert cell == f"{summary['steps']} ({len(lines)})"
    for cell, summary in zip(rows["prompts"], summaries):
        assert f"({summary['data']['prompts']} prompts)" in cell
    for cell, summary in zip(rows["wall time"], summaries):
        assert cell == f"{round(summary['wall_seconds'])} s"
    assert rows["adapter weights changed"] == [
        "yes" if s["adapter_checksum"]["changed"] else "**no**" for s in summaries
    ]
    # how far each adapter moved, next to the telemetry: run_summary.json's adapter_update, in 3 digits
    cells = rows["adapter update ‖ΔW‖ / ‖W‖"]
    assert cells == [f"{s['adapter_update']['relative_norm']:.2e}" for s in summaries]
    assert all(0 < float(c) for c in cells)
    # TRL's share and the exact one disagree in the fixture as in real runs: the card says which to read.
    assert "The zero-variance share to read is `frac_reward_zero_std_exact`" in section


def test_filter_paragraph_equals_filter_report(text):
    report = _json(RUN / "filter" / "filter_report.json")
    section = _section(text, "What GRPO did")
    paragraph = " ".join(section.split("**The pass-rate filter.**")[1].split("\n\n")[0].split())
    assert f"**{report['summary']}**" in paragraph
    assert (
        f"K = {report['num_samples']} completions (temperature {report['generation']['temperature']})"
        in paragraph
    )
    assert (
        f"each of the {report['pool']} questions of the world `{report['dataset']['split']}` split"
        in paragraph
    )
    assert f"{report['pass_rate_low']} < p < {report['pass_rate_high']}" in paragraph
    assert f"Mean pass rate {report['mean_pass_rate']:.3f}." in paragraph
    counts = report["counts"]
    assert report["summary"].startswith(f"{counts['band']} band / {counts['all_fail']} all-fail")


def test_grpo_settings_table_equals_the_resolved_config(text):
    config = yaml.safe_load((RUN / "grpo" / "config.yaml").read_text())
    adapter = _json(RUN / "grpo" / "adapter_config.json")
    rows = _table(_section(text, "Training details"), "Setting")
    settings = {key.strip("`"): value for key, value in rows}
    checked = 0
    for key, value in settings.items():
        if key in config:
            assert yaml.safe_load(value) == config[key], key
            checked += 1
    assert checked >= 15
    assert settings["LoRA"].startswith(
        f"r = {adapter['r']}, alpha = {adapter['lora_alpha']}, dropout = {adapter['lora_dropout']}"
    )
    summary = _json(RUN / "grpo" / "run_summary.json")
    assert settings["prompts per generation"] == str(summary["generation"]["prompts_per_generation"])


def test_filter_paragraph_says_how_many_questions_were_left_out_as_sft_data(text, tmp_path):
    report = _json(RUN / "filter" / "filter_report.json")
    assert (report["excluded_sft"], report["sft_overlap"]) == (0, 0)
    paragraph = " ".join(
        _section(text, "What GRPO did").split("**The pass-rate filter.**")[1].split("\n\n")[0].split()
    )
    assert (
        f"Left out as SFT training data before the pool was drawn: {report['excluded_sft']} questions of the "
        f"split; SFT questions in the pool: {report['sft_overlap']}." in paragraph
    )
    run = tmp_path / "run"  # a filter whose adapter had no record of its SFT questions (the Hub adapter)
    shutil.copytree(RUN, run)
    unknown = {**report, "sft_overlap": None, "sft_record": None}
    (run / "filter" / "filter_report.json").write_text(json.dumps(unknown), encoding="utf-8")
    readme = build_card(run, tmp_path / "card", options=CardOptions(repo_id=REPO_ID)).readme.read_text()
    assert "SFT questions in the pool: unknown (the SFT adapter has no complete record" in " ".join(
        readme.split()
    )


def _limits_row(text: str) -> tuple[str, str]:
    rows = _table(_section(text, "Training details"), "Setting")
    (row,) = [row for row in rows if row[0].startswith("SQL limits")]
    return row[0], row[1]


def test_sql_limits_row_states_the_limits_filter_grpo_and_eval_recorded(text):
    limits = _json(RUN / "grpo" / "run_summary.json")["limits"]
    assert _json(RUN / "filter" / "filter_report.json")["limits"] == limits
    assert _json(RUN / "eval" / "eval_results.json")["limits"] == limits
    name, value = _limits_row(text)
    assert name == "SQL limits (filter, GRPO, eval)"
    assert value == (
        f"{limits['timeout_s']} s, {limits['max_ops']:,} SQLite instructions, {limits['max_rows']:,} rows, "
        f"{limits['max_result_bytes'] / 2**20:g} MiB per query"
    )


def test_a_stage_that_judged_under_other_limits_is_flagged_on_the_card(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    results = _json(run / "eval" / "eval_results.json")
    results["limits"]["max_rows"] = 10_000
    (run / "eval" / "eval_results.json").write_text(json.dumps(results), encoding="utf-8")
    text = build_card(run, options=CardOptions(repo_id=REPO_ID)).readme.read_text(encoding="utf-8")
    name, value = _limits_row(text)
    assert name == "SQL limits (filter, GRPO)" and "**eval judged under other limits**" in value


def test_reward_and_compute_lines_equal_run_summary(text):
    summary = _json(RUN / "grpo" / "run_summary.json")
    section = " ".join(_section(text, "Training details").split())
    rewards = summary["rewards"]
    execution = rewards["execution"]
    assert f"`execution`: {execution['correct']} when the query's result matches" in section
    assert f"{execution['executes']} when it runs but differs, {execution['fails']} when it fails" in section
    assert f"`format`: {rewards['format']} for an answer" in section
    weights = ", ".join(f"{f} × {w}" for f, w in zip(rewards["funcs"], rewards["weights"]))
    assert f"**Reward** ({weights})" in section
    params = summary["parameters"]
    assert f"{params['trainable']:,} trainable of {params['total']:,} parameters" in section
    assert f"training {round(summary['train_seconds'])} s, wall {round(summary['wall_seconds'])} s" in section
    assert f"torch {summary['environment']['torch']}" in section


def test_lineage_numbers_equal_sft_and_base_summaries(text):
    section = " ".join(_section(text, "Training details").split())
    base = _json(RUN / "base" / "run_summary.json")
    assert f"{base['parameters']['total']:,} parameters" in section
    assert f"({base['steps']} steps, final loss {base['final_loss']:.4f})" in section
    for stage in (1, 2):
        summary = _json(RUN / "sft" / f"stage{stage}" / "run_summary.json")
        assert (
            f"({summary['data']['trained_on']} examples, {summary['steps']} steps, final loss "
            f"{summary['final_loss']:.4f})" in section
        )
    assert "**this adapter**" in section and "kept for its telemetry, not shipped" in section


def test_guards_table_lists_every_guard_of_every_attempt(text):
    rows = _table(_section(text, "Guards"), "Attempt")
    expected = []
    for number, folder in ((1, "grpo_attempt1"), (2, "grpo")):
        for result in _json(RUN / folder / "run_summary.json")["guards"]["results"]:
            expected.append(
                [f"attempt #{number}", f"`{result['name']}`", result["status"].upper(), result["message"]]
            )
    assert rows == expected


def test_null_section_bounds_the_effect_with_each_ci(text):
    results = _json(RUN / "eval" / "eval_results.json")["benchmarks"]
    section = _section(text, "Why publish a null result")
    for key, entry in results.items():
        low, high = (round(100 * x, 1) for x in entry["comparison"]["ci95"])
        match = re.search(rf"- {key}: between (\S+) and (\S+) points \(n = (\d+)\)", section)
        assert (_num(match[1]), _num(match[2]), int(match[3])) == (low, high, entry["comparison"]["n"])


def test_reproduce_commands_run_the_shipped_configs(card, text):
    block = _section(text, "How to reproduce").split("```bash\n")[1].split("```")[0]
    commands = block.strip().splitlines()
    world = _json(RUN / "world" / "world.json")
    assert commands[0].startswith(
        f"slmsql world build --out outputs/quickstart/world --seed {world['seed']} "
    )
    assert f"--rl-pool {world['sizes']['rl_pool']}" in commands[0]
    configs = [c.split("--config ")[1] for c in commands if "--config " in c]
    stages = ("base", "sft_stage1", "sft_stage2", "filter", "grpo_attempt1", "grpo", "eval")
    assert configs == [f"configs/{n}.yaml" for n in stages]
    sources = {
        "base": yaml.safe_load((RUN / "base" / "config.yaml").read_text()),
        "sft_stage2": yaml.safe_load((RUN / "sft" / "stage2" / "config.yaml").read_text()),
        "filter": _json(RUN / "filter" / "filter_config.json")["config"],
        "grpo": yaml.safe_load((RUN / "grpo" / "config.yaml").read_text()),
        "eval": _json(RUN / "eval" / "eval_results.json")["config"],
    }
    for name, source in sources.items():
        assert yaml.safe_load((card.folder / "configs" / f"{name}.yaml").read_text()) == source, name
    assert commands[-1] == f"slmsql card --run-dir outputs/quickstart --repo-id {REPO_ID}"


@pytest.mark.slow
def test_shipped_filter_and_eval_configs_parse_as_recipes(card):
    from slmsql_hub.evaluation import load_eval_config
    from slmsql_hub.filtering import load_filter_config
    from slmsql_hub.recipes import parse_recipe
    from slmsql_hub.training.configs import GRPO_ARGUMENTS

    assert (
        load_filter_config(card.folder / "configs" / "filter.yaml").output_dir == "outputs/quickstart/filter"
    )
    assert load_eval_config(card.folder / "configs" / "eval.yaml").grpo_adapter == "outputs/quickstart/grpo"
    _, _, training = parse_recipe(GRPO_ARGUMENTS, card.folder / "configs" / "grpo.yaml")
    assert training.output_dir == "outputs/quickstart/grpo"


# ------------------------------------------------------------------------------------------------------------
# .eval_results, plots, the folder
# ------------------------------------------------------------------------------------------------------------


def test_eval_results_yaml_follows_the_hub_format(published_run, published_card):
    card = published_card
    results = _json(published_run / "eval" / "eval_results.json")
    assert constants.EVAL_RESULTS_FOLDER == ".eval_results"
    assert sorted(p.name for p in card.eval_results) == sorted(f"{key}.yaml" for key in results["benchmarks"])
    for key, entry in results["benchmarks"].items():
        data = yaml.safe_load((card.folder / ".eval_results" / f"{key}.yaml").read_text())
        assert isinstance(data, list) and len(data) == 1
        item = data[0]
        assert item["dataset"] == {"id": entry["dataset_id"], "task_id": entry["split"]}
        assert item["value"] == round(100 * entry["policies"]["grpo"]["ex"], 1)
        assert item["date"] == results["created_at"]
        assert item["source"] == {
            "url": f"https://huggingface.co/{REPO_ID}/blob/main/eval/{entry['predictions_file']}",
            "name": "slmsql eval: per-question predictions and verdicts",
        }
        assert (card.folder / "eval" / entry["predictions_file"]).is_file()  # the source link resolves
        (parsed,) = parse_eval_result_entries(data)
        assert (parsed.dataset_id, parsed.value, parsed.source_url) == (
            entry["dataset_id"],
            item["value"],
            item["source"]["url"],
        )


def test_plots_are_pngs_referenced_by_relative_path(card, text):
    from matplotlib.image import imread

    stems = {"frac_reward_zero_std", "reward_std", "grad_norm", "completion_length", "pass_rate_histogram"}
    assert set(card.plots) == stems
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(links) == sorted(f"plots/{stem}.png" for stem in stems)
    for link in links:
        path = card.folder / link
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        height, width, _ = imread(path).shape
        assert width > 400 and height > 200


def test_card_folder_ships_the_adapter_and_run_files_but_not_trls_draft(card):
    for name in (
        "adapter_config.json",
        "adapter_model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "telemetry.jsonl",
        "run_summary.json",
        "config.yaml",
    ):
        assert (card.folder / name).read_bytes() == (RUN / "grpo" / name).read_bytes(), name
    assert (card.folder / "eval" / "eval_results.json").read_bytes() == (
        RUN / "eval" / "eval_results.json"
    ).read_bytes()
    assert (card.folder / "grpo_attempt1" / "telemetry.jsonl").is_file()
    assert (card.folder / "filter" / "filter_report.json").is_file()
    assert not (card.folder / "trl_model_card.md").exists()
    assert "generated_from_trainer" not in card.readme.read_text()
    assert card.files == sorted(
        str(p.relative_to(card.folder)) for p in card.folder.rglob("*") if p.is_file()
    )


@pytest.mark.slow
def test_usage_snippet_loads_the_shipped_adapter_on_the_shipped_base_and_generates(card, text, tmp_path):
    import sqlite3

    database = tmp_path / "pets.sqlite"
    with sqlite3.connect(database) as conn:  # test baseline: builds the database
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
    code = _section(text, "How to use").split("```python\n")[1].split("```")[0]
    download = f'folder = snapshot_download("{REPO_ID}")'
    assert download in code  # offline here: the snippet reads the same files from the card folder
    code = code.replace(download, f'folder = "{card.folder}"')
    code = code.replace("path/to/database.sqlite", str(database))
    printed = []
    exec(compile(code, "card-snippet", "exec"), {"print": printed.append})  # noqa: S102
    assert len(printed) == 1 and (printed[0] is None or isinstance(printed[0], str))


# ------------------------------------------------------------------------------------------------------------
# A significant result; errors
# ------------------------------------------------------------------------------------------------------------


def test_significant_result_drops_the_negative_result_tag_and_the_null_section(significant_card):
    text = significant_card.readme.read_text()
    data = ModelCard.load(significant_card.readme).data
    assert significant_card.outcome == "improved"
    assert "negative-result" not in data.tags
    assert "## Why publish a null result" not in text
    results = _json(SIGNIFICANT_EVAL / "eval_results.json")["benchmarks"]
    tldr = next(line for line in text.splitlines() if line.startswith("> **TL;DR"))
    assert "GRPO improved execution accuracy significantly" in tldr
    for key, entry in results.items():
        comparison = entry["comparison"]
        assert comparison["significant"]
        assert f"{key}: {comparison['summary'].removeprefix(comparison['verdict'] + ': ')}" in tldr
    rows = _table(_section(text, "Results"), "Benchmark")
    assert [_num(row[5]) for row in rows] == [
        round(100 * e["comparison"]["delta_ex"], 1) for e in results.values()
    ]


def test_missing_evaluation_is_one_error_naming_the_command(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    shutil.rmtree(run / "eval")
    with pytest.raises(
        UsageError, match=r"eval_results\.json not found; evaluate the policies first \(`slmsql eval"
    ):
        build_card(run)
    assert not (run / "card").exists()


def test_a_folder_with_other_files_or_a_stage_folder_is_never_replaced(tmp_path):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="holds files a card folder does not"):
        build_card(RUN, other)
    assert (other / "notes.txt").read_text() == "keep me"
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    (run / "grpo" / "trl_model_card.md").unlink()
    with pytest.raises(UsageError, match="is the input .*grpo; choose an output outside the inputs"):
        build_card(run, run / "grpo")
    assert (run / "grpo" / "adapter_model.safetensors").is_file()


def test_template_with_an_undefined_variable_is_refused(tmp_path):
    template = tmp_path / "card.md"
    template.write_text("---\n{{ card_data }}\n---\n# {{ model_name }} {{ not_a_field }}\n")
    with pytest.raises(ValueError, match="not_a_field"):
        render_card(load_run(RUN), template_path=template)


def test_cli_builds_without_repo_id_then_rebuilds_over_its_own_folder(published_run, tmp_path, capsys):
    out = tmp_path / "card"
    assert cli.main(["card", "--run-dir", str(published_run), "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["outcome"] == "null" and Path(printed["card"]) == out / "README.md"
    item = yaml.safe_load((out / ".eval_results" / "world_dev.yaml").read_text())[0]
    assert "source" not in item and item["dataset"]["id"] == WORLD_COPY  # no repo, no source link
    assert f'folder = "{out}"' in (out / "README.md").read_text()
    (out / "plots" / "stale.png").write_bytes(b"old")
    args = ["card", "--run-dir", str(published_run), "--out", str(out), "--repo-id", REPO_ID]
    assert cli.main([*args, "--dataset", "bad name"]) == 2  # one line, before anything is written
    assert "bad name" in capsys.readouterr().err and (out / "plots" / "stale.png").exists()
    assert cli.main(args) == 2  # a finished card is replaced only when asked
    assert "pass --overwrite" in capsys.readouterr().err and (out / "plots" / "stale.png").exists()
    assert cli.main([*args, "--overwrite"]) == 0
    assert not (out / "plots" / "stale.png").exists()  # replaced as a whole, not merged
    assert f'snapshot_download("{REPO_ID}")' in (out / "README.md").read_text()
    assert not list(tmp_path.glob(".card.*"))  # no temporary folder, no lock left


def test_cli_reports_a_bad_run_folder_in_one_line(tmp_path, capsys):
    assert cli.main(["card", "--run-dir", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("slmsql card: error: run folder not found") and "\n" not in err


def test_links_point_to_the_hub_the_card_is_rendered_for(published_run, tmp_path, monkeypatch):
    """A card built with ``HF_ENDPOINT`` set (a private Hub) links there, not to huggingface.co."""
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.org/")
    built = build_card(
        published_run, tmp_path / "card", options=CardOptions(repo_id=REPO_ID, datasets=(BAND_ID,))
    )
    readme = built.readme.read_text(encoding="utf-8")
    sources = [r.source_url for r in ModelCard.load(built.readme).data.eval_results]
    assert sources and all(url.startswith(f"https://hub.example.org/{REPO_ID}") for url in sources)
    assert "https://hub.example.org/datasets/" in readme
    assert (
        f"https://huggingface.co/{REPO_ID}" not in readme and "https://huggingface.co/datasets/" not in readme
    )


# ------------------------------------------------------------------------------------------------------------
# maj@K (eval's self_consistency) beside greedy EX
# ------------------------------------------------------------------------------------------------------------


def test_maj_at_k_table_equals_eval_results_and_is_absent_for_older_results(text, tmp_path):
    assert "maj@K" not in text  # results written before maj@K: the card is as it was
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    results = add_maj_at_k(run)
    card_text = build_card(run, tmp_path / "card", options=CardOptions(repo_id=REPO_ID)).readme.read_text()
    section = _section(card_text, "Results")
    assert "K = 8, temperature 0.7, top-p 1.0; keyed samples, namespace `eval-sc`, seed 0" in section
    rows = _table(section, "Benchmark")  # the greedy table first, unchanged
    assert [row[3] for row in rows] == [row[3] for row in _table(_section(text, "Results"), "Benchmark")]
    maj_rows = _table(section[section.index("| Benchmark | Mode | n | SFT maj@K") :], "Benchmark")
    assert len(maj_rows) == len(results["benchmarks"])
    for row, greedy_row, entry in zip(maj_rows, rows, results["benchmarks"].values()):
        bench, mode, n, sft, grpo, delta, ci, p, discordant, verdict = row
        comparison = entry["self_consistency"]["comparison"]
        assert (bench, mode, int(n)) == (f"{entry['benchmark']} {entry['split']}", entry["mode"], comparison["n"])
        assert _num(sft) == round(100 * entry["self_consistency"]["policies"]["sft"]["ex"], 1)
        assert _num(grpo) == round(100 * entry["self_consistency"]["policies"]["grpo"]["ex"], 1)
        assert _num(delta) == round(100 * comparison["delta_ex"], 1)
        low, high = ci.strip("[]").split(",")
        assert (_num(low), _num(high)) == tuple(round(100 * x, 1) for x in comparison["ci95"])
        assert _num(p) == _p_text(comparison["mcnemar_p"])
        assert discordant == f"{comparison['discordant']['a_only']} / {comparison['discordant']['b_only']}"
        assert verdict == comparison["verdict"]
        assert (sft, grpo) != (greedy_row[3], greedy_row[4])  # the maj@K numbers, not greedy's again


def test_the_scope_device_and_environment_lines_are_read_from_the_runs_files(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    summary = json.loads((run / "grpo" / "run_summary.json").read_text())
    summary["environment"].update(device="cuda", cuda="12.8", gpu="NVIDIA H100 80GB HBM3")
    (run / "grpo" / "run_summary.json").write_text(json.dumps(summary))
    config = (run / "grpo" / "config.yaml").read_text().replace("use_cpu: true", "use_cpu: false")
    (run / "grpo" / "config.yaml").write_text(config)
    text = render_card(load_run(run)).text
    # today: "trained and evaluated on world dev" and "the default device (GPU when present)"
    assert "trained on SFT stage 1: `foundation`; SFT stage 2: `grounding`; GRPO: the pass-rate band" in text
    assert "GRPO: the pass-rate band (of world:rl_pool); evaluated on world dev, world test only" in text
    assert "on\nGPU (NVIDIA H100 80GB HBM3, CUDA 12.8);" in text
    assert "Software:\nslmsql_hub 0.1.0" in text and "gpu NVIDIA" not in text


def test_the_usage_snippet_builds_the_prompt_the_run_trained_with(tmp_path):
    """A recipe's system prompt reaches the card's "How to use": the snippet once rebuilt only the two numbers, so a
    run with another prompt text was shown, and would be used, with the default one."""
    from slmsql_hub.data.prompts import PromptConfig

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    default = render_card(load_run(run)).text
    assert "prompt = PromptConfig(sample_rows=" in default and "system_prompt=" not in default
    summary = json.loads((run / "grpo" / "run_summary.json").read_text())
    summary["prompt"] = {**summary.get("prompt", {}), "system_prompt": "Answer in SQLite only."}
    (run / "grpo" / "run_summary.json").write_text(json.dumps(summary))
    text = render_card(load_run(run)).text
    line = next(line for line in text.splitlines() if line.startswith("prompt = PromptConfig("))
    args = line.split("PromptConfig(", 1)[1].rsplit(")  #", 1)[0]
    assert eval(f"PromptConfig({args})").system_prompt == "Answer in SQLite only."  # noqa: S307 (the card's own line)
    assert eval(f"PromptConfig({args})") == PromptConfig.from_record(summary["prompt"])  # noqa: S307
