"""The comparison Space without the page, testable without a browser; :mod:`app` draws the page (its Compare
tab: :mod:`space_compare`).

:mod:`space_settings` holds the settings, :mod:`space_data` what the page shows (read at startup through
:func:`slmsql_hub.run.read.read_run`), :mod:`space_views` the other tabs' tables. Here,
:class:`ComparisonSpace`: the base model loaded once with both LoRA adapters (switched with
:func:`~slmsql_hub.generation.use_adapter`) and one :class:`~slmsql_hub.sql.Sandbox` through which every query
runs. This module re-exports the others' names; importing it does no I/O and imports neither torch nor gradio.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from space_data import (  # noqa: F401 - re-exported
    POLICY_LABELS,
    POLICY_NAMES,
    Database,
    Example,
    PolicySpec,
    SpaceData,
    load_space_data,
)
from space_settings import DEFAULT_RUN_DIR, SpaceSettings, env_settings  # noqa: F401 - re-exported
from space_views import (  # noqa: F401 - re-exported
    DISAGREEMENT_FILTERS,
    card_summary,
    disagreement_html,
    disagreements,
    eval_table,
    untrained_note,
)

from slmsql_hub.errors import UsageError
from slmsql_hub.run.metric_names import EXACT_ZERO_STD_METRIC

logger = logging.getLogger(__name__)

STATUS_TEXT: dict[str, str] = {
    "matches_gold": "matches gold",
    "wrong": "wrong: it runs, but returns other rows than the gold",
    "error": "error",
    "timeout": "timeout",
    "too_large": "too many rows",
    "refused": "refused: not one read-only query",
    "no_sql": "no SQL in the answer",
    "ran": "ran (no gold to compare with)",
    "unscorable": "the gold query failed: cannot judge",
    "infra_failure": "the machine was too slow or a worker died: not judged, try again",
}
"""Every status a column can show, by the key ``/compare`` returns in its details."""


_TELEMETRY_COLUMNS = {
    "Mean reward": "reward",
    "Zero-variance groups": EXACT_ZERO_STD_METRIC,
    "Reward std": "reward_std",
    "Grad norm": "grad_norm",
    "Completion length": "completions/mean_length",
}


def _status(verdict: str) -> str:
    """The :data:`STATUS_TEXT` key of a judge's verdict (``pred_error`` -> ``error``) or an execution status."""
    return {"correct": "matches_gold", "ok": "ran"}.get(verdict, verdict.removeprefix("pred_"))


@dataclass(frozen=True)
class Answer:
    """One policy's answer, executed (and judged when there is a gold): ``status`` is a :data:`STATUS_TEXT` key,
    ``result`` ``None`` without SQL, ``finished`` false when the token limit cut the answer."""

    policy: str
    output: str
    sql: str | None
    status: str
    result: Any
    latency_s: float
    num_tokens: int
    finished: bool
    error: str | None = None

    @property
    def status_text(self) -> str:
        return STATUS_TEXT[self.status]

    def to_dict(self) -> dict[str, Any]:
        result = self.result
        return {
            "policy": self.policy,
            "status": self.status,
            "status_text": self.status_text,
            "sql": self.sql,
            "output": self.output,
            "latency_s": round(self.latency_s, 4),
            "num_tokens": self.num_tokens,
            "finished": self.finished,
            "rows": None if result is None or not result.ok else len(result.rows),
            "error": self.error,
        }


@dataclass(frozen=True)
class Comparison:
    """Both policies' answers (by name, SFT first) and the gold's result; ``gold_sql``/``gold`` ``None`` for a
    typed question."""

    database: Database
    question: str
    gold_sql: str | None
    gold: Any
    answers: dict[str, Answer]

    def to_dict(self) -> dict[str, Any]:
        gold = self.gold
        return {
            "database": self.database.key,
            "mode": self.database.mode,
            "question": self.question,
            "gold_sql": self.gold_sql,
            "gold_status": None if gold is None else gold.status.value,
            "gold_rows": None if gold is None or not gold.ok else len(gold.rows),
            "gold_error": None if gold is None else gold.error,
            **{name: answer.to_dict() for name, answer in self.answers.items()},
        }


def _normalize(question: str) -> str:
    return " ".join(question.split()).casefold()


class ComparisonSpace:
    """One sandbox, one base model with two adapters (loaded once, on first use), and :meth:`compare`.

    Generation is serialized: switching adapters changes the shared model. ``data`` ``None`` runs
    :func:`load_space_data`. Close it (or use ``with``) to stop the sandbox and remove its plots.

    Example:

    ```python
    >>> from space_backend import ComparisonSpace, SpaceSettings
    >>> with ComparisonSpace(SpaceSettings(run_dir="/nowhere/run")) as space:
    ...     space.ready
    False

    ```
    """

    def __init__(self, settings: SpaceSettings, data: SpaceData | None = None) -> None:
        from slmsql_hub.sql import Limits, Sandbox

        self.settings = settings
        self.data = data if data is not None else load_space_data(settings)
        self.sandbox = Sandbox(
            Limits(timeout_s=float(settings.timeout_s), max_rows=settings.max_rows),
            workers=settings.sandbox_workers,
        )
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()
        self._policy: tuple[Any, Any] | None = None
        self._examples = {
            key: {_normalize(example.question): example for example in examples}
            for key, examples in self.data.examples.items()
        }
        self._plot_dir: Path | None = None
        self._plots: dict[str, Path] = {}

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether the base and both adapters were found."""
        return bool(self.data.policies) and self.data.base_model is not None

    def load(self) -> tuple[Any, Any]:
        """``(model, tokenizer)``, loaded on the first call; :class:`UsageError` saying what is missing."""
        if not self.ready:
            reasons = "; ".join(self.data.problems) or "the base model or an adapter is missing"
            raise UsageError(f"the models are not available: {reasons}")
        with self._load_lock:
            if self._policy is None:
                from slmsql_hub.generation import load_policy

                started = time.perf_counter()
                self._policy = load_policy(
                    self.data.base_model,
                    adapters={name: spec.adapter for name, spec in self.data.policies.items()},
                    dtype=None if self.settings.dtype == "auto" else self.settings.dtype,
                    device=self.settings.device,
                )
                logger.info(
                    "loaded the base model and both adapters in %.1f s", time.perf_counter() - started
                )
            return self._policy

    def preload(self) -> bool:
        """Load the policy at startup; returns whether it loaded (a failure becomes a problem for the page)."""
        if not self.ready:
            return False
        try:
            self.load()
        except (
            UsageError,
            OSError,
            ValueError,
            RuntimeError,
        ) as err:  # bad weights, missing files, torch errors
            message = f"the models could not be loaded: {type(err).__name__}: {err}"
            logger.error(message)
            self.data.problems.append(message)
            return False
        return True

    def close(self) -> None:
        """Stop the sandbox's workers and delete the plots drawn for the page."""
        self.sandbox.close()
        if self._plot_dir is not None:
            shutil.rmtree(self._plot_dir, ignore_errors=True)
            self._plot_dir = None

    def __enter__(self) -> ComparisonSpace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- lookups -----------------------------------------------------------------------------------------------
    def database(self, key: str) -> Database:
        """The database with this key; :class:`UsageError` listing the known ones otherwise."""
        database = self.data.databases.get(key or "")
        if database is None:
            known = ", ".join(list(self.data.databases)[:8]) or "none: see the message at the top of the page"
            raise UsageError(f"unknown database {key!r}; choose one of {known}")
        return database

    def schema(self, key: str, sample_rows: int = 3) -> str:
        """The database's ``CREATE TABLE`` statements with sample rows (read through the sandbox)."""
        from slmsql_hub.sql.schema import schema_text

        return schema_text(self.database(key).path, self.sandbox, sample_rows=sample_rows)

    def examples(self, key: str) -> list[Example]:
        """The database's example questions."""
        return list(self.data.examples.get(key, []))

    def find_example(self, key: str, question: str) -> Example | None:
        """The example with this question (case and spacing ignored), else ``None``."""
        return self._examples.get(key, {}).get(_normalize(question))

    def check_question(self, question: str | None) -> str:
        """The question, stripped; :class:`UsageError` when it is empty or too long."""
        text = (question or "").strip()
        if not text:
            raise UsageError("type a question, or pick an example question")
        limit = self.settings.max_question_chars
        if len(text) > limit:
            raise UsageError(f"the question has {len(text)} characters; the limit is {limit}: shorten it")
        return text

    # -- the comparison ----------------------------------------------------------------------------------------
    def prompt(
        self, name: str, database: Database, question: str, example: Example | None = None
    ) -> list[dict[str, str]]:
        """Adapter ``name``'s chat prompt for ``question`` on ``database`` (the example's evidence, if any), built
        as training built it: :func:`~slmsql_hub.data.prompts.build_prompts` with the adapter's prompt config."""
        from slmsql_hub.data.prompts import build_prompts

        row = {"question": question, "db_path": str(database.path), "evidence": example.evidence if example else ""}
        return build_prompts([row], self.data.policies[name].prompt, self.sandbox)[0]

    def _generate(self, name: str, messages: list[dict[str, str]]) -> tuple[Any, float]:
        from slmsql_hub.generation import GenerationConfig, generate_completions, use_adapter

        model, tokenizer = self.load()
        config = GenerationConfig(max_new_tokens=self.data.max_new_tokens, batch_size=1)
        with self._generate_lock:
            started = time.perf_counter()
            with use_adapter(model, name):
                completion = generate_completions(model, tokenizer, [messages], config, progress=False)[0][0]
            return completion, time.perf_counter() - started

    def compare(self, key: str, question: str) -> Comparison:
        """Ask both adapters about database ``key`` (``world/library``); run what they write, and judge it by the
        benchmark's rule when the question is an example (a typed one has no gold).

        :class:`UsageError` on an unknown database, a bad question, or models that are not available.
        """
        from slmsql_hub.sql import Judge, extract_sql

        if not self.ready:
            self.load()  # raises the UsageError that says what is missing
        database = self.database(key)
        question = self.check_question(question)
        self.load()
        example = self.find_example(key, question)
        generated = {}
        for name in self.data.policies:
            generated[name] = self._generate(name, self.prompt(name, database, question, example))
        names = list(generated)
        outputs = [generated[name][0].text for name in names]
        sqls = [extract_sql(text) for text in outputs]
        # What each query returns, as written (the judge may rewrite queries, e.g. Spider drops DISTINCT).
        runs = self.sandbox.execute_many(
            [(database.path, sql) for sql in sqls if sql is not None]
            + ([(database.path, example.gold_sql)] if example else [])
        )
        results = iter(runs)
        shown = [next(results) if sql is not None else None for sql in sqls]
        gold = next(results) if example else None
        if example is not None:
            judge = Judge(sandbox=self.sandbox, mode=database.mode)
            judgements = judge.judge_many(
                outputs, [example.gold_sql] * len(names), [database.path] * len(names)
            )
            statuses = [_status(j.verdict.value) for j in judgements]
        else:
            statuses = [
                "no_sql" if r is None else "infra_failure" if r.infra else _status(r.status.value)
                for r in shown
            ]
        answers = {}
        for name, text, sql, result, status in zip(names, outputs, sqls, shown, statuses):
            completion, latency = generated[name]
            answers[name] = Answer(
                policy=name,
                output=text,
                sql=sql,
                status=status,
                result=result,
                latency_s=latency,
                num_tokens=completion.num_tokens,
                finished=completion.finished,
                error=None if result is None or result.ok else result.error,
            )
        comparison = Comparison(database, question, example.gold_sql if example else None, gold, answers)
        logger.info(
            "compare %s %r: %s",
            key,
            question[:80],
            ", ".join(
                f"{name} {answer.status} ({answer.latency_s:.2f} s)" for name, answer in answers.items()
            ),
        )
        return comparison

    # -- telemetry ---------------------------------------------------------------------------------------------
    def telemetry_plots(self) -> list[tuple[str, str]]:
        """The GRPO telemetry plots as ``(png_path, title)``, drawn once into a folder :meth:`close` removes."""
        from slmsql_hub.render.plots import TELEMETRY_PLOTS, write_card_plots

        if not self.data.attempts:
            return []
        if self._plot_dir is None:
            self._plot_dir = Path(tempfile.mkdtemp(prefix="slmsql-space-plots-"))
            self._plots = write_card_plots(self.data.attempts, None, self._plot_dir)
        return [(str(path), TELEMETRY_PLOTS[stem][1]) for stem, path in self._plots.items()]

    def telemetry_table(self) -> list[dict[str, str]]:
        """Per attempt: steps logged, the headline metrics' means (``n/a`` when not logged), the adapter update."""
        from slmsql_hub.render.fmt import scientific
        from slmsql_hub.render.plots import METRIC_FALLBACKS, logged_metric
        from slmsql_hub.training.telemetry import summarize_telemetry

        rows = []
        for label, records in self.data.attempts.items():
            summary = summarize_telemetry(records)
            row = {"Attempt": label, "Steps logged": str(summary["steps_logged"])}
            for title, metric in _TELEMETRY_COLUMNS.items():
                value = summary["mean"].get(
                    logged_metric({label: records}, metric) or METRIC_FALLBACKS.get(metric, metric)
                )
                row[title] = "n/a" if value is None else f"{value:.3g}"
            update = self.data.adapter_updates.get(label, {}).get("relative_norm")
            rows.append({**row, "Adapter update ‖ΔW‖/‖W‖": scientific(update)})
        return rows
