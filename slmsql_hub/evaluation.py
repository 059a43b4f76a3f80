"""``slmsql eval``: the SFT and the GRPO adapters on the same benchmark slices, with paired statistics.

For each benchmark slice (the world's ``dev`` and ``test``; Spider or BIRD layouts when given, as seeded
subsets such as the study's 149 BIRD / 200 Spider questions) the evaluation:

1. builds every prompt as training did (:class:`~slmsql_hub.prompts.PromptConfig`, read from each adapter's
   ``run_summary.json`` unless the config sets it),
2. generates greedily with the SFT adapter, then with the GRPO adapter, over ONE base model loaded once
   (:func:`~slmsql_hub.generation.load_policy` with both adapters, switched with
   :func:`~slmsql_hub.generation.use_adapter`),
3. judges both policies' answers in one sandbox batch, in the benchmark's own semantics (Spider: ``spider``;
   BIRD and the world: ``bird``),
4. reports EX per policy with breakdowns (by difficulty/hardness, by database; for the world the held-out
   database apart) through :mod:`slmsql_hub.ex_report`, and the paired comparison of GRPO against SFT
   (:func:`slmsql_hub.stats.paired_comparison`: ΔEX, paired bootstrap 95% CI, McNemar exact p, discordant
   counts, a verdict sentence).

Questions whose gold SQL fails are unscorable: left out of both policies' EX and of the paired statistics,
counted apart (``n_unscorable``), never scored 0.

Outputs in ``output_dir``: ``eval_results.json`` (the format the model card, the Space and ``slmsql push``
read; see :func:`run_eval`) and ``predictions/<benchmark_key>.jsonl`` (one line per question, both policies'
outputs, extracted SQL, correctness and verdicts).

The building blocks (:func:`load_slice`, :func:`build_prompts`, :func:`generate_and_judge`,
:func:`policy_scores`) are public so other loops (``benchmarks/measure_world_ex.py``) can share them.
Importing this module does no I/O and imports neither torch nor TRL.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from . import __version__
from .errors import UsageError
from .model_refs import DTYPES
from .prompts import build_prompts
from .run_files import write_atomic
from .sql.recipe_limits import LIMITS_KEY, SQLLimitsArguments, limits_record

if TYPE_CHECKING:  # pragma: no cover
    from .generation import Completion, GenerationConfig
    from .prompts import PromptConfig
    from .sql import Judge, Judgement, Sandbox

logger = logging.getLogger(__name__)

POLICIES: tuple[str, str] = ("sft", "grpo")
"""The two policies compared, in order: ``a`` (the reference) and ``b``; ΔEX is ``grpo - sft``."""

RESULTS_FILE = "eval_results.json"
"""The results file in ``output_dir``."""
PREDICTIONS_DIR = "predictions"
"""Where the per-question predictions go (``<output_dir>/predictions/<benchmark_key>.jsonl``)."""

EVAL_BENCHMARKS: tuple[str, ...] = ("world", "spider", "bird")
"""The benchmarks :class:`EvalConfig` can evaluate on."""

MODES: dict[str, str] = {"world": "bird", "spider": "spider", "bird": "bird"}
"""Each benchmark's own comparison semantics (Spider's test-suite rule; BIRD's set equality)."""

BREAKDOWNS: dict[str, str] = {"world": "hardness", "spider": "hardness", "bird": "difficulty"}
"""What each benchmark's ``difficulty`` column holds (Spider hardness or BIRD's labels)."""

DEFAULT_DATASET_IDS: dict[str, str] = {
    "world": "slmsql/world",
    "spider": "xlangai/spider",
    "bird": "birdsql/bird-dev",
}
"""The Hub dataset ids written into the results (and the model card's ``model-index``). BIRD's dev set has no
official Hub copy: set ``dataset_ids: [bird=<the copy you used>]``."""

_EVAL_SPLITS = {"world": ("dev", "test"), "spider": ("dev",), "bird": ("dev",)}
_ROOT_FIELDS = {"world": "world_dir", "spider": "spider_root", "bird": "bird_root"}


# ----------------------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark slice to evaluate: ``name:split`` or ``name:split:limit`` in a recipe.

    Args:
        name (`str`): ``world``, ``spider`` or ``bird``.
        split (`str`): ``dev`` (or the world's ``test``).
        limit (`int`, *optional*): a seeded subset of this many questions (``None``: the whole split).

    Example:

    ```python
    >>> from slmsql_hub.evaluation import BenchmarkSpec
    >>> spec = BenchmarkSpec.parse("spider:dev:200")
    >>> spec.key, spec.limit, spec.mode
    ('spider_dev', 200, 'spider')
    >>> BenchmarkSpec.parse("spider")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmark 'spider' must be name:split or name:split:limit, e.g. world:dev or spider:dev:200

    ```
    """

    name: str
    split: str
    limit: int | None = None

    @classmethod
    def parse(cls, text: str) -> BenchmarkSpec:
        """Read ``name:split[:limit]``."""
        parts = [part.strip() for part in str(text).split(":")]
        if len(parts) not in (2, 3) or not all(parts):
            raise UsageError(
                f"benchmark {text!r} must be name:split or name:split:limit, e.g. world:dev or spider:dev:200"
            )
        name, split = parts[0].lower(), parts[1]
        if name not in EVAL_BENCHMARKS:
            hint = " (SynSQL is a training pool)" if name == "synsql" else ""
            raise UsageError(
                f"benchmark {text!r}: unknown benchmark {name!r}{hint}; choose one of {', '.join(EVAL_BENCHMARKS)}"
            )
        if split not in _EVAL_SPLITS[name]:
            raise UsageError(
                f"benchmark {text!r}: evaluate {name} on {' or '.join(_EVAL_SPLITS[name])}, not {split!r} "
                "(training splits say nothing about held-out accuracy)"
            )
        limit = None
        if len(parts) == 3:
            try:
                limit = int(parts[2])
            except ValueError:
                limit = 0
            if limit < 1:
                raise UsageError(
                    f"benchmark {text!r}: the limit must be a positive integer, got {parts[2]!r}"
                )
        return cls(name=name, split=split, limit=limit)

    @property
    def key(self) -> str:
        """The slice's key in ``eval_results.json`` and its predictions file name: ``<name>_<split>``."""
        return f"{self.name}_{self.split}"

    @property
    def mode(self) -> str:
        """The benchmark's comparison semantics: ``spider`` for Spider, ``bird`` otherwise."""
        return MODES[self.name]


@dataclass
class EvalConfig(SQLLimitsArguments):
    """Everything ``slmsql eval`` needs: the base and the two adapters, the slices, decoding, judging, stats.

    Read from a flat YAML recipe plus ``--field value`` overrides with :func:`load_eval_config`. Validation
    here reads no file and touches no network, so a recipe for a model this machine cannot run still
    validates; paths are checked when the run starts.

    Args:
        model_name_or_path (`str`):
            The base model both adapters were trained on: a folder (``outputs/quickstart/base``) or a Hub id.
        sft_adapter (`str`):
            The SFT LoRA adapter (policy ``a``): a folder (``outputs/quickstart/sft/stage2``) or a Hub id.
        grpo_adapter (`str`):
            The GRPO LoRA adapter (policy ``b``): a folder (``outputs/quickstart/grpo``) or a Hub id.
        model_revision, sft_adapter_revision, grpo_adapter_revision (`str`, *optional*):
            Hub revisions (commit sha, tag or branch) of the base and of each adapter; ``None``: the main branch.
        tokenizer_name_or_path (`str`, *optional*):
            Where the tokenizer comes from; defaults to ``model_name_or_path``.
        dtype (`str`, defaults to `"auto"`):
            ``auto`` (bfloat16 on a GPU that has it, float32 otherwise), ``float32``, ``bfloat16``, ``float16``.
        device (`str`, *optional*):
            ``cuda``, ``cpu``...; defaults to CUDA when available.
        num_threads (`int`, *optional*):
            ``torch.set_num_threads`` for the run (``None``: torch's default).
        backend (`str`, defaults to `"transformers"`):
            ``transformers`` or ``vllm`` (needs ``pip install 'slmsql-hub[vllm]'``; checked when the run starts).
        benchmarks (`list[str]`, defaults to `["world:dev", "world:test"]`):
            The slices, each ``name:split`` or ``name:split:limit`` (a seeded subset): ``world:dev``,
            ``world:test``, ``spider:dev:200``, ``bird:dev:149``.
        world_dir (`str`, *optional*):
            The world folder (``slmsql world build --out``); needed by ``world:*`` slices.
        spider_root (`str`, *optional*):
            A Spider folder (``dev.json``, ``database/``); needed by ``spider:*`` slices.
        bird_root (`str`, *optional*):
            A BIRD folder (``dev.json``, ``dev_databases/``); needed by ``bird:*`` slices.
        seed (`int`, defaults to `0`):
            The seed of the ``limit`` subsets (the same seed always picks the same questions).
        skip_missing_db (`bool`, defaults to `False`):
            Drop questions whose database file is missing (logged with a count) instead of failing.
        dataset_ids (`list[str]`, defaults to `[]`):
            ``benchmark=hub_id`` overrides of :data:`DEFAULT_DATASET_IDS` (recorded for the model card).
        max_new_tokens (`int`, defaults to `256`):
            Most tokens per answer (greedy decoding).
        batch_size (`int`, defaults to `8`):
            Prompts per ``generate`` call.
        sql_timeout_s, sql_max_ops, sql_max_rows:
            The sandbox limits (:mod:`slmsql_hub.sql.recipe_limits`); set them as in the filter and GRPO recipes.
        timeout_s (`float`, *optional*):
            Deprecated name of ``sql_timeout_s`` (removed in the next release).
        sandbox_workers (`int`, *optional*):
            Sandbox worker processes (``None``: one per CPU core).
        keep_distinct (`bool`, defaults to `False`):
            Spider slices only: keep DISTINCT instead of removing it (the official evaluator removes it).
        prompt_sample_rows (`int`, *optional*):
            Sample rows per table in the schema; ``None`` reads each adapter's ``run_summary.json`` (what it
            was trained with), else 3.
        prompt_max_value_chars (`int`, *optional*):
            Longest sample value shown; ``None`` reads each adapter's ``run_summary.json``, else 40.
        bootstrap_resamples (`int`, defaults to `10000`):
            Paired bootstrap resamples for the CI of ΔEX (at least 10,000).
        bootstrap_seed (`int`, defaults to `0`):
            The bootstrap's seed.
        output_dir (`str`):
            Where ``eval_results.json`` and ``predictions/`` go.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import EvalConfig
    >>> config = EvalConfig(model_name_or_path="outputs/quickstart/base", sft_adapter="outputs/quickstart/sft/stage2",
    ...                     grpo_adapter="outputs/quickstart/grpo", world_dir="outputs/quickstart/world",
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

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Base model both adapters were trained on (folder or Hub id)."}
    )
    sft_adapter: str | None = field(default=None, metadata={"help": "The SFT LoRA adapter (policy a)."})
    grpo_adapter: str | None = field(default=None, metadata={"help": "The GRPO LoRA adapter (policy b)."})
    model_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of model_name_or_path; null: main."}
    )
    sft_adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of sft_adapter; null: main."}
    )
    grpo_adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of grpo_adapter; null: main."}
    )
    tokenizer_name_or_path: str | None = field(
        default=None, metadata={"help": "Tokenizer location; null uses the base model's."}
    )
    dtype: str = field(default="auto", metadata={"help": "Weights' dtype.", "choices": list(DTYPES)})
    device: str | None = field(default=None, metadata={"help": "cuda, cpu...; null picks CUDA when present."})
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})
    backend: str = field(
        default="transformers",
        metadata={"help": "Generation backend: transformers or vllm.", "choices": ["transformers", "vllm"]},
    )
    benchmarks: list[str] = field(
        default_factory=lambda: ["world:dev", "world:test"],
        metadata={"help": "Slices: name:split[:limit], e.g. world:dev spider:dev:200 bird:dev:149."},
    )
    world_dir: str | None = field(default=None, metadata={"help": "The world folder (slmsql world build)."})
    spider_root: str | None = field(default=None, metadata={"help": "Spider folder (dev.json, database/)."})
    bird_root: str | None = field(default=None, metadata={"help": "BIRD folder (dev.json, dev_databases/)."})
    seed: int = field(default=0, metadata={"help": "Seed of the limit subsets."})
    skip_missing_db: bool = field(
        default=False, metadata={"help": "Drop questions whose database is missing."}
    )
    dataset_ids: list[str] = field(
        default_factory=list, metadata={"help": "benchmark=hub_id overrides of the recorded dataset ids."}
    )
    max_new_tokens: int = field(default=256, metadata={"help": "Most tokens per answer (greedy)."})
    batch_size: int = field(default=8, metadata={"help": "Prompts per generate call."})
    timeout_s: float | None = field(default=None, metadata={"help": "Deprecated: use sql_timeout_s."})
    sandbox_workers: int | None = field(default=None, metadata={"help": "Sandbox processes (null: CPUs)."})
    keep_distinct: bool = field(default=False, metadata={"help": "Spider slices: keep DISTINCT."})
    prompt_sample_rows: int | None = field(
        default=None, metadata={"help": "Sample rows per table (null: each adapter's run_summary.json)."}
    )
    prompt_max_value_chars: int | None = field(
        default=None, metadata={"help": "Longest sample value (null: each adapter's run_summary.json)."}
    )
    bootstrap_resamples: int = field(default=10_000, metadata={"help": "Bootstrap resamples (>= 10000)."})
    bootstrap_seed: int = field(default=0, metadata={"help": "Bootstrap seed."})
    output_dir: str | None = field(default=None, metadata={"help": "Where eval_results.json goes."})

    def __post_init__(self) -> None:
        for name, example in (
            ("model_name_or_path", "outputs/quickstart/base"),
            ("sft_adapter", "outputs/quickstart/sft/stage2"),
            ("grpo_adapter", "outputs/quickstart/grpo"),
            ("output_dir", "outputs/quickstart/eval"),
        ):
            if not getattr(self, name):
                raise UsageError(f"{name} is not set: e.g. `{name}: {example}`")
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.backend not in ("transformers", "vllm"):
            raise UsageError(f"backend must be 'transformers' or 'vllm'; got {self.backend!r}")
        for name in ("max_new_tokens", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        for name in ("num_threads", "sandbox_workers"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"{name} must be >= 1, or null for the default; got {value}")
        self.resolve_sql_limits(deprecated_timeout="timeout_s")
        if self.prompt_sample_rows is not None and self.prompt_sample_rows < 0:
            raise UsageError(f"prompt_sample_rows must be >= 0, or null; got {self.prompt_sample_rows}")
        if self.prompt_max_value_chars is not None and self.prompt_max_value_chars < 1:
            raise UsageError(
                f"prompt_max_value_chars must be >= 1, or null; got {self.prompt_max_value_chars}"
            )
        if self.bootstrap_resamples < 10_000:
            raise UsageError(
                f"bootstrap_resamples must be >= 10000 for a stable 95% CI (it costs milliseconds); "
                f"got {self.bootstrap_resamples}"
            )
        if isinstance(self.benchmarks, str):
            self.benchmarks = [self.benchmarks]
        self.benchmarks = [str(b).strip() for b in (self.benchmarks or []) if str(b).strip()]
        if isinstance(self.dataset_ids, str):
            self.dataset_ids = [self.dataset_ids]
        self.dataset_ids = [str(d).strip() for d in (self.dataset_ids or []) if str(d).strip()]
        self.benchmark_specs()  # validates every slice and its root
        self.dataset_id_map()

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
            root_field = _ROOT_FIELDS[spec.name]
            if not getattr(self, root_field):
                raise UsageError(
                    f"benchmark {text} needs {root_field}: set it to the {spec.name} folder "
                    f"(e.g. `{root_field}: {'outputs/quickstart/world' if spec.name == 'world' else 'data/' + spec.name}`)"
                )
        return specs

    def dataset_id_map(self) -> dict[str, str]:
        """:data:`DEFAULT_DATASET_IDS` with the ``dataset_ids`` overrides applied."""
        ids = dict(DEFAULT_DATASET_IDS)
        for item in self.dataset_ids:
            name, sep, repo_id = item.partition("=")
            name, repo_id = name.strip().lower(), repo_id.strip()
            if not sep or name not in EVAL_BENCHMARKS or not repo_id:
                raise UsageError(
                    f"dataset_ids entry {item!r} must be benchmark=hub_id with benchmark one of "
                    f"{', '.join(EVAL_BENCHMARKS)}, e.g. bird=my-org/bird-dev"
                )
            ids[name] = repo_id
        return ids

    def adapters(self) -> dict[str, str]:
        """``{"sft": sft_adapter, "grpo": grpo_adapter}``, the names the base loads them under."""
        return {"sft": str(self.sft_adapter), "grpo": str(self.grpo_adapter)}

    def adapter_revisions(self) -> dict[str, str | None]:
        """``{"sft": sft_adapter_revision, "grpo": grpo_adapter_revision}``, keyed like :meth:`adapters`."""
        return {"sft": self.sft_adapter_revision, "grpo": self.grpo_adapter_revision}

    def generation_config(self) -> GenerationConfig:
        """Greedy decoding with this config's token budget and batch size."""
        from .generation import GenerationConfig

        return GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            batch_size=self.batch_size,
            do_sample=False,
            seed=None,
            backend=self.backend,
        )


def load_eval_config(config: str | os.PathLike | None = None, overrides: Sequence[str] = ()) -> EvalConfig:
    """Read an :class:`EvalConfig` from a flat YAML recipe, then ``--field value`` overrides (which win).

    The same parser as the training recipes (:func:`~slmsql_hub.training.configs.parse_recipe`): an unknown
    key or a bad value is one :class:`~slmsql_hub.errors.UsageError` naming the fix.

    Args:
        config: the YAML recipe (``None``: defaults and overrides only).
        overrides: command-line style arguments, e.g. ``["--max_new_tokens", "128"]``.

    Returns:
        `EvalConfig`: the validated config.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.evaluation import load_eval_config
    >>> recipe = pathlib.Path(tempfile.mkdtemp()) / "eval.yaml"
    >>> _ = recipe.write_text("model_name_or_path: out/base\\nsft_adapter: out/sft/stage2\\ngrpo_adapter: out/grpo\\n"
    ...                       "world_dir: out/world\\noutput_dir: out/eval\\n")
    >>> load_eval_config(recipe, ["--benchmarks", "world:dev:20"]).benchmarks
    ['world:dev:20']

    ```
    """
    from .training.configs import parse_recipe

    (parsed,) = parse_recipe((EvalConfig,), config, overrides)
    return parsed


# ----------------------------------------------------------------------------------------------------------
# Slices and prompts
# ----------------------------------------------------------------------------------------------------------


@dataclass
class EvalSlice:
    """One loaded benchmark slice.

    Args:
        spec (`BenchmarkSpec`): what was asked for.
        rows (`list[dict]`): the questions (:data:`~slmsql_hub.data.benchmarks.BENCHMARK_COLUMNS`).
        dataset_id (`str`): the Hub dataset id recorded for it.
        held_out_db (`str`, *optional*): the world's held-out database (``None`` elsewhere).
    """

    spec: BenchmarkSpec
    rows: list[dict]
    dataset_id: str
    held_out_db: str | None = None


def load_slice(spec: BenchmarkSpec, config: EvalConfig) -> EvalSlice:
    """Load one slice through :func:`~slmsql_hub.data.benchmarks.load_benchmark` (seeded ``limit`` subset).

    Args:
        spec: the slice.
        config: for the benchmark's root, the subset seed, ``skip_missing_db`` and the dataset ids.

    Returns:
        `EvalSlice`: the rows, plus the world's held-out database (from its ``world.json``).

    Raises:
        UsageError: a missing root, split or database, an empty slice, or repeated question ids.
    """
    from .data.benchmarks import load_benchmark

    root = getattr(config, _ROOT_FIELDS[spec.name])
    dataset = load_benchmark(
        spec.name,
        root,
        spec.split,
        limit=spec.limit,
        seed=config.seed,
        skip_missing_db=config.skip_missing_db,
    )
    rows = [dict(row) for row in dataset]
    if not rows:
        raise UsageError(f"benchmark {spec.key} under {root} has no questions to evaluate")
    ids = [row["question_id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise UsageError(f"benchmark {spec.key} under {root} repeats question ids; they must be unique")
    held_out = None
    if spec.name == "world":
        manifest = Path(root).expanduser() / "world.json"
        held_out = json.loads(manifest.read_text(encoding="utf-8")).get("held_out_db")
    return EvalSlice(
        spec=spec, rows=rows, dataset_id=config.dataset_id_map()[spec.name], held_out_db=held_out
    )


def resolve_prompt_config(
    adapter: str | os.PathLike | None, sample_rows: int | None = None, max_value_chars: int | None = None
) -> PromptConfig:
    """The prompt settings a policy is evaluated with: the given values, else its training's, else defaults.

    The adapter's ``run_summary.json`` (its ``prompt`` section, written by ``slmsql train sft`` and ``slmsql
    train grpo``) says how it was trained; a Hub adapter has none, and the defaults (3 rows, 40 chars) apply.

    Args:
        adapter: the adapter folder (or Hub id).
        sample_rows: overrides the sample rows per table.
        max_value_chars: overrides the longest sample value.

    Returns:
        `PromptConfig`: the settings.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import resolve_prompt_config
    >>> config = resolve_prompt_config("org/hub-adapter", sample_rows=0)
    >>> config.sample_rows, config.max_value_chars
    (0, 40)

    ```
    """
    from .prompts import PromptConfig

    trained: dict = {}
    summary_file = Path(adapter).expanduser() / "run_summary.json" if adapter else None
    if summary_file is not None and summary_file.is_file():
        try:
            trained = json.loads(summary_file.read_text(encoding="utf-8")).get("prompt") or {}
        except json.JSONDecodeError as err:
            raise UsageError(
                f"{summary_file} is not valid JSON ({err}); fix it or set prompt_sample_rows"
            ) from err
    if sample_rows is None:
        sample_rows = int(trained.get("sample_rows", 3))
    if max_value_chars is None:
        max_value_chars = int(trained.get("max_value_chars", 40))
    return PromptConfig(sample_rows=sample_rows, max_value_chars=max_value_chars)


# ----------------------------------------------------------------------------------------------------------
# Generation, judging and scores
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyOutput:
    """One policy's answer to one question and its judgement.

    Args:
        completion (`Completion`): the generated text, its token count and whether the turn ended.
        judgement (`Judgement`): the verdict (``correct`` is 1, 0 or ``None`` = unscorable).
    """

    completion: Completion
    judgement: Judgement


def generate_and_judge(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    prompts: Mapping[str | None, Sequence[Any]],
    judge: Judge,
    generation_config: GenerationConfig,
    *,
    progress: bool = True,
) -> dict[str | None, list[PolicyOutput]]:
    """Greedy answers of several adapters of one model to the same questions, judged in ONE sandbox batch.

    Each adapter is activated in turn with :func:`~slmsql_hub.generation.use_adapter` (``None`` runs the base
    alone); all answers are then judged together, so each gold query runs once (the sandbox deduplicates).

    Args:
        model: the policy from :func:`~slmsql_hub.generation.load_policy`, loaded with the adapters.
        tokenizer: its tokenizer.
        rows: the questions (``gold_sql`` and ``db_path`` used).
        prompts: per adapter name (``None``: base only), the prompts in row order.
        judge: the :class:`~slmsql_hub.sql.Judge` (its mode is the benchmark's).
        generation_config: greedy decoding settings.
        progress: show tqdm bars.

    Returns:
        Per adapter name, one :class:`PolicyOutput` per row, in order.
    """
    from .generation import generate_completions, use_adapter

    completions: dict[str | None, list[Completion]] = {}
    for name, policy_prompts in prompts.items():
        if len(policy_prompts) != len(rows):
            raise ValueError(f"{len(policy_prompts)} prompts for {len(rows)} rows (adapter {name!r})")
        logger.info("generating %d answers with %s", len(rows), name or "the base model alone")
        with use_adapter(model, name):
            grouped = generate_completions(
                model, tokenizer, policy_prompts, generation_config, progress=progress
            )
        completions[name] = [group[0] for group in grouped]
    names = list(completions)
    judgements = judge.judge_many(
        [c.text for name in names for c in completions[name]],
        [row["gold_sql"] for _ in names for row in rows],
        [row["db_path"] for _ in names for row in rows],
        progress="judge" if progress else False,
    )
    n = len(rows)
    return {
        name: [PolicyOutput(c, j) for c, j in zip(completions[name], judgements[k * n : (k + 1) * n])]
        for k, name in enumerate(names)
    }


def _group_scores(report: Any) -> dict[str, dict]:
    """``{level: {"n", "n_scorable", "correct", "ex"}}`` from an ExReport's levels (the ``all`` row left out)."""
    from .ex_report import ALL_LEVEL

    return {
        level.level: {
            "n": level.count,
            "n_scorable": level.scored,
            "correct": level.correct,
            "ex": level.execution_accuracy,
        }
        for level in report.levels
        if level.level != ALL_LEVEL
    }


def policy_scores(
    rows: Sequence[Mapping[str, Any]],
    outputs: Sequence[PolicyOutput],
    *,
    breakdown_by: str = "hardness",
    held_out_db: str | None = None,
    mode: str | None = None,
) -> dict:
    """One policy's EX on one slice with its breakdowns, built with :func:`~slmsql_hub.ex_report.build_ex_report`.

    Every group reports ``n`` (questions), ``n_scorable`` (EX's denominator), ``correct`` and ``ex``
    (``None`` when nothing in the group could be scored).

    Args:
        rows: the questions (``difficulty``, ``db_id`` and ``gold_sql`` used).
        outputs: the policy's :class:`PolicyOutput` per row.
        breakdown_by: ``hardness`` or ``difficulty`` (what the ``difficulty`` column holds).
        held_out_db: the world's held-out database: adds ``held_out_db`` and ``seen_dbs`` groups.
        mode: the comparison mode, for the record.

    Returns:
        `dict`: ``ex``, ``correct``, ``n_scorable``, ``verdicts``, ``by_difficulty``, ``by_db`` (and
        ``held_out_db``/``seen_dbs``), ``mean_completion_tokens``, ``finished_share``.
    """
    from .ex_report import build_ex_report, example_levels

    judgements = [o.judgement for o in outputs]
    _, levels = example_levels(
        [row["gold_sql"] for row in rows], [row.get("difficulty") or None for row in rows]
    )
    by_level = build_ex_report(judgements, levels=levels, breakdown_by=breakdown_by, mode=mode)
    by_db = build_ex_report(judgements, levels=[row["db_id"] for row in rows], breakdown_by="db", mode=mode)
    counts = by_level.counts
    tokens = [o.completion.num_tokens for o in outputs]
    scores: dict[str, Any] = {
        "ex": counts.execution_accuracy,
        "correct": counts.num_correct,
        "n_scorable": counts.num_scored,
        "verdicts": dict(counts.verdicts),
        "breakdown_by": breakdown_by,
        "by_difficulty": _group_scores(by_level),
        "by_db": _group_scores(by_db),
    }
    if held_out_db is not None:
        split = build_ex_report(
            judgements, levels=["held_out" if row["db_id"] == held_out_db else "seen" for row in rows]
        )
        groups = _group_scores(split)
        empty = {"n": 0, "n_scorable": 0, "correct": 0, "ex": None}
        scores["held_out_db"] = {"db_id": held_out_db, **groups.get("held_out", empty)}
        scores["seen_dbs"] = groups.get("seen", empty)
    scores["mean_completion_tokens"] = sum(tokens) / len(tokens) if tokens else 0.0
    scores["finished_share"] = sum(o.completion.finished for o in outputs) / len(outputs) if outputs else 0.0
    return scores


def prediction_records(
    rows: Sequence[Mapping[str, Any]], outputs: Mapping[str, Sequence[PolicyOutput]]
) -> list[dict]:
    """The lines of ``predictions/<key>.jsonl``: the question, then per policy its output, SQL, verdict.

    Per policy ``<p>``: ``<p>_output`` (the raw answer), ``<p>_sql`` (the SQL extracted from it, ``None``
    when there was none), ``<p>_correct`` (1 / 0 / ``None`` = unscorable), ``<p>_verdict``, ``<p>_error``
    and ``<p>_num_tokens``.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import PolicyOutput, prediction_records
    >>> from slmsql_hub.generation import Completion
    >>> from slmsql_hub.sql import ExecStatus, Judgement, Verdict
    >>> row = {"question_id": "q1", "db_id": "pets", "question": "How many?", "gold_sql": "SELECT 1",
    ...        "difficulty": "easy"}
    >>> out = PolicyOutput(Completion("SELECT 1", 4, True), Judgement(Verdict.CORRECT, "SELECT 1", ExecStatus.OK, ExecStatus.OK))
    >>> record = prediction_records([row], {"sft": [out]})[0]
    >>> record["sft_sql"], record["sft_correct"], record["sft_verdict"]
    ('SELECT 1', 1, 'correct')

    ```
    """
    records = []
    for index, row in enumerate(rows):
        record = {
            "question_id": row["question_id"],
            "db_id": row["db_id"],
            "question": row["question"],
            "evidence": row.get("evidence") or "",
            "gold_sql": row["gold_sql"],
            "difficulty": row.get("difficulty") or None,
        }
        for name, policy_outputs in outputs.items():
            output = policy_outputs[index]
            judgement = output.judgement
            record.update(
                {
                    f"{name}_output": output.completion.text,
                    f"{name}_sql": judgement.pred_sql,
                    f"{name}_correct": judgement.correct,
                    f"{name}_verdict": judgement.verdict.value,
                    f"{name}_error": judgement.error,
                    f"{name}_num_tokens": output.completion.num_tokens,
                }
            )
        records.append(record)
    return records


# ----------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------


def _config_record(config: EvalConfig) -> dict:
    """The resolved config as a recipe-shaped mapping (every value is already YAML/JSON-safe)."""
    return dataclasses.asdict(config)


def run_eval(config: EvalConfig, *, policy: tuple[Any, Any] | None = None, progress: bool = True) -> dict:
    """Evaluate the SFT and GRPO adapters on every slice and write ``eval_results.json`` and the predictions.

    ``eval_results.json`` (the shared run-folder contract)::

        {"created_at", "slmsql_hub_version", "config": {...resolved...},
         "policies": {"sft": {"base_model", "adapter"}, "grpo": {...}},
         "prompt": {"sft": {"sample_rows", "max_value_chars"}, "grpo": {...}},
         "limits": {"timeout_s", "max_ops", "max_rows", ...},
         "significance_rule": "...", "time": {"wall_seconds"},
         "benchmarks": {"<name>_<split>": {
             "benchmark", "split", "limit", "seed", "dataset_id", "mode", "breakdown_by", "held_out_db",
             "n", "n_scorable", "n_unscorable",
             "policies": {"sft": {"ex", "correct", "n_scorable", "verdicts", "by_difficulty", "by_db",
                                  ["held_out_db", "seen_dbs"], "mean_completion_tokens", "finished_share"},
                          "grpo": {...}},
             "comparison": {"a", "b", "ex_a", "ex_b", "delta_ex", "ci95", "bootstrap_resamples",
                            "bootstrap_seed", "mcnemar_p", "discordant": {"a_only", "b_only"}, "n",
                            "significant", "rule", "verdict", "summary"},
             "predictions_file": "predictions/<name>_<split>.jsonl"}}}

    Args:
        config (`EvalConfig`): the run's settings.
        policy (`tuple`, *optional*): an already loaded ``(model, tokenizer)`` whose PEFT adapters are named
            ``sft`` and ``grpo``; ``None`` loads ``config.model_name_or_path`` with both adapters once.
        progress (`bool`, defaults to `True`): show tqdm bars.

    Returns:
        `dict`: what was written to ``eval_results.json``.

    Raises:
        UsageError: missing data, model or adapters, or a slice with no scorable question.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import EvalConfig, run_eval
    >>> run_eval(EvalConfig(model_name_or_path="m", sft_adapter="a", grpo_adapter="b", output_dir="o",
    ...                     world_dir="/nowhere"))
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: world root is not a directory: /nowhere

    ```
    """
    from .sql import Judge, Sandbox
    from .stats import SIGNIFICANCE_RULE, paired_comparison

    started = time.perf_counter()
    from .training.common import loaded_revisions

    created_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    slices = [load_slice(spec, config) for spec in config.benchmark_specs()]
    adapters = config.adapters()
    prompt_configs = {
        name: resolve_prompt_config(path, config.prompt_sample_rows, config.prompt_max_value_chars)
        for name, path in adapters.items()
    }
    if len(set(prompt_configs.values())) > 1:
        logger.warning(
            "the adapters were trained with different prompt settings (%s); each is evaluated with its own",
            {name: (c.sample_rows, c.max_value_chars) for name, c in prompt_configs.items()},
        )
    generation_config = config.generation_config()
    if config.num_threads is not None:
        import torch

        torch.set_num_threads(config.num_threads)
    if policy is None:
        from .generation import load_policy

        loaded = load_policy(
            config.model_name_or_path,
            adapters=adapters,
            tokenizer=config.tokenizer_name_or_path,
            dtype=config.dtype,
            device=config.device,
            backend=config.backend,
            revision=config.model_revision,
            adapter_revisions=config.adapter_revisions(),
        )
        # the vLLM backend returns one VLLMPolicy that tokenizes for itself
        policy = (loaded, None) if config.backend == "vllm" else loaded
    model, tokenizer = policy
    out = Path(str(config.output_dir)).expanduser()
    (out / PREDICTIONS_DIR).mkdir(parents=True, exist_ok=True)
    a_name, b_name = POLICIES
    benchmarks: dict[str, dict] = {}
    limits = config.sql_limits()
    with Sandbox(limits, workers=config.sandbox_workers) as sandbox:
        schema_cache: dict = {}
        for piece in tqdm(slices, desc="eval slices", unit="slice", disable=not progress or len(slices) < 2):
            spec, rows = piece.spec, piece.rows
            logger.info("%s: %d questions, %s mode", spec.key, len(rows), spec.mode)
            judge = Judge(
                sandbox=sandbox, mode=spec.mode, keep_distinct=config.keep_distinct and spec.mode == "spider"
            )
            prompts = {
                name: build_prompts(rows, prompt_configs[name], sandbox, schema_cache) for name in POLICIES
            }
            outputs = generate_and_judge(
                model, tokenizer, rows, prompts, judge, generation_config, progress=progress
            )
            correct = {name: [o.judgement.correct for o in outputs[name]] for name in POLICIES}
            n_unscorable = sum(1 for value in correct[a_name] if value is None)
            if n_unscorable == len(rows):
                raise UsageError(
                    f"{spec.key}: none of the {len(rows)} gold queries ran (every example is unscorable); "
                    f"check the databases under {getattr(config, _ROOT_FIELDS[spec.name])}"
                )
            if n_unscorable:
                logger.warning(
                    "%s: %d of %d questions are unscorable (their gold SQL failed); left out of EX and the "
                    "paired statistics",
                    spec.key,
                    n_unscorable,
                    len(rows),
                )
            comparison = paired_comparison(
                correct[a_name],
                correct[b_name],
                a_name=a_name,
                b_name=b_name,
                resamples=config.bootstrap_resamples,
                seed=config.bootstrap_seed,
            )
            predictions_file = f"{PREDICTIONS_DIR}/{spec.key}.jsonl"
            records = prediction_records(rows, outputs)
            write_atomic(
                out / predictions_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            )
            benchmarks[spec.key] = {
                "benchmark": spec.name,
                "split": spec.split,
                "limit": spec.limit,
                "seed": config.seed,
                "dataset_id": piece.dataset_id,
                "mode": spec.mode,
                "keep_distinct": config.keep_distinct if spec.mode == "spider" else None,
                "breakdown_by": BREAKDOWNS[spec.name],
                "held_out_db": piece.held_out_db,
                "n": len(rows),
                "n_scorable": len(rows) - n_unscorable,
                "n_unscorable": n_unscorable,
                "policies": {
                    name: policy_scores(
                        rows,
                        outputs[name],
                        breakdown_by=BREAKDOWNS[spec.name],
                        held_out_db=piece.held_out_db,
                        mode=spec.mode,
                    )
                    for name in POLICIES
                },
                "comparison": comparison.to_dict(),
                "predictions_file": predictions_file,
            }
            logger.info("%s: %s", spec.key, comparison.summary)
    results = {
        "created_at": created_at,
        "slmsql_hub_version": __version__,
        "config": _config_record(config),
        "policies": {
            name: {
                "base_model": str(config.model_name_or_path),
                "adapter": adapters[name],
                **loaded_revisions(
                    config.model_name_or_path,
                    config.model_revision,
                    adapters[name],
                    config.adapter_revisions()[name],
                ),
            }
            for name in POLICIES
        },
        "prompt": {
            name: {"sample_rows": c.sample_rows, "max_value_chars": c.max_value_chars}
            for name, c in prompt_configs.items()
        },
        LIMITS_KEY: limits_record(limits),
        "significance_rule": SIGNIFICANCE_RULE,
        "time": {"wall_seconds": round(time.perf_counter() - started, 3)},
        "benchmarks": benchmarks,
    }
    write_atomic(out / RESULTS_FILE, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    current = {bench["predictions_file"] for bench in benchmarks.values()}
    for stale in sorted((out / PREDICTIONS_DIR).glob("*.jsonl")):
        if f"{PREDICTIONS_DIR}/{stale.name}" not in current:
            # an earlier run's slice: removed so the folder (shipped with the model) matches the results
            logger.warning("removing %s: not a slice of this evaluation", stale)
            stale.unlink()
    logger.info("wrote %s", out / RESULTS_FILE)
    return results


def read_eval_results(path: str | os.PathLike) -> dict:
    """Read an ``eval_results.json`` (or the folder holding it), with one clear error when it is not one.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import read_eval_results
    >>> read_eval_results("/nowhere/eval")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: no eval_results.json at /nowhere/eval/eval_results.json; run `slmsql eval --config ...` first

    ```
    """
    target = Path(path).expanduser()
    if target.is_dir() or target.suffix != ".json":
        target = target / RESULTS_FILE
    if not target.is_file():
        raise UsageError(f"no {RESULTS_FILE} at {target}; run `slmsql eval --config ...` first")
    try:
        results = json.loads(target.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UsageError(f"{target} is not valid JSON ({err}); rerun `slmsql eval`") from err
    if not isinstance(results, dict) or "benchmarks" not in results:
        raise UsageError(f"{target} has no 'benchmarks' section: it is not an slmsql eval results file")
    return results


def summary_lines(results: Mapping[str, Any]) -> list[str]:
    """A short text summary of ``eval_results.json``: per slice, both policies' EX and the verdict.

    Example:

    ```python
    >>> from slmsql_hub.evaluation import summary_lines
    >>> results = {"benchmarks": {"world_dev": {"n": 4, "n_unscorable": 0, "mode": "bird",
    ...     "policies": {"sft": {"ex": 0.5, "correct": 2, "n_scorable": 4}, "grpo": {"ex": 0.75, "correct": 3, "n_scorable": 4}},
    ...     "comparison": {"summary": "no significant difference: ΔEX = +25.0 points, 95% CI [0.0, +75.0], p = 1.00, n = 4"}}}}
    >>> print("\\n".join(summary_lines(results)))
    world_dev (4 questions, bird): sft EX 50.0% (2/4) | grpo EX 75.0% (3/4)
      no significant difference: ΔEX = +25.0 points, 95% CI [0.0, +75.0], p = 1.00, n = 4

    ```
    """
    from .ex_report import format_percent

    lines = []
    for key, bench in results.get("benchmarks", {}).items():
        unscorable = f", {bench['n_unscorable']} unscorable" if bench.get("n_unscorable") else ""
        parts = []
        for name, scores in bench["policies"].items():
            ex = scores.get("ex")
            shown = "n/a" if ex is None else f"{format_percent(ex, 1)}%"
            parts.append(f"{name} EX {shown} ({scores['correct']}/{scores['n_scorable']})")
        lines.append(f"{key} ({bench['n']} questions{unscorable}, {bench['mode']}): " + " | ".join(parts))
        lines.append(f"  {bench['comparison']['summary']}")
    return lines
