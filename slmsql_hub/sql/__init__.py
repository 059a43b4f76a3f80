"""The execution core: the ONE place in slmsql-hub that runs or judges SQL.

- :mod:`~slmsql_hub.sql.sandbox` runs SQL read-only under limits in supervised worker processes,
- :mod:`~slmsql_hub.sql.compare` decides whether two result sets match (``bird`` and ``spider`` rules),
- :mod:`~slmsql_hub.sql.judge` puts both together: prediction + gold + database -> verdict,
- :mod:`~slmsql_hub.sql.extract` pulls the SQL out of a model's answer,
- :mod:`~slmsql_hub.sql.hardness` labels Spider hardness (easy / medium / hard / extra).

Rewards, the ``slmsql/ex`` metric, evaluation and the Space all call these; none of them opens SQLite.
"""

from .compare import CompareMode, prepare_sql, result_key, rows_match
from .extract import extract_sql
from .judge import Judge, Judgement, Verdict
from .result import ExecResult, ExecStatus, Limits
from .sandbox import Sandbox

__all__ = [
    "CompareMode",
    "ExecResult",
    "ExecStatus",
    "Judge",
    "Judgement",
    "Limits",
    "Sandbox",
    "Verdict",
    "extract_sql",
    "prepare_sql",
    "result_key",
    "rows_match",
]
