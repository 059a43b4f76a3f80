"""The diagnosis's settings: :class:`DiagnoseConfig`, read from a recipe by :func:`load_diagnose_config`.

Everything is checked here, before any data or model is loaded: a bad recipe is one line, exit 2.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.config import BenchmarkArguments
from ..data.prompts import PromptArguments
from ..data.sources import check_dataset_name
from ..errors import UsageError
from ..filtering.config import FilterConfig, check_sampling
from ..generation.loading import InferenceArguments, _is_int
from ..recipes import parse_recipe
from ..sql.compare import CompareMode

if TYPE_CHECKING:  # pragma: no cover
    from ..evaluation import BenchmarkSpec
    from ..generation import GenerationConfig

NAMESPACE = "diagnose"
"""The key namespace of the diagnosis's samples: sample ``j`` of question ``q`` is seeded from
``sample_seed(seed, q, j, namespace=NAMESPACE)``, so it never reuses a seed of the filter's (namespace ``filter``)."""



def sample_key(question_id: str) -> str:
    """The recorded sampler key of ``question_id`` in the diagnosis: the ONE place it is formed (its seeds come
    from the question id in the :data:`NAMESPACE` namespace).

    >>> sample_key("world-dev-7")
    'diagnose:world-dev-7'
    """
    return f"{NAMESPACE}:{question_id}"


def band_name(ref: str) -> str:
    """The slice name of a band: ``band`` for the filter's ``band`` folder, the folder's name when it starts with
    ``band_`` (a study's ``band/band_heldout``: the slice its report names), else ``band_<folder or repository
    name>``.

    >>> band_name("outputs/world/filter/band"), band_name("alice/world-band")
    ('band', 'band_world-band')
    >>> band_name("outputs/ablations/band/band_heldout")
    'band_heldout'
    """
    name = Path(str(ref).rstrip("/")).name
    return name if name == "band" or name.startswith("band_") else f"band_{name}"


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class DiagnoseConfig(PromptArguments, BenchmarkArguments, InferenceArguments):
    """Everything ``slmsql diagnose`` needs: a policy (base + ``adapter_path``), slices (``benchmarks`` as in
    ``slmsql eval``, and ``bands``: band folders or Hub dataset ids), K keyed samples per question, and optionally
    the ``training_band`` a GRPO run would use.

    Example:

    ```python
    >>> from slmsql_hub.diagnosis import DiagnoseConfig
    >>> config = DiagnoseConfig(model_name_or_path="outputs/world/base", adapter_path="outputs/world/sft_stage2",
    ...                         benchmarks=["world:dev"], world_root="outputs/world", output_dir="d")
    >>> [spec.key for spec in config.benchmark_specs()], config.num_samples
    (['world_dev'], 16)
    >>> DiagnoseConfig(model_name_or_path="m", benchmarks=[], output_dir="d")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: nothing to diagnose: list slices in benchmarks (e.g. world:dev) or bands (a band folder or Hub dataset id)

    ```
    """

    adapter_path: str | None = field(
        default=None, metadata={"help": "The policy's LoRA adapter (folder or Hub id); null: the base alone."}
    )
    adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of adapter_path; null: main."}
    )
    benchmarks: list[str] = field(
        default_factory=list,
        metadata={"help": "Evaluation slices as in slmsql eval: world:dev spider:dev:200 bird:dev:149."},
    )
    bands: list[str] = field(
        default_factory=list,
        metadata={"help": "More slices: band folders (slmsql filter) or Hub dataset ids, judged in compare_mode."},
    )
    training_band: str | None = field(
        default=None,
        metadata={"help": "The band a GRPO run would train on (folder or Hub id): where its errors occur."},
    )
    training_band_revision: str | None = field(
        default=None, metadata={"help": "Hub revision of training_band; null: main."}
    )
    num_samples: int = field(default=16, metadata={"help": "K: keyed samples per question."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (use the filter's)."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling mass."})
    top_k: int = field(default=0, metadata={"help": "Top-k sampling (0: off)."})
    compare_mode: str = field(default="bird", metadata={"help": "Comparison rule of the bands: bird or spider."})
    min_consistency: float = field(
        default=0.5, metadata={"help": "Least consistency for an error class to be predicted fixable."}
    )

    def __post_init__(self) -> None:
        for name, example in (("model_name_or_path", "outputs/world/base"), ("output_dir", "outputs/world/diagnosis")):
            if not getattr(self, name):
                raise UsageError(f"{name} is not set: e.g. `{name}: {example}`")
        InferenceArguments.__post_init__(self)
        PromptArguments.__post_init__(self)
        self.bands = _listed(self.bands)
        self._normalise()
        if not self.benchmarks and not self.bands:
            raise UsageError(
                "nothing to diagnose: list slices in benchmarks (e.g. world:dev) or bands (a band folder or Hub "
                "dataset id)"
            )
        if self.benchmarks:
            self.benchmark_specs()
        for ref in [*self.bands, *([self.training_band] if self.training_band else [])]:
            _check_band(ref)
        names = [spec.key for spec in self.benchmark_specs()] if self.benchmarks else []
        for ref in self.bands:
            if band_name(ref) in names:
                raise UsageError(
                    f"bands entry {ref!r} is named {band_name(ref)!r} like another slice; rename its folder"
                )
            names.append(band_name(ref))
        if not _is_int(self.num_samples) or self.num_samples < 2:
            raise UsageError(f"num_samples (K) must be an integer >= 2 (the issue's K is 16); got {self.num_samples!r}")
        check_sampling(self.temperature, self.top_p, self.top_k)
        self.compare_mode = CompareMode.parse(self.compare_mode).value
        if not _number(self.min_consistency) or not 0 <= self.min_consistency <= 1:
            raise UsageError(f"min_consistency must be a number in [0, 1]; got {self.min_consistency!r}")

    def benchmark_specs(self) -> list[BenchmarkSpec]:
        """The ``benchmarks`` slices parsed and checked as ``slmsql eval`` checks them (a root for each, no key
        twice)."""
        from ..evaluation import EvalConfig

        return EvalConfig.benchmark_specs(self)  # the same rule, not a copy of it

    def dataset_id_map(self) -> dict[str, str | None]:
        """The Hub dataset ids of the benchmarks (``slmsql eval``'s defaults: the registry's)."""
        from ..data.benchmarks import REGISTRY
        from ..evaluation import eval_benchmarks

        return {name: REGISTRY[name].dataset_id for name in eval_benchmarks()}

    key_namespace = NAMESPACE  # not a field: the diagnosis never draws in another namespace

    def generation_config(self, sampled: bool) -> GenerationConfig:
        """Greedy decoding as ``slmsql eval`` decodes (``sampled=False``), or K keyed samples per question as the
        filter draws them (``sampled=True``): their own rules, not copies."""
        from ..evaluation import EvalConfig

        return FilterConfig.generation_config(self) if sampled else EvalConfig.generation_config(self)


def _listed(value: object) -> list[str]:
    items = [value] if isinstance(value, str) else list(value or [])  # type: ignore[call-overload]
    return [str(item).strip() for item in items if str(item).strip()]


def _check_band(ref: str) -> None:
    """A band named by something that is neither a path nor a Hub dataset id: one line (a missing folder is
    :func:`~slmsql_hub.filtering.report.read_band`'s line, when the slices load, before the model)."""
    check_dataset_name(ref, "bands / training_band")


def load_diagnose_config(
    config: str | os.PathLike | None = None, overrides: Sequence[str] = ()
) -> DiagnoseConfig:
    """Read a :class:`DiagnoseConfig` from a YAML recipe and ``--field value`` overrides (which win)."""
    (parsed,) = parse_recipe((DiagnoseConfig,), config, overrides)
    return parsed
