"""The run folder as a typed contract: RunLayout names the paths `slmsql quickstart` writes, read_run reads a run
(finished, in progress, or a card folder) and load_run adds the checks the model card needs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slmsql_hub.errors import UsageError
from slmsql_hub.run.layout import CardLayout, RunLayout, layout_of
from slmsql_hub.run.read import load_run, read_run

FIXTURE_RUN = Path(__file__).resolve().parent / "fixtures" / "run"


def _touch(path: Path, text: str = "{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_layout_names_the_folders_and_files_quickstart_writes():
    run = RunLayout("runs/q")
    named = {
        run.world_manifest: "world/world.json",
        run.world_split("rl_pool"): "world/datasets/rl_pool",
        run.base.summary: "base/run_summary.json",
        run.sft_stage1.config: "sft/stage1/config.yaml",
        run.sft_stage2.sft_questions: "sft/stage2/sft_questions.json",
        run.filter_report: "filter/filter_report.json",
        run.filter_state: "filter/filter_config.json",
        run.filter_results: "filter/results.jsonl",
        run.band: "filter/band",
        run.grpo.telemetry: "grpo/telemetry.jsonl",
        run.grpo_attempt1.summary: "grpo_attempt1/run_summary.json",
        run.eval_results: "eval/eval_results.json",
        run.predictions_file("world_dev"): "eval/predictions/world_dev.jsonl",
        run.card.readme: "card/README.md",
        run.card.grpo.telemetry: "card/telemetry.jsonl",
        run.push_plan: "push_dry_run/plan.json",
    }
    for path, relative in named.items():
        assert path == Path("runs/q") / relative
    assert list(run.attempts) == ["grpo_attempt1", "grpo"]  # attempt #1 first
    assert Path(run.grpo) == run.grpo.path  # a stage folder is path-like


def test_layouts_are_frozen_values():
    assert RunLayout("a") == RunLayout(Path("a"))
    with pytest.raises(AttributeError):
        RunLayout("a").root = Path("b")


def test_a_finished_run_reads_every_stage(tmp_path):
    run = read_run(FIXTURE_RUN)
    assert isinstance(run.layout, RunLayout)
    assert [(a.name, a.number, a.label) for a in run.attempts] == [
        ("grpo_attempt1", 1, "attempt #1"),
        ("grpo", 2, "attempt #2"),
    ]
    assert run.shipped.records and all(r.get("kind", "train") == "train" for r in run.shipped.records)
    assert set(run.stages) == {"base", "sft_stage1", "sft_stage2"}
    assert run.eval_results["benchmarks"] and run.eval_dir == FIXTURE_RUN / "eval"
    assert run.filter_report["counts"] and run.filter_config is not None
    assert run.world is not None and run.card_text is None
    assert run.local(f"{run.recorded_root}/sft/stage2") == FIXTURE_RUN / "sft" / "stage2"


def test_a_run_in_progress_reads_as_the_stages_it_has(tmp_path):
    layout = RunLayout(tmp_path)
    _touch(layout.world_manifest, json.dumps({"seed": 0}))
    _touch(layout.base.summary, json.dumps({"kind": "base"}))
    # still training, and killed mid-line
    _touch(layout.grpo.telemetry, '{"step": 1, "kind": "train"}\n{"step": 2, "kin')
    run = read_run(tmp_path)
    assert set(run.stages) == {"base"} and run.world == {"seed": 0}
    assert run.eval_results is None and run.eval_dir is None and run.filter_report is None
    (attempt,) = run.attempts
    assert attempt.shipped and attempt.summary is None and attempt.records == [{"step": 1, "kind": "train"}]


def test_a_malformed_file_is_one_error_naming_it_and_the_fix(tmp_path):
    _touch(RunLayout(tmp_path).eval_results, "{not json")
    with pytest.raises(UsageError, match=r"eval_results\.json is not valid JSON .*rerun `slmsql eval`"):
        read_run(tmp_path)
    _touch(RunLayout(tmp_path).eval_results, "[1, 2]")
    with pytest.raises(UsageError, match="does not hold a JSON object"):
        read_run(tmp_path)


def test_a_card_folder_reads_its_shipped_attempt_evaluation_and_card(tmp_path):
    card = CardLayout(tmp_path / "card")
    _touch(card.readme, "# card\n")
    _touch(card.grpo.summary, json.dumps({"adapter_update": {"relative_norm": 0.1}}))
    _touch(card.grpo.telemetry, '{"step": 1}\n')
    _touch(card.eval_results, json.dumps({"benchmarks": {}}))
    assert isinstance(layout_of(card.root), CardLayout)
    run = read_run(card.root)
    assert run.card_text == "# card\n" and run.eval_dir == card.eval
    assert [(a.name, a.folder) for a in run.attempts] == [("grpo", card.root)]


def test_the_card_reader_drops_attempts_still_training_and_needs_the_evaluation(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run_dir)
    layout = RunLayout(run_dir)
    layout.grpo_attempt1.summary.unlink()
    assert [a.name for a in load_run(run_dir).attempts] == ["grpo"]
    shutil.rmtree(layout.eval)
    with pytest.raises(UsageError, match=r"eval_results\.json not found; evaluate the policies first"):
        load_run(run_dir)
    layout.grpo.summary.unlink()
    with pytest.raises(UsageError, match="no GRPO run in .*grpo/run_summary.json is missing; train it first"):
        load_run(run_dir)


def test_the_card_reader_needs_the_shipped_telemetry(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run_dir)
    RunLayout(run_dir).grpo.telemetry.unlink()
    with pytest.raises(UsageError, match=r"telemetry\.jsonl not found: the card's mechanism section"):
        load_run(run_dir)


def test_progress_bars_write_nothing_into_a_log_file(tmp_path):
    """#35: nested bars wrote carriage returns and cursor codes into logs; the package's bars follow tqdm's own
    rule (shown only on a terminal), and a bar turned off stays off."""
    from tqdm.auto import tqdm

    from slmsql_hub.runtime import bar_disabled

    log = tmp_path / "log.txt"
    with log.open("w") as stream:
        for _ in tqdm(range(3), file=stream, disable=bar_disabled(True)):
            for _ in tqdm(range(2), file=stream, leave=False, disable=bar_disabled(True)):
                pass
    assert log.read_text() == ""
    assert bar_disabled(False) is True
