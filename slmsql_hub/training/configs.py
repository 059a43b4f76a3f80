"""Configuration for ``slmsql train base``, ``slmsql train sft`` and ``slmsql train grpo``: dataclasses parsed
from a YAML recipe plus command-line overrides.

As in open-r1, each run is described by three dataclasses, one flat YAML recipe fills all of them, and
``--key value`` on the command line wins over the recipe:

- ``sft``: :class:`SFTScriptArguments` (data and prompt), :class:`ModelArguments` (base model and LoRA) and
  :class:`SFTTrainingConfig` (a ``trl.SFTConfig`` that adds the stage and the adapter stage 2 continues);
- ``base``: :class:`BaseScriptArguments` (the world and the tokenizer), :class:`TinyModelArguments` (the
  tiny Qwen2's shape) and :class:`BaseTrainingConfig` (``transformers.TrainingArguments`` + block length).
- ``grpo``: :class:`GRPOScriptArguments` (prompts and their source), :class:`ModelArguments` and
  :class:`GRPOTrainingConfig` (a ``trl.GRPOConfig`` that adds the SFT adapter to continue and the rewards).

Every dataclass checks itself in ``__post_init__`` and raises :class:`~slmsql_hub.errors.UsageError` naming
the fix; nothing here reads datasets or models, or touches the network, so a recipe for a model that cannot
run on this machine still validates. Paths are checked when a run starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from transformers import TrainingArguments
from trl import GRPOConfig, SFTConfig

from ..errors import UsageError
from ..model_refs import DTYPES
from ..sql.recipe_limits import SQLLimitsArguments

logger = logging.getLogger(__name__)



def _check_prompt_fields(owner: str, sample_rows: int, max_value_chars: int) -> None:
    if sample_rows < 0:
        raise UsageError(
            f"{owner}.prompt_sample_rows must be >= 0 (0 shows no sample rows); got {sample_rows}"
        )
    if max_value_chars < 1:
        raise UsageError(f"{owner}.prompt_max_value_chars must be >= 1; got {max_value_chars}")


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


def _check_threads(owner: str, num_threads: int | None) -> None:
    if num_threads is not None and num_threads < 1:
        raise UsageError(
            f"{owner}.num_threads must be >= 1, or null to keep torch's default; got {num_threads}"
        )


@dataclass
class SFTScriptArguments:
    """What an SFT run trains on, and how prompts are built.

    Args:
        dataset_paths: one or more datasets written with ``save_to_disk`` (for the world:
            ``<world>/datasets/foundation`` for stage 1, ``.../grounding`` for stage 2), concatenated. Columns:
            ``question``, ``gold_sql``, optional ``evidence``, and ``schema`` (prompt text) or ``db_path`` (the
            schema is then read from the database through the sandbox; relative paths resolve against the
            dataset folder, then its parents).
        benchmarks: benchmarks loaded from their release files and added to ``dataset_paths``, each as
            ``name=root`` (``spider``, ``bird``, ``synsql`` or ``world``; e.g. ``bird=data/bird``); see
            :func:`~slmsql_hub.data.benchmarks.load_benchmark`.
        benchmark_split: the split read from each benchmark (``train``).
        benchmark_limit: a seeded subset of this many questions per benchmark (``None``: all).
        max_train_samples: keep only the first N examples after shuffling (``None``: all).
        prompt_sample_rows: sample rows per table in the schema text (see
            :class:`~slmsql_hub.prompts.PromptConfig`); evaluation must use the same value.
        prompt_max_value_chars: longest value shown in a sample row.
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
    >>> SFTScriptArguments(benchmarks=["bird=data/bird", "spider=data/spider"]).benchmark_roots()
    {'bird': 'data/bird', 'spider': 'data/spider'}

    ```
    """

    dataset_paths: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Dataset folder(s) written with save_to_disk (e.g. outputs/world/datasets/foundation)."
        },
    )
    benchmarks: list[str] = field(
        default_factory=list,
        metadata={"help": "Benchmarks read from their release files, as name=root (e.g. bird=data/bird)."},
    )
    benchmark_split: str = field(default="train", metadata={"help": "The split read from each benchmark."})
    benchmark_limit: int | None = field(
        default=None, metadata={"help": "A seeded subset of this many questions per benchmark; null: all."}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Keep only the first N (shuffled) examples; null keeps all."}
    )
    prompt_sample_rows: int = field(default=3, metadata={"help": "Sample rows per table in the schema text."})
    prompt_max_value_chars: int = field(default=40, metadata={"help": "Longest value shown in a sample row."})
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})

    def __post_init__(self) -> None:
        if isinstance(self.dataset_paths, (str, os.PathLike)):
            self.dataset_paths = [str(self.dataset_paths)]
        self.dataset_paths = [str(p) for p in (self.dataset_paths or []) if str(p).strip()]
        if isinstance(self.benchmarks, str):
            self.benchmarks = [self.benchmarks]
        self.benchmarks = [str(b).strip() for b in (self.benchmarks or []) if str(b).strip()]
        if not self.dataset_paths and not self.benchmarks:
            raise UsageError(
                "nothing to train on: set dataset_paths to the dataset folder(s), e.g. "
                "`dataset_paths: [outputs/world/datasets/foundation]` (build the world with `slmsql world build`), "
                "or benchmarks, e.g. `benchmarks: [bird=data/bird, spider=data/spider]`"
            )
        self.benchmark_roots()  # validates the entries
        if self.benchmark_limit is not None and self.benchmark_limit < 1:
            raise UsageError(f"benchmark_limit must be >= 1, or null for all; got {self.benchmark_limit}")
        if self.max_train_samples is not None and self.max_train_samples < 1:
            raise UsageError(f"max_train_samples must be >= 1, or null for all; got {self.max_train_samples}")
        _check_prompt_fields("SFTScriptArguments", self.prompt_sample_rows, self.prompt_max_value_chars)
        _check_threads("SFTScriptArguments", self.num_threads)

    def benchmark_roots(self) -> dict[str, str]:
        """``{name: root}`` from :attr:`benchmarks` (``name=root`` entries), checked."""
        known = ("spider", "bird", "synsql", "world")
        roots: dict[str, str] = {}
        for entry in self.benchmarks:
            name, sep, root = entry.partition("=")
            name, root = name.strip(), root.strip()
            if not sep or not root or name not in known:
                raise UsageError(
                    f"benchmarks entry {entry!r} must be name=root with name one of {', '.join(known)}, "
                    "e.g. bird=data/bird"
                )
            if name in roots:
                raise UsageError(f"benchmark {name!r} is listed twice in benchmarks; keep one entry")
            roots[name] = root
        return roots


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
class BaseScriptArguments:
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
    prompt_sample_rows: int = field(default=3, metadata={"help": "Sample rows per table in schema texts."})
    prompt_max_value_chars: int = field(default=40, metadata={"help": "Longest value shown in a sample row."})
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
        _check_prompt_fields("BaseScriptArguments", self.prompt_sample_rows, self.prompt_max_value_chars)
        _check_threads("BaseScriptArguments", self.num_threads)


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
"""The dataclasses of ``slmsql train base``, in the order :func:`parse_recipe` returns them."""


def _field_names(dataclass_types: Sequence[type]) -> set[str]:
    return {f.name for cls in dataclass_types for f in dataclasses.fields(cls) if f.init}


def _build_parser(dataclass_types: Sequence[type]):
    from trl import TrlParser

    # No abbreviations: `--learning_r 1e-4` must fail like any other misspelling, not set learning_rate (and a
    # field added later must not silently change what an existing abbreviation means).
    parser = TrlParser(dataclass_types=list(dataclass_types), allow_abbrev=False)

    def refuse(message: str) -> NoReturn:
        # argparse would print its usage block and exit; the caller wants one line it can report.
        raise UsageError(f"invalid value in the recipe or an override: {message}")

    parser.error = refuse
    return parser


def parse_recipe(
    dataclass_types: Sequence[type],
    config: str | os.PathLike | None = None,
    overrides: Sequence[str] = (),
) -> tuple:
    """Fill ``dataclass_types`` from a flat YAML recipe, then from ``--key value`` overrides (which win).

    Args:
        dataclass_types: :data:`SFT_ARGUMENTS`, :data:`BASE_ARGUMENTS` or your own dataclasses.
        config: the YAML recipe (``None``: defaults and overrides only).
        overrides: command-line style arguments, e.g. ``["--learning_rate", "1e-4"]``.

    Returns:
        One instance per dataclass, in the order given, each validated by its ``__post_init__``.

    Raises:
        UsageError: the recipe is missing or not a mapping, a key is unknown (in the recipe or the
            overrides), or a value fails validation.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.training.configs import SFT_ARGUMENTS, parse_recipe
    >>> recipe = pathlib.Path(tempfile.mkdtemp()) / "sft.yaml"
    >>> _ = recipe.write_text(
    ...     "model_name_or_path: outputs/world/base\\n"
    ...     "dataset_paths: [outputs/world/datasets/foundation]\\n"
    ...     "output_dir: outputs/world/sft_stage1\\n"
    ...     "learning_rate: 5.0e-4\\n"
    ...     "report_to: none\\n"
    ... )
    >>> script, model, training = parse_recipe(SFT_ARGUMENTS, recipe, ["--learning_rate", "1e-4"])
    >>> training.learning_rate, model.lora_r, model.lora_alpha, script.dataset_paths
    (0.0001, 32, 64, ['outputs/world/datasets/foundation'])

    ```
    """
    import yaml

    argv: list[str] = []
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise UsageError(f"recipe not found: {path}; pass an existing YAML file to --config")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            raise UsageError(f"recipe {path} is not valid YAML: {err}") from err
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise UsageError(f"recipe {path} must be a YAML mapping of field: value")
        known = _field_names(dataclass_types) | {"env"}
        unknown = sorted(set(loaded) - known)
        if unknown:
            raise UsageError(
                f"unknown key(s) in {path}: {', '.join(unknown)}; remove them or check the spelling "
                f"(known fields are those of {', '.join(c.__name__ for c in dataclass_types)})"
            )
        argv = ["--config", str(path)]
    parser = _build_parser(dataclass_types)
    # A rejected value raises UsageError (see _build_parser); only --help exits, with code 0.
    parsed = parser.parse_args_and_config(
        [*argv, *overrides], return_remaining_strings=True, separate_remaining_strings=True
    )
    *instances, config_rest, cli_rest = parsed
    if config_rest or cli_rest:
        raise UsageError(
            f"unknown argument(s) {' '.join(config_rest + cli_rest)}; overrides are --field value with fields of "
            f"{', '.join(c.__name__ for c in dataclass_types)}"
        )
    return tuple(instances)


def _plain(value: Any) -> Any:
    """A YAML-safe rendering of a config value."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _plain(to_dict())
    return str(value)


_SECRET_FIELDS = frozenset({"hub_token"})


def config_to_dict(*instances: Any) -> dict[str, Any]:
    """Flatten config dataclasses into one recipe-shaped mapping (later instances win on shared names).

    Secrets (``hub_token``) are left out, so the result can be written next to the model and read back with
    :func:`parse_recipe`.

    Args:
        *instances: dataclass instances, e.g. what :func:`parse_recipe` returned.

    Returns:
        ``{field: value}`` with YAML-safe values.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import ModelArguments, config_to_dict
    >>> config_to_dict(ModelArguments(model_name_or_path="m"))["lora_target_modules"]
    ['all-linear']

    ```
    """
    out: dict[str, Any] = {}
    for instance in instances:
        for f in dataclasses.fields(instance):
            if not f.init or f.name in _SECRET_FIELDS:
                continue
            out[f.name] = _plain(getattr(instance, f.name))
    return out


def save_resolved_config(path: str | os.PathLike, *instances: Any) -> Path:
    """Write the resolved configuration as a YAML recipe that :func:`parse_recipe` reads back.

    Args:
        path: the YAML file to write (its folder is created).
        *instances: the run's config dataclasses.

    Returns:
        The path written.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.training.configs import ModelArguments, save_resolved_config
    >>> out = save_resolved_config(pathlib.Path(tempfile.mkdtemp()) / "config.yaml", ModelArguments("m"))
    >>> "lora_alpha: 64" in out.read_text()
    True

    ```
    """
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = config_to_dict(*instances)
    header = "# Resolved configuration (recipe + overrides + defaults); rerun with --config on this file.\n"
    path.write_text(header + yaml.safe_dump(payload, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def describe_arguments(dataclass_types: Sequence[type]) -> argparse.ArgumentParser:
    """An ``argparse`` parser listing every field of ``dataclass_types`` (for ``--help`` texts).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import SFT_ARGUMENTS, describe_arguments
    >>> "--adapter_path" in describe_arguments(SFT_ARGUMENTS).format_help()
    True

    ```
    """
    return _build_parser(dataclass_types)


# ----------------------------------------------------------------------------------------------------------
# slmsql train grpo
# ----------------------------------------------------------------------------------------------------------

REWARD_FUNCS = ("execution", "format", "result_f1")
"""The reward functions a GRPO recipe can name (see :mod:`slmsql_hub.rewards`)."""


@dataclass
class GRPOScriptArguments:
    """What a GRPO run trains on, and how its prompts are built.

    The prompts come from ``dataset_paths`` (datasets written with ``save_to_disk``: a world split such as
    ``<world>/datasets/grounding``, or the band the pass-rate filter saved) and/or ``benchmarks`` read from
    their release files (as in :class:`SFTScriptArguments`: ``name=root`` entries, ``benchmark_split``,
    ``benchmark_limit``; Spider train for the study's attempt #1). Rows need ``question``, ``gold_sql`` and
    ``db_path``: the rewards execute against that database.

    Args:
        dataset_paths: dataset folder(s), concatenated.
        benchmarks: benchmarks read from their files, each as ``name=root`` (e.g. ``spider=data/spider``).
        benchmark_split: the split read from each benchmark (``train``; never ``dev`` or ``test``).
        benchmark_limit: a seeded subset of this many questions per benchmark (``None``: all).
        max_train_samples: keep only the first N examples after shuffling (``None``: all).
        prompt_sample_rows: sample rows per table in the schema text; ``None`` uses the value the SFT adapter
            was trained with (its ``run_summary.json``), else 3. Evaluation must use the same value.
        prompt_max_value_chars: longest value shown in a sample row (``None``: as the adapter, else 40).
        num_threads: ``torch.set_num_threads`` for the run (``None``: torch's default).

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOScriptArguments
    >>> GRPOScriptArguments(dataset_paths="outputs/world/band").dataset_paths
    ['outputs/world/band']
    >>> GRPOScriptArguments(benchmarks=["spider=data/spider"]).benchmark_roots()
    {'spider': 'data/spider'}
    >>> GRPOScriptArguments(benchmarks=["spider=data/spider"], benchmark_split="dev")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmark_split 'dev' is what EX is measured on; train on a training split...

    ```
    """

    dataset_paths: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Dataset folder(s) written with save_to_disk (a world split, or the filter's band)."
        },
    )
    benchmarks: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Benchmarks read from their release files, as name=root (e.g. spider=data/spider)."
        },
    )
    benchmark_split: str = field(default="train", metadata={"help": "The split read from each benchmark."})
    benchmark_limit: int | None = field(
        default=None, metadata={"help": "A seeded subset of this many questions per benchmark; null: all."}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Keep only the first N (shuffled) examples; null keeps all."}
    )
    prompt_sample_rows: int | None = field(
        default=None,
        metadata={"help": "Sample rows per table in the schema text; null: as the SFT adapter was trained."},
    )
    prompt_max_value_chars: int | None = field(
        default=None, metadata={"help": "Longest value shown in a sample row; null: as the SFT adapter."}
    )
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})

    # The same name=root parsing and checks as SFT's benchmarks.
    benchmark_roots = SFTScriptArguments.benchmark_roots

    def __post_init__(self) -> None:
        if isinstance(self.dataset_paths, (str, os.PathLike)):
            self.dataset_paths = [str(self.dataset_paths)]
        self.dataset_paths = [str(p) for p in (self.dataset_paths or []) if str(p).strip()]
        if isinstance(self.benchmarks, str):
            self.benchmarks = [self.benchmarks]
        self.benchmarks = [str(b).strip() for b in (self.benchmarks or []) if str(b).strip()]
        if not self.dataset_paths and not self.benchmarks:
            raise UsageError(
                "no training prompts: set dataset_paths (e.g. `dataset_paths: [outputs/world/datasets/grounding]` "
                "or the filter's band folder) or benchmarks (e.g. `benchmarks: [spider=data/spider]`)"
            )
        self.benchmark_roots()  # validates the entries
        if self.benchmarks and self.benchmark_split in ("dev", "test"):
            raise UsageError(
                f"benchmark_split {self.benchmark_split!r} is what EX is measured on; train on a training split "
                "(Spider/BIRD/SynSQL: train; the world: grounding or rl_pool)"
            )
        if self.benchmark_limit is not None and self.benchmark_limit < 1:
            raise UsageError(f"benchmark_limit must be >= 1, or null for all; got {self.benchmark_limit}")
        if self.max_train_samples is not None and self.max_train_samples < 1:
            raise UsageError(f"max_train_samples must be >= 1, or null for all; got {self.max_train_samples}")
        _check_prompt_fields(
            "GRPOScriptArguments",
            0 if self.prompt_sample_rows is None else self.prompt_sample_rows,
            1 if self.prompt_max_value_chars is None else self.prompt_max_value_chars,
        )
        _check_threads("GRPOScriptArguments", self.num_threads)


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
        if self.learning_rate < 0:  # 0 is the ablation study's negative control (the adapter must not move)
            raise UsageError(f"learning_rate must be >= 0; got {self.learning_rate}")
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


RECIPE_KINDS: dict[str, str] = {
    "base": "slmsql_hub.training.configs:BASE_ARGUMENTS",
    "sft": "slmsql_hub.training.configs:SFT_ARGUMENTS",
    "grpo": "slmsql_hub.training.configs:GRPO_ARGUMENTS",
    "filter": "slmsql_hub.filtering:load_filter_config",
    "eval": "slmsql_hub.evaluation:load_eval_config",
    "ablations": "slmsql_hub.ablate.config:load_recipe",
}
"""How to read a recipe, by the first ``_``-separated word of its file name (``sft_stage1_synsql.yaml`` is an
``sft`` recipe): ``"module:NAME"`` of a tuple of dataclasses (read with :func:`parse_recipe`) or of a loader
``(config, overrides) -> config``. Register a new kind of recipe here and ``tests/test_recipes.py`` checks it."""


def recipe_kind(path: str | os.PathLike) -> str:
    """The kind of a recipe: the first ``_``-separated word of its file name.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import recipe_kind
    >>> recipe_kind("recipes/qwen2.5-coder-1.5b/sft_stage2_bird_spider.yaml")
    'sft'

    ```
    """
    return Path(path).stem.split("_", 1)[0]


def load_recipe(path: str | os.PathLike, overrides: Sequence[str] = ()) -> tuple:
    """Read and validate any registered recipe (see :data:`RECIPE_KINDS`); nothing is downloaded or loaded.

    Returns:
        The validated config objects, as a tuple.

    Raises:
        UsageError: the kind is not registered, or the recipe is invalid.

    Example:

    ```python
    >>> import pathlib, slmsql_hub
    >>> from slmsql_hub.training.configs import load_recipe
    >>> recipes = pathlib.Path(slmsql_hub.__file__).resolve().parents[1] / "recipes"
    >>> script, model, training = load_recipe(recipes / "world" / "sft_stage2.yaml")
    >>> training.stage, training.adapter_path
    (2, 'outputs/world/sft_stage1')

    ```
    """
    import importlib

    kind = recipe_kind(path)
    if kind not in RECIPE_KINDS:
        raise UsageError(
            f"cannot tell what {path} configures: its name starts with {kind!r}, not one of "
            f"{', '.join(sorted(RECIPE_KINDS))}; rename it or register the kind in RECIPE_KINDS"
        )
    module_name, _, attribute = RECIPE_KINDS[kind].partition(":")
    target = getattr(importlib.import_module(module_name), attribute)
    if isinstance(target, tuple):
        return parse_recipe(target, path, overrides)
    return (target(path, overrides),)
