"""The filter's settings: :class:`FilterConfig`, read from a recipe by :func:`load_filter_config`, and the
run folder's file names.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..configs import BenchmarkArguments, BenchmarkEntry, PromptArguments
from ..errors import UsageError
from ..model_refs import DTYPES
from ..sql.recipe_limits import SQLLimitsArguments

if TYPE_CHECKING:  # pragma: no cover
    from ..generation import GenerationConfig

RESULTS_FILE = "results.jsonl"
"""Per-question results, appended as they are computed (the resume log), rewritten in pool order at the end."""

STATE_FILE = "filter_config.json"
"""The configuration a run's results were produced with; a resume must match it."""

REPORT_FILE = "filter_report.json"
"""Counts per class, thresholds, policy, dataset, time and the pass-rate histogram."""

BAND_DIR = "band"
"""The band, saved with ``datasets.Dataset.save_to_disk``."""

_COMPARE_MODES = ("bird", "spider")

_BACKENDS = ("transformers", "vllm")

_HELD_OUT_WORLD_SPLITS = ("dev", "test")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class FilterConfig(PromptArguments, BenchmarkArguments, SQLLimitsArguments):
    """Everything ``slmsql filter`` needs: the policy, the pool, K, the thresholds, decoding and judging.

    Read from a flat YAML recipe plus ``--field value`` overrides with :func:`load_filter_config`. Validation
    here needs no network and reads no file, so a recipe for a model this machine cannot run still validates;
    paths are checked when the run starts.

    Each field's ``help`` says what it is; the contract beyond that: ``benchmarks`` is ONE
    ``NAME:SPLIT[:LIMIT]`` pool entry (the world's ``dev`` and ``test`` are refused: EX is measured on them;
    ``LIMIT`` draws a seeded subset after the adapter's SFT questions are left out); ``num_samples`` (K) is at
    least 2; the band is strictly between ``pass_rate_low`` and ``pass_rate_high``; sample ``j`` of a question is
    drawn from its own seed on either backend, so a resumed run draws the same samples. Set ``temperature`` and
    the ``sql_*`` limits as in the GRPO recipe.

    Example:

    ```python
    >>> from slmsql_hub.filtering import FilterConfig
    >>> config = FilterConfig(model_name_or_path="outputs/world/base", benchmarks=["world:rl_pool"],
    ...                       world_root="outputs/world", output_dir="outputs/world/filter")
    >>> config.num_samples, config.pass_rate_low, config.pass_rate_high
    (8, 0.2, 0.8)
    >>> FilterConfig(model_name_or_path="m", benchmarks=["world:rl_pool"], world_root="w", output_dir="o",
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
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})
    output_dir: str | None = field(default=None, metadata={"help": "Where results, band and report go."})
    overwrite: bool = field(
        default=False, metadata={"help": "Start over instead of resuming from results in output_dir."}
    )
    backend: str = field(
        default="transformers",
        metadata={"help": "Generation backend: transformers or vllm.", "choices": list(_BACKENDS)},
    )

    def __post_init__(self) -> None:
        if not self.model_name_or_path:
            raise UsageError(
                "model_name_or_path is not set: name the base model, e.g. `model_name_or_path: outputs/world/base` "
                "or `Qwen/Qwen2.5-Coder-1.5B-Instruct`"
            )
        if not self.output_dir:
            raise UsageError(
                "output_dir is not set: name the folder for the results, e.g. outputs/world/filter"
            )
        PromptArguments.__post_init__(self)
        BenchmarkArguments.__post_init__(self)
        entries = self.benchmark_entries()
        if len(entries) != 1:
            raise UsageError(
                f"benchmarks must name ONE pool to filter, e.g. `benchmarks: [world:rl_pool]` and "
                f"`world_root: outputs/world`; got {self.benchmarks or 'none'}"
            )
        (pool,) = entries
        if pool.name == "world" and pool.split in _HELD_OUT_WORLD_SPLITS:
            raise UsageError(
                f"the world's {pool.split} split is held out for evaluation; filter the GRPO pool instead "
                "(`benchmarks: [world:rl_pool]`)"
            )
        if self.backend not in _BACKENDS:
            raise UsageError(f"backend must be 'transformers' or 'vllm'; got {self.backend!r}")
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

    def generation_config(self) -> GenerationConfig:
        """The decoding settings as a :class:`~slmsql_hub.generation.GenerationConfig` (K samples, seeded)."""
        from ..generation import GenerationConfig

        return GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            temperature=float(self.temperature),
            top_p=float(self.top_p),
            top_k=self.top_k,
            do_sample=True,
            num_samples=self.num_samples,
            batch_size=self.batch_size,
            seed=self.seed,
            backend=self.backend,
        )

    @property
    def pool(self) -> BenchmarkEntry:
        """The one ``benchmarks`` entry: the pool's benchmark, split and ``limit``."""
        return self.benchmark_entries()[0]

    @property
    def pool_root(self) -> str:
        """The pool's benchmark folder (its ``<name>_root``)."""
        return str(self.root(self.pool.name))


def load_filter_config(
    config: str | os.PathLike | None = None, overrides: Sequence[str] = ()
) -> FilterConfig:
    """Read a :class:`FilterConfig` from a flat YAML recipe, then ``--field value`` overrides (which win).

    ``config`` ``None``: defaults and overrides only. Parsed by :func:`~slmsql_hub.configs.parse_recipe`: an
    unknown key or a bad value is one :class:`~slmsql_hub.errors.UsageError`.


    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.filtering import load_filter_config
    >>> recipe = pathlib.Path(tempfile.mkdtemp()) / "filter.yaml"
    >>> _ = recipe.write_text("model_name_or_path: outputs/world/base\\nbenchmarks: [world:rl_pool]\\n"
    ...                       "world_root: outputs/world\\noutput_dir: outputs/world/filter\\n")
    >>> load_filter_config(recipe, ["--num_samples", "4", "--temperature", "0.8"]).num_samples
    4

    ```
    """
    from ..configs import parse_recipe

    (parsed,) = parse_recipe((FilterConfig,), config, overrides)
    return parsed
