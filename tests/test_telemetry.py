"""telemetry.jsonl: one line per logged step, main process only, exact across kill -9 and resume; the summary."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

from slmsql_hub.rewards import FormatReward
from slmsql_hub.training.telemetry import TelemetryCallback, TimedReward, read_telemetry, summarize_telemetry


def _state(step: int, main: bool = True) -> SimpleNamespace:
    return SimpleNamespace(is_world_process_zero=main, global_step=step, epoch=step / 10)


def _log(callback: TelemetryCallback, step: int, **metrics) -> None:
    callback.on_log(None, _state(step), None, logs=metrics or {"reward": float(step)})


def test_every_logged_metric_lands_in_one_line_per_step(tmp_path):
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(0), None)
    metrics = {
        "reward": 0.5,
        "frac_reward_zero_std": 0.25,
        "rewards/execution/mean": 0.4,
        "clip_ratio/region_mean": 0.0,
        "sql/frac_correct_zero_std": 0.5,
        "learning_rate": 1e-5,
    }
    _log(callback, 1, **metrics)
    _log(callback, 2, **metrics)
    records = read_telemetry(tmp_path / "telemetry.jsonl")
    assert [r["step"] for r in records] == [1, 2]
    for key, value in metrics.items():
        assert records[0][key] == value
    assert records[1]["epoch"] == 0.2 and records[0]["kind"] == "train"
    assert records[1]["elapsed_s"] >= 0


def test_a_step_logged_twice_is_written_once(tmp_path):
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(0), None)
    _log(callback, 1, reward=0.1)
    _log(callback, 1, reward=0.9)
    assert [r["reward"] for r in read_telemetry(callback.path)] == [0.1]


def test_resume_drops_steps_after_the_checkpoint_and_a_line_cut_by_the_kill(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    lines = [json.dumps({"step": s, "kind": "train", "reward": s / 10}) for s in range(1, 7)]
    path.write_text("\n".join(lines) + '\n{"step": 7, "rew')  # killed while writing step 7
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(4), None)  # resumed from checkpoint-4
    assert [r["step"] for r in read_telemetry(path)] == [1, 2, 3, 4]
    _log(callback, 4)  # already recorded before the kill
    for step in (5, 6, 7, 8):
        _log(callback, step)
    steps = [r["step"] for r in read_telemetry(path)]
    assert steps == list(range(1, 9))
    assert len(path.read_text().splitlines()) == 8  # the cut line is gone, not just skipped on read


def test_a_fresh_run_in_an_old_output_folder_starts_a_new_file(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    path.write_text(json.dumps({"step": 1, "reward": 9.0}) + "\n")
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(0), None)
    _log(callback, 1, reward=0.3)
    assert [r["reward"] for r in read_telemetry(path)] == [0.3]


def test_only_the_main_process_writes(tmp_path):
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(0, main=False), None)
    callback.on_log(None, _state(1, main=False), None, logs={"reward": 1.0})
    assert not (tmp_path / "telemetry.jsonl").exists()


def test_nan_metrics_are_written_as_null_so_the_file_stays_json(tmp_path):
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(0), None)
    _log(callback, 1, reward=math.nan, grad_norm=math.inf)
    text = (tmp_path / "telemetry.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    record = read_telemetry(tmp_path / "telemetry.jsonl")[0]
    assert record["reward"] is None and record["grad_norm"] is None


def test_end_of_training_metrics_are_kept_apart_from_the_steps(tmp_path):
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(0), None)
    _log(callback, 1, reward=0.5)
    callback.on_log(None, _state(1), None, logs={"train_runtime": 12.5, "train_loss": 0.01})
    assert [r["step"] for r in read_telemetry(callback.path)] == [1]
    assert callback.final_metrics["train_runtime"] == 12.5


def test_eval_logs_are_their_own_kind(tmp_path):
    callback = TelemetryCallback(tmp_path)
    callback.on_train_begin(None, _state(0), None)
    _log(callback, 2, reward=0.5)
    _log(callback, 2, eval_reward=0.7)
    kinds = [(r["step"], r["kind"]) for r in read_telemetry(callback.path)]
    assert kinds == [(2, "train"), (2, "eval")]
    assert summarize_telemetry(read_telemetry(callback.path))["steps_logged"] == 1


def test_summary_means_over_steps_and_reward_time_share():
    records = [
        {
            "step": 1,
            "reward": 0.2,
            "frac_reward_zero_std": 1.0,
            "step_time": 4.0,
            "timing/reward/execution_s": 0.3,
        },
        {
            "step": 2,
            "reward": 0.4,
            "frac_reward_zero_std": 0.5,
            "step_time": 4.0,
            "timing/reward/execution_s": 0.1,
        },
        {
            "step": 3,
            "reward": 0.9,
            "frac_reward_zero_std": 0.0,
            "step_time": 2.0,
            "timing/reward/format_s": 0.1,
        },
    ]
    summary = summarize_telemetry(records)
    assert summary["steps_logged"] == 3 and (summary["first_step"], summary["last_step"]) == (1, 3)
    assert summary["mean"]["frac_reward_zero_std"] == 0.5
    assert (summary["first_reward"], summary["last_reward"]) == (0.2, 0.9)
    assert summary["reward_time_share"] == 0.05  # 0.5 s of rewards in 10 s of steps
    assert "entropy" not in summary["mean"]  # absent metrics are not invented


def test_summary_of_no_records_has_no_numbers():
    summary = summarize_telemetry([])
    assert summary["steps_logged"] == 0 and summary["mean"] == {} and summary["reward_time_share"] is None


def test_timed_reward_keeps_the_name_and_values_and_logs_its_time():
    logged: dict[str, float] = {}
    reward = TimedReward(FormatReward(value=0.3))
    values = reward(completions=["```sql\nSELECT 1\n```", "no block"], log_metric=logged.__setitem__)
    assert values == [0.3, 0.0]
    assert reward.__name__ == "format"
    assert logged["timing/reward/format_s"] >= 0.0
