"""Telemetry of a GRPO run: ``telemetry.jsonl``, one JSON line per logged step (step, epoch, wall time and
every metric the trainer logged, TRL's and ours), written by the main process, and its summary.

Resuming is exact: when training (re)starts at step ``s``, lines of steps after ``s`` (written after the
checkpoint a killed run resumes from) are dropped, as is a line cut short by the kill; a step already recorded is
never written twice. So after a kill -9 and ``--resume_from_checkpoint``, every step appears exactly once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..run.layout import TELEMETRY as TELEMETRY_FILE
from ..run.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC

logger = logging.getLogger(__name__)

_FINAL_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss")

_SUMMARY_METRICS = (
    "reward",
    "reward_std",
    TRL_ZERO_STD_METRIC,
    EXACT_ZERO_STD_METRIC,
    "sql/frac_correct_zero_std",
    "sql/correct_rate",
    "sql/exec_error_rate",
    "sql/timeout_rate",
    "sql/infra_failure_rate",
    "completions/mean_length",
    "entropy",
    "clip_ratio/region_mean",
    "grad_norm",
    "step_time",
)


def _clean(value: Any) -> Any:
    """A JSON-safe value: NaN and infinities become ``None``, tensors and numpy scalars become floats."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def read_telemetry(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a ``telemetry.jsonl`` file in order (none for a missing file), skipping a line cut short by
    a killed run.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "telemetry.jsonl"
    >>> _ = path.write_text('{"step": 1, "reward": 0.5}\\n{"step": 2, "rew')
    >>> read_telemetry(path)
    [{'step': 1, 'reward': 0.5}]

    ```
    """
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                logger.warning(
                    "%s: line %d is not complete JSON (a run killed mid-write); skipped", path, number
                )
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


class TelemetryCallback(TrainerCallback):
    """Write every logged step's metrics to ``<output_dir>/<filename>`` (main process only).

    Example:

    ```python
    >>> import tempfile
    >>> from types import SimpleNamespace
    >>> callback = TelemetryCallback(tempfile.mkdtemp())
    >>> state = SimpleNamespace(is_world_process_zero=True, global_step=0, epoch=0.0)
    >>> callback.on_train_begin(None, state, None)
    >>> state.global_step = 1
    >>> callback.on_log(None, state, None, logs={"reward": 0.4, "frac_reward_zero_std": 0.5})
    >>> callback.on_log(None, state, None, logs={"reward": 0.4})  # the same step again: not written twice
    >>> [(r["step"], r["reward"]) for r in read_telemetry(callback.path)]
    [(1, 0.4)]

    ```
    """

    def __init__(self, output_dir: str | os.PathLike, filename: str = TELEMETRY_FILE) -> None:
        self.path = Path(output_dir) / filename
        self.final_metrics: dict[str, Any] = {}
        self._seen: set[tuple[str, int]] = set()
        self._start = time.time()

    def on_train_begin(self, args, state, control, **kwargs):
        """Drop records of steps after the one training (re)starts from; remember the steps kept."""
        if not state.is_world_process_zero:
            return
        self._start = time.time()
        start_step = int(state.global_step or 0)
        records = read_telemetry(self.path)
        kept = [r for r in records if isinstance(r.get("step"), int) and r["step"] <= start_step]
        dropped = len(records) - len(kept)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if dropped or self.path.is_file():
            temporary = self.path.with_suffix(".jsonl.tmp")
            with temporary.open("w", encoding="utf-8") as handle:
                for record in kept:
                    handle.write(json.dumps(record) + "\n")
            os.replace(temporary, self.path)
        if dropped:
            logger.info(
                "telemetry: starting at step %d, dropped %d record(s) of later steps (a resumed run redoes them)",
                start_step,
                dropped,
            )
        self._seen = {(str(r.get("kind", "train")), r["step"]) for r in kept}

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Append one line for this step's logs (once per step and kind)."""
        if not state.is_world_process_zero or not logs:
            return
        if any(key in logs for key in _FINAL_KEYS):
            # The trainer's end-of-training summary, not a step: kept for run_summary.json.
            self.final_metrics = {k: _clean(v) for k, v in logs.items()}
            return
        kind = "eval" if any(key.startswith("eval_") for key in logs) else "train"
        step = int(state.global_step)
        if (kind, step) in self._seen:
            return
        self._seen.add((kind, step))
        record = {
            "step": step,
            "epoch": _clean(getattr(state, "epoch", None)),
            "kind": kind,
            "time": round(time.time(), 3),
            "elapsed_s": round(time.time() - self._start, 3),
        }
        record.update({str(k): _clean(v) for k, v in logs.items()})
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()


class TimedReward:
    """Wrap a reward function to log its seconds per call as ``timing/reward/<name>_s`` through TRL's
    ``log_metric`` hook; the reward's ``__name__`` (hence TRL's ``rewards/<name>/*``) is kept.

    Example:

    ```python
    >>> from slmsql_hub.rewards import FormatReward
    >>> logged = {}
    >>> reward = TimedReward(FormatReward())
    >>> reward(completions=["```sql\\nSELECT 1\\n```"], log_metric=logged.__setitem__)
    [0.2]
    >>> reward.__name__, sorted(logged)
    ('format', ['timing/reward/format_s'])

    ```
    """

    def __init__(self, func: Callable[..., list]) -> None:
        self.func = func
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, *args, log_metric: Callable[[str, float], None] | None = None, **kwargs) -> list:
        start = time.perf_counter()
        rewards = self.func(*args, log_metric=log_metric, **kwargs)
        if log_metric is not None:
            log_metric(f"timing/reward/{self.__name__}_s", time.perf_counter() - start)
        return rewards

    def close(self) -> None:
        """Close the wrapped reward (its sandbox workers), if it has ``close``."""
        close = getattr(self.func, "close", None)
        if callable(close):
            close()


def _mean(values: Iterable[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(numbers) / len(numbers) if numbers else None


def summarize_telemetry(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Headline numbers of a run's training records: steps logged, first/last step and ``reward``, the mean of each
    of :data:`_SUMMARY_METRICS` present, and ``reward_time_share`` (``timing/reward/*_s`` over TRL's ``step_time``,
    summed over the steps that log both).

    Example:

    ```python
    >>> records = [{"step": 1, "reward": 0.2, "frac_reward_zero_std": 1.0, "step_time": 2.0,
    ...             "timing/reward/execution_s": 0.1},
    ...            {"step": 2, "reward": 0.6, "frac_reward_zero_std": 0.5, "step_time": 2.0,
    ...             "timing/reward/execution_s": 0.1}]
    >>> summary = summarize_telemetry(records)
    >>> summary["steps_logged"], summary["mean"]["frac_reward_zero_std"], summary["reward_time_share"]
    (2, 0.75, 0.05)

    ```
    """
    train = [r for r in records if r.get("kind", "train") == "train"]
    summary: dict[str, Any] = {
        "steps_logged": len(train),
        "first_step": train[0]["step"] if train else None,
        "last_step": train[-1]["step"] if train else None,
        "mean": {},
    }
    for name in _SUMMARY_METRICS:
        value = _mean(r.get(name) for r in train)
        if value is not None:
            summary["mean"][name] = value
    rewards = [r.get("reward") for r in train if isinstance(r.get("reward"), (int, float))]
    summary["first_reward"] = rewards[0] if rewards else None
    summary["last_reward"] = rewards[-1] if rewards else None
    reward_seconds = 0.0
    step_seconds = 0.0
    for record in train:
        timings = [
            v for k, v in record.items() if k.startswith("timing/reward/") and isinstance(v, (int, float))
        ]
        if timings and isinstance(record.get("step_time"), (int, float)):
            reward_seconds += sum(timings)
            step_seconds += float(record["step_time"])
    summary["reward_seconds"] = round(reward_seconds, 4)
    summary["step_seconds"] = round(step_seconds, 4)
    summary["reward_time_share"] = round(reward_seconds / step_seconds, 4) if step_seconds > 0 else None
    return summary
