"""``slmsql eval``: the SFT and the GRPO adapters on the same benchmark slices, with paired statistics.

For each benchmark slice (the world's ``dev`` and ``test``; Spider or BIRD layouts when given, as seeded
subsets such as the study's 149 BIRD / 200 Spider questions) the evaluation:

1. builds every prompt as training did (:class:`~slmsql_hub.data.prompts.PromptConfig`, read from each adapter's
   ``run_summary.json`` unless the config sets it),
2. generates greedily with the SFT adapter, then with the GRPO adapter, over ONE base model loaded once
   (:func:`~slmsql_hub.generation.load_policy` with both adapters, switched with
   :func:`~slmsql_hub.generation.use_adapter`),
3. judges both policies' answers in one sandbox batch, in the benchmark's own semantics (Spider: ``spider``;
   BIRD and the world: ``bird``),
4. reports EX per policy with breakdowns (by difficulty/hardness, by database; for the world the held-out
   database apart) through :mod:`slmsql_hub.sql.ex_report`, and the paired comparison of GRPO against SFT
   (:func:`slmsql_hub.evaluation.stats.paired_comparison`: ΔEX, paired bootstrap 95% CI, McNemar exact p, discordant
   counts, a verdict sentence).

With ``self_consistency: K`` the evaluation also reports execution-majority EX (maj@K) per policy, with the same
paired statistics (:mod:`slmsql_hub.evaluation.self_consistency`).

Questions whose gold SQL fails are unscorable: left out of both policies' EX and of the paired statistics,
counted apart (``n_unscorable``), never scored 0.

Outputs in ``output_dir``: ``eval_results.json`` (the format the model card, the Space and ``slmsql push``
read; see :func:`run_eval`) and ``predictions/<benchmark_key>.jsonl`` (one line per question, both policies'
outputs, extracted SQL, correctness and verdicts).

The building blocks (:func:`load_slice`, :func:`build_prompts`, :func:`generate_and_judge`,
:func:`policy_scores`) are public so other loops (``benchmarks/measure_world_ex.py``) can share them.
Importing this module does no I/O and imports neither torch nor TRL.
"""

from ..data.prompts import build_prompts
from ..run.layout import PREDICTIONS_DIR
from .config import (
    POLICIES,
    RESULTS_FILE,
    BenchmarkSpec,
    EvalConfig,
    eval_benchmarks,
    load_eval_config,
)
from .run import EvalSlice, load_slice, resolve_prompt_config, run_eval
from .scoring import (
    PolicyOutput,
    generate_and_judge,
    policy_scores,
    prediction_records,
    read_eval_results,
    summary_lines,
)

__all__ = [
    "POLICIES",
    "PREDICTIONS_DIR",
    "RESULTS_FILE",
    "BenchmarkSpec",
    "EvalConfig",
    "EvalSlice",
    "PolicyOutput",
    "build_prompts",
    "eval_benchmarks",
    "generate_and_judge",
    "load_eval_config",
    "load_slice",
    "policy_scores",
    "prediction_records",
    "read_eval_results",
    "resolve_prompt_config",
    "run_eval",
    "summary_lines",
]
