"""The ablation report's diagnostics (issue #22): template families from the gold SQL's shape, KL(SFT ‖ GRPO)
and token entropy teacher-forced on SFT's samples, and SFT's support on the held-out database."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from slmsql_hub.evaluation.stats import holm
from slmsql_hub.sql.shape import FAMILIES, sql_family
from slmsql_hub.study.diagnostics import family_comparison, run_divergence, support_curves
from tests import test_ablate

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "tests" / "fixtures" / "run"
finished_grid = test_ablate.finished_grid  # a fabricated finished grid (no training)


@pytest.mark.parametrize(
    ("sql", "family"),
    [
        ("SELECT a FROM t EXCEPT SELECT a FROM u WHERE b IN (SELECT b FROM v)", "set_operation"),
        ("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)", "nested"),
        ("SELECT count(*) FROM (SELECT a FROM t GROUP BY a)", "nested"),
        ("SELECT t.a FROM t, u WHERE t.id = u.id", "join"),
        ("SELECT t.a, count(*) FROM t JOIN u ON t.id = u.id GROUP BY t.a ORDER BY 2 LIMIT 3", "join"),
        ("SELECT a FROM t GROUP BY a HAVING count(*) >= 2 ORDER BY a", "group_by"),
        ("SELECT a FROM t ORDER BY b", "order_limit"),
        ("SELECT max(b) FROM t WHERE a <= 3", "aggregate"),
        ("SELECT a FROM t WHERE b BETWEEN 1 AND 2", "filter"),
        ("DROP TABLE t", "unparsed"),
        ("", "unparsed"),
    ],
)
def test_a_query_lands_in_the_family_of_its_hardest_construct(sql, family):
    assert sql_family(sql) == family


def test_every_spider_dev_gold_query_has_a_family():
    dev = REPO.parent / "shared" / "data" / "spider_dev" / "dev.json"
    if not dev.is_file():
        pytest.skip("no Spider dev data here")
    found = {sql_family(q["query"]) for q in json.loads(dev.read_text())}
    assert found <= set(FAMILIES) and "unparsed" not in found and len(found) == 7


def _answers(folder: Path, name: str, correct: list[int | None]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"question_id": f"q{i}", "db_id": "db", "correct": c, "sql": ""} for i, c in enumerate(correct)]
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_family_delta_counts_questions_over_the_seeds_and_holm_corrects_across_families(tmp_path):
    families = {f"q{i}": ("join" if i < 20 else "filter") for i in range(30)}
    sft = [0] * 20 + [1] * 9 + [None]
    _answers(tmp_path / "sft", "band_heldout", sft)
    runs = []
    for seed, fixed in ((0, 12), (1, 8)):  # joins fixed; filters: one broken per seed
        grpo = [1] * fixed + [0] * (20 - fixed) + [0] + [1] * 8 + [1]
        _answers(tmp_path / f"r{seed}", "band_heldout", grpo)
        runs.append({"folder": str(tmp_path / f"r{seed}").replace("/answers", "")})
    for run in runs:  # answers/ under the run folder, as a grid writes them
        folder = Path(run["folder"])
        (folder / "answers").mkdir()
        shutil.move(folder / "band_heldout.jsonl", folder / "answers" / "band_heldout.jsonl")
    table = family_comparison(tmp_path, runs, {"band_heldout": families})["band_heldout"]
    assert [r["family"] for r in table] == ["join", "filter"]  # FAMILIES order
    join, plain = table
    # n counts questions; fixed / broken count answers, summed over the seeds
    assert (join["n"], join["fixed"], join["broken"], join["sft_ex"]) == (20, 20, 0, 0.0)
    assert join["grpo_ex"] == pytest.approx(0.5) and join["delta"] == pytest.approx(0.5)
    assert plain["n"] == 9  # the unscorable question (None) left out
    assert (plain["fixed"], plain["broken"]) == (0, 2)
    # sign-flip p on the per-question mean differences: joins q0-q7 (+1) and q8-q11 (+1/2) all positive, so 2 of
    # 2^12 sign vectors reach |T|; filters: one question at -1, so 2 of 2
    ps = [2 * 0.5**12, 1.0]
    assert [r["p"] for r in table] == ps and [r["p_holm"] for r in table] == holm(ps)
    assert join["p_holm"] < 0.05 <= plain["p_holm"]


def test_support_curve_is_the_unbiased_pass_at_k_over_fully_scored_questions():
    counts = [{"question_id": "a", "n": 4, "c": 0}, {"question_id": "b", "n": 4, "c": 1},
              {"question_id": "c", "n": 3, "c": 3}]  # fmt: skip
    entry = support_curves({"world_test": counts}, {"world_test": "db7"}, 4)["world_test"]
    assert (entry["held_out_db"], entry["questions"], entry["scored"]) == ("db7", 3, 2)
    assert [p["k"] for p in entry["passk"]] == [1, 2, 3, 4]
    assert [p["pass_at_k"] for p in entry["passk"]] == pytest.approx([0.125, 0.25, 0.375, 0.5])
    assert entry["inside_support"]
    outside = support_curves({"s": [{"question_id": "a", "n": 4, "c": 0}]}, {"s": "db7"}, 4)["s"]
    assert not outside["inside_support"] and outside["passk"][-1]["pass_at_k"] == 0.0


def _manual(model_a, model_b, prompt: list[int], completion: list[int]) -> tuple[float, float, float]:
    """Σ over the completion's positions of KL(a ‖ b), H(a), H(b): plain torch on two separate models."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        la = torch.log_softmax(model_a(input_ids=ids).logits[0].float(), -1)
        lb = torch.log_softmax(model_b(input_ids=ids).logits[0].float(), -1)
    kl = h_a = h_b = 0.0
    for t in range(len(prompt) - 1, len(prompt) + len(completion) - 1):
        p, q = la[t].exp(), lb[t].exp()
        kl += float((p * (la[t] - lb[t])).sum())
        h_a += float(-(p * la[t]).sum())
        h_b += float(-(q * lb[t]).sum())
    return kl, h_a, h_b


def _sft_adapter(folder: Path) -> Path:
    """A second LoRA adapter on the fixture run's base (the fixture's own GRPO adapter's config, seeded random
    weights), standing in for the SFT adapter."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = LoraConfig.from_pretrained(RUN / "grpo")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(RUN / "base"), config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    """The fixture run's base with an SFT adapter as ``sft`` (as the diagnostics load it), and two separate
    plain PEFT models (SFT, the fixture's GRPO adapter) for the manual computation."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from slmsql_hub.generation import load_policy

    sft = _sft_adapter(tmp_path_factory.mktemp("sft") / "stage2")
    model, _ = load_policy(RUN / "base", adapters={"sft": sft}, device="cpu", dtype="float32")
    separate = {name: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(RUN / "base"), path).eval()
                for name, path in (("sft", sft), ("grpo", RUN / "grpo"))}  # fmt: skip
    return model, separate


SAMPLES = {"band_heldout": [{"question_id": "q0", "prompt_ids": [5, 9, 17, 3], "completions": [[40, 41, 2], [7]]},
                            {"question_id": "q1", "prompt_ids": [11, 12], "completions": [[13, 14, 15, 2]]}]}  # fmt: skip


def test_kl_of_an_adapter_against_itself_is_zero_and_its_entropy_is_the_manual_one(policies):
    from slmsql_hub.evaluation.divergence import divergence_sums, mean_divergence

    model, separate = policies
    row = SAMPLES["band_heldout"][0]
    sums = divergence_sums(model, row["prompt_ids"], row["completions"], "sft", "sft")
    expected = [_manual(separate["sft"], separate["sft"], row["prompt_ids"], c) for c in row["completions"]]
    assert sums["tokens"] == 4 and sums["kl"] == 0.0
    assert sums["entropy_a"] == pytest.approx(sum(h for _, h, _ in expected), rel=1e-5)
    assert sums["entropy_b"] == sums["entropy_a"] > 0
    assert mean_divergence(sums)["entropy_a"] == pytest.approx(sums["entropy_a"] / 4)


def test_kl_of_sft_against_the_grpo_adapter_is_the_manual_one_and_cached(policies, tmp_path):
    model, separate = policies
    run = tmp_path / "high_lr-seed0"
    shutil.copytree(RUN / "grpo", run / "grpo")
    result = run_divergence(model, SAMPLES, run, "digest-1")
    # loaded beside sft, then removed
    assert "grpo" not in model.peft_config and model.active_adapter == "sft"
    sums = result["slices"]["band_heldout"]
    manual = [_manual(separate["sft"], separate["grpo"], row["prompt_ids"], c)
              for row in SAMPLES["band_heldout"] for c in row["completions"]]  # fmt: skip
    assert sums["tokens"] == 8
    assert sums["kl"] > 1e-6
    assert sums["kl"] == pytest.approx(sum(m[0] for m in manual), rel=1e-4)
    assert sums["entropy_a"] == pytest.approx(sum(m[1] for m in manual), rel=1e-5)
    assert sums["entropy_b"] == pytest.approx(sum(m[2] for m in manual), rel=1e-5)
    assert json.loads((run / "divergence.json").read_text())["samples_digest"] == "digest-1"
    assert run_divergence(None, SAMPLES, run, "digest-1") == result  # cached: no model needed
    with pytest.raises(AttributeError):  # other samples: computed again (here: no model to do it with)
        run_divergence(None, SAMPLES, run, "digest-2")


@pytest.mark.parametrize("completions", [[[40, 41, 2], [7], [9, 9, 9, 9, 2]], [[7], [8]]])
def test_the_shared_prompt_forward_scores_what_each_whole_row_scores(policies, completions):
    from slmsql_hub.evaluation.divergence import divergence_sums

    model, _ = policies
    model.load_adapter(str(RUN / "grpo"), adapter_name="grpo", is_trainable=False)
    try:
        shared, whole = (divergence_sums(model, [5, 9, 17, 3, 11], completions, "sft", "grpo", share_prompt=share)
                         for share in (True, False))  # fmt: skip
    finally:
        model.delete_adapter("grpo")
    assert shared["tokens"] == whole["tokens"] == sum(map(len, completions))
    assert shared["kl"] > 0
    for key in ("kl", "entropy_a", "entropy_b"):
        assert shared[key] == pytest.approx(whole[key], rel=1e-5)


@pytest.fixture
def tiny_study(tmp_path, policies):
    """A finished one-run study around the fixture run's base: a tiny world, its rl_pool as the band, SFT's
    answers and one run's (fabricated, as tests/test_ablate.py does), the fixture's GRPO adapter as the run's."""
    import datasets

    from slmsql_hub.study.config import load_ablation_config
    from slmsql_hub.study.grid import prepare_band
    from tests._helpers import tiny_world
    from tests.test_ablate import _finished_run

    run = tmp_path / "run"
    shutil.copytree(RUN / "base", run / "base")
    _sft_adapter(run / "sft" / "stage2")
    tiny_world(run / "world", dev=10)
    datasets.load_from_disk(str(run / "world" / "datasets" / "rl_pool")).save_to_disk(
        str(run / "filter" / "band")
    )
    world = REPO / "recipes" / "world"
    recipe = tmp_path / "ablations.yaml"
    recipe.write_text(
        f"run_dir: {run}\noutput_dir: {tmp_path / 'study'}\ngrpo_recipe: {world / 'grpo_band_smoke.yaml'}\n"
        f"eval_recipe: {world / 'eval_smoke.yaml'}\ntransfer: ['world:dev']\nseeds: [0]\nnum_threads: 1\n"
        f"diagnostic_samples: 2\nsupport_samples: 3\n"
        f"band: {{filter_recipe: {world / 'filter_smoke.yaml'}, pool_rl_pool: null, min_band: 0}}\n"
        "variants:\n  - {name: high_lr, hypothesis: h, overrides: {learning_rate: 2.0e-4}}\n"
    )
    config = load_ablation_config(recipe)
    band, _ = prepare_band(config)
    out = Path(config.output_dir)
    (out / "sft").mkdir()
    dev = datasets.load_from_disk(str(run / "world" / "datasets" / "dev"))
    for name, rows in (("band_train", band.train), ("band_heldout", band.heldout), ("world_dev", list(dev))):
        answers = [{"question_id": r["question_id"], "db_id": r["db_id"], "correct": i % 2, "sql": ""}
                   for i, r in enumerate(rows)]  # fmt: skip
        (out / "sft" / f"{name}.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    _finished_run(out, "high_lr", 0, flips=2, relative_norm=0.01)
    for path in (RUN / "grpo").iterdir():
        shutil.copy(path, out / "runs" / "high_lr-seed0" / "grpo" / path.name)
    return config, band, dev


def test_diagnostics_after_the_fact_sample_sft_once_score_every_run_and_reach_the_report(tiny_study):
    import torch
    from transformers import AutoModelForCausalLM

    from slmsql_hub.filtering import KeyedSampler, load_filter_config, sample_seed
    from slmsql_hub.run.files import read_jsonl
    from slmsql_hub.study.diagnostics import run_diagnostics
    from slmsql_hub.study.report import write_report
    from slmsql_hub.study.sampled import STUDY_KEYS

    config, band, dev = tiny_study
    out = Path(config.output_dir)
    run_diagnostics(config)
    shapes = json.loads((out / "sft" / "shapes.json").read_text())
    assert shapes["world_dev"] == {r["question_id"]: sql_family(r["gold_sql"]) for r in dev}
    samples = read_jsonl(out / "sft" / "diagnostics" / "band_heldout.jsonl")
    assert [s["question_id"] for s in samples] == [r["question_id"] for r in band.heldout]
    assert not (out / "sft" / "diagnostics" / "band_train.jsonl").exists()  # held-out prompts only
    assert all(len(s["completions"]) == 2 and all(s["completions"]) for s in samples)

    # The stored prompt ids are the very context SFT sampled in: replaying the filter's keyed sampler, keyed in the
    # study's namespace, on SFT's logits after them gives back each stored completion token.
    sampler = load_filter_config(REPO / "recipes" / "world" / "filter_smoke.yaml", [])
    from peft import PeftModel

    sft = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(config.base_path), config.sft_path
    ).eval()
    for row in samples[:2]:
        for j, completion in enumerate(row["completions"]):
            keyed = KeyedSampler([sample_seed(sampler.seed, row["question_id"], j, STUDY_KEYS)], temperature=sampler.temperature,
                                 top_k=sampler.top_k, top_p=sampler.top_p)  # fmt: skip
            ids = list(row["prompt_ids"])
            for token in completion[:4]:
                with torch.no_grad():
                    logits = sft(input_ids=torch.tensor([ids])).logits[:, -1]
                assert int(keyed(None, logits).argmax(-1)) == token
                ids.append(token)

    divergence = json.loads((out / "runs" / "high_lr-seed0" / "divergence.json").read_text())
    tokens = sum(len(c) for s in samples for c in s["completions"])
    assert (
        divergence["slices"]["band_heldout"]["tokens"] == tokens
        and divergence["slices"]["band_heldout"]["kl"] > 0
    )

    support = json.loads((out / "sft" / "support.json").read_text())
    held = [r for r in dev if r["db_id"] == support["world_dev"]["held_out_db"]]
    assert support["world_dev"]["questions"] == len(held) > 0
    assert [p["k"] for p in support["world_dev"]["passk"]] == [1, 2, 3]
    assert [c["question_id"] for c in read_jsonl(out / "sft" / "support" / "world_dev.jsonl")] == [
        r["question_id"] for r in held
    ]

    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.json*")}
    run_diagnostics(config)  # a rerun is free: nothing sampled or scored again
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    config.support_samples = 2  # another sample size: SFT's counts are drawn again, the rest is kept
    run_diagnostics(config)
    assert [p["k"] for p in json.loads((out / "sft" / "support.json").read_text())["world_dev"]["passk"]] == [
        1,
        2,
    ]
    assert all(c["n"] <= 2 for c in read_jsonl(out / "sft" / "support" / "world_dev.jsonl"))
    assert (out / "runs" / "high_lr-seed0" / "divergence.json").stat().st_mtime_ns == stamps[
        out / "runs" / "high_lr-seed0" / "divergence.json"
    ]
    config.support_samples = 3
    run_diagnostics(config)
    support = json.loads((out / "sft" / "support.json").read_text())

    report = write_report(out, ["high_lr"], {"diagnostic_samples": 2, "support_samples": 3})
    pooled = report["pooled"][0]
    assert set(pooled["divergence"]) == {"band_heldout"}
    assert pooled["divergence"]["band_heldout"]["tokens"] == tokens
    assert pooled["divergence"]["band_heldout"]["kl"] == pytest.approx(
        divergence["slices"]["band_heldout"]["kl"] / tokens
    )
    assert set(pooled["families"]) == {"band_train", "band_heldout", "world_dev"}
    assert sum(f["n"] for f in pooled["families"]["world_dev"]) == len(dev)
    assert report["support"] == support
    keys = {"namespace": STUDY_KEYS, "seed": sampler.seed}
    assert report["diagnostic_keys"] == keys and all(e["keys"] == keys for e in support.values())
    text = (out / "report.md").read_text()
    assert "KL(SFT ‖ GRPO)" in text and "ΔEX per template family" in text and "held-out database `" in text


@pytest.mark.parametrize(("line", "key"), [("diagnostic_samples: -1", "diagnostic_samples"),
                                           ("support_samples: 2.5", "support_samples"),
                                           ("diagnostic_samples: yes", "diagnostic_samples")])  # fmt: skip
def test_a_bad_diagnostics_setting_is_one_line_and_exit_2_before_anything_loads(tmp_path, capsys, line, key):
    from slmsql_hub.cli import main
    from tests.test_ablate import _recipe

    recipe = _recipe(tmp_path, "  - {name: frozen, hypothesis: h, overrides: {learning_rate: 0.0}}\n")
    text, replaced = re.subn(rf"(?m)^{key}: .*$", line, recipe.read_text())
    assert replaced == 1
    recipe.write_text(text)
    assert main(["ablate", "--config", str(recipe), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{key} must be a whole number >= 0" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("line", "said"), [("passk_slices: [world_dev]", "world_dev is not a sampled slice"),
                                            ("passk_slices: band_train", "must be a list of slice names"),
                                            ("passk_slices: []", "must be a list of slice names")])  # fmt: skip
def test_passk_slices_naming_no_sampled_slice_is_one_line_and_exit_2(tmp_path, capsys, line, said):
    from slmsql_hub.cli import main
    from tests.test_ablate import _recipe

    recipe = _recipe(tmp_path, "  - {name: frozen, hypothesis: h, overrides: {learning_rate: 0.0}}\n")
    recipe.write_text(recipe.read_text() + line + "\n")
    assert main(["ablate", "--config", str(recipe), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and "band_heldout" in err
    assert not (tmp_path / "out").exists()


def test_every_study_recipe_turns_the_diagnostics_on():
    from slmsql_hub.study.config import load_ablation_config

    for path in ("world/ablations.yaml", "world/transfer.yaml", "qwen2.5-coder-1.5b/ablations.yaml"):
        config = load_ablation_config(REPO / "recipes" / path)
        assert (config.passk_samples, config.diagnostic_samples, config.support_samples) == (16, 4, 16), path


def test_report_only_on_a_band_it_cannot_read_again_says_so_unless_the_diagnostics_are_skipped(
    finished_grid, capsys
):
    from slmsql_hub.cli import main
    from tests.test_ablate import WORLD

    out = finished_grid  # its band.json names no band_dir
    argv = [
        "ablate",
        "--config",
        str(WORLD),
        "--run-dir",
        str(RUN),
        "--output-dir",
        str(out),
        "--report-only",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "names no band_dir" in err and "--skip-diagnostics" in err
    assert main([*argv, "--skip-diagnostics"]) == 0
    assert (out / "report.md").is_file()


def test_a_finished_runs_pass_at_k_drawn_with_other_keys_is_sampled_again_and_then_reused(tiny_study):
    from slmsql_hub.run.files import read_jsonl
    from slmsql_hub.study.evaluate import load_eval_settings
    from slmsql_hub.study.grid import RESULT_FILE, _reused
    from slmsql_hub.study.sampled import PASSK_DIR, STUDY_KEYS, sample_counts, sampler_settings

    config, band, _ = tiny_study
    out = Path(config.output_dir)
    config.passk_samples = 2
    sampler = sampler_settings(config, out / "sft" / PASSK_DIR)
    rows = {"band_heldout": band.heldout[:3]}
    sft = sample_counts(sampler, config.sft_path, rows, out / "sft" / PASSK_DIR, config.sft_adapter_revision)
    evaluation = (load_eval_settings(config, out / "sft"), None, None, (sampler, rows, sft))
    folder = out / "runs" / "high_lr-seed0"
    stale = [{"question_id": r["question_id"], "n": 7, "c": 7} for r in rows["band_heldout"]]  # no keys recorded
    (folder / PASSK_DIR).mkdir()
    (folder / PASSK_DIR / "band_heldout.jsonl").write_text("".join(json.dumps(c) + "\n" for c in stale))
    said = []
    entry = _reused(folder, evaluation, said.append)
    keys = {"band_heldout": {"namespace": STUDY_KEYS, "seed": sampler.seed}}
    assert entry["passk_keys"] == keys and json.loads((folder / RESULT_FILE).read_text())["passk_keys"] == keys
    counts = read_jsonl(folder / PASSK_DIR / "band_heldout.jsonl")
    assert [c["n"] for c in counts] == [2, 2, 2] and len(said) == 1
    stamp = (folder / RESULT_FILE).stat().st_mtime_ns
    assert _reused(folder, evaluation, said.append) == entry and len(said) == 1  # now reused as is
    assert (folder / RESULT_FILE).stat().st_mtime_ns == stamp
    # A recipe that now samples no pass@k (passk_samples 0, or passk_slices the world lacks) reports none of the
    # folder's, and the report pools none of SFT's files left by the earlier recipe; nothing is rewritten.
    from slmsql_hub.study.report import _pooled_passk

    bare = _reused(folder, (*evaluation[:3], None), said.append)
    assert "passk" not in bare and "passk_keys" not in bare and {**bare, "passk": entry["passk"]} == {
        k: v for k, v in entry.items() if k != "passk_keys"
    }
    assert (folder / RESULT_FILE).stat().st_mtime_ns == stamp
    assert _pooled_passk(out, [{**bare, "folder": str(folder)}]) == {}
    assert set(_pooled_passk(out, [{**entry, "folder": str(folder)}])) == {"band_heldout"}


def test_with_the_sampled_diagnostics_off_nothing_is_sampled(tiny_study):
    from slmsql_hub.study.diagnostics import run_diagnostics

    config, _, _ = tiny_study
    config.diagnostic_samples = config.support_samples = 0
    run_diagnostics(config)
    out = Path(config.output_dir)
    assert (out / "sft" / "shapes.json").is_file() and not (out / "sft" / "diagnostics").exists()
    assert not (out / "sft" / "support.json").exists()


def test_diagnostics_shared_among_workers_equal_the_serial_ones(tiny_study):
    """``jobs: 2`` spreads the runs' KL over two spawned workers; each run's divergence.json is the one a single
    process writes, run by run (a run's numbers do not depend on which worker scored it)."""
    from safetensors.torch import load_file, save_file

    from slmsql_hub.study.diagnostics import run_diagnostics

    config, _, _ = tiny_study
    runs = Path(config.output_dir) / "runs"
    for seed, scale in ((1, 3.0), (2, -1.0)):  # two more runs, their adapters moved apart from seed 0's
        folder = runs / f"high_lr-seed{seed}"
        shutil.copytree(runs / "high_lr-seed0", folder)
        weights = folder / "grpo" / "adapter_model.safetensors"
        tensors = load_file(weights)
        save_file({k: v * scale if "lora_B" in k else v for k, v in tensors.items()}, weights)
    config.jobs = 2
    run_diagnostics(config)
    parallel = {p.parent.name: p.read_text() for p in runs.glob("*/divergence.json")}
    assert len(parallel) == 3 and len({json.dumps(json.loads(t)["slices"]) for t in parallel.values()}) == 3
    for path in runs.glob("*/divergence.json"):
        path.unlink()
    config.jobs = 1
    run_diagnostics(config)
    assert {p.parent.name: p.read_text() for p in runs.glob("*/divergence.json")} == parallel
