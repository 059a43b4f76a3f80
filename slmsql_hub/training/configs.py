"""Configuration of ``slmsql train base``, ``slmsql train sft`` and ``slmsql train grpo``.

As in open-r1, each run is three dataclasses that one flat YAML recipe fills (read with
:func:`slmsql_hub.recipes.parse_recipe`; ``--field value`` overrides win):

- ``sft``: :class:`SFTScriptArguments` (data and prompt), :class:`ModelArguments` (base model and LoRA) and
  :class:`SFTTrainingConfig` (a ``trl.SFTConfig`` that adds the stage and the adapter stage 2 continues);
- ``base``: :class:`BaseScriptArguments` (the world and the tokenizer), :class:`TinyModelArguments` (the
  tiny Qwen2's shape) and :class:`BaseTrainingConfig` (``transformers.TrainingArguments`` + block length);
- ``grpo``: :class:`GRPOScriptArguments` (the SFT ones; prompts default to the adapter's), :class:`ModelArguments`
  and :class:`GRPOTrainingConfig` (a ``trl.GRPOConfig`` that adds the SFT adapter to continue and the rewards).

Every dataclass checks itself in ``__post_init__`` and raises :class:`~slmsql_hub.errors.UsageError` naming
the fix; nothing here reads datasets or models, or touches the network. Paths are checked when a run starts.
Each field's meaning is its ``help`` metadata (what ``--help`` prints); the class docstrings add only the rest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, make_dataclass

from transformers import TrainingArguments
from trl import GRPOConfig, ModelConfig, SFTConfig

from ..data.benchmarks import get_benchmark
from ..data.config import BenchmarkArguments
from ..data.prompts import PromptArguments
from ..data.sources import check_dataset_name
from ..errors import UsageError
from ..generation.loading import HUB_KERNELS_HELP
from ..refs import DTYPES
from ..rewards import REWARDS, resolve_reward, reward_fields
from ..sql.compare import CompareMode
from ..sql.recipe_limits import SQLLimitsArguments


def _resolve_precision(config: TrainingArguments) -> None:
    """``bf16: null`` means auto: bf16 on a GPU that supports it, float32 elsewhere, so one recipe runs on either
    (TRL's bf16 default is refused by ``TrainingArguments`` on a machine without such a GPU)."""
    from transformers.utils import is_torch_bf16_gpu_available

    if config.bf16 is None:
        config.bf16 = bool(not config.fp16 and not config.use_cpu and is_torch_bf16_gpu_available())
    elif config.bf16 and not config.use_cpu and not is_torch_bf16_gpu_available():
        raise UsageError(
            "bf16: true needs a GPU with bfloat16 support and this machine has none; set `bf16: null` (auto) "
            "or `bf16: false`"
        )


def _check_reporters(report_to: str | list[str] | None) -> None:
    """A tracker named in ``report_to`` must be installed: one line naming the install, before any data loads."""
    import importlib.util

    reporters = [report_to] if isinstance(report_to, str) else list(report_to or [])
    packages = {"tensorboard": ("tensorboard", "tensorboardX"), "trackio": ("trackio",)}
    for name, modules in packages.items():
        if name in reporters and not any(importlib.util.find_spec(module) for module in modules):
            extra = " (or `pip install 'slmsql-hub[tracking]'`)" if name == "trackio" else ""
            raise UsageError(
                f"report_to: {name} needs the {name} package: `pip install {name}`{extra}, or drop it from report_to"
            )


_TRAINING_AT_LEAST: dict[str, float] = {
    "per_device_train_batch_size": 1,
    "per_device_eval_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "learning_rate": 0,
    "weight_decay": 0,
    "max_grad_norm": 0,
    "num_train_epochs": 0,
    "warmup_steps": 0,
    "adam_epsilon": 0,
    "dataloader_num_workers": 0,
    "seed": 0,
    "logging_steps": 0,
    "save_steps": 0,
}
"""The ``TrainingArguments`` numbers every training recipe checks up front (``transformers`` finds a negative
batch size only when the data loader is built, after the model and the data loaded)."""


def _check_training_numbers(config: TrainingArguments) -> None:
    """One :class:`UsageError` line for the first number of ``config`` out of range, before anything loads.

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> _check_training_numbers(SimpleNamespace(per_device_train_batch_size=-3))
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: per_device_train_batch_size must be >= 1; got -3

    ```
    """
    for name, low in _TRAINING_AT_LEAST.items():
        value = getattr(config, name, None)
        if isinstance(value, (int, float)) and not value >= low:  # `not >=` also refuses nan
            raise UsageError(f"{name} must be >= {low}; got {value}")
    max_steps = getattr(config, "max_steps", -1)
    if max_steps is not None and max_steps != -1 and max_steps < 1:
        raise UsageError(f"max_steps must be >= 1, or -1 to train num_train_epochs; got {max_steps}")
    for name in ("adam_beta1", "adam_beta2"):
        value = getattr(config, name, None)
        if value is not None and not 0 <= value < 1:
            raise UsageError(f"{name} must be in [0, 1); got {value}")


def _check_threads(num_threads: int | None) -> None:
    if num_threads is not None and num_threads < 1:
        raise UsageError(f"num_threads must be >= 1, or null to keep torch's default; got {num_threads}")


@dataclass
class SFTScriptArguments(BenchmarkArguments, PromptArguments):
    """What an SFT run trains on: ``dataset_paths`` (``save_to_disk`` folders or Hub dataset ids, at
    ``dataset_revision``, with ``question``, ``gold_sql``, optional ``evidence``, and ``schema`` or ``db_path``)
    then ``benchmarks``, concatenated; and how prompts are
    built (unset prompt fields take the defaults, 3 rows and 40 chars; evaluation must use the same values).

    Example:

    ```python
    >>> SFTScriptArguments(dataset_paths=["outputs/world/datasets/foundation"]).prompt_sample_rows
    3
    >>> SFTScriptArguments(dataset_paths=[])
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: nothing to train on: set dataset_paths to the dataset folder(s)...

    ```
    """

    dataset_paths: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Dataset folder(s) written with save_to_disk (e.g. outputs/world/datasets/foundation) or Hub "
            "dataset id(s) (e.g. alice/qwen-grpo-band, read with datasets.load_dataset, its databases downloaded)."
        },
    )
    dataset_revision: str | None = field(
        default=None,
        metadata={"help": "Hub revision (branch, tag or sha) of dataset_paths' Hub ids; null: main."},
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Keep only the first N (shuffled) examples; null keeps all."}
    )
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})

    def __post_init__(self) -> None:
        BenchmarkArguments.__post_init__(self)
        PromptArguments.__post_init__(self)
        if isinstance(self.dataset_paths, (str, os.PathLike)):
            self.dataset_paths = [str(self.dataset_paths)]
        self.dataset_paths = [str(p) for p in (self.dataset_paths or []) if str(p).strip()]
        for name in self.dataset_paths:
            check_dataset_name(name, "dataset_paths")
        if not self.dataset_paths and not self.benchmarks:
            raise UsageError(self._nothing_to_train_on)
        if self.max_train_samples is not None and self.max_train_samples < 1:
            raise UsageError(f"max_train_samples must be >= 1, or null for all; got {self.max_train_samples}")
        _check_threads(self.num_threads)
        self._check_stage_fields()

    _nothing_to_train_on = (
        "nothing to train on: set dataset_paths to the dataset folder(s), e.g. "
        "`dataset_paths: [outputs/world/datasets/foundation]` (build the world with `slmsql world build`), "
        "or benchmarks, e.g. `benchmarks: [bird:train, spider:train]` with bird_root and spider_root"
    )

    def _check_stage_fields(self) -> None:
        self.fill_prompt_defaults()

    def dataset_commits(self) -> dict[str, str | None]:
        """``{hub id: commit}`` of the ``dataset_paths`` that are Hub datasets, as loaded (read from the local
        cache after :func:`~slmsql_hub.training.common.load_datasets`); ``{}`` when all are folders."""
        from ..runtime import hub_commit

        return {
            name: hub_commit(name, self.dataset_revision, repo_type="dataset")
            for name in self.dataset_paths
            if not os.path.isdir(os.path.expanduser(name)) and check_dataset_name(name) == "hub"
        }

    def sources(self) -> list[str]:
        """The run's sources as the summary records them: dataset folders, then ``name=root:split`` entries."""
        return list(self.dataset_paths) + [
            f"{entry.name}={self.root(entry.name)}:{entry.split}" for entry in self.benchmark_entries()
        ]


@dataclass
class ModelArguments(ModelConfig):
    """``trl.ModelConfig`` (base model, dtype, LoRA) with the study's defaults (rank 32, alpha 64, every linear
    layer, LoRA only) plus ``adapter_revision`` and ``tokenizer_name_or_path``; :func:`trl.get_peft_config` turns
    it into the ``LoraConfig`` of a fresh adapter.

    Example:

    ```python
    >>> from trl import get_peft_config
    >>> config = get_peft_config(ModelArguments(model_name_or_path="Qwen/Qwen2.5-Coder-1.5B-Instruct"))
    >>> config.r, config.lora_alpha, config.target_modules
    (32, 64, 'all-linear')
    >>> ModelArguments(model_name_or_path="m", lora_alpha=0)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: lora_alpha must be > 0 (the study uses 64 with lora_r 32); got 0

    ```
    """

    model_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of model_name_or_path; null: main."}
    )
    use_peft: bool = field(default=True, metadata={"help": "Train a LoRA adapter (the only mode here)."})
    lora_r: int = field(default=32, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=64, metadata={"help": "LoRA alpha."})
    lora_target_modules: list[str] | None = field(
        default_factory=lambda: ["all-linear"], metadata={"help": "Modules to adapt ('all-linear' or names)."}
    )
    adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of adapter_path; null: main."}
    )
    use_kernels: bool = field(default=False, metadata={"help": HUB_KERNELS_HELP})
    tokenizer_name_or_path: str | None = field(
        default=None, metadata={"help": "Tokenizer location; null: the adapter's, else the model's."}
    )

    def __post_init__(self) -> None:
        if not self.model_name_or_path:
            raise UsageError(
                "model_name_or_path is not set: name the base model, e.g. `model_name_or_path: outputs/world/base` "
                "(from `slmsql train base`) or `Qwen/Qwen2.5-Coder-1.5B-Instruct`"
            )
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if not self.use_peft or self.load_in_4bit or self.load_in_8bit:
            raise UsageError("this project trains LoRA adapters in full precision: keep use_peft: true and no load_in_*bit")
        if self.lora_r < 1:
            raise UsageError(f"lora_r must be >= 1 (the study uses 32); got {self.lora_r}")
        if self.lora_alpha <= 0:
            raise UsageError(f"lora_alpha must be > 0 (the study uses 64 with lora_r 32); got {self.lora_alpha}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise UsageError(f"lora_dropout must be in [0, 1); got {self.lora_dropout}")
        modules = [self.lora_target_modules] if isinstance(self.lora_target_modules, str) else self.lora_target_modules
        modules = [str(m) for m in (modules or []) if str(m).strip()]
        if not modules:
            raise UsageError("lora_target_modules is empty: use ['all-linear'] or name the modules to adapt")
        if "all-linear" in modules and len(modules) > 1:
            raise UsageError("lora_target_modules: 'all-linear' already covers every linear layer; list it alone")
        if "lm_head" in modules:
            raise UsageError("lora_target_modules must not include lm_head (TRL cannot train an adapter on it)")
        # PEFT reads a string as a regular expression: only 'all-linear' may be one; names stay a list.
        self.lora_target_modules = "all-linear" if modules == ["all-linear"] else modules
        super().__post_init__()
        if isinstance(self.lora_target_modules, str) and self.lora_target_modules != "all-linear":
            self.lora_target_modules = [self.lora_target_modules]  # TRL turns a one-item list into a string

    def torch_dtype(self):
        """The ``dtype`` argument for ``from_pretrained`` (``"auto"`` or a ``torch.dtype``)."""
        if self.dtype == "auto":
            return "auto"
        import torch

        return getattr(torch, self.dtype)


@dataclass
class _CheckpointingAlias:
    """TRL defaults the deprecated ``gradient_checkpointing`` alias to true, which would override a recipe's
    ``activation_checkpointing``; unset, the recipe's ``activation_checkpointing`` decides."""

    gradient_checkpointing: bool | None = field(
        default=None,
        metadata={"help": "Deprecated alias of activation_checkpointing (null: use activation_checkpointing)."},
    )


@dataclass
class SFTTrainingConfig(_CheckpointingAlias, SFTConfig):
    """``trl.SFTConfig`` plus the study's two stages: ``stage: 1`` attaches a fresh LoRA adapter, ``stage: 2``
    continues the stage-1 adapter at ``adapter_path`` (required there, refused in stage 1).

    Example:

    ```python
    >>> SFTTrainingConfig(output_dir="out/sft2", stage=2, report_to="none")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: stage 2 continues the stage-1 adapter: set adapter_path to the stage-1 output ...

    ```
    """

    stage: int = field(
        default=1, metadata={"help": "1: new LoRA adapter; 2: continue the adapter at adapter_path."}
    )
    adapter_path: str | None = field(
        default=None,
        metadata={"help": "Stage 2 only: the stage-1 output folder holding the adapter to continue."},
    )

    def __post_init__(self) -> None:
        if self.stage not in (1, 2):
            raise UsageError(f"stage must be 1 (new adapter) or 2 (continue adapter_path); got {self.stage}")
        if self.stage == 2 and not self.adapter_path:
            raise UsageError(
                "stage 2 continues the stage-1 adapter: set adapter_path to the stage-1 output folder "
                "(e.g. `adapter_path: outputs/world/sft_stage1`)"
            )
        if self.stage == 1 and self.adapter_path:
            raise UsageError(
                f"adapter_path ({self.adapter_path}) is only read by stage 2: remove it, or set `stage: 2` to "
                "continue that adapter"
            )
        if self.assistant_only_loss:
            raise UsageError(
                "assistant_only_loss is not used here: the data is prompt-completion, so the loss already covers "
                "the answer only (completion_only_loss); remove assistant_only_loss"
            )
        if self.max_length is not None and self.max_length < 16:
            raise UsageError(f"max_length must be >= 16 tokens, or null; got {self.max_length}")
        _check_training_numbers(self)
        _check_reporters(self.report_to)
        _resolve_precision(self)
        super().__post_init__()


@dataclass
class BaseScriptArguments(PromptArguments):
    """The world the tiny base model and its tokenizer learn from (the corpus: :mod:`slmsql_hub.training.base`).
    ``paired_splits`` is a subset of ``corpus_splits`` (``None``: all); the prompt fields should match the SFT
    recipes.

    Example:

    ```python
    >>> BaseScriptArguments(world_dir="outputs/world").corpus_splits
    ['foundation', 'grounding']
    >>> BaseScriptArguments(world_dir="w", corpus_splits=["foundation", "dev"])
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: corpus_splits must not include dev or test (their SQL is what EX is measured on)...

    ```
    """

    world_dir: str | None = field(
        default=None, metadata={"help": "The world folder (slmsql world build --out)."}
    )
    corpus_splits: list[str] = field(
        default_factory=lambda: ["foundation", "grounding"],
        metadata={"help": "World splits the corpus is drawn from (never dev/test)."},
    )
    paired_splits: list[str] | None = field(
        default=None,
        metadata={"help": "Corpus splits whose questions and SQL appear together, as `-- question` + SQL."},
    )
    corpus_repeats: int = field(default=4, metadata={"help": "Copies of each schema text in the corpus."})
    vocab_size: int = field(default=3072, metadata={"help": "Tokenizer vocabulary size."})
    tokenizer_min_frequency: int = field(default=2, metadata={"help": "Fewest occurrences for a BPE merge."})
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})

    def __post_init__(self) -> None:
        if not self.world_dir:
            raise UsageError(
                "world_dir is not set: point it at the folder from `slmsql world build --out DIR` "
                "(e.g. `world_dir: outputs/world`)"
            )
        if isinstance(self.corpus_splits, str):
            self.corpus_splits = [self.corpus_splits]
        if not self.corpus_splits:
            raise UsageError("corpus_splits is empty: use e.g. [foundation, grounding]")
        held_out = sorted({"dev", "test"} & set(self.corpus_splits))
        if held_out:
            raise UsageError(
                "corpus_splits must not include dev or test (their SQL is what EX is measured on); "
                f"remove {', '.join(held_out)}"
            )
        if self.paired_splits is None:
            self.paired_splits = list(self.corpus_splits)
        if isinstance(self.paired_splits, str):
            self.paired_splits = [self.paired_splits]
        stray = sorted(set(self.paired_splits) - set(self.corpus_splits))
        if stray:
            raise UsageError(
                f"paired_splits must be among corpus_splits {self.corpus_splits}; remove {', '.join(stray)} "
                "or add it to corpus_splits"
            )
        if self.corpus_repeats < 1:
            raise UsageError(f"corpus_repeats must be >= 1; got {self.corpus_repeats}")
        if not 300 <= self.vocab_size <= 65536:
            raise UsageError(
                f"vocab_size must be between 300 and 65536 (the world uses ~3k); got {self.vocab_size}"
            )
        if self.tokenizer_min_frequency < 1:
            raise UsageError(f"tokenizer_min_frequency must be >= 1; got {self.tokenizer_min_frequency}")
        PromptArguments.__post_init__(self)
        self.fill_prompt_defaults()
        _check_threads(self.num_threads)


@dataclass
class TinyModelArguments:
    """The shape of the tiny ``Qwen2ForCausalLM`` trained from scratch. ``copy_circuit`` (see
    :func:`~slmsql_hub.training.base.install_copy_circuit`) needs ``num_key_value_heads == num_attention_heads``,
    two layers or more and tied embeddings.

    Example:

    ```python
    >>> TinyModelArguments(hidden_size=96, num_attention_heads=4, num_key_value_heads=4).head_dim
    24
    >>> TinyModelArguments(hidden_size=100, num_attention_heads=3)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: num_attention_heads (3) must divide hidden_size (100)

    ```
    """

    hidden_size: int = field(default=128, metadata={"help": "Residual width."})
    intermediate_size: int = field(default=384, metadata={"help": "MLP width."})
    num_hidden_layers: int = field(default=4, metadata={"help": "Decoder layers."})
    num_attention_heads: int = field(default=4, metadata={"help": "Query heads."})
    num_key_value_heads: int = field(default=4, metadata={"help": "Key/value heads."})
    max_position_embeddings: int = field(default=1024, metadata={"help": "Longest sequence."})
    rope_theta: float = field(default=1000000.0, metadata={"help": "RoPE base (Qwen2.5's 1e6)."})
    tie_word_embeddings: bool = field(
        default=True, metadata={"help": "Tie input embeddings and output head."}
    )
    init_seed: int = field(default=0, metadata={"help": "Seed of the random initialisation."})
    copy_circuit: bool = field(
        default=True,
        metadata={
            "help": "Start with a previous-token head (layer 0) and an induction head (layer 1) wired in."
        },
    )

    def __post_init__(self) -> None:
        for name in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1; got {getattr(self, name)}")
        if self.hidden_size % self.num_attention_heads:
            raise UsageError(
                f"num_attention_heads ({self.num_attention_heads}) must divide hidden_size ({self.hidden_size})"
            )
        if self.num_key_value_heads < 1 or self.num_attention_heads % self.num_key_value_heads:
            raise UsageError(
                f"num_key_value_heads ({self.num_key_value_heads}) must divide num_attention_heads "
                f"({self.num_attention_heads})"
            )
        if (self.hidden_size // self.num_attention_heads) % 2:
            raise UsageError(
                f"the head size hidden_size/num_attention_heads = {self.hidden_size // self.num_attention_heads} "
                "must be even (RoPE rotates pairs)"
            )
        if self.max_position_embeddings < 16:
            raise UsageError(f"max_position_embeddings must be >= 16; got {self.max_position_embeddings}")
        if self.copy_circuit:
            if self.num_hidden_layers < 2:
                raise UsageError(
                    "copy_circuit needs num_hidden_layers >= 2 (an induction head reads layer 0)"
                )
            if self.num_key_value_heads != self.num_attention_heads:
                raise UsageError(
                    "copy_circuit needs num_key_value_heads == num_attention_heads (each circuit head owns its "
                    "keys and values); set them equal or copy_circuit: false"
                )
            if not self.tie_word_embeddings:
                raise UsageError(
                    "copy_circuit reads tokens back through the tied output head: keep tie_word_embeddings"
                )
            if (
                self.hidden_size % 2
                or -(-(self.hidden_size // 2) // self.head_dim) > self.num_attention_heads
            ):
                raise UsageError(
                    f"copy_circuit carries half of hidden_size ({self.hidden_size // 2} dims) through heads of "
                    f"{self.head_dim}: use more heads or copy_circuit: false"
                )
            if self.head_dim < 16:
                raise UsageError(f"copy_circuit needs heads of at least 16 dims; got {self.head_dim}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass
class BaseTrainingConfig(TrainingArguments):
    """``transformers.TrainingArguments`` plus ``max_length``, the block length the corpus is packed into. (The
    plain ``Trainer`` pretrains: every position is scored, and TRL's fused LM head would cost more than the model.)

    Example:

    ```python
    >>> BaseTrainingConfig(output_dir="out/base", max_length=8, report_to="none")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: max_length is the pretraining block length and must be >= 16 tokens; got 8

    ```
    """

    max_length: int = field(default=256, metadata={"help": "Tokens per pretraining block."})

    def __post_init__(self) -> None:
        if self.max_length is None or self.max_length < 16:
            raise UsageError(
                f"max_length is the pretraining block length and must be >= 16 tokens; got {self.max_length}"
            )
        _check_training_numbers(self)
        _check_reporters(self.report_to)
        _resolve_precision(self)
        super().__post_init__()


SFT_ARGUMENTS = (SFTScriptArguments, ModelArguments, SFTTrainingConfig)
"""The dataclasses of ``slmsql train sft``, in the order :func:`parse_recipe` returns them."""

BASE_ARGUMENTS = (BaseScriptArguments, TinyModelArguments, BaseTrainingConfig)


@dataclass
class GRPOScriptArguments(SFTScriptArguments):
    """:class:`SFTScriptArguments` for GRPO: rows need ``db_path`` (the rewards execute against it), benchmarks
    must name a training split, and unset prompt fields take the SFT adapter's values.

    Example:

    ```python
    >>> GRPOScriptArguments(dataset_paths="outputs/world/band").dataset_paths
    ['outputs/world/band']
    >>> GRPOScriptArguments(benchmarks=["spider:dev"], spider_root="data/spider")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmarks entry spider:dev names dev, what EX is measured on; train on a training split...

    ```
    """

    _nothing_to_train_on = (
        "no training prompts: set dataset_paths (e.g. `dataset_paths: [outputs/world/datasets/grounding]` "
        "or the filter's band folder) or benchmarks (e.g. `benchmarks: [spider:train]` with spider_root)"
    )

    def _check_stage_fields(self) -> None:
        for entry in self.benchmark_entries():
            if entry.split in get_benchmark(entry.name).eval_splits:
                raise UsageError(
                    f"benchmarks entry {entry} names {entry.split}, what EX is measured on; train on a training "
                    "split (Spider/BIRD/SynSQL: train; the world: grounding or rl_pool)"
                )


@dataclass
class _AdapterAndRewards:
    """GRPO's first own fields; the rewards' parameters follow (from the reward table), then the rest, so a
    resolved ``config.yaml`` lists them in one order."""

    adapter_path: str | None = field(
        default=None,
        metadata={
            "help": "The SFT adapter to continue (folder or Hub id); null attaches a fresh LoRA adapter."
        },
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["execution", "format"],
        metadata={
            "help": f"Reward functions: {', '.join(REWARDS)} (random: a control), or a dotted path "
            "module:function with TRL's signature (prompts, completions, **kwargs)."
        },
    )


_RewardParameters = make_dataclass(
    "_RewardParameters",
    [(name, type(default), field(default=default, metadata={"help": text})) for name, default, text in reward_fields()],
)
_RewardParameters.__module__ = __name__
_RewardParameters.__doc__ = "The recipe fields of the rewards' parameters, from :data:`slmsql_hub.rewards.REWARDS`."


@dataclass
class GRPOTrainingConfig(
    _RewardParameters, _AdapterAndRewards, _CheckpointingAlias, GRPOConfig, SQLLimitsArguments
):
    """``trl.GRPOConfig`` plus the study's setup: ``adapter_path`` (the SFT adapter, a folder or Hub id, loaded
    **trainable**; ``None``: a fresh LoRA adapter), the rewards named in ``reward_funcs`` (weighted by TRL's
    ``reward_weights``: names from :data:`slmsql_hub.rewards.REWARDS`, whose parameters are fields here, or dotted
    paths, imported when the recipe is read) and the sandbox limits they judge under (set as in the filter and
    eval recipes).

    Example:

    ```python
    >>> config = GRPOTrainingConfig(output_dir="out/grpo", num_generations=4, per_device_train_batch_size=4,
    ...                             report_to="none", use_cpu=True)
    >>> config.reward_funcs, config.reward_weights, config.reward_correct, config.format_reward_value
    (['execution', 'format'], None, 1.0, 0.2)
    >>> GRPOTrainingConfig(output_dir="out/grpo", reward_funcs=["execution", "speed"], report_to="none",
    ...                    use_cpu=True)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: unknown reward function speed; choose from execution, format, result_f1, random or give a dotted path module:function

    ```
    """

    reward_compare_mode: str = field(
        default="bird",
        metadata={"help": "Result comparison rule: bird or spider."},
    )
    sandbox_workers: int | None = field(
        default=None, metadata={"help": "Sandbox worker processes per training process; null: the default."}
    )
    min_relative_update: float = field(
        default=1e-6,
        metadata={"help": "Warn when the adapter's update is below this share of the weights' norm (0: never)."},
    )

    def __post_init__(self) -> None:
        if isinstance(self.reward_funcs, str):
            self.reward_funcs = [self.reward_funcs]
        if not isinstance(self.reward_funcs, (list, tuple, type(None))):
            raise UsageError(
                f"reward_funcs must be a list of reward names, e.g. `reward_funcs: [execution, format]`; got "
                f"{self.reward_funcs!r}"
            )
        self.reward_funcs = [str(name).strip() for name in (self.reward_funcs or []) if str(name).strip()]
        if not self.reward_funcs:
            raise UsageError("reward_funcs is empty: use e.g. `reward_funcs: [execution, format]`")
        for spec in self.reward_funcs:
            resolve_reward(spec)
        if len(set(self.reward_funcs)) != len(self.reward_funcs):
            raise UsageError(f"reward_funcs lists a reward twice: {self.reward_funcs}; give each once")
        if self.reward_weights is not None and len(self.reward_weights) != len(self.reward_funcs):
            raise UsageError(
                f"reward_weights has {len(self.reward_weights)} value(s) for {len(self.reward_funcs)} reward "
                f"function(s) ({', '.join(self.reward_funcs)}); give one weight per reward, or null for all 1.0"
            )
        self.reward_compare_mode = CompareMode.parse(self.reward_compare_mode).value
        self.resolve_sql_limits()
        if not self.min_relative_update >= 0:
            raise UsageError(f"min_relative_update must be >= 0 (0 never warns); got {self.min_relative_update}")
        if self.sandbox_workers is not None and self.sandbox_workers < 1:
            raise UsageError(
                f"sandbox_workers must be >= 1, or null for the default; got {self.sandbox_workers}"
            )
        if self.temperature <= 0:
            raise UsageError(
                f"temperature must be > 0 (GRPO samples; the study uses 0.8); got {self.temperature}"
            )
        if self.beta < 0 or self.epsilon < 0:
            raise UsageError(f"beta and epsilon must be >= 0; got beta={self.beta}, epsilon={self.epsilon}")
        if self.max_completion_length is not None and self.max_completion_length < 8:
            raise UsageError(f"max_completion_length must be >= 8 tokens; got {self.max_completion_length}")
        if self.num_iterations < 1:
            raise UsageError(f"num_iterations must be >= 1; got {self.num_iterations}")
        _check_training_numbers(self)
        import importlib.util

        if self.use_vllm and importlib.util.find_spec("vllm") is None:
            raise UsageError(
                "use_vllm: true needs vLLM: install it with `pip install 'slmsql-hub[vllm]'`, or set `use_vllm: false`"
            )
        _check_reporters(self.report_to)
        _resolve_precision(self)
        try:
            super().__post_init__()
        except ValueError as err:  # TRL's own consistency checks (batch sizes vs num_generations...)
            raise UsageError(f"{err}") from err


GRPO_ARGUMENTS = (GRPOScriptArguments, ModelArguments, GRPOTrainingConfig)
"""The dataclasses of ``slmsql train grpo``, in the order :func:`parse_recipe` returns them."""
