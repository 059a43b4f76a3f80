"""``slmsql diagnose``: will GRPO help this model? Support, error anatomy and headroom of one policy, before any
GPU hour (issue #36).

The policy (a base and its adapter) answers every question of each slice greedily and draws K samples with the
filter's keyed sampler under its own key namespace (:func:`~slmsql_hub.diagnosis.config.sample_key`: never a seed
the filter used to select the band). Every answer is judged by the execution core in the slice's compare mode;
every wrong one is classified by :func:`~slmsql_hub.sql.anatomy.anatomy`. The training band a GRPO run would use
(optional) contributes the filter's own samples, re-judged and classified.

Per slice: greedy EX, pass@1..K (the unbiased estimator, :mod:`slmsql_hub.evaluation.passk`), maj@K
(:mod:`slmsql_hub.evaluation.majority`), the shares of questions all-fail (c = 0 of K: out of reach of
outcome-only RL), all-pass and mixed, and the sharpening ceiling: greedy EX can rise at most to pass@K.

Per error class (a question is *affected* when one of its answers, greedy or sampled, has that class):

- **consistency**: each affected question's commonest ``(trigger, output)`` pair of the class (the abstracted gold
  part and what the prediction put there, e.g. ``>=`` -> ``>``); consistency is the share of affected questions,
  evaluation and training together, whose output is the commonest output of their trigger
  (:func:`~slmsql_hub.diagnosis.analysis.consistency`). 1.0: each trigger gives one wrong output everywhere.
  (Before 2026-12-07 it was the share holding the class's one commonest pair, so a plant with two symmetric
  triggers scored about 0.5, and an output that names nothing counted as a rule.)
- **support**: the share of affected evaluation questions with at least one correct sample.
- **where**: affected training-band questions with 0 < pass rate < 1 (GRPO sees them with reward variance), affected
  evaluation questions, ``both`` when both are non-zero.
- **ceiling**: the share of scorable evaluation questions whose greedy answer is wrong, that the class affects,
  and that have a correct sample: what fixing the class by sharpening can add to greedy EX at most, pooled over
  the slices and per slice.

The prediction ranks, by ceiling, the classes that occur in both, are in support and have consistency at least
``min_consistency``; when none does, it says so in one sentence with the reasons.

Outputs in ``output_dir`` (``<run>/diagnosis``): ``report.json``, ``report.md`` (``model_card/diagnosis_report.md``),
``diagnosis.png`` and ``questions/<slice>.jsonl``. Importing this package does no I/O and imports neither torch
nor TRL.
"""

from .config import NAMESPACE, DiagnoseConfig, load_diagnose_config, sample_key
from .run import REPORT_FILE, reanalyse, run_diagnose

__all__ = ["NAMESPACE", "REPORT_FILE", "DiagnoseConfig", "load_diagnose_config", "reanalyse", "run_diagnose",
           "sample_key"]
