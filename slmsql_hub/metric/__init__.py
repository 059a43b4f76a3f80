"""The ``slmsql/ex`` execution-accuracy metric for ``evaluate``, and what it is built from.

- :func:`compute_execution_accuracy`: the computation (usable without ``evaluate``),
- ``ex.py``: the thin ``evaluate.Metric`` script that ``evaluate.load("slmsql/ex")`` loads
  (:data:`METRIC_SCRIPT` is its path in this package),
- :func:`install_metric`: puts that script into ``evaluate``'s module cache so it loads offline,
- :func:`make_demo_database`: a toy database for examples and smoke tests.

Importing this package imports neither ``evaluate`` nor ``datasets``.
"""

from .compute import compute_execution_accuracy
from .demo import make_demo_database
from .install import METRIC_ID, METRIC_SCRIPT, install_metric

__all__ = [
    "METRIC_ID",
    "METRIC_SCRIPT",
    "compute_execution_accuracy",
    "install_metric",
    "make_demo_database",
]
