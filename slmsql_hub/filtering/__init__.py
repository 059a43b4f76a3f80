"""The DAPO-style pass-rate filter: keep the questions the SFT policy *sometimes* solves.

GRPO learns from a group of K samples only when their rewards differ; a question the policy always solves
(or never solves) gives a group with zero variance and no gradient. The filter samples K completions per
question from the SFT policy, scores each one's BINARY correctness by execution (the
:class:`~slmsql_hub.sql.Judge`), and splits the pool by pass rate:

- ``unscorable``: no sample could be scored because the gold SQL itself failed (error or timeout). The pass
  rate is undefined; the question is reported, never counted as a failure.
- otherwise the pass rate is ``p = n_correct / n_scorable`` (``n_scorable == K`` whenever the gold runs, since
  a question's K samples are judged against one execution of its gold) and, with ``low < high``:

  - ``all_fail`` when ``p <= low`` (``p == 0`` included; with K=8 and low=0.2: 0 or 1 correct),
  - ``all_pass`` when ``p >= high`` (with K=8 and high=0.8: 7 or 8 correct),
  - ``band`` when ``low < p < high`` (strict on both sides; with K=8: 2 to 6 correct).

These four classes are exclusive and exhaustive, so their counts add up to the pool.

The pool is held out from SFT: the questions the adapter's SFT stages trained on (its ``sft_questions.json``,
:mod:`slmsql_hub.data.sft_record`) are left out of the split before the seeded ``limit`` subset is drawn, and
``filter_report.json`` says how many (``excluded_sft``) and how many SFT questions the pool still holds
(``sft_overlap``: 0, or ``null`` when the adapter has no complete record, e.g. a Hub adapter).

Sampling is seeded per question: sample ``j`` of question ``q`` draws its randomness from its own generator,
seeded from ``(seed, q, j)`` and a key namespace (:func:`sample_seed`; the filter's is ``filter``, the study's
pass@k draws fresh samples in another), through a Gumbel-max sampler (:class:`KeyedSampler`).
A question's samples therefore do not depend on which other questions share its batch, on the batch size,
or on where an interrupted run resumed (up to floating-point differences between batch shapes, which on a
GPU in bfloat16 can flip a near-tie token now and then).

Results are appended to ``<output_dir>/results.jsonl`` as each batch is judged (flushed and fsynced), so a
run killed with ``kill -9`` resumes without regenerating finished questions; resuming with settings that
change the samples is refused. At the end the filter writes ``band/`` (``datasets.save_to_disk``: the
benchmark columns, ``pass_rate`` and the samples), ``filter_report.json`` and the per-question
``results.jsonl`` in pool order. Importing this module does no I/O and imports neither torch nor TRL.
"""

from ..run.layout import BAND_DIR
from .config import (
    REPORT_FILE,
    RESULTS_FILE,
    STATE_FILE,
    FilterConfig,
    load_filter_config,
)
from .report import ALL_FAIL, ALL_PASS, BAND, CLASS_RULES, CLASSES, UNSCORABLE, classify, summary_line
from .resume import read_results
from .run import run_filter, score_batch
from .sampling import KeyedSampler, generate_keyed_samples, sample_seed

__all__ = [
    "ALL_FAIL",
    "ALL_PASS",
    "BAND",
    "BAND_DIR",
    "CLASSES",
    "CLASS_RULES",
    "REPORT_FILE",
    "RESULTS_FILE",
    "STATE_FILE",
    "UNSCORABLE",
    "FilterConfig",
    "KeyedSampler",
    "classify",
    "generate_keyed_samples",
    "load_filter_config",
    "read_results",
    "run_filter",
    "score_batch",
    "sample_seed",
    "summary_line",
]
