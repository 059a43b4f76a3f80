"""The filter's settings: :class:`FilterConfig`, read from a recipe by :func:`load_filter_config`, and the
run folder's file names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..data.config import BenchmarkArguments, BenchmarkEntry
from ..data.prompts import PromptArguments
from ..errors import UsageError
from ..generation.config import FILTER_KEYS, check_key_namespace
from ..generation.loading import InferenceArguments, _is_int
from ..recipes import parse_recipe
from ..run.artifacts import check_folder_to_write
from ..run.layout import FILTER_REPORT, FILTER_RESULTS, FILTER_STATE
from ..sql.compare import CompareMode, check_keep_distinct

if TYPE_CHECKING:  # pragma: no cover
    from ..generation import GenerationConfig

# The filter's files, named in run/layout.py: RESULTS_FILE holds per-question results, appended as they are computed
# (the resume log) and rewritten in pool order at the end; STATE_FILE the configuration they were produced with (a
# resume must match it); REPORT_FILE the counts per class, thresholds, policy, dataset, time and the pass-rate
# histogram. The band (``run.layout.BAND_DIR``) is saved with ``datasets.Dataset.save_to_disk``.
RESULTS_FILE, STATE_FILE, REPORT_FILE = FILTER_RESULTS, FILTER_STATE, FILTER_REPORT

_HELD_OUT_WORLD_SPLITS = ("dev", "test")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sampling(temperature: Any, top_p: Any, top_k: Any) -> None:
    """The keyed sampler's settings, checked (one UsageError line): temperature > 0, top_p in (0, 1], top_k >= 0.

    >>> check_sampling(0.0, 1.0, 0)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: temperature must be > 0 (the keyed sampler samples); got 0.0
    """
    if not _is_number(temperature) or not temperature > 0:
        raise UsageError(f"temperature must be > 0 (the keyed sampler samples); got {temperature!r}")
    if not _is_number(top_p) or not 0 < top_p <= 1:
        raise UsageError(f"top_p must be in (0, 1]; got {top_p!r}")
    if not _is_int(top_k) or top_k < 0:
        raise UsageError(f"top_k must be an integer >= 0 (0 turns it off); got {top_k!r}")


@dataclass
class FilterConfig(PromptArguments, BenchmarkArguments, InferenceArguments):
    """Everything ``slmsql filter`` needs. ``benchmarks`` is ONE ``NAME:SPLIT[:LIMIT]`` pool (never the world's
    dev or test); the band is strictly between ``pass_rate_low`` and ``pass_rate_high``.

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

    adapter_path: str | None = field(
        default=None, metadata={"help": "The SFT LoRA adapter (folder or Hub id); null samples the base."}
    )
    adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of adapter_path; null: main."}
    )
    num_samples: int = field(default=8, metadata={"help": "K: completions sampled per question."})
    pass_rate_low: float = field(default=0.2, metadata={"help": "p <= low is all_fail."})
    pass_rate_high: float = field(default=0.8, metadata={"help": "p >= high is all_pass."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling mass."})
    top_k: int = field(default=0, metadata={"help": "Top-k sampling (0: off)."})
    compare_mode: str = field(default="bird", metadata={"help": "Result comparison rule: bird or spider."})
    overwrite: bool = field(
        default=False, metadata={"help": "Start over instead of resuming from results in output_dir."}
    )
    key_namespace: str = field(
        default=FILTER_KEYS,
        metadata={"help": "Keyed sampling's namespace: another one draws fresh samples (the study's pass@k)."},
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
        check_folder_to_write(self.output_dir)
        InferenceArguments.__post_init__(self)
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
        self.compare_mode = CompareMode.parse(self.compare_mode).value
        check_keep_distinct(self.compare_mode, self.keep_distinct)
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
        check_sampling(self.temperature, self.top_p, self.top_k)
        check_key_namespace(self.key_namespace)

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
            key_namespace=self.key_namespace,
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
    config: str | os.PathLike | None = None, overrides: Sequence[str] = (), values: Mapping[str, Any] | None = None
) -> FilterConfig:
    """Read a :class:`FilterConfig` from a YAML recipe (``None``: defaults), typed ``values`` and ``--field value``
    overrides (later wins; :func:`~slmsql_hub.recipes.parse_recipe`)."""
    (parsed,) = parse_recipe((FilterConfig,), config, overrides, values)
    return parsed
