"""`slmsql ablate --shard K/N` and `--merge`: a grid split over shards (a Slurm array's jobs) gives the same
report as one run of it; bad shard values stop in one line before anything loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slmsql_hub.cli import main
from slmsql_hub.errors import UsageError
from slmsql_hub.study.grid import shard_grid, visible_devices
from tests import test_ablate

REPO = Path(__file__).resolve().parents[1]
RECIPE = str(REPO / "recipes" / "world" / "ablations.yaml")
finished_grid = test_ablate.finished_grid  # a fabricated finished grid (no training)


@pytest.mark.parametrize("value", ["2/2", "-1/2", "0/0", "1", "a/b", "1/2/3", "0.5/2"])
def test_bad_shard_values_stop_in_one_line_with_exit_2(value, capsys, tmp_path):
    code = main(["ablate", "--config", RECIPE, f"--shard={value}", "--output_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--shard" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_shards_split_the_grid_into_disjoint_shares_that_cover_it():
    pairs = [(v, s) for v in ("frozen", "high_lr", "kl", "unfiltered") for s in (0, 1)]
    for n in (1, 2, 3, 8, 11):
        shares = [shard_grid(pairs, (k, n)) for k in range(n)]
        assert sorted(p for share in shares for p in share) == sorted(pairs)
        assert max(map(len, shares)) - min(map(len, shares)) <= 1


@pytest.mark.parametrize(("listed", "expected"), [("2,3", ["2", "3"]), ("", []), ("-1", []), ("0", ["0"])])
def test_the_visible_gpus_are_those_cuda_visible_devices_lists(monkeypatch, listed, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert visible_devices() == expected


def test_merge_refuses_a_folder_that_is_no_shard(tmp_path, capsys):
    assert (
        main(["ablate", "--config", RECIPE, "--merge", str(tmp_path), "--output_dir", str(tmp_path / "o")])
        == 2
    )
    assert "not a prepared shard folder" in capsys.readouterr().err


def test_churn_splits_the_discordant_pairs_by_the_sft_pass_rate_bucket():
    import random

    from slmsql_hub.evaluation.stats import paired_comparison
    from slmsql_hub.study.report import churn_by_bucket, pass_rate_bucket

    rng = random.Random(0)
    rates = [rng.choice([None, 0.0, 1.0]) if rng.random() < 0.2 else rng.random() for _ in range(300)]
    sft = [rng.random() < (0.5 if r is None else r) for r in rates]
    grpo = [rng.random() < 0.6 for _ in rates]
    rows = churn_by_bucket(sft, grpo, rates)
    discordant = paired_comparison(sft, grpo, seed=0).discordant
    assert sum(r["fixed"] for r in rows) == discordant["b_only"] > 0
    assert sum(r["broken"] for r in rows) == discordant["a_only"] > 0
    for row in rows:  # each bucket counts its own questions
        mine = [i for i, r in enumerate(rates) if pass_rate_bucket(r) == row["bucket"]]
        assert row["n"] == len(mine)
        assert row["fixed"] == sum(grpo[i] and not sft[i] for i in mine)


def _comparable(report: dict) -> dict:
    """report.json without what differs by when and where it ran: the clock (``time``, ``created_at``, TRL's
    ``step_time``) and the config (its output folder)."""
    report = {k: v for k, v in report.items() if k not in ("created_at", "config")}
    variants = []
    for entry in report["variants"]:
        entry = {k: v for k, v in entry.items() if k != "time"}
        mean = {k: v for k, v in entry["telemetry"]["mean"].items() if k != "step_time"}
        variants.append({**entry, "telemetry": {**entry["telemetry"], "mean": mean}})
    report["variants"] = variants
    return report


@pytest.mark.slow
def test_two_shards_merged_give_the_same_report_as_one_run(tmp_path, capsys):
    from tests.test_ablate_smoke import _smoke_recipe, _smoke_run

    recipe = _smoke_recipe(tmp_path, _smoke_run(tmp_path))
    filter_recipe = REPO / "recipes" / "world" / "filter.yaml"  # the sampler's settings: the study's filter
    text = recipe.read_text().replace("band: {", f"band: {{filter_recipe: {filter_recipe}, ", 1)
    recipe.write_text(text + "passk_samples: 2\n")  # sampled pass@k, 2 samples per question
    recipe = str(recipe)
    argv = ["ablate", "--config", recipe, "--variants", "frozen", "high_lr"]
    assert main([*argv, "--output_dir", str(tmp_path / "one")]) == 0
    one = json.loads((tmp_path / "one" / "report.json").read_text())

    sharded = tmp_path / "sharded"
    for k in (0, 1):
        assert main([*argv, "--output_dir", str(sharded), "--shard", f"{k}/2"]) == 0
        assert "variant 1/1" in capsys.readouterr().out  # one (variant, seed) each
    shards = sorted(str(p) for p in (sharded / "shards").iterdir())
    assert [Path(p).name for p in shards] == ["0-of-2", "1-of-2"]
    assert main([*argv, "--output_dir", str(sharded), "--merge", *shards]) == 0
    merged = json.loads((sharded / "report.json").read_text())
    assert [(e["name"], e["seed"]) for e in merged["variants"]] == [("frozen", 0), ("high_lr", 0)]
    assert _comparable(merged) == _comparable(one)
    assert all(e["device"]["device"] == "cpu" for e in merged["variants"])
    for pooled in merged["pooled"]:  # churn: fixed and broken add up to the discordant pairs of each slice
        for name, rows in pooled["churn"].items():
            counts = pooled["slices"][name]["discordant"]
            assert sum(r["fixed"] for r in rows) == counts["b_only"]
            assert sum(r["broken"] for r in rows) == counts["a_only"]
            assert sum(r["n"] for r in rows) == pooled["slices"][name]["n"] * len(pooled["seeds"])  # answers
    assert "fixed / broken (answers, questions x seeds)" in (sharded / "report.md").read_text()
    # Sampled pass@k: keyed samples, so frozen draws exactly SFT's; both shards sampled SFT alike (merged above).
    # (The smoke model answers no band question right, so here these are counts of 0: the shape is checked.)
    frozen, high_lr = merged["variants"]
    assert set(frozen["passk"]) == {"band_train", "band_heldout"}
    for points in frozen["passk"].values():
        assert [p["k"] for p in points] == [1, 2] and all(
            p["delta"] == 0 and p["a"] == p["b"] for p in points
        )
    assert set(high_lr["passk"]) == {"band_train", "band_heldout"}
    assert {k["namespace"] for e in merged["variants"] for k in e["passk_keys"].values()} == {"study-passk"}
    assert all(set(p["passk"]) == {"band_train", "band_heldout"} for p in merged["pooled"])
    assert "Sampled pass@k on the band and probe slices" in (sharded / "report.md").read_text()

    # passk_slices narrows the sampled slices: the finished runs are reused and only band_heldout's counts read
    # again (the same keys, so the same numbers); the report's pass@k names that slice alone.
    recipe_path = Path(recipe)
    recipe_path.write_text(recipe_path.read_text() + "passk_slices: [band_heldout]\n")
    assert main([*argv, "--output_dir", str(tmp_path / "one")]) == 0
    narrowed = json.loads((tmp_path / "one" / "report.json").read_text())
    assert [set(e["passk"]) for e in narrowed["variants"]] == [{"band_heldout"}, {"band_heldout"}]
    assert [e["passk"]["band_heldout"] for e in narrowed["variants"]] == [
        e["passk"]["band_heldout"] for e in one["variants"]
    ]
    assert all(set(p["passk"]) == {"band_heldout"} for p in narrowed["pooled"])
    assert "Sampled pass@k on band_heldout (the filter's sampler" in (tmp_path / "one" / "report.md").read_text()

    # The GRPO adapter carries its SFT parent's question record: a filter with it leaves out the same questions.
    from slmsql_hub.data.sft_record import read_sft_record

    grpo = read_sft_record(sharded / "shards" / "1-of-2" / "runs" / "high_lr-seed0" / "grpo")
    sft = read_sft_record(tmp_path / "run" / "sft" / "stage2")
    assert grpo is not None and grpo.keys == sft.keys and grpo.complete == sft.complete and len(sft.keys) > 0

    # Folders that both finished one (variant, seed) are refused: each run belongs to one shard.
    assert (
        main([*argv, "--output_dir", str(tmp_path / "twice"), "--merge", shards[0], str(tmp_path / "one")])
        == 2
    )
    assert "frozen seed 0 is finished in both" in capsys.readouterr().err


def test_churn_counts_the_fixed_answers_in_their_sft_pass_rate_bucket(finished_grid):
    from slmsql_hub.study.report import write_report

    band = json.loads((finished_grid / "band" / "band.json").read_text())
    band["sft_pass_rates"] = {f"q{i}": (i % 8) / 8 for i in range(100)}
    (finished_grid / "band" / "band.json").write_text(json.dumps(band))
    from slmsql_hub.study.sampled import passk_entry

    for result in (finished_grid / "runs").glob(
        "*/result.json"
    ):  # as a grid with passk_samples: 4 leaves them
        entry = json.loads(result.read_text())
        sft = {"band_train": [{"question_id": f"q{i}", "n": 4, "c": i % 5} for i in range(100)]}
        grpo = {
            "band_train": [
                {**c, "c": min(4, c["c"] + (entry["name"] == "high_lr"))} for c in sft["band_train"]
            ]
        }
        keys = {"band_train": {"namespace": "study-passk", "seed": 0}}
        affected = {"frozen": None, "high_lr": 30 + entry["seed"]}[entry["name"]]
        result.write_text(json.dumps({**entry, "passk": passk_entry(sft, grpo), "passk_keys": keys,
                                      "affected_prompts": affected}))  # fmt: skip
    report = write_report(finished_grid, ["frozen", "high_lr"], {"passk_samples": 4})
    assert "sft_pass_rates" not in report["band"]
    assert report["plots"]["passk"] == "plots/passk.png" and (finished_grid / "plots" / "passk.png").is_file()
    text = (finished_grid / "report.md").read_text()
    assert "| `frozen` | 0 | band_train | study-passk, seed 0 | 50.0 → 50.0 |" in text
    assert "![pass@k per run and slice]" in text
    assert {p["name"]: p["affected_prompts"] for p in report["pooled"]} == {"frozen": [None], "high_lr": [30, 31]}
    assert "in each run's training data, after max_train_samples,\nper seed: `high_lr` 30, 31." in text
    churn = {p["name"]: p["churn"] for p in report["pooled"]}
    # high_lr turned SFT's first 20 (seed 0) and 15 (seed 1) wrong answers right: q0, q2, q4, ...
    buckets = {row["bucket"]: row for row in churn["high_lr"]["band_train"]}
    assert sum(row["fixed"] for row in buckets.values()) == 35
    assert sum(row["broken"] for row in buckets.values()) == 0
    assert buckets["0"]["fixed"] == 9  # q0 q8 q16 q24 q32, then q0 q8 q16 q24
    assert buckets["0"]["n"] == 2 * 13  # q0, q8, ..., q96 in each seed
    assert [row["bucket"] for row in churn["high_lr"]["world_dev"]] == ["unknown"]
    assert all(row["fixed"] == row["broken"] == 0 for rows in churn["frozen"].values() for row in rows)
    assert "| `high_lr` | band_train | 9 / 0 (26) |" in (finished_grid / "report.md").read_text()


def test_shard_folders_merge_into_the_report_of_one_folder(finished_grid, tmp_path):
    import shutil

    from slmsql_hub.study.report import merge_shards, write_report

    one = write_report(finished_grid, ["frozen", "high_lr"])
    shards = [tmp_path / "shards" / f"{k}-of-2" for k in (0, 1)]
    for k, shard in enumerate(shards):
        for part in ("band", "sft"):
            shutil.copytree(finished_grid / part, shard / part)
        for run in ("frozen-seed0", "high_lr-seed1") if k == 0 else ("high_lr-seed0",):
            shutil.copytree(finished_grid / "runs" / run, shard / "runs" / run)
    merged = merge_shards(shards, tmp_path / "merged", ["frozen", "high_lr"])
    assert _comparable(merged) == _comparable(one)

    # Shards whose SFT answers differ were not prepared alike: refused in one line.
    answers = shards[1] / "sft" / "world_dev.jsonl"
    answers.write_text(answers.read_text().replace('"correct": 1', '"correct": 0', 1))
    with pytest.raises(UsageError, match="hold different SFT answers"):
        merge_shards(shards, tmp_path / "again", ["frozen", "high_lr"])


def test_pooled_pass_at_k_reads_the_counts_and_a_frozen_run_sampling_otherwise_fails_the_control(
    finished_grid,
):
    from slmsql_hub.study.report import write_report
    from slmsql_hub.study.sampled import passk_entry

    def counts(folder: Path, bump: int) -> list[dict]:
        (folder / "passk").mkdir(parents=True, exist_ok=True)
        rows = [{"question_id": f"q{i}", "n": 4, "c": min(4, i % 5 + bump)} for i in range(100)]
        (folder / "passk" / "band_train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return rows

    sft = counts(finished_grid / "sft", 0)
    for run, bump in (("frozen-seed0", 0), ("high_lr-seed0", 1), ("high_lr-seed1", 0)):
        grpo = counts(finished_grid / "runs" / run, bump)
        result = finished_grid / "runs" / run / "result.json"  # as the grid records a run's sampled pass@k
        entry = json.loads(result.read_text())
        result.write_text(json.dumps({**entry, "passk": passk_entry({"band_train": sft}, {"band_train": grpo})}))
    report = write_report(finished_grid, ["frozen", "high_lr"])
    pooled = {p["name"]: p for p in report["pooled"]}
    first = pooled["high_lr"]["passk"]["band_train"][0]  # each question's pass@1 averaged over the seeds: 0.6
    assert (first["k"], first["a"], round(first["b"], 6)) == (1, 0.5, 0.6)
    assert (first["unit"], first["seeds"]) == ("question", 2)
    assert all(p["delta"] == 0 for p in pooled["frozen"]["passk"]["band_train"])
    assert report["controls"]["negative"] is True

    counts(finished_grid / "runs" / "frozen-seed0", 1)  # frozen sampled otherwise than SFT: a pipeline fault
    assert write_report(finished_grid, ["frozen", "high_lr"])["controls"]["negative"] is False
