"""Parity of our comparator with the official evaluators' verdicts on real Spider dev predictions.

For each ``verdicts/<name>.jsonl`` (official per-question verdicts of four published prediction sets on the
972 scorable dev questions) we execute the prediction ``preds/<name>.txt`` and the gold ``dev_gold.sql`` on
the question's database, after :func:`prepare_sql` of the mode, and compare with :func:`rows_match`. Every
verdict must be reproduced: ``bird``, ``spider`` and ``spider_keep_distinct`` (= ``spider`` with
``keep_distinct=True``). A prediction that fails to execute is 0, as in the official evaluators.

Execution here is the one allowed direct use of ``sqlite3`` outside ``slmsql_hub/sql/``: a test baseline that
mirrors the official evaluator (read-only, text decoded with ``errors="ignore"``), so that the test checks the
comparator alone. Lines are read the way the official ``evaluation.py`` reads them: stripped, the part before
a tab, and a prediction's `` value `` placeholder replaced by `` 1 ``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from slmsql_hub.sql.compare import order_matters, prepare_sql, rows_match

DATA = Path(__file__).resolve().parents[1].parent / "shared/data/spider_dev"
VERDICT_FILES = sorted(DATA.glob("verdicts/*.jsonl")) if DATA.is_dir() else []
MODES = {  # verdict key -> (comparison mode, keep_distinct)
    "bird": ("bird", False),
    "spider": ("spider", False),
    "spider_keep_distinct": ("spider", True),
}
TIMEOUT_S = 5.0

pytestmark = [
    pytest.mark.spider,
    pytest.mark.skipif(not VERDICT_FILES, reason=f"Spider dev data not found at {DATA}"),
]


class _Baseline:
    """Runs SQL the way the official evaluators do: read-only, undecodable bytes dropped, with a deadline."""

    def __init__(self) -> None:
        self._connections: dict[Path, sqlite3.Connection] = {}
        self._cache: dict[tuple[Path, str], list[tuple] | None] = {}
        self._deadline = 0.0

    def _connection(self, db_path: Path) -> sqlite3.Connection:
        if db_path not in self._connections:
            connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)
            connection.text_factory = lambda b: b.decode(errors="ignore")
            connection.set_progress_handler(lambda: int(time.monotonic() > self._deadline), 10_000)
            self._connections[db_path] = connection
        return self._connections[db_path]

    def rows(self, db_path: Path, sql: str) -> list[tuple] | None:
        """The result rows, or ``None`` when the SQL fails or runs past the deadline."""
        key = (db_path, sql)
        if key not in self._cache:
            self._deadline = time.monotonic() + TIMEOUT_S
            try:
                self._cache[key] = self._connection(db_path).execute(sql).fetchall()
            except (sqlite3.Error, sqlite3.Warning, ValueError):
                self._cache[key] = None
        return self._cache[key]

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()


def _read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def our_verdicts() -> dict[str, dict[str, dict[int, int]]]:
    """{prediction set: {verdict key: {question index: our 0/1}}} for every official verdict line."""
    gold = [line.strip().split("\t") for line in _read_lines(DATA / "dev_gold.sql")]
    baseline = _Baseline()
    results: dict[str, dict[str, dict[int, int]]] = {}
    try:
        for verdict_file in VERDICT_FILES:
            name = verdict_file.stem
            preds = [
                line.strip().split("\t")[0].replace(" value ", " 1 ")
                for line in _read_lines(DATA / "preds" / f"{name}.txt")
            ]
            assert len(preds) == len(gold), f"{name}: {len(preds)} predictions for {len(gold)} questions"
            results[name] = {key: {} for key in MODES}
            for line in _read_lines(verdict_file):
                official = json.loads(line)
                index = official["index"]
                gold_sql, db_id = gold[index]
                assert db_id == official["db_id"], f"{name}: question {index} is on {db_id}"
                db_path = DATA / "database" / db_id / f"{db_id}.sqlite"
                for key, (mode, keep_distinct) in MODES.items():
                    prepared_gold = prepare_sql(gold_sql, mode, keep_distinct=keep_distinct)
                    gold_rows = baseline.rows(db_path, prepared_gold)
                    assert gold_rows is not None, f"gold {index} fails on {db_id}: {prepared_gold}"
                    pred_rows = baseline.rows(db_path, prepare_sql(preds[index], mode, keep_distinct))
                    ordered = order_matters(prepared_gold, mode)
                    match = pred_rows is not None and rows_match(
                        pred_rows, gold_rows, mode, order_matters=ordered
                    )
                    results[name][key][index] = int(match)
    finally:
        baseline.close()
    return results


@pytest.mark.parametrize("key", list(MODES))
@pytest.mark.parametrize("verdict_file", VERDICT_FILES, ids=lambda path: path.stem)
def test_comparator_reproduces_every_official_verdict(our_verdicts, verdict_file: Path, key: str):
    official = {row["index"]: row[key] for row in map(json.loads, _read_lines(verdict_file))}
    ours = our_verdicts[verdict_file.stem][key]
    assert len(official) == 972
    mismatches = sorted(index for index, verdict in official.items() if ours[index] != verdict)
    assert mismatches == [], f"{verdict_file.stem} / {key}: {len(mismatches)} mismatches at {mismatches[:20]}"
