"""The comparison Space without the page: the engine that compares the two policies on one question.

:mod:`app` draws the page; everything it shows comes from the modules beside it, so the logic is testable
without a browser:

- :mod:`space_settings`: :class:`SpaceSettings` (the run folder or the Hub ids, the safety limits) and
  :func:`env_settings` (``SLMSQL_*``);
- :mod:`space_data`: :func:`load_space_data`, the databases and examples, where the policies are, and the
  evaluation, telemetry and card read through :func:`slmsql_hub.run_files.read_run`;
- :mod:`space_views`: the Evaluation and About tabs' tables and texts;
- here, :class:`ComparisonSpace`: the base model loaded ONCE with both LoRA adapters (switched with PEFT through
  :func:`~slmsql_hub.generation.use_adapter`), one :class:`~slmsql_hub.sql.Sandbox` through which EVERY query
  runs, and :meth:`ComparisonSpace.compare`: both policies' answers to one question, executed and judged
  against the gold when the question is one of the examples.

This module re-exports the names of the three others, so ``from space_backend import ...`` reaches them all.
Importing it does no I/O and imports neither torch nor gradio.
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
from space_views import DISAGREEMENT_FILTERS, card_summary, disagreements, eval_table  # noqa: F401 - re-exported

from slmsql_hub.errors import UsageError
from slmsql_hub.training.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC

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
"""Every status a column can show, by key (the key is what ``/compare`` returns in its details)."""

_VERDICT_STATUS = {
    "correct": "matches_gold",
    "wrong": "wrong",
    "pred_error": "error",
    "pred_timeout": "timeout",
    "pred_too_large": "too_large",
    "pred_refused": "refused",
    "no_sql": "no_sql",
    "unscorable": "unscorable",
    "infra_failure": "infra_failure",
}
_EXEC_STATUS = {
    "ok": "ran",
    "error": "error",
    "timeout": "timeout",
    "too_large": "too_large",
    "refused": "refused",
}


@dataclass(frozen=True)
class Answer:
    """One policy's answer to the question, executed (and judged when there is a gold).

    ``status`` is a key of :data:`STATUS_TEXT`; ``result`` is ``None`` without SQL; ``finished`` is false when
    the token limit cut the answer.
    """

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
    """Both policies' answers to one question, and the gold's result when the question is an example.

    ``gold_sql`` and ``gold`` are ``None`` for a typed question; ``answers`` by policy name, SFT first.
    """

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
    """The Space's engine: one sandbox, one base model with two adapters, and :meth:`compare`.

    The policy is loaded on first use (or by :meth:`load`), once; generation is serialized with a lock because
    switching adapters changes the shared model. Close it (or use it as a context manager) to stop the sandbox
    and remove the plots it drew.

    ``data`` ``None`` runs :func:`load_space_data`.

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

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether both adapters and the base were found (answers can be generated)."""
        return bool(self.data.policies) and self.data.base_model is not None

    def load(self) -> tuple[Any, Any]:
        """Load the base model once with both adapters; later calls return the same ``(model, tokenizer)``.

        Raises :class:`UsageError` when the policy is not available (the message says what is missing and
        how to fix it).
        """
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
        """Load the policy now (at startup) when it is available; a failure becomes a problem for the page.

        Returns whether the model and both adapters are loaded.
        """
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
        """The database with this key.

        Raises :class:`UsageError` on an unknown key (the message lists the known ones).
        """
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
        """The example questions of a database (possibly none)."""
        return list(self.data.examples.get(key, []))

    def find_example(self, key: str, question: str) -> Example | None:
        """The example whose question this is (same words, case and spacing ignored), else ``None``."""
        return self._examples.get(key, {}).get(_normalize(question))

    def check_question(self, question: str | None) -> str:
        """The question, stripped; raises a :class:`UsageError` naming the fix when it is empty or too long."""
        text = (question or "").strip()
        if not text:
            raise UsageError("type a question, or pick an example question")
        limit = self.settings.max_question_chars
        if len(text) > limit:
            raise UsageError(f"the question has {len(text)} characters; the limit is {limit}: shorten it")
        return text

    # -- the comparison ----------------------------------------------------------------------------------------
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
        """Ask both adapters the question about database ``key``; run and judge what they write.

        When the question is one of the database's examples its gold SQL runs too and each answer is judged
        against it (the benchmark's own rule: set equality for the world, Spider's test-suite rule for Spider).
        A typed question has no gold: each answer is only run.

        ``key``: e.g. ``world/library``. Raises :class:`UsageError` on an unknown database, an empty or
        over-long question, or models that are not available.
        """
        from slmsql_hub.sql import Judge, extract_sql

        if not self.ready:
            self.load()  # raises the UsageError that says what is missing
        database = self.database(key)
        question = self.check_question(question)
        self.load()
        example = self.find_example(key, question)
        generated = {}
        for name, spec in self.data.policies.items():
            schema = spec.prompt.schema(database.path, self.sandbox)
            messages = spec.prompt.messages(question, schema, example.evidence if example else "")
            generated[name] = self._generate(name, messages)
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
            statuses = [_VERDICT_STATUS[j.verdict.value] for j in judgements]
        else:
            statuses = [
                "no_sql" if r is None else "infra_failure" if r.infra else _EXEC_STATUS[r.status.value]
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
        """Draw the GRPO telemetry plots (one line per attempt) and return ``(png_path, title)`` pairs.

        Drawn once, into a temporary folder removed by :meth:`close`; no telemetry gives no plots.
        """
        from slmsql_hub.plots import TELEMETRY_PLOTS, logged_metric, plot_metric

        if not self.data.attempts:
            return []
        if self._plot_dir is None:
            self._plot_dir = Path(tempfile.mkdtemp(prefix="slmsql-space-plots-"))
        plots = []
        for stem, (metric, title, ylabel) in TELEMETRY_PLOTS.items():
            path = self._plot_dir / f"{stem}.png"
            if not path.is_file():
                key = logged_metric(self.data.attempts, metric)
                if key is None:
                    continue
                plot_metric(self.data.attempts, key, path, title=title, ylabel=ylabel)
            plots.append((str(path), title))
        return plots

    def telemetry_table(self) -> list[dict[str, str]]:
        """Per attempt: steps logged, the mean of the headline metrics (``n/a`` when not logged) and how far the
        adapter moved (``adapter_update.relative_norm`` of its ``run_summary.json``)."""
        from slmsql_hub.card import scientific
        from slmsql_hub.plots import logged_metric
        from slmsql_hub.training.telemetry import summarize_telemetry

        rows = []
        for label, records in self.data.attempts.items():
            summary = summarize_telemetry(records)
            means = summary["mean"]

            def fmt(name: str, means: dict = means) -> str:
                value = means.get(name)
                return "n/a" if value is None else f"{value:.3g}"

            rows.append(
                {
                    "Attempt": label,
                    "Steps logged": str(summary["steps_logged"]),
                    "Mean reward": fmt("reward"),
                    "Zero-variance groups": fmt(
                        logged_metric({label: records}, EXACT_ZERO_STD_METRIC) or TRL_ZERO_STD_METRIC
                    ),
                    "Reward std": fmt("reward_std"),
                    "Grad norm": fmt("grad_norm"),
                    "Completion length": fmt("completions/mean_length"),
                    "Adapter update ‖ΔW‖/‖W‖": scientific(
                        self.data.adapter_updates.get(label, {}).get("relative_norm")
                    ),
                }
            )
        return rows
