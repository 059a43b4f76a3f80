"""The evaluation's settings: the slices (:class:`BenchmarkSpec`) and :class:`EvalConfig`, read from a recipe
by :func:`load_eval_config`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..data.benchmarks import REGISTRY, get_benchmark
from ..data.config import BenchmarkArguments, BenchmarkEntry
from ..data.prompts import PromptArguments
from ..errors import UsageError
from ..filtering.config import FilterConfig, check_sampling
from ..generation.loading import InferenceArguments, _is_int
from ..recipes import parse_recipe
from ..run.artifacts import check_folder_to_write
from ..run.layout import EVAL_RESULTS

if TYPE_CHECKING:  # pragma: no cover
    from ..generation import GenerationConfig

POLICIES: tuple[str, str] = ("sft", "grpo")
"""The two policies compared, in order: ``a`` (the reference) and ``b``; ΔEX is ``grpo - sft``."""

RESULTS_FILE = EVAL_RESULTS
"""The results file in ``output_dir`` (named in :mod:`slmsql_hub.run.layout`, with ``PREDICTIONS_DIR``, where the
per-question predictions go: ``<output_dir>/predictions/<benchmark_key>.jsonl``)."""

def eval_benchmarks() -> tuple[str, ...]:
    """The registered benchmarks :class:`EvalConfig` can evaluate on (those with held-out ``eval_splits``).

    Example:

    ```python
    >>> from slmsql_hub.evaluation.config import eval_benchmarks
    >>> eval_benchmarks()[:4]
    ('spider', 'bird', 'world', 'bird_mini_dev')

    ```
    """
    return tuple(name for name, entry in REGISTRY.items() if entry.eval_splits)


SC_KEYS = "eval-sc"
"""The key namespace of the maj@K pass's samples (``self_consistency``): sample ``j`` of question ``q`` is seeded
from ``sample_seed(seed, q, j, namespace=SC_KEYS)``, never a seed of the filter's or the diagnosis's; both
policies draw with the same seeds (paired noise)."""

class BenchmarkSpec(BenchmarkEntry):
    """One benchmark slice to evaluate: a ``benchmarks`` entry (``NAME:SPLIT[:LIMIT]``) that is a held-out split.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import BenchmarkSpec
    >>> spec = BenchmarkSpec.parse("spider:dev:200")
    >>> spec.key, spec.limit, spec.mode
    ('spider_dev', 200, 'spider')
    >>> BenchmarkSpec.parse("world:rl_pool")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmark 'world:rl_pool': evaluate world on dev or test or probe_same or probe_cross or probe_control, not 'rl_pool' (training splits say nothing about held-out accuracy)

    ```
    """

    @classmethod
    def parse(cls, text: str) -> BenchmarkSpec:
        """Read ``NAME:SPLIT[:LIMIT]`` (:meth:`BenchmarkEntry.parse`) and check it is an evaluation slice."""
        entry = BenchmarkEntry.parse(text)
        splits = get_benchmark(entry.name).eval_splits
        if not splits:
            raise UsageError(
                f"benchmark {text!r}: cannot evaluate on {entry.name!r} (a training pool: it has no held-out "
                f"split); choose one of {', '.join(eval_benchmarks())}"
            )
        if entry.split not in splits:
            raise UsageError(
                f"benchmark {text!r}: evaluate {entry.name} on {' or '.join(splits)}, not "
                f"{entry.split!r} (training splits say nothing about held-out accuracy)"
            )
        return cls(*entry)

    @property
    def key(self) -> str:
        """The slice's key in ``eval_results.json`` and its predictions file name: ``<name>_<split>``."""
        return f"{self.name}_{self.split}"

    @property
    def mode(self) -> str:
        """The benchmark's comparison semantics, its registry entry's ``compare_mode`` (``spider``, ``bird``)."""
        return get_benchmark(self.name).compare_mode.value

    @property
    def breakdown(self) -> str:
        """What the benchmark's ``difficulty`` column holds: ``hardness`` or ``difficulty``."""
        return get_benchmark(self.name).breakdown


@dataclass
class EvalConfig(PromptArguments, BenchmarkArguments, InferenceArguments):
    """Everything ``slmsql eval`` needs. ``benchmarks`` are held-out slices ``NAME:SPLIT[:LIMIT]``, each needing
    its root; decoding is greedy; ``dataset_ids`` override the registry's Hub dataset ids.
    ``self_consistency: K`` (0: off) adds execution-majority EX over K keyed samples per question at
    ``temperature`` / ``top_p`` / ``top_k`` (:mod:`slmsql_hub.evaluation.self_consistency`).

    Example:

    ```python
    >>> from slmsql_hub.evaluation import EvalConfig
    >>> config = EvalConfig(model_name_or_path="outputs/quickstart/base", sft_adapter="outputs/quickstart/sft/stage2",
    ...                     grpo_adapter="outputs/quickstart/grpo", world_root="outputs/quickstart/world",
    ...                     output_dir="outputs/quickstart/eval")
    >>> [spec.key for spec in config.benchmark_specs()]
    ['world_dev', 'world_test']
    >>> EvalConfig(model_name_or_path="m", sft_adapter="a", grpo_adapter="b", output_dir="o",
    ...            benchmarks=["spider:dev:200"])
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmark spider:dev:200 needs spider_root: set it to the spider folder (e.g. `spider_root: data/spider`)

    ```
    """

    sft_adapter: str | None = field(default=None, metadata={"help": "The SFT LoRA adapter (policy a)."})
    grpo_adapter: str | None = field(default=None, metadata={"help": "The GRPO LoRA adapter (policy b)."})
    sft_adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of sft_adapter; null: main."}
    )
    grpo_adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of grpo_adapter; null: main."}
    )
    benchmarks: list[str] = field(
        default_factory=lambda: ["world:dev", "world:test"],
        metadata={"help": "Slices: name:split[:limit], e.g. world:dev spider:dev:200 bird:dev:149."},
    )
    dataset_ids: list[str] = field(
        default_factory=list, metadata={"help": "benchmark=hub_id overrides of the recorded dataset ids."}
    )
    bootstrap_resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples (>= 10000)."})
    bootstrap_seed: int = field(default=0, metadata={"help": "Bootstrap seed."})
    self_consistency: int = field(
        default=0, metadata={"help": "K: maj@K over K keyed samples per question beside greedy EX (0: off)."}
    )
    temperature: float = field(default=1.0, metadata={"help": "maj@K sampling temperature (self_consistency > 0)."})
    top_p: float = field(default=1.0, metadata={"help": "maj@K nucleus sampling mass."})
    top_k: int = field(default=0, metadata={"help": "maj@K top-k sampling (0: off)."})

    key_namespace = SC_KEYS  # not a field: the maj@K pass never draws in another namespace

    def __post_init__(self) -> None:
        for name, example in (
            ("model_name_or_path", "outputs/quickstart/base"),
            ("sft_adapter", "outputs/quickstart/sft/stage2"),
            ("grpo_adapter", "outputs/quickstart/grpo"),
            ("output_dir", "outputs/quickstart/eval"),
        ):
            if not getattr(self, name):
                raise UsageError(f"{name} is not set: e.g. `{name}: {example}`")
        check_folder_to_write(self.output_dir)
        InferenceArguments.__post_init__(self)
        PromptArguments.__post_init__(self)
        if self.bootstrap_resamples < 10_000:
            raise UsageError(
                f"bootstrap_resamples must be >= 10000 for a stable 95% CI (it costs milliseconds); "
                f"got {self.bootstrap_resamples}"
            )
        # Not BenchmarkArguments.__post_init__: it allows one entry per benchmark, and eval takes world:dev AND
        # world:test; the slices are checked by benchmark_specs below (one per name and split).
        self._normalise()
        if isinstance(self.dataset_ids, str):
            self.dataset_ids = [self.dataset_ids]
        self.dataset_ids = [str(d).strip() for d in (self.dataset_ids or []) if str(d).strip()]
        self.benchmark_specs()  # validates every slice and its root
        self.root_map()
        self.dataset_id_map()
        if not _is_int(self.self_consistency) or self.self_consistency < 0 or self.self_consistency == 1:
            raise UsageError(
                f"self_consistency (K) must be 0 (off) or an integer >= 2 (a vote over K samples, e.g. 8); "
                f"got {self.self_consistency!r}"
            )
        if self.self_consistency:
            check_sampling(self.temperature, self.top_p, self.top_k)

    def benchmark_specs(self) -> list[BenchmarkSpec]:
        """The slices, parsed and checked: known benchmarks and splits, a root for each, no key twice."""
        if not self.benchmarks:
            raise UsageError("benchmarks is empty: list slices such as `benchmarks: [world:dev, world:test]`")
        specs = [BenchmarkSpec.parse(text) for text in self.benchmarks]
        seen: dict[str, str] = {}
        for text, spec in zip(self.benchmarks, specs):
            if spec.key in seen:
                raise UsageError(
                    f"benchmarks {seen[spec.key]!r} and {text!r} are both {spec.key}: evaluate each split once"
                )
            seen[spec.key] = text
            self.check_root(text, spec.name)
        return specs

    def dataset_id_map(self) -> dict[str, str | None]:
        """Each evaluable benchmark's Hub dataset id (its registry entry's), with the ``dataset_ids`` overrides."""
        ids = {name: REGISTRY[name].dataset_id for name in eval_benchmarks()}
        for item in self.dataset_ids:
            name, sep, repo_id = item.partition("=")
            name, repo_id = name.strip(), repo_id.strip()
            if not sep or not repo_id or get_benchmark(name).name not in ids:
                raise UsageError(
                    f"dataset_ids entry {item!r} must be benchmark=hub_id with benchmark one of "
                    f"{', '.join(ids)}, e.g. bird=my-org/bird-dev"
                )
            ids[get_benchmark(name).name] = repo_id
        return ids

    def adapters(self) -> dict[str, str]:
        """``{"sft": sft_adapter, "grpo": grpo_adapter}``, the names the base loads them under."""
        return {"sft": str(self.sft_adapter), "grpo": str(self.grpo_adapter)}

    def adapter_revisions(self) -> dict[str, str | None]:
        """``{"sft": sft_adapter_revision, "grpo": grpo_adapter_revision}``, keyed like :meth:`adapters`."""
        return {"sft": self.sft_adapter_revision, "grpo": self.grpo_adapter_revision}

    def generation_config(self) -> GenerationConfig:
        """Greedy decoding with this config's token budget and batch size."""
        from ..generation import GenerationConfig

        return GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            batch_size=self.batch_size,
            do_sample=False,
            seed=None,
            backend=self.backend,
        )

    @property
    def num_samples(self) -> int:
        """K of the maj@K pass (``self_consistency``), under the name the filter's sampling rule reads."""
        return self.self_consistency

    def sampling_config(self) -> GenerationConfig:
        """The maj@K pass's decoding: the filter's keyed sampling (its rule, not a copy) with K =
        ``self_consistency`` in the :data:`SC_KEYS` namespace. UsageError when ``self_consistency`` is 0."""
        if not self.self_consistency:
            raise UsageError("self_consistency is 0: set it to K >= 2 to sample for maj@K")
        return FilterConfig.generation_config(self)


def load_eval_config(
    config: str | os.PathLike | None = None, overrides: Sequence[str] = (), values: Mapping[str, Any] | None = None
) -> EvalConfig:
    """Read an :class:`EvalConfig` from a YAML recipe (``None``: defaults), typed ``values`` and ``--field value``
    overrides (later wins; :func:`~slmsql_hub.recipes.parse_recipe`)."""
    (parsed,) = parse_recipe((EvalConfig,), config, overrides, values)
    return parsed
