"""Judging predictions: prediction + gold SQL + database -> a :class:`Judgement`.

This is the single judging path shared by the GRPO reward, the pass-rate filter, the ``slmsql/ex`` metric,
``slmsql ex``, the evaluation and the Space. It extracts the SQL from the model's answer, rewrites both
queries as the chosen comparison mode requires, executes everything in one sandbox batch (each distinct
(database, SQL) once) and compares results with :func:`~slmsql_hub.sql.compare.rows_match`.

Rules:
    - A prediction that fails (error, timeout, too large, refused) or has no SQL never matches, not even a
      failing gold.
    - A gold that fails, times out or is too large makes the example **unscorable**: ``correct`` is ``None``;
      it is counted apart and never scored 0.
    - A query over its budget (op budget, ``timeout_s`` of CPU time, rows, bytes, memory) is the query's
      fault, whichever limit notices first: a prediction is wrong (``pred_timeout``, ...), a gold unscorable.
    - An **infrastructure failure** (:attr:`ExecResult.infra`: a query starved of CPU by a busy machine until
      the wall-clock cap, workers killed from outside) is no verdict: ``infra_failure``, ``correct`` is
      ``None``, counted apart. It is what the query does not reproduce on its own.
    - In ``spider`` mode, when the database's folder holds several ``.sqlite`` files (a distilled test suite),
      the prediction must match the gold on every one of them.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .compare import CompareMode, order_matters, prepare_sql, rows_match
from .extract import extract_sql
from .result import ExecResult, ExecStatus, Limits
from .sandbox import Sandbox


class Verdict(str, enum.Enum):
    """The outcome of judging one example."""

    CORRECT = "correct"
    WRONG = "wrong"
    PRED_ERROR = "pred_error"
    PRED_TIMEOUT = "pred_timeout"
    PRED_TOO_LARGE = "pred_too_large"
    PRED_REFUSED = "pred_refused"
    NO_SQL = "no_sql"
    UNSCORABLE = "unscorable"
    INFRA_FAILURE = "infra_failure"

    def __str__(self) -> str:
        return self.value


_PRED_FAILURE = {
    ExecStatus.ERROR: Verdict.PRED_ERROR,
    ExecStatus.TIMEOUT: Verdict.PRED_TIMEOUT,
    ExecStatus.TOO_LARGE: Verdict.PRED_TOO_LARGE,
    ExecStatus.REFUSED: Verdict.PRED_REFUSED,
}


@dataclass(frozen=True)
class Judgement:
    """The verdict on one example; ``pred``/``gold`` are the results on the (first) database, ``error`` the
    prediction's error, or the gold's when the example is unscorable."""

    verdict: Verdict
    pred_sql: str | None
    pred_status: ExecStatus | None
    gold_status: ExecStatus
    error: str | None = None
    pred: ExecResult | None = None
    gold: ExecResult | None = None

    @property
    def scorable(self) -> bool:
        """Whether the example has a score: neither an unscorable gold nor an infrastructure failure."""
        return self.verdict not in (Verdict.UNSCORABLE, Verdict.INFRA_FAILURE)

    @property
    def correct(self) -> int | None:
        """1 when correct, 0 when not, ``None`` when the example is unscorable or the machine failed."""
        if not self.scorable:
            return None
        return int(self.verdict is Verdict.CORRECT)

    @property
    def executed(self) -> bool:
        """Whether the prediction ran (correct or wrong)."""
        return self.verdict in (Verdict.CORRECT, Verdict.WRONG)

    def to_dict(self) -> dict:
        return {
            "correct": self.correct,
            "verdict": self.verdict.value,
            "pred_sql": self.pred_sql,
            "pred_status": None if self.pred_status is None else self.pred_status.value,
            "gold_status": self.gold_status.value,
            "error": self.error,
        }


class Judge:
    """Judge predictions against gold SQL by execution, under a :mod:`~slmsql_hub.sql.compare` ``mode``.

    Without ``sandbox`` the judge makes one (``limits``, ``workers``) and closes it in :meth:`close`.
    ``extract``: pull the SQL out of model output with :func:`extract_sql` (plain SQL passes through).

    Example:

    ```python
    >>> import sqlite3, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "toy.sqlite")
    >>> _ = sqlite3.connect(path).executescript("CREATE TABLE t (name TEXT, age INTEGER); INSERT INTO t VALUES ('ann', 30), ('bob', 41)")
    >>> with Judge(mode="bird", workers=1) as judge:
    ...     js = judge.judge_many(
    ...         ["```sql\\nSELECT name FROM t WHERE age > 35\\n```", "SELECT age FROM t", "SELECT nme FROM t"],
    ...         ["SELECT name FROM t WHERE age >= 40"] * 3,
    ...         [path] * 3,
    ...     )
    >>> [(j.verdict.value, j.correct) for j in js]
    [('correct', 1), ('wrong', 0), ('pred_error', 0)]

    ```
    """

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        *,
        mode: CompareMode | str = CompareMode.BIRD,
        keep_distinct: bool = False,
        extract: bool = True,
        limits: Limits | None = None,
        workers: int | None = None,
    ) -> None:
        self.mode = CompareMode.parse(mode)
        self.keep_distinct = keep_distinct
        self.extract = extract
        self._owns_sandbox = sandbox is None
        self.sandbox = sandbox if sandbox is not None else Sandbox(limits, workers=workers)
        self._suites: dict[str, list[str]] = {}

    def judge(self, prediction: str | None, gold_sql: str, db_path: str | os.PathLike) -> Judgement:
        """:meth:`judge_many` of one example."""
        return self.judge_many([prediction], [gold_sql], [db_path])[0]

    def judge_many(
        self,
        predictions: Sequence[str | None],
        gold_sqls: Sequence[str],
        db_paths: Sequence[str | os.PathLike],
        *,
        progress: bool | str = False,
    ) -> list[Judgement]:
        """Judge many examples in one sandbox batch, in input order. ValueError when the lengths differ,
        FileNotFoundError for a missing database."""
        if not (len(predictions) == len(gold_sqls) == len(db_paths)):
            raise ValueError(
                f"predictions, gold SQL and db paths differ in length: "
                f"{len(predictions)}, {len(gold_sqls)}, {len(db_paths)}"
            )
        plans = []
        requests: list[tuple[str, str | None]] = []
        cap = self.sandbox.limits.max_sql_chars
        for prediction, gold, db_path in zip(predictions, gold_sqls, db_paths):
            # The length cap comes before any parsing: an over-long text goes to the sandbox as it is, which
            # refuses it at once (a 10 MB prediction is not tokenised for a minute first).
            if isinstance(prediction, str) and len(prediction) > cap:
                pred_sql = pred_prepared = prediction
            else:
                pred_sql = extract_sql(prediction) if self.extract else prediction
                pred_prepared = None if pred_sql is None else prepare_sql(pred_sql, self.mode, self.keep_distinct)
            databases = self._databases(os.fspath(db_path))
            gold_prepared = prepare_sql(gold, self.mode, self.keep_distinct) if isinstance(gold, str) else gold
            gold_at = len(requests)
            requests.extend((db, gold_prepared) for db in databases)
            pred_at = len(requests)
            if pred_prepared is not None:
                requests.extend((db, pred_prepared) for db in databases)
            plans.append((pred_sql, gold_prepared, len(databases), gold_at, pred_at))
        results = self.sandbox.execute_many(requests, progress=progress)

        judgements = []
        for pred_sql, gold_prepared, n_db, gold_at, pred_at in plans:
            golds = results[gold_at : gold_at + n_db]
            preds = results[pred_at : pred_at + n_db] if pred_sql is not None else []
            judgements.append(self._decide(pred_sql, gold_prepared, golds, preds))
        return judgements

    def _decide(
        self, pred_sql: str | None, gold_prepared, golds: list[ExecResult], preds: list[ExecResult]
    ) -> Judgement:
        first_pred = preds[0] if preds else None
        pred_status = first_pred.status if first_pred is not None else None
        infra = next((r for r in (*golds, *preds) if r.infra), None)
        if infra is not None:
            which = "gold" if any(r is infra for r in golds) else "prediction"
            return Judgement(
                Verdict.INFRA_FAILURE,
                pred_sql,
                pred_status,
                golds[0].status,
                error=f"infrastructure failure on the {which} ({infra.status.value}): {infra.error}",
                pred=first_pred,
                gold=golds[0],
            )
        bad_gold = next((g for g in golds if not g.ok), None)
        if bad_gold is not None:
            return Judgement(
                Verdict.UNSCORABLE,
                pred_sql,
                pred_status,
                bad_gold.status,
                error=f"gold SQL failed ({bad_gold.status.value}): {bad_gold.error}",
                pred=first_pred,
                gold=golds[0],
            )
        if pred_sql is None:
            return Judgement(Verdict.NO_SQL, None, None, golds[0].status, error="no SQL in the prediction", gold=golds[0])
        in_order = order_matters(gold_prepared, self.mode)
        for gold, pred in zip(golds, preds):
            if not pred.ok:
                return Judgement(
                    _PRED_FAILURE[pred.status], pred_sql, pred.status, gold.status, pred.error, first_pred, golds[0]
                )
            if not rows_match(pred.rows, gold.rows, self.mode, order_matters=in_order):
                return Judgement(Verdict.WRONG, pred_sql, pred_status, gold.status, None, first_pred, golds[0])
        return Judgement(Verdict.CORRECT, pred_sql, pred_status, golds[0].status, None, first_pred, golds[0])

    def _databases(self, db_path: str) -> list[str]:
        """The database files an example is judged on: one, or the folder's test suite in spider mode."""
        if self.mode is not CompareMode.SPIDER:
            return [db_path]
        suite = self._suites.get(db_path)
        if suite is None:
            folder = Path(db_path).parent
            others = sorted(
                str(p) for p in folder.iterdir() if ".sqlite" in p.name and p.is_file() and str(p) != db_path
            ) if folder.is_dir() else []
            suite = [db_path, *others]
            self._suites[db_path] = suite
        return suite

    def close(self) -> None:
        """Close the sandbox if this judge created it."""
        if self._owns_sandbox:
            self.sandbox.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
