"""Configuration of ``slmsql train base``, ``slmsql train sft`` and ``slmsql train grpo``.

As in open-r1, each run is three dataclasses that one flat YAML recipe fills (read with
:func:`slmsql_hub.configs.parse_recipe`; ``--field value`` overrides win):

- ``sft``: :class:`SFTScriptArguments` (data and prompt), :class:`ModelArguments` (base model and LoRA) and
  :class:`SFTTrainingConfig` (a ``trl.SFTConfig`` that adds the stage and the adapter stage 2 continues);
- ``base``: :class:`BaseScriptArguments` (the world and the tokenizer), :class:`TinyModelArguments` (the
  tiny Qwen2's shape) and :class:`BaseTrainingConfig` (``transformers.TrainingArguments`` + block length);
- ``grpo``: :class:`GRPOScriptArguments` (the SFT ones; prompts default to the adapter's), :class:`ModelArguments`
  and :class:`GRPOTrainingConfig` (a ``trl.GRPOConfig`` that adds the SFT adapter to continue and the rewards).

Every dataclass checks itself in ``__post_init__`` and raises :class:`~slmsql_hub.errors.UsageError` naming
the fix; nothing here reads datasets or models, or touches the network. Paths are checked when a run starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from transformers import TrainingArguments
from trl import GRPOConfig, SFTConfig

from ..configs import (  # noqa: F401  (re-exported for callers of the old location)
    BenchmarkArguments,
    PromptArguments,
    RECIPE_KINDS,
    config_to_dict,
    describe_arguments,
    load_recipe,
    parse_recipe,
    recipe_kind,
    save_resolved_config,
)
from ..errors import UsageError
from ..model_refs import DTYPES
from ..sql.recipe_limits import SQLLimitsArguments


def _resolve_precision(config: TrainingArguments) -> None:
    """``bf16: null`` means auto: bf16 on a GPU that supports it, float32 elsewhere (CPU included).

    TRL defaults to bf16 everywhere, which ``TrainingArguments`` refuses on a machine without such a GPU;
    resolving it here lets one recipe validate and run on either.
    """
    from transformers.utils import is_torch_bf16_gpu_available

    if config.bf16 is None:
        config.bf16 = bool(not config.fp16 and not config.use_cpu and is_torch_bf16_gpu_available())
    elif config.bf16 and not config.use_cpu and not is_torch_bf16_gpu_available():
        raise UsageError(
            "bf16: true needs a GPU with bfloat16 support and this machine has none; set `bf16: null` (auto) "
            "or `bf16: false`"
        )


def _check_threads(num_threads: int | None) -> None:
    if num_threads is not None and num_threads < 1:
        raise UsageError(f"num_threads must be >= 1, or null to keep torch's default; got {num_threads}")


@dataclass
class SFTScriptArguments(BenchmarkArguments, PromptArguments):
    """What an SFT run trains on: saved datasets and/or benchmarks, and how prompts are built.

    Args:
        dataset_paths: datasets written with ``save_to_disk`` (the world's ``<world>/datasets/foundation`` for
            stage 1, ``.../grounding`` for stage 2), concatenated. Columns: ``question``, ``gold_sql``, optional
            ``evidence``, and ``schema`` or ``db_path`` (relative paths resolve against the dataset folder).
        benchmarks: ``NAME:SPLIT[:LIMIT]`` entries read from their release files (``<name>_root``), added after
            ``dataset_paths``; see :class:`~slmsql_hub.configs.BenchmarkArguments`.
        max_train_samples: keep only the first N examples after shuffling (``None``: all).
        prompt_sample_rows, prompt_max_value_chars: see :class:`~slmsql_hub.configs.PromptArguments`; SFT starts
            from a base model, so unset means the defaults (3, 40). Evaluation must use the same values.
        num_threads: ``torch.set_num_threads`` for the run (``None``: torch's default).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import SFTScriptArguments
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
        metadata={"help": "Dataset folder(s) written with save_to_disk (e.g. outputs/world/datasets/foundation)."},
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

    def sources(self) -> list[str]:
        """The run's sources as the summary records them: dataset folders, then ``name=root:split`` entries."""
        return list(self.dataset_paths) + [
            f"{entry.name}={self.root(entry.name)}:{entry.split}" for entry in self.benchmark_entries()
        ]

@dataclass
class ModelArguments:
    """The base model and the LoRA adapter trained on it.

    Args:
        model_name_or_path: a Hub id (``Qwen/Qwen2.5-Coder-1.5B-Instruct``) or a local folder (the world's
            ``outputs/world/base``).
        model_revision: the Hub revision (a commit sha, tag or branch) of ``model_name_or_path``; ``None``: the
            default branch as it is on the day (the run records the commit it got).
        adapter_revision: the Hub revision of the training config's ``adapter_path`` when that is a Hub id.
        tokenizer_name_or_path: where the tokenizer comes from (``None``: the model's).
        dtype: weights' dtype when loading: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        lora_r: LoRA rank (the study: 32).
        lora_alpha: LoRA scaling numerator (the study: 64).
        lora_dropout: dropout on the LoRA input.
        lora_target_modules: modules to adapt; ``["all-linear"]`` (the study) adapts every linear layer but the
            output head (q/k/v/o/gate/up/down on Qwen2).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import ModelArguments
    >>> ModelArguments(model_name_or_path="Qwen/Qwen2.5-Coder-1.5B-Instruct").peft_target_modules()
    'all-linear'
    >>> ModelArguments(model_name_or_path="m", lora_alpha=0)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: lora_alpha must be > 0 (the study uses 64 with lora_r 32); got 0

    ```
    """

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Base model: a Hub id or a local folder (e.g. outputs/world/base)."}
    )
    model_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of model_name_or_path; null: main."}
    )
    adapter_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of adapter_path; null: main."}
    )
    tokenizer_name_or_path: str | None = field(
        default=None, metadata={"help": "Tokenizer location; null uses the model's."}
    )
    dtype: str = field(default="float32", metadata={"help": "Weights' dtype.", "choices": list(DTYPES)})
    lora_r: int = field(default=32, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=64, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["all-linear"], metadata={"help": "Modules to adapt ('all-linear' or names)."}
    )

    def __post_init__(self) -> None:
        if not self.model_name_or_path:
            raise UsageError(
                "model_name_or_path is not set: name the base model, e.g. `model_name_or_path: outputs/world/base` "
                "(from `slmsql train base`) or `Qwen/Qwen2.5-Coder-1.5B-Instruct`"
            )
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.lora_r < 1:
            raise UsageError(f"lora_r must be >= 1 (the study uses 32); got {self.lora_r}")
        if self.lora_alpha <= 0:
            raise UsageError(
                f"lora_alpha must be > 0 (the study uses 64 with lora_r 32); got {self.lora_alpha}"
            )
        if not 0.0 <= self.lora_dropout < 1.0:
            raise UsageError(f"lora_dropout must be in [0, 1); got {self.lora_dropout}")
        if isinstance(self.lora_target_modules, str):
            self.lora_target_modules = [self.lora_target_modules]
        self.lora_target_modules = [str(m) for m in self.lora_target_modules if str(m).strip()]
        if not self.lora_target_modules:
            raise UsageError("lora_target_modules is empty: use ['all-linear'] or name the modules to adapt")
        if "all-linear" in self.lora_target_modules and len(self.lora_target_modules) > 1:
            raise UsageError(
                "lora_target_modules: 'all-linear' already covers every linear layer; list it alone"
            )
        if "lm_head" in self.lora_target_modules:
            raise UsageError(
                "lora_target_modules must not include lm_head (TRL cannot train an adapter on it)"
            )

    def peft_target_modules(self) -> str | list[str]:
        """``target_modules`` as PEFT wants it: the string ``"all-linear"`` or a list of module names."""
        if self.lora_target_modules == ["all-linear"]:
            return "all-linear"
        return list(self.lora_target_modules)

    def torch_dtype(self):
        """The ``dtype`` argument for ``from_pretrained`` (``"auto"`` or a ``torch.dtype``)."""
        if self.dtype == "auto":
            return "auto"
        import torch

        return getattr(torch, self.dtype)


@dataclass
class SFTTrainingConfig(SFTConfig):
    """``trl.SFTConfig`` plus the two-stage setup of the study.

    Stage 1 attaches a fresh LoRA adapter to the base model; stage 2 continues the SAME adapter (loaded
    trainable from ``adapter_path``, the stage-1 output folder) on the next dataset. Every other field is
    TRL's (``learning_rate``, ``num_train_epochs``, ``max_length``, ``output_dir``...). The loss covers the
    answer only: the data is conversational prompt-completion, for which TRL's ``completion_only_loss``
    applies by default.

    Args:
        stage: 1 (new adapter) or 2 (continue ``adapter_path``).
        adapter_path: the stage-1 output folder; required for stage 2, refused for stage 1.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import SFTTrainingConfig
    >>> SFTTrainingConfig(output_dir="out/sft2", stage=2, report_to="none")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: stage 2 continues the stage-1 adapter: set adapter_path to the stage-1 output ...

    ```
    """

    gradient_checkpointing: bool | None = field(
        default=None,
        metadata={
            "help": "Deprecated alias of activation_checkpointing (null: use activation_checkpointing)."
        },
    )
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
        _resolve_precision(self)
        super().__post_init__()


@dataclass
class BaseScriptArguments(PromptArguments):
    """The world the tiny base model and its tokenizer learn from.

    Args:
        world_dir: the folder written by ``slmsql world build --out DIR``.
        corpus_splits: the world's splits whose schemas, questions and SQL form the corpus (never dev/test;
            by default not rl_pool either, so GRPO's pass-rate filter meets questions the model never read).
        paired_splits: corpus splits whose questions and SQL appear together, as SQL written under a
            ``-- question`` comment (how a code model meets SQL in the wild); the other corpus splits
            contribute questions and SQL separately. A subset of ``corpus_splits`` (``None``: all of them). Pairs are what
            teach the tiny model to read a value in the question and copy it into the query.
        corpus_repeats: how many times each schema text appears in the corpus (schemas are few but long).
        vocab_size: tokenizer vocabulary size (bytes and special tokens included).
        tokenizer_min_frequency: the fewest occurrences a pair needs to become a token.
        prompt_sample_rows: sample rows per table in the schema texts (match the SFT recipes).
        prompt_max_value_chars: longest value shown in a sample row.
        num_threads: ``torch.set_num_threads`` for the run (``None``: torch's default).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import BaseScriptArguments
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
    """The shape of the tiny ``Qwen2ForCausalLM`` trained from scratch (same modules as Qwen2.5-Coder, so LoRA
    targets, chat template and generation follow the real path).

    Args:
        hidden_size: width of the residual stream.
        intermediate_size: width of the gated MLP.
        num_hidden_layers: decoder layers.
        num_attention_heads: query heads (must divide ``hidden_size``).
        num_key_value_heads: key/value heads (grouped-query attention; must divide the query heads).
        max_position_embeddings: longest sequence (RoPE).
        rope_theta: RoPE base (1e6, as Qwen2.5).
        tie_word_embeddings: share the input embedding and the output head (as Qwen2.5-1.5B does).
        init_seed: seed of the random initialisation.
        copy_circuit: wire a copy circuit into the initial weights (see
            :func:`~slmsql_hub.training.base.install_copy_circuit`): text-to-SQL copies values from the
            question, and a model this small does not grow induction heads in the tokens two CPU cores afford.
            Needs ``num_key_value_heads == num_attention_heads``, two layers or more, tied embeddings.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import TinyModelArguments
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
        """Size of one attention head."""
        return self.hidden_size // self.num_attention_heads


@dataclass
class BaseTrainingConfig(TrainingArguments):
    """``transformers.TrainingArguments`` for pretraining the tiny model on the world's text, plus the block
    length the corpus is packed into.

    Pretraining runs on the plain ``transformers.Trainer``: every position is scored, and on two CPU cores
    TRL's memory-saving fused LM head would cost more than the model itself.

    Args:
        max_length: tokens per training block (documents are packed end to end and cut into blocks).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import BaseTrainingConfig
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
        _resolve_precision(self)
        super().__post_init__()


SFT_ARGUMENTS = (SFTScriptArguments, ModelArguments, SFTTrainingConfig)
"""The dataclasses of ``slmsql train sft``, in the order :func:`parse_recipe` returns them."""

BASE_ARGUMENTS = (BaseScriptArguments, TinyModelArguments, BaseTrainingConfig)
# ----------------------------------------------------------------------------------------------------------
# slmsql train grpo
# ----------------------------------------------------------------------------------------------------------

REWARD_FUNCS = ("execution", "format", "result_f1")
"""The reward functions a GRPO recipe can name (see :mod:`slmsql_hub.rewards`)."""


@dataclass
class GRPOScriptArguments(SFTScriptArguments):
    """What a GRPO run trains on: :class:`SFTScriptArguments`, with two differences.

    Rows need ``db_path`` (the rewards execute against it), benchmarks must name a training split, and unset
    prompt fields take the values the SFT adapter was trained with (see
    :func:`~slmsql_hub.configs.resolve_prompt_config`).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOScriptArguments
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
            if entry.split in ("dev", "test"):
                raise UsageError(
                    f"benchmarks entry {entry} names {entry.split}, what EX is measured on; train on a training "
                    "split (Spider/BIRD/SynSQL: train; the world: grounding or rl_pool)"
                )


@dataclass
class GRPOTrainingConfig(GRPOConfig, SQLLimitsArguments):
    """``trl.GRPOConfig`` plus the study's setup: the SFT adapter to continue and the rewards to train on.

    With ``adapter_path`` set, the SFT adapter (a local folder or a Hub id such as
    ``Anurich/slmsql-qwen2.5-coder-1.5b``) is loaded **trainable** and GRPO continues it; without it, a fresh
    LoRA adapter (``lora_*`` of :class:`ModelArguments`) is attached to the base model. The rewards are
    :mod:`slmsql_hub.rewards` classes named in ``reward_funcs``, weighted by TRL's ``reward_weights``. Every
    other field is TRL's (``num_generations``, ``beta``, ``epsilon``, ``temperature``, ``learning_rate``...).

    Args:
        adapter_path: the SFT adapter to continue (``None``: a fresh LoRA adapter).
        reward_funcs: reward names, from ``execution``, ``format`` and ``result_f1``.
        reward_correct: execution reward of a correct query (the study: 1.0).
        reward_executes: execution reward of a query that runs but is wrong (the study: 0.1).
        reward_fails: execution reward of a query that fails, times out or is missing (the study: 0.0).
        format_reward_value: the format reward for a completion with a ```sql block (the study: 0.2).
        reward_compare_mode: ``bird`` (set equality) or ``spider`` (test-suite rule).
        sql_timeout_s, sql_max_ops, sql_max_rows: the sandbox limits the rewards judge under; set them as in the
            filter and eval recipes (see :mod:`slmsql_hub.sql.recipe_limits`).
        reward_timeout_s: deprecated name of ``sql_timeout_s`` (removed in the next release).
        reward_workers: sandbox worker processes per training process (``None``: the sandbox's default).
        min_relative_update: the ``adapter_update`` guard warns when the adapter's effective update, relative to
            the weights it adapts, ends below this (see :func:`~slmsql_hub.training.guards.adapter_update`).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOTrainingConfig
    >>> config = GRPOTrainingConfig(output_dir="out/grpo", num_generations=4, per_device_train_batch_size=4,
    ...                             report_to="none", use_cpu=True)
    >>> config.reward_funcs, config.reward_weights
    (['execution', 'format'], None)
    >>> GRPOTrainingConfig(output_dir="out/grpo", reward_funcs=["execution", "speed"], report_to="none",
    ...                    use_cpu=True)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: unknown reward function(s) speed; choose from execution, format, result_f1

    ```
    """

    gradient_checkpointing: bool | None = field(
        default=None,
        metadata={
            "help": "Deprecated alias of activation_checkpointing (null: use activation_checkpointing)."
        },
    )
    adapter_path: str | None = field(
        default=None,
        metadata={
            "help": "The SFT adapter to continue (folder or Hub id); null attaches a fresh LoRA adapter."
        },
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["execution", "format"],
        metadata={"help": "Reward functions: execution, format, result_f1."},
    )
    reward_correct: float = field(default=1.0, metadata={"help": "Execution reward of a correct query."})
    reward_executes: float = field(
        default=0.1, metadata={"help": "Execution reward of a wrong query that runs."}
    )
    reward_fails: float = field(
        default=0.0, metadata={"help": "Execution reward of a failing or missing query."}
    )
    format_reward_value: float = field(default=0.2, metadata={"help": "Format reward for a ```sql block."})
    reward_compare_mode: str = field(
        default="bird",
        metadata={"help": "Result comparison rule: bird or spider.", "choices": ["bird", "spider"]},
    )
    reward_timeout_s: float | None = field(
        default=None, metadata={"help": "Deprecated: use sql_timeout_s."}
    )
    reward_workers: int | None = field(
        default=None, metadata={"help": "Sandbox worker processes per training process; null: the default."}
    )
    min_relative_update: float = field(
        default=1e-6,
        metadata={"help": "Warn when the adapter's update is below this share of the weights' norm (0: never)."},
    )

    def __post_init__(self) -> None:
        if isinstance(self.reward_funcs, str):
            self.reward_funcs = [self.reward_funcs]
        self.reward_funcs = [str(name).strip() for name in (self.reward_funcs or []) if str(name).strip()]
        if not self.reward_funcs:
            raise UsageError("reward_funcs is empty: use e.g. `reward_funcs: [execution, format]`")
        unknown = [name for name in self.reward_funcs if name not in REWARD_FUNCS]
        if unknown:
            raise UsageError(
                f"unknown reward function(s) {', '.join(unknown)}; choose from {', '.join(REWARD_FUNCS)}"
            )
        if len(set(self.reward_funcs)) != len(self.reward_funcs):
            raise UsageError(f"reward_funcs lists a reward twice: {self.reward_funcs}; give each once")
        if self.reward_weights is not None and len(self.reward_weights) != len(self.reward_funcs):
            raise UsageError(
                f"reward_weights has {len(self.reward_weights)} value(s) for {len(self.reward_funcs)} reward "
                f"function(s) ({', '.join(self.reward_funcs)}); give one weight per reward, or null for all 1.0"
            )
        if self.reward_compare_mode not in ("bird", "spider"):
            raise UsageError(f"reward_compare_mode must be bird or spider; got {self.reward_compare_mode!r}")
        self.resolve_sql_limits(deprecated_timeout="reward_timeout_s")
        if not self.min_relative_update >= 0:
            raise UsageError(f"min_relative_update must be >= 0 (0 never warns); got {self.min_relative_update}")
        if self.reward_workers is not None and self.reward_workers < 1:
            raise UsageError(
                f"reward_workers must be >= 1, or null for the default; got {self.reward_workers}"
            )
        if self.num_generations is None or self.num_generations < 2:
            raise UsageError(
                f"num_generations must be >= 2 (GRPO compares the samples of one prompt; the study uses 8); "
                f"got {self.num_generations}"
            )
        if self.temperature <= 0:
            raise UsageError(
                f"temperature must be > 0 (GRPO samples; the study uses 0.8); got {self.temperature}"
            )
        if self.beta < 0 or self.epsilon < 0:
            raise UsageError(f"beta and epsilon must be >= 0; got beta={self.beta}, epsilon={self.epsilon}")
        if self.learning_rate <= 0:
            raise UsageError(f"learning_rate must be > 0; got {self.learning_rate}")
        if self.max_completion_length is not None and self.max_completion_length < 8:
            raise UsageError(f"max_completion_length must be >= 8 tokens; got {self.max_completion_length}")
        import importlib.util

        if self.use_vllm and importlib.util.find_spec("vllm") is None:
            raise UsageError(
                "use_vllm: true needs vLLM: install it with `pip install 'slmsql-hub[vllm]'`, or set `use_vllm: false`"
            )
        reporters = [self.report_to] if isinstance(self.report_to, str) else list(self.report_to or [])
        if "tensorboard" in reporters and not (
            importlib.util.find_spec("tensorboard") or importlib.util.find_spec("tensorboardX")
        ):
            raise UsageError(
                "report_to: tensorboard needs the tensorboard package: `pip install tensorboard`, or drop it from "
                "report_to"
            )
        _resolve_precision(self)
        try:
            super().__post_init__()
        except ValueError as err:  # TRL's own consistency checks (batch sizes vs num_generations...)
            raise UsageError(f"{err}") from err


GRPO_ARGUMENTS = (GRPOScriptArguments, ModelArguments, GRPOTrainingConfig)
"""The dataclasses of ``slmsql train grpo``, in the order :func:`parse_recipe` returns them."""

GRPO_ARGUMENTS = (GRPOScriptArguments, ModelArguments, GRPOTrainingConfig)
"""The dataclasses of ``slmsql train grpo``, in the order :func:`parse_recipe` returns them."""
