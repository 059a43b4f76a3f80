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
seeded from ``(seed, q, j)`` (:func:`sample_seed`), through a Gumbel-max sampler (:class:`KeyedSampler`).
A question's samples therefore do not depend on which other questions share its batch, on the batch size,
or on where an interrupted run resumed (up to floating-point differences between batch shapes, which on a
GPU in bfloat16 can flip a near-tie token now and then).

Results are appended to ``<output_dir>/results.jsonl`` as each batch is judged (flushed and fsynced), so a
run killed with ``kill -9`` resumes without regenerating finished questions; resuming with settings that
change the samples is refused. At the end the filter writes ``band/`` (``datasets.save_to_disk``: the
benchmark columns, ``pass_rate`` and the samples), ``filter_report.json`` and the per-question
``results.jsonl`` in pool order. Importing this module does no I/O and imports neither torch nor TRL.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from .data.sft_record import SFTRecord, read_sft_record, report_fields, row_keys
from .errors import UsageError
from .model_refs import DTYPES
from .prompts import build_prompts
from .run_files import read_jsonl, write_atomic
from .sql.recipe_limits import LIMITS_KEY, SQLLimitsArguments, limits_record

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from .generation import Completion, GenerationConfig, Prompt
    from .prompts import PromptConfig

logger = logging.getLogger(__name__)

BAND = "band"
ALL_FAIL = "all_fail"
ALL_PASS = "all_pass"
UNSCORABLE = "unscorable"
CLASSES: tuple[str, ...] = (BAND, ALL_FAIL, ALL_PASS, UNSCORABLE)
"""The four classes a question falls into, in the order the summary line shows them."""

CLASS_RULES = (
    "unscorable: no scorable sample (the gold SQL failed); otherwise p = n_correct / n_scorable and "
    "all_fail: p <= low (p == 0 included); all_pass: p >= high; band: low < p < high"
)
"""The class rules in one line (also written into ``filter_report.json``)."""

RESULTS_FILE = "results.jsonl"
"""Per-question results, appended as they are computed (the resume log), rewritten in pool order at the end."""
STATE_FILE = "filter_config.json"
"""The configuration a run's results were produced with; a resume must match it."""
REPORT_FILE = "filter_report.json"
"""Counts per class, thresholds, policy, dataset, time and the pass-rate histogram."""
BAND_DIR = "band"
"""The band, saved with ``datasets.Dataset.save_to_disk``."""

_COMPARE_MODES = ("bird", "spider")
_BENCHMARKS = ("spider", "bird", "synsql", "world")
_HELD_OUT_WORLD_SPLITS = ("dev", "test")
_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
# Fields that cannot change what a question's samples and verdicts are: a resume may change them freely.
_FREE_FIELDS = frozenset(
    {
        "pass_rate_low",
        "pass_rate_high",
        "batch_size",
        "limit",
        "skip_missing_db",
        "output_dir",
        "overwrite",
        "device",
        "num_threads",
        "sandbox_workers",
        "timeout_s",  # deprecated: moved into sql_timeout_s
    }
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class FilterConfig(SQLLimitsArguments):
    """Everything ``slmsql filter`` needs: the policy, the pool, K, the thresholds, decoding and judging.

    Read from a flat YAML recipe plus ``--field value`` overrides with :func:`load_filter_config`. Validation
    here needs no network and reads no file, so a recipe for a model this machine cannot run still validates;
    paths are checked when the run starts.

    Args:
        model_name_or_path (`str`):
            The base model: a local folder (the world's ``outputs/world/base``) or a Hub id
            (``Qwen/Qwen2.5-Coder-1.5B-Instruct``).
        adapter_path (`str`, *optional*):
            The SFT LoRA adapter (folder or Hub id) the policy runs with; ``None`` samples the base alone.
        model_revision (`str`, *optional*):
            Hub revision (commit sha, tag or branch) of ``model_name_or_path``; ``None``: the main branch.
        adapter_revision (`str`, *optional*):
            Hub revision of ``adapter_path``; ``None``: the main branch.
        tokenizer_name_or_path (`str`, *optional*):
            Where the tokenizer comes from; defaults to ``model_name_or_path``.
        dtype (`str`, defaults to `"auto"`):
            Weights' dtype: ``auto`` (bfloat16 on a GPU that has it, float32 otherwise), ``float32``,
            ``bfloat16`` or ``float16``.
        device (`str`, *optional*):
            ``cuda``, ``cpu``...; defaults to CUDA when available.
        benchmark (`str`, defaults to `"world"`):
            The pool's loader: ``world``, ``spider``, ``bird`` or ``synsql`` (see
            :func:`~slmsql_hub.data.benchmarks.load_benchmark`).
        data_root (`str`):
            The benchmark's folder (for the world: the folder ``slmsql world build --out`` wrote).
        split (`str`, *optional*):
            The split to filter (the world's: ``rl_pool``); ``None`` takes the loader's default. The world's
            ``dev`` and ``test`` are refused: they are what EX is measured on.
        limit (`int`, *optional*):
            Filter a seeded subset of this many questions (``None``: the whole split), drawn after the adapter's
            SFT questions are left out.
        seed (`int`, defaults to `0`):
            Seeds the subset and every question's sampling (with its ``question_id``).
        skip_missing_db (`bool`, defaults to `False`):
            Drop questions whose database file is missing instead of failing.
        num_samples (`int`, defaults to `8`):
            K, the completions sampled per question (the study: 8, GRPO's group size). At least 2.
        pass_rate_low (`float`, defaults to `0.2`):
            Questions with pass rate ``<= pass_rate_low`` are ``all_fail``.
        pass_rate_high (`float`, defaults to `0.8`):
            Questions with pass rate ``>= pass_rate_high`` are ``all_pass``; the band is strictly between.
        temperature (`float`, defaults to `1.0`):
            Sampling temperature; use the one GRPO will sample with (the study: 0.8).
        top_p (`float`, defaults to `1.0`):
            Nucleus sampling mass in ``(0, 1]``.
        top_k (`int`, defaults to `0`):
            Sample among the ``top_k`` most likely tokens; ``0`` turns it off.
        max_new_tokens (`int`, defaults to `256`):
            Most tokens per completion.
        batch_size (`int`, defaults to `8`):
            Questions per ``generate`` call (each call decodes ``batch_size * num_samples`` sequences); also
            how often results are saved.
        compare_mode (`str`, defaults to `"bird"`):
            How results are compared: ``bird`` (set equality) or ``spider`` (test-suite rule).
        keep_distinct (`bool`, defaults to `False`):
            Spider mode only: keep DISTINCT instead of removing it.
        sql_timeout_s, sql_max_ops, sql_max_rows:
            The sandbox limits (:mod:`slmsql_hub.sql.recipe_limits`); set them as in the GRPO and eval recipes.
        timeout_s (`float`, *optional*):
            Deprecated name of ``sql_timeout_s`` (removed in the next release).
        sandbox_workers (`int`, *optional*):
            Sandbox worker processes (``None``: one per CPU core).
        prompt_sample_rows (`int`, *optional*):
            Sample rows per table in the schema; ``None`` reads the adapter's ``run_summary.json`` (what it was
            trained with), else 3.
        prompt_max_value_chars (`int`, *optional*):
            Longest sample value shown; ``None`` reads the adapter's ``run_summary.json``, else 40.
        num_threads (`int`, *optional*):
            ``torch.set_num_threads`` for the run (``None``: torch's default).
        output_dir (`str`):
            Where ``results.jsonl``, ``band/`` and ``filter_report.json`` go.
        overwrite (`bool`, defaults to `False`):
            Discard earlier results in ``output_dir`` instead of resuming from them.

    Example:

    ```python
    >>> from slmsql_hub.filtering import FilterConfig
    >>> config = FilterConfig(model_name_or_path="outputs/world/base", data_root="outputs/world",
    ...                       split="rl_pool", output_dir="outputs/world/filter")
    >>> config.num_samples, config.pass_rate_low, config.pass_rate_high
    (8, 0.2, 0.8)
    >>> FilterConfig(model_name_or_path="m", data_root="w", split="rl_pool", output_dir="o",
    ...              pass_rate_low=0.8, pass_rate_high=0.2)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: pass_rate_low (0.8) must be below pass_rate_high (0.2): the band is low < p < high...

    ```
    """

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Base model: a local folder or a Hub id."}
    )
    adapter_path: str | None = field(
        default=None, metadata={"help": "The SFT LoRA adapter (folder or Hub id); null samples the base."}
    )
    model_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of model_name_or_path; null: main."}
    )
    adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of adapter_path; null: main."}
    )
    tokenizer_name_or_path: str | None = field(
        default=None, metadata={"help": "Tokenizer location; null uses the base model's."}
    )
    dtype: str = field(default="auto", metadata={"help": "Weights' dtype.", "choices": list(DTYPES)})
    device: str | None = field(default=None, metadata={"help": "cuda, cpu...; null picks CUDA when present."})
    benchmark: str = field(default="world", metadata={"help": "Pool loader.", "choices": list(_BENCHMARKS)})
    data_root: str | None = field(default=None, metadata={"help": "The benchmark's folder."})
    split: str | None = field(default=None, metadata={"help": "Split to filter (the world's: rl_pool)."})
    limit: int | None = field(default=None, metadata={"help": "Filter a seeded subset of N questions."})
    seed: int = field(default=0, metadata={"help": "Seeds the subset and each question's sampling."})
    skip_missing_db: bool = field(
        default=False, metadata={"help": "Drop questions whose database is missing."}
    )
    num_samples: int = field(default=8, metadata={"help": "K: completions sampled per question."})
    pass_rate_low: float = field(default=0.2, metadata={"help": "p <= low is all_fail."})
    pass_rate_high: float = field(default=0.8, metadata={"help": "p >= high is all_pass."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling mass."})
    top_k: int = field(default=0, metadata={"help": "Top-k sampling (0: off)."})
    max_new_tokens: int = field(default=256, metadata={"help": "Most tokens per completion."})
    batch_size: int = field(default=8, metadata={"help": "Questions per generate call and per save."})
    compare_mode: str = field(
        default="bird", metadata={"help": "Result comparison rule.", "choices": list(_COMPARE_MODES)}
    )
    keep_distinct: bool = field(default=False, metadata={"help": "Spider mode: keep DISTINCT."})
    timeout_s: float | None = field(default=None, metadata={"help": "Deprecated: use sql_timeout_s."})
    sandbox_workers: int | None = field(default=None, metadata={"help": "Sandbox processes (null: CPUs)."})
    prompt_sample_rows: int | None = field(
        default=None, metadata={"help": "Sample rows per table (null: the adapter's run_summary.json)."}
    )
    prompt_max_value_chars: int | None = field(
        default=None, metadata={"help": "Longest sample value (null: the adapter's run_summary.json)."}
    )
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})
    output_dir: str | None = field(default=None, metadata={"help": "Where results, band and report go."})
    overwrite: bool = field(
        default=False, metadata={"help": "Start over instead of resuming from results in output_dir."}
    )

    def __post_init__(self) -> None:
        if not self.model_name_or_path:
            raise UsageError(
                "model_name_or_path is not set: name the base model, e.g. `model_name_or_path: outputs/world/base` "
                "or `Qwen/Qwen2.5-Coder-1.5B-Instruct`"
            )
        if not self.data_root:
            raise UsageError(
                "data_root is not set: point it at the benchmark folder, e.g. `data_root: outputs/world` "
                "(built with `slmsql world build --out outputs/world`)"
            )
        if not self.output_dir:
            raise UsageError(
                "output_dir is not set: name the folder for the results, e.g. outputs/world/filter"
            )
        if self.benchmark not in _BENCHMARKS:
            raise UsageError(f"benchmark must be one of {', '.join(_BENCHMARKS)}; got {self.benchmark!r}")
        split = self.split or "dev"
        if self.benchmark == "world" and split in _HELD_OUT_WORLD_SPLITS:
            raise UsageError(
                f"the world's {split} split is held out for evaluation; filter the GRPO pool instead "
                "(`split: rl_pool`)"
            )
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.compare_mode not in _COMPARE_MODES:
            raise UsageError(f"compare_mode must be 'bird' or 'spider'; got {self.compare_mode!r}")
        if self.keep_distinct and self.compare_mode != "spider":
            raise UsageError(
                "keep_distinct only applies to compare_mode: spider; remove it or switch the mode"
            )
        if not _is_int(self.num_samples) or self.num_samples < 2:
            raise UsageError(
                f"num_samples (K) must be an integer >= 2: a pass rate needs several samples (the study uses 8); "
                f"got {self.num_samples!r}"
            )
        for name in ("pass_rate_low", "pass_rate_high"):
            value = getattr(self, name)
            if not _is_number(value) or not 0.0 <= value <= 1.0:
                raise UsageError(f"{name} must be a number in [0, 1]; got {value!r}")
        if not self.pass_rate_low < self.pass_rate_high:
            raise UsageError(
                f"pass_rate_low ({self.pass_rate_low}) must be below pass_rate_high ({self.pass_rate_high}): "
                "the band is low < p < high (the study: 0.2 and 0.8)"
            )
        k = self.num_samples
        if not any(self.pass_rate_low < j / k < self.pass_rate_high for j in range(1, k)):
            raise UsageError(
                f"with num_samples={k} no pass rate j/{k} lies strictly between {self.pass_rate_low} and "
                f"{self.pass_rate_high}, so the band would always be empty; raise num_samples or widen the "
                "thresholds"
            )
        if not _is_number(self.temperature) or not self.temperature > 0:
            raise UsageError(f"temperature must be > 0 (the filter samples); got {self.temperature!r}")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise UsageError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise UsageError(f"top_k must be an integer >= 0 (0 turns it off); got {self.top_k!r}")
        for name in ("max_new_tokens", "batch_size"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise UsageError(f"{name} must be a positive integer; got {value!r}")
        self.resolve_sql_limits(deprecated_timeout="timeout_s")
        if not _is_int(self.seed):
            raise UsageError(f"seed must be an integer; got {self.seed!r}")
        for name in ("limit", "sandbox_workers", "num_threads"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise UsageError(f"{name} must be a positive integer, or null; got {value!r}")
        if self.prompt_sample_rows is not None and (
            not _is_int(self.prompt_sample_rows) or self.prompt_sample_rows < 0
        ):
            raise UsageError(
                f"prompt_sample_rows must be >= 0, or null to use the adapter's; got {self.prompt_sample_rows!r}"
            )
        if self.prompt_max_value_chars is not None and (
            not _is_int(self.prompt_max_value_chars) or self.prompt_max_value_chars < 1
        ):
            raise UsageError(
                f"prompt_max_value_chars must be >= 1, or null to use the adapter's; "
                f"got {self.prompt_max_value_chars!r}"
            )

    def generation_config(self) -> GenerationConfig:
        """The decoding settings as a :class:`~slmsql_hub.generation.GenerationConfig` (K samples, seeded)."""
        from .generation import GenerationConfig

        return GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            temperature=float(self.temperature),
            top_p=float(self.top_p),
            top_k=self.top_k,
            do_sample=True,
            num_samples=self.num_samples,
            batch_size=self.batch_size,
            seed=self.seed,
        )


def load_filter_config(
    config: str | os.PathLike | None = None, overrides: Sequence[str] = ()
) -> FilterConfig:
    """Read a :class:`FilterConfig` from a flat YAML recipe, then ``--field value`` overrides (which win).

    The same parser as the training recipes (:func:`~slmsql_hub.training.configs.parse_recipe`): unknown keys
    and bad values are one :class:`~slmsql_hub.errors.UsageError` naming the fix.

    Args:
        config: the YAML recipe (``None``: defaults and overrides only).
        overrides: command-line style arguments, e.g. ``["--num_samples", "4"]``.

    Returns:
        The validated config.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.filtering import load_filter_config
    >>> recipe = pathlib.Path(tempfile.mkdtemp()) / "filter.yaml"
    >>> _ = recipe.write_text("model_name_or_path: outputs/world/base\\ndata_root: outputs/world\\n"
    ...                       "split: rl_pool\\noutput_dir: outputs/world/filter\\n")
    >>> load_filter_config(recipe, ["--num_samples", "4", "--temperature", "0.8"]).num_samples
    4

    ```
    """
    from .training.configs import parse_recipe

    (parsed,) = parse_recipe((FilterConfig,), config, overrides)
    return parsed


# ----------------------------------------------------------------------------------------------------------
# Classes
# ----------------------------------------------------------------------------------------------------------


def classify(n_correct: int, n_scorable: int, low: float = 0.2, high: float = 0.8) -> str:
    """The class of one question from its sample counts (see :data:`CLASS_RULES`).

    Args:
        n_correct: samples whose result matched the gold.
        n_scorable: samples that could be scored (0 when the gold SQL failed).
        low: the all-fail threshold (``p <= low``).
        high: the all-pass threshold (``p >= high``).

    Returns:
        ``"band"``, ``"all_fail"``, ``"all_pass"`` or ``"unscorable"``.

    Example:

    ```python
    >>> from slmsql_hub.filtering import classify
    >>> [classify(n, 8) for n in (0, 1, 2, 6, 7, 8)]
    ['all_fail', 'all_fail', 'band', 'band', 'all_pass', 'all_pass']
    >>> classify(0, 0)
    'unscorable'

    ```
    """
    if not 0 <= n_correct <= n_scorable:
        raise ValueError(f"n_correct ({n_correct}) must be between 0 and n_scorable ({n_scorable})")
    if n_scorable == 0:
        return UNSCORABLE
    pass_rate = n_correct / n_scorable
    if pass_rate <= low:
        return ALL_FAIL
    if pass_rate >= high:
        return ALL_PASS
    return BAND


def summary_line(counts: dict[str, int]) -> str:
    """The study's one-line summary: ``"494 band / 502 all-fail / 184 all-pass / 0 unscorable of 1180"``.

    Example:

    ```python
    >>> from slmsql_hub.filtering import summary_line
    >>> summary_line({"band": 494, "all_fail": 502, "all_pass": 184, "unscorable": 0})
    '494 band / 502 all-fail / 184 all-pass / 0 unscorable of 1180'

    ```
    """
    total = sum(counts.get(name, 0) for name in CLASSES)
    parts = " / ".join(f"{counts.get(name, 0)} {name.replace('_', '-')}" for name in CLASSES)
    return f"{parts} of {total}"


# ----------------------------------------------------------------------------------------------------------
# Seeded sampling
# ----------------------------------------------------------------------------------------------------------


def sample_seed(seed: int, question_id: str, index: int) -> int:
    """The seed of sample ``index`` of question ``question_id``: a stable 63-bit hash of all three.

    Example:

    ```python
    >>> from slmsql_hub.filtering import sample_seed
    >>> sample_seed(0, "world-rl_pool-7", 3) == sample_seed(0, "world-rl_pool-7", 3)
    True
    >>> len({sample_seed(0, "q", j) for j in range(8)})
    8

    ```
    """
    digest = hashlib.sha256(f"slmsql-filter:{seed}:{question_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


class KeyedSampler:
    """A logits processor that samples each row with its OWN random generator (Gumbel-max).

    ``model.generate`` runs greedy; this processor applies temperature and top-k (transformers' warpers) and
    top-p, then adds Gumbel noise drawn from the row's generator, so the arg-max is a sample from the filtered softmax. Row ``r``'s
    ``t``-th token always uses the ``t``-th draw of generator ``r``, whatever the other rows are: a row's
    samples depend on its seed and its own logits only, not on the batch.

    Args:
        row_seeds (`Sequence[int]`): one seed per row of the batch (rows in ``input_ids`` order).
        temperature (`float`, defaults to `1.0`): softmax temperature (> 0).
        top_k (`int`, defaults to `0`): keep the ``top_k`` largest logits (0: off).
        top_p (`float`, defaults to `1.0`): keep the smallest set of tokens with this much probability.
        device (*optional*): where the generators live; by default the device of the first logits it sees.

    Example:

    ```python
    >>> import torch
    >>> from slmsql_hub.filtering import KeyedSampler
    >>> logits = torch.tensor([[0.0, 3.0, 1.0], [0.0, 3.0, 1.0]])
    >>> KeyedSampler([1, 2], top_k=1)(None, logits).argmax(-1).tolist()   # top_k=1 is greedy
    [1, 1]
    >>> a = KeyedSampler([5, 6])(None, logits)
    >>> b = KeyedSampler([6])(None, logits[1:])   # row 2 alone draws the same noise
    >>> torch.equal(a[1], b[0])
    True

    ```
    """

    def __init__(
        self,
        row_seeds: Sequence[int],
        *,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        device: Any = None,
    ) -> None:
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.row_seeds = [int(seed) for seed in row_seeds]
        self.generators: list[torch.Generator] = []
        if device is not None:
            self._seed_generators(device)

    def _seed_generators(self, device: Any) -> None:
        import torch

        self.generators = []
        for seed in self.row_seeds:
            generator = torch.Generator(device=device)
            generator.manual_seed(seed)
            self.generators.append(generator)

    def __call__(self, input_ids: torch.Tensor | None, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if scores.shape[0] != len(self.row_seeds):
            raise ValueError(f"{scores.shape[0]} rows of logits for {len(self.row_seeds)} row seeds")
        if not self.generators:
            self._seed_generators(scores.device)
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper

        scores = TemperatureLogitsWarper(self.temperature)(input_ids, scores.float())
        vocab = scores.shape[-1]
        if self.top_k > 0:
            scores = TopKLogitsWarper(self.top_k)(input_ids, scores)
        if self.top_p < 1.0:
            # Our own nucleus rule, not TopPLogitsWarper's: that one keeps another set at the boundary
            # (ascending cumsum <= 1 - top_p), so its samples would differ.
            sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
            probs = sorted_scores.softmax(dim=-1)
            # Drop a token when the more likely tokens already hold top_p of the mass (the first never is).
            drop_sorted = (probs.cumsum(dim=-1) - probs) >= self.top_p
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            scores = scores.masked_fill(drop, float("-inf"))
        uniform = torch.stack([torch.rand(vocab, generator=g, device=scores.device) for g in self.generators])
        tiny = torch.finfo(uniform.dtype).tiny
        gumbel = -torch.log(-torch.log(uniform.clamp(min=tiny, max=1.0 - 1e-7)))
        return scores + gumbel


def generate_keyed_samples(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    keys: Sequence[str],
    config: GenerationConfig,
) -> list[list[Completion]]:
    """Sample ``config.num_samples`` completions per prompt in ONE ``generate`` call, seeded per (prompt, sample).

    Sample ``j`` of prompt ``i`` is drawn with :func:`sample_seed` ``(config.seed, keys[i], j)`` through
    :class:`KeyedSampler`, so it does not depend on the other prompts of the call. Chats are rendered with
    the chat template, prompts LEFT padded, and completions cut at ``<|im_end|>`` or eos, as in
    :func:`~slmsql_hub.generation.generate_completions`.

    Args:
        model: the policy (a ``transformers`` causal LM, PEFT-wrapped or not); its active adapter is used.
        tokenizer: its tokenizer.
        prompts: chats or templated strings (all of them go into one call: batch them yourself).
        keys: one stable key per prompt (the question id).
        config: decoding settings; ``config.seed`` must be set and ``do_sample`` true.

    Returns:
        `list[list[Completion]]`: ``num_samples`` completions per prompt, in input order.

    Example:

    ```python
    >>> from slmsql_hub.filtering import generate_keyed_samples
    >>> from slmsql_hub.generation import GenerationConfig
    >>> generate_keyed_samples(None, None, [], [], GenerationConfig(do_sample=True, num_samples=2))
    []

    ```
    """
    if len(prompts) != len(keys):
        raise ValueError(f"{len(prompts)} prompts but {len(keys)} keys")
    if not config.do_sample or config.seed is None:
        raise UsageError("keyed sampling needs do_sample=True and an integer seed")
    if config.backend != "transformers":
        raise UsageError(
            "the pass-rate filter samples with the transformers backend; set backend='transformers'"
        )
    if not prompts:
        return []
    # The same rendering, padding, stop tokens and completion splitting as every other caller of generation;
    # greedy decoding over the sampler's perturbed logits IS sampling, one generator per row.
    from .generation import generate_with_processor

    k = config.num_samples
    sampler = KeyedSampler(
        [sample_seed(config.seed, key, j) for key in keys for j in range(k)],
        temperature=config.temperature,
        top_k=config.top_k,
        top_p=config.top_p,
    )
    return generate_with_processor(
        model, tokenizer, prompts, sampler, num_samples=k, max_new_tokens=config.max_new_tokens
    )


# ----------------------------------------------------------------------------------------------------------
# The resume log
# ----------------------------------------------------------------------------------------------------------


def read_results(path: str | os.PathLike) -> dict[str, dict]:
    """Read a results log, repairing a torn last line (a run killed mid-write) by truncating it away.

    Args:
        path: ``<output_dir>/results.jsonl``; a missing file reads as empty.

    Returns:
        ``{question_id: row}`` (a later row for the same id wins).

    Raises:
        UsageError: a complete line is not a JSON object with a ``question_id``.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.filtering import read_results
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = log.write_text('{"question_id": "q1", "n_correct": 3}\\n{"question_id": "q2", "n_cor')
    >>> sorted(read_results(log)), log.read_text()
    (['q1'], '{"question_id": "q1", "n_correct": 3}\\n')

    ```
    """
    path = Path(path)
    if not path.is_file():
        return {}
    data = path.read_bytes()
    # Rows are written whole, newline-terminated: anything after the last newline is a write cut short.
    end = data.rfind(b"\n") + 1
    if end < len(data):
        logger.warning(
            "%s: dropping a torn last line (%d bytes) left by an interrupted run", path, len(data) - end
        )
        with path.open("r+b") as handle:
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())
    records = read_jsonl(path)  # the torn tail is cut: a line it skips is damage, not a kill
    lines = sum(1 for raw in data[:end].split(b"\n") if raw.strip())
    if len(records) != lines or any("question_id" not in row for row in records):
        raise UsageError(
            f"{path} has lines that are not result rows; fix or delete the file, or set `overwrite: true` "
            "to start over"
        )
    return {str(row["question_id"]): row for row in records}


def _append_rows(handle: Any, rows: Sequence[dict]) -> None:
    """Append rows as JSON lines and make them durable (flush + fsync) before returning."""
    handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    handle.flush()
    os.fsync(handle.fileno())


def _adapter_digest(adapter: str | None) -> str | None:
    """sha256 of a local adapter's weights (so retraining it in place is caught on resume); None otherwise."""
    if adapter is None:
        return None
    folder = Path(adapter).expanduser()
    for name in _ADAPTER_WEIGHTS:
        weights = folder / name
        if weights.is_file():
            digest = hashlib.sha256()
            with weights.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            return digest.hexdigest()
    return None


def _fingerprint(
    config: FilterConfig,
    prompt_config: PromptConfig,
    adapter_sha256: str | None,
    sft_record_sha256: str | None = None,
) -> dict:
    """The settings that decide a question's samples and verdicts, and which questions the pool may hold (the SFT
    record left out of it): a resume must match them all, so it never mixes pools."""
    values = {
        f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in _FREE_FIELDS
    }
    values["data_root"] = str(Path(str(config.data_root)).expanduser().resolve())
    values["adapter_sha256"] = adapter_sha256
    values["sft_record_sha256"] = sft_record_sha256
    values["prompt_sample_rows"] = prompt_config.sample_rows
    values["prompt_max_value_chars"] = prompt_config.max_value_chars
    return values


def _check_or_write_state(out: Path, fingerprint: dict, config: FilterConfig, have_results: bool) -> None:
    state_file = out / STATE_FILE
    if have_results:
        if not state_file.is_file():
            raise UsageError(
                f"{out / RESULTS_FILE} exists without its {STATE_FILE}, so its settings are unknown; choose "
                "another output_dir or set `overwrite: true` to start over"
            )
        stored = json.loads(state_file.read_text(encoding="utf-8")).get("fingerprint", {})
        changed = [
            f"{key}: {stored.get(key)!r} there, {value!r} now"
            for key, value in fingerprint.items()
            if stored.get(key) != value
        ]
        if changed:
            raise UsageError(
                f"{out} holds results produced with other settings ({'; '.join(changed)}); rerun with the same "
                "settings to resume, choose another output_dir, or set `overwrite: true` to start over"
            )
        return
    payload = {"fingerprint": fingerprint, "config": dataclasses.asdict(config)}
    write_atomic(state_file, json.dumps(payload, indent=2, default=str) + "\n")


def _clear_outputs(out: Path) -> None:
    import shutil

    for name in (RESULTS_FILE, STATE_FILE, REPORT_FILE):
        (out / name).unlink(missing_ok=True)
    if (out / BAND_DIR).is_dir():
        shutil.rmtree(out / BAND_DIR)


# ----------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------


def resolve_prompt_config(config: FilterConfig) -> PromptConfig:
    """The prompt settings: the config's, else what the adapter was trained with (its ``run_summary.json``).

    Example:

    ```python
    >>> from slmsql_hub.filtering import FilterConfig, resolve_prompt_config
    >>> config = FilterConfig(model_name_or_path="m", data_root="w", split="rl_pool", output_dir="o",
    ...                       prompt_sample_rows=0)
    >>> resolve_prompt_config(config).sample_rows, resolve_prompt_config(config).max_value_chars
    (0, 40)

    ```
    """
    from .prompts import PromptConfig

    trained: dict = {}
    if config.adapter_path:
        summary_file = Path(config.adapter_path).expanduser() / "run_summary.json"
        if summary_file.is_file():
            trained = json.loads(summary_file.read_text(encoding="utf-8")).get("prompt") or {}
    sample_rows = config.prompt_sample_rows
    if sample_rows is None:
        sample_rows = int(trained.get("sample_rows", 3))
    max_value_chars = config.prompt_max_value_chars
    if max_value_chars is None:
        max_value_chars = int(trained.get("max_value_chars", 40))
    return PromptConfig(sample_rows=sample_rows, max_value_chars=max_value_chars)


def _load_pool(config: FilterConfig, record: SFTRecord | None) -> tuple[list[dict], int]:
    """The pool: the split less the SFT record's questions, then the seeded ``limit`` subset; and how many were
    left out as SFT data (before the draw, so ``limit`` still counts held-out questions)."""
    from .data.benchmarks import load_benchmark, seeded_subset

    dataset = load_benchmark(
        config.benchmark,
        config.data_root,
        config.split,
        seed=config.seed,
        skip_missing_db=config.skip_missing_db,
    )
    kept = list(range(len(dataset)))
    if record is not None:
        kept = [i for i, key in zip(kept, row_keys(dataset)) if key not in record.keys]
    excluded = len(dataset) - len(kept)
    pool = [
        dict(row)
        for row in dataset.select([kept[i] for i in seeded_subset(len(kept), config.limit, config.seed)])
    ]
    duplicates = [qid for qid, n in Counter(row["question_id"] for row in pool).items() if n > 1]
    if duplicates:
        raise UsageError(
            f"question_id must be unique to resume by it; {len(duplicates)} repeat (e.g. {duplicates[0]!r})"
        )
    if not pool:
        why = f" (all {excluded} are in the adapter's SFT question record)" if excluded else ""
        raise UsageError(
            f"the pool is empty: {config.benchmark} {config.split or ''} under {config.data_root}{why}"
        )
    if excluded:
        logger.info("left %d SFT training questions out of the pool (%s)", excluded, record.path)
    return pool, excluded


def _prompt_lengths(tokenizer: Any, prompts: dict[str, Any]) -> dict[str, int]:
    """Tokens per prompt, chat template applied (as generation will see it)."""
    from .generation import render_prompts

    texts = render_prompts(tokenizer, list(prompts.values()))
    return {
        key: len(tokenizer(text, add_special_tokens=False)["input_ids"]) for key, text in zip(prompts, texts)
    }


def _warn_if_too_long(model: Any, lengths: dict[str, int], max_new_tokens: int) -> None:
    """Warn when prompts plus completions exceed the model's context: those questions would fail for it."""
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not isinstance(context, int):
        return
    too_long = [n for n in lengths.values() if n + max_new_tokens > context]
    if too_long:
        logger.warning(
            "%d of %d prompts plus max_new_tokens=%d exceed the model's %d positions (longest prompt: %d "
            "tokens); their samples will mostly fail: lower prompt_sample_rows or max_new_tokens",
            len(too_long),
            len(lengths),
            max_new_tokens,
            context,
            max(too_long),
        )


def _score_batch(
    batch: list[dict], prompts: list[Any], model: Any, tokenizer: Any, judge: Any, gen_config: Any
) -> list[dict]:
    """Sample K completions for each question of the batch, judge them, and build the result rows."""
    from .sql import Verdict

    groups = generate_keyed_samples(
        model, tokenizer, prompts, [row["question_id"] for row in batch], gen_config
    )
    k = gen_config.num_samples
    judgements = judge.judge_many(
        [c.text for group in groups for c in group],
        [row["gold_sql"] for row in batch for _ in range(k)],
        [row["db_path"] for row in batch for _ in range(k)],
    )
    results = []
    for i, (row, group) in enumerate(zip(batch, groups)):
        verdicts = judgements[i * k : (i + 1) * k]
        correct = [j.correct for j in verdicts]
        scorable = [c for c in correct if c is not None]
        gold_error = next((j.error for j in verdicts if j.verdict is Verdict.UNSCORABLE), None)
        results.append(
            {
                **row,
                "n_samples": k,
                "n_scorable": len(scorable),
                "n_correct": int(sum(scorable)),
                "pass_rate": sum(scorable) / len(scorable) if scorable else None,
                "samples": [c.text for c in group],
                "sample_correct": correct,
                "sample_verdicts": [str(j.verdict) for j in verdicts],
                "sample_tokens": [c.num_tokens for c in group],
                "gold_error": gold_error,
            }
        )
    return results


def _band_dataset(rows: list[dict]) -> Any:
    import datasets

    from .data.benchmarks import BENCHMARK_COLUMNS

    features = datasets.Features(
        {
            **{name: datasets.Value("string") for name in BENCHMARK_COLUMNS},
            "pass_rate": datasets.Value("float64"),
            "n_correct": datasets.Value("int32"),
            "n_scorable": datasets.Value("int32"),
            "samples": datasets.Sequence(datasets.Value("string")),
            "sample_correct": datasets.Sequence(datasets.Value("int8")),
            "sample_verdicts": datasets.Sequence(datasets.Value("string")),
        }
    )
    columns = {name: [row[name] for row in rows] for name in features}
    return datasets.Dataset.from_dict(columns, features=features)


def _histogram(rows: list[dict], k: int) -> dict:
    by_correct = Counter(row["n_correct"] for row in rows if row["n_scorable"])
    by_rate = Counter(round(row["pass_rate"], 6) for row in rows if row["pass_rate"] is not None)
    rates = sorted(by_rate)
    return {
        "n_correct": list(range(k + 1)),
        "questions_by_n_correct": [by_correct.get(n, 0) for n in range(k + 1)],
        "pass_rate": rates,
        "questions_by_pass_rate": [by_rate[r] for r in rates],
    }


def run_filter(config: FilterConfig, *, policy: tuple[Any, Any] | None = None, progress: bool = True) -> dict:
    """Run the pass-rate filter end to end (resuming from ``output_dir`` when it holds earlier results).

    Args:
        config: the run's settings.
        policy: an already loaded ``(model, tokenizer)``; ``None`` loads ``config.model_name_or_path`` with
            ``config.adapter_path`` through :func:`~slmsql_hub.generation.load_policy` (only when some
            question is left to sample).
        progress: show a tqdm bar over questions.

    Returns:
        The report written to ``<output_dir>/filter_report.json``: ``counts`` per class (adding up to
        ``pool``), thresholds, policy, dataset, time, the pass-rate histogram and ``summary`` (the study's
        line).

    Raises:
        UsageError: missing data or model, or ``output_dir`` holding results of other settings.

    Example:

    ```python
    >>> from slmsql_hub.filtering import FilterConfig, run_filter
    >>> run_filter(FilterConfig(model_name_or_path="m", data_root="/nowhere", split="rl_pool", output_dir="o"))
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: world root is not a directory: /nowhere

    ```
    """
    from .sql import Judge, Sandbox

    started = time.perf_counter()
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record = read_sft_record(config.adapter_path)
    pool, excluded = _load_pool(config, record)
    sft = report_fields(record, config.adapter_path, pool, excluded)
    prompt_config = resolve_prompt_config(config)
    out = Path(str(config.output_dir)).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    if config.overwrite:
        _clear_outputs(out)
    log_path = out / RESULTS_FILE
    done = read_results(log_path)
    fingerprint = _fingerprint(
        config, prompt_config, _adapter_digest(config.adapter_path), record.sha256 if record else None
    )
    _check_or_write_state(out, fingerprint, config, have_results=bool(done))
    todo = [row for row in pool if row["question_id"] not in done]
    reused = len(pool) - len(todo)
    if reused:
        logger.info("resuming: %d of %d questions already done in %s", reused, len(pool), log_path)
    if todo:
        if config.num_threads is not None:
            import torch

            torch.set_num_threads(config.num_threads)
        if policy is None:
            from .generation import load_policy

            policy = load_policy(
                config.model_name_or_path,
                config.adapter_path,
                tokenizer=config.tokenizer_name_or_path,
                dtype=config.dtype,
                device=config.device,
                revision=config.model_revision,
                adapter_revisions={"default": config.adapter_revision},
            )
        model, tokenizer = policy
        gen_config = config.generation_config()
        with Sandbox(config.sql_limits(), workers=config.sandbox_workers) as sandbox:
            judge = Judge(sandbox=sandbox, mode=config.compare_mode, keep_distinct=config.keep_distinct)
            prompts = dict(
                zip([row["question_id"] for row in todo], build_prompts(todo, prompt_config, sandbox))
            )
            lengths = _prompt_lengths(tokenizer, prompts)
            _warn_if_too_long(model, lengths, config.max_new_tokens)
            # Longest prompts first: little padding per batch, and an out-of-memory error shows at once.
            todo.sort(key=lambda row: -lengths[row["question_id"]])
            batches = [todo[i : i + config.batch_size] for i in range(0, len(todo), config.batch_size)]
            in_pool = {row["question_id"] for row in pool}
            classes = Counter(
                classify(r["n_correct"], r["n_scorable"], config.pass_rate_low, config.pass_rate_high)
                for qid, r in done.items()
                if qid in in_pool
            )
            with (
                log_path.open("a", encoding="utf-8") as handle,
                tqdm(
                    total=len(pool),
                    initial=reused,
                    desc=f"filter (K={config.num_samples})",
                    unit="q",
                    disable=not progress,
                ) as bar,
            ):
                for batch in batches:
                    rows = _score_batch(
                        batch, [prompts[r["question_id"]] for r in batch], model, tokenizer, judge, gen_config
                    )
                    _append_rows(handle, rows)
                    for row in rows:
                        done[row["question_id"]] = row
                        classes[
                            classify(
                                row["n_correct"],
                                row["n_scorable"],
                                config.pass_rate_low,
                                config.pass_rate_high,
                            )
                        ] += 1
                    bar.update(len(rows))
                    bar.set_postfix({name: classes[name] for name in (BAND, ALL_FAIL, ALL_PASS)})
    return _finish(
        config, out, pool, done, prompt_config, fingerprint, started, started_at, len(todo), reused, sft=sft
    )


def _finish(
    config: FilterConfig,
    out: Path,
    pool: list[dict],
    done: dict[str, dict],
    prompt_config: PromptConfig,
    fingerprint: dict,
    started: float,
    started_at: str,
    generated: int,
    reused: int,
    *,
    sft: dict | None = None,
) -> dict:
    """Classify the pool, write results.jsonl in pool order, the band dataset and filter_report.json (``sft``:
    :func:`~slmsql_hub.data.sft_record.report_fields`)."""
    import shutil

    from .training.common import loaded_revisions

    ordered = []
    for row in pool:
        result = dict(done[row["question_id"]])
        result["class"] = classify(
            result["n_correct"], result["n_scorable"], config.pass_rate_low, config.pass_rate_high
        )
        ordered.append(result)
    in_pool = {row["question_id"] for row in pool}
    others = [row for qid, row in done.items() if qid not in in_pool]  # from an earlier, larger pool
    write_atomic(
        out / RESULTS_FILE,
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in [*ordered, *others]),
    )
    counts = {name: 0 for name in CLASSES}
    counts.update(Counter(row["class"] for row in ordered))
    band_rows = [row for row in ordered if row["class"] == BAND]
    band_dir = out / BAND_DIR
    if band_dir.exists():
        shutil.rmtree(band_dir)
    # one shard even when empty: datasets writes no file for an empty dataset otherwise, and cannot load it back
    _band_dataset(band_rows).save_to_disk(str(band_dir), num_shards=1)
    if not band_rows:
        logger.warning(
            "the band is empty: GRPO on it has nothing to learn from; check the policy, the temperature or the "
            "thresholds"
        )
    by_difficulty: dict[str, Counter] = {}
    for row in ordered:
        by_difficulty.setdefault(row["difficulty"], Counter())[row["class"]] += 1
    scored = [row["pass_rate"] for row in ordered if row["pass_rate"] is not None]
    line = summary_line(counts)
    report = {
        "summary": line,
        "counts": counts,
        "pool": len(pool),
        "num_samples": config.num_samples,
        "pass_rate_low": config.pass_rate_low,
        "pass_rate_high": config.pass_rate_high,
        "class_rules": CLASS_RULES,
        "mean_pass_rate": sum(scored) / len(scored) if scored else None,
        **(sft or {"excluded_sft": None, "sft_overlap": None, "sft_record": None}),
        "policy": {
            "base": config.model_name_or_path,
            "adapter": config.adapter_path,
            **loaded_revisions(
                config.model_name_or_path,
                config.model_revision,
                config.adapter_path,
                config.adapter_revision,
            ),
            "adapter_sha256": fingerprint["adapter_sha256"],
        },
        "dataset": {
            "benchmark": config.benchmark,
            "data_root": str(config.data_root),
            "split": config.split,
            "limit": config.limit,
            "seed": config.seed,
            "questions": len(pool),
        },
        "generation": {
            "temperature": config.temperature,
            "top_p": config.top_p,
            "top_k": config.top_k,
            "max_new_tokens": config.max_new_tokens,
            "seed": config.seed,
            "seeding": "per question and sample: sha256(seed, question_id, j)",
        },
        "judging": {"compare_mode": config.compare_mode, "keep_distinct": config.keep_distinct},
        LIMITS_KEY: limits_record(config.sql_limits()),
        "prompt": {
            "sample_rows": prompt_config.sample_rows,
            "max_value_chars": prompt_config.max_value_chars,
        },
        "by_difficulty": {
            d: {name: c.get(name, 0) for name in CLASSES} for d, c in sorted(by_difficulty.items())
        },
        "histogram": _histogram(ordered, config.num_samples),
        "time": {
            "started_at": started_at,
            "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "wall_seconds": round(time.perf_counter() - started, 2),
            "questions_sampled": generated,
            "questions_resumed": reused,
        },
        "outputs": {
            "band": str(band_dir),
            "results": str(out / RESULTS_FILE),
            "report": str(out / REPORT_FILE),
        },
    }
    write_atomic(out / REPORT_FILE, json.dumps(report, indent=2) + "\n")
    logger.info(
        "pass-rate filter: %s (K=%d, band %s < p < %s)",
        line,
        config.num_samples,
        config.pass_rate_low,
        config.pass_rate_high,
    )
    return report
