"""The embedded world's base model: a tiny ``Qwen2ForCausalLM`` and its tokenizer, trained from scratch.

The real study starts from Qwen2.5-Coder-1.5B-Instruct; the world replaces it with a model of a few million
parameters that has the same architecture (so LoRA targets q/k/v/o/gate/up/down, the ChatML template and
generation all follow the real path) and learns, in about two minutes on two CPU cores, the language of the
world: its schemas, its questions, its SQL and the prompt's shape.

The corpus is drawn from ``corpus_splits`` (default: the SFT splits ``foundation`` and ``grounding``; never dev
or test, and not ``rl_pool``, so GRPO's pass-rate filter meets unread questions). It never shows a question
with its SQL in the chat format (that is what SFT teaches). It holds, shuffled:

- each database's schema inside the chat prompt, with one of its questions (``corpus_repeats`` times),
- for the ``paired_splits`` (default: both), each SQL under its question as a ``-- question`` comment, the
  way a code model has met SQL in the wild; without such pairs a model this small never learns to condition
  its SQL on the question (measured: dev EX ~20% after SFT with ``foundation`` pairs only, ~40% with both),
- for the other corpus splits, each question and each gold SQL (as a ```` ```sql ```` block) on its own.

**The copy circuit** (:func:`install_copy_circuit`). Text-to-SQL copies values (numbers, names) from the
question into the query, and a model of a million parameters grows the induction heads that copy only after
tens of millions of tokens, far more than two CPU cores afford. So the world's model starts with one, as an
initial condition rather than an architecture change (the modules, hence LoRA targets and generation, stay
Qwen2's):

- the residual stream is split in half: token embeddings live in the first half (the second starts at zero),
- layer 0: ``n`` heads attend to the previous token (constant query/key biases whose RoPE phases peak at a
  distance of one, from the highest frequencies) and write its embedding into the second half,
- layer 1: ``n`` heads match the current token (first half) against each position's previous token (second
  half), through RoPE frequencies slow enough to be position-blind up to ``max_distance``, and write the
  matched position's token back into the first half, which the tied output head reads as that token.

``n`` is the number of heads needed to carry half of the hidden size. On a random repeated sequence the
circuit predicts the repeat's next token correctly about 95% of the time before any training.

``slmsql train base --config recipes/world/base.yaml`` writes the model, the tokenizer, the resolved
configuration and ``run_summary.json`` into ``output_dir``.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..runtime import Stopwatch, environment, set_num_threads
from ..world.tokenizer import IM_END, IM_START, PAD_TOKEN, train_tokenizer
from .common import (
    count_parameters,
    final_loss,
    load_datasets,
    to_prompt_completion,
    train_and_save,
    write_run_summary,
)
from .configs import BaseScriptArguments, BaseTrainingConfig, TinyModelArguments

logger = logging.getLogger(__name__)


def _render_turns(messages: list[dict[str, str]]) -> str:
    """ChatML text of ``messages`` (what :data:`~slmsql_hub.world.tokenizer.CHAT_TEMPLATE` renders)."""
    return "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)


def _split_folders(world_dir: str | Path, splits: list[str]) -> list[Path]:
    """The dataset folders of ``splits`` in a world (``<world>/datasets/<split>``); :class:`UsageError` when the
    world or a split is missing.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> world = pathlib.Path(tempfile.mkdtemp())
    >>> (world / "datasets" / "foundation").mkdir(parents=True)
    >>> [p.name for p in _split_folders(world, ["foundation"])]
    ['foundation']

    ```
    """
    world = Path(world_dir).expanduser()
    if not (world / "datasets").is_dir():
        raise UsageError(
            f"no world at {world} (no datasets/ folder); build it with `slmsql world build --out {world}`"
        )
    folders = [world / "datasets" / split for split in splits]
    missing = [f.name for f in folders if not f.is_dir()]
    if missing:
        raise UsageError(
            f"world {world} has no split(s) {', '.join(missing)}; fix corpus_splits or rebuild the world"
        )
    return folders


def _commented_sql(question: str, sql: str) -> str:
    """A question and its SQL as code in the wild has them: the query under a ``--`` comment.

    Example:

    ```python
    >>> print(_commented_sql("How many pets?", "SELECT count(*) FROM pet"))
    -- How many pets?
    SELECT count(*) FROM pet

    ```
    """
    comment = " ".join(question.split())
    return f"-- {comment}\n{sql.strip()}"


def build_corpus(script_args: BaseScriptArguments, seed: int = 0) -> tuple[list[str], dict[str, int]]:
    """``(documents, counts)``: the pretraining text documents drawn from the world's corpus splits (ChatML
    special tokens inside prompt documents), shuffled with ``seed``, and how many there are of each kind."""
    from ..data.prompts import format_answer

    prompt_config, _ = script_args.resolve_prompt_config(None)
    rows = load_datasets(_split_folders(script_args.world_dir, script_args.corpus_splits))
    rng = random.Random(seed)
    # One prompt (schema + a question of that database) per database and repeat: the model learns each schema
    # and the prompt's shape without ever seeing a question next to its SQL.
    db_key = (
        "db_id" if "db_id" in rows.column_names else ("db_path" if "db_path" in rows.column_names else None)
    )
    by_db: dict[str, list[int]] = {}
    for i, key in enumerate(rows[db_key] if db_key else [str(i) for i in range(len(rows))]):
        by_db.setdefault(str(key), []).append(i)
    picks = [rng.choice(indices) for indices in by_db.values() for _ in range(script_args.corpus_repeats)]
    prompts = to_prompt_completion(rows.select(picks), prompt_config)["prompt"]
    prompt_docs = [_render_turns(messages) for messages in prompts]
    paired = set(script_args.paired_splits)
    question_docs, sql_docs, paired_docs = [], [], []
    for question, sql, source in zip(rows["question"], rows["gold_sql"], rows["_source"]):
        question, sql = (question or "").strip(), (sql or "").strip()
        if Path(source).name in paired:
            if question and sql:
                paired_docs.append(_commented_sql(question, sql))
            continue
        if question:
            question_docs.append(question)
        if sql:
            sql_docs.append(format_answer(sql))
    documents = prompt_docs + question_docs + sql_docs + paired_docs
    rng.shuffle(documents)
    counts = {
        "databases": len(by_db),
        "rows": len(rows),
        "prompt_documents": len(prompt_docs),
        "question_documents": len(question_docs),
        "sql_documents": len(sql_docs),
        "paired_documents": len(paired_docs),
    }
    logger.info("world corpus: %s", counts)
    return documents, counts


def _tokenizer_texts(documents: list[str]) -> list[str]:
    """The corpus as the tokenizer trainer should see it: special tokens replaced by newlines (they are
    added as whole tokens, never learnt from their characters).

    Example:

    ```python
    >>> _tokenizer_texts(["<|im_start|>user\\nhi<|im_end|>\\n"])
    ['\\nuser\\nhi\\n\\n']

    ```
    """
    out = []
    for doc in documents:
        for token in (IM_START, IM_END, PAD_TOKEN):
            doc = doc.replace(token, "\n")
        out.append(doc)
    return out


def pack_blocks(documents: list[str], tokenizer: Any, block_length: int) -> list[list[int]]:
    """Tokenize ``documents``, end each with ``<|endoftext|>``, concatenate and cut into blocks of exactly
    ``block_length`` tokens (the last partial block is dropped).

    Example:

    ```python
    >>> from slmsql_hub.world.tokenizer import train_tokenizer
    >>> tok = train_tokenizer(["SELECT a FROM t"] * 10, vocab_size=300)
    >>> blocks = pack_blocks(["SELECT a FROM t"] * 10, tok, block_length=8)
    >>> {len(b) for b in blocks}, blocks[0].count(tok.pad_token_id) >= 1
    ({8}, True)

    ```
    """
    ids = tokenizer(documents, add_special_tokens=False)["input_ids"]
    stream: list[int] = []
    for doc in ids:
        stream.extend(doc)
        stream.append(tokenizer.pad_token_id)
    n_blocks = len(stream) // block_length
    return [stream[i * block_length : (i + 1) * block_length] for i in range(n_blocks)]


def install_copy_circuit(model: Any, max_distance: int = 256, seed: int = 0) -> dict[str, Any]:
    """Wire a copy circuit (see the module docstring) into a freshly initialised ``Qwen2ForCausalLM`` with tied
    embeddings, ``num_key_value_heads == num_attention_heads`` and at least two layers; every weight stays
    trainable. The matching heads resolve copies up to ``max_distance`` tokens back and compare through a random
    projection drawn with ``seed``. Returns ``{"heads": n, "previous_token_frequencies": [...],
    "matching_dims": k}``.

    Example:

    ```python
    >>> import torch
    >>> from transformers import Qwen2Config, Qwen2ForCausalLM
    >>> config = Qwen2Config(vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    ...                      num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True,
    ...                      rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    >>> model = Qwen2ForCausalLM(config).eval()
    >>> install_copy_circuit(model)["heads"]
    1
    >>> first = torch.randint(3, 500, (4, 40), generator=torch.Generator().manual_seed(0))
    >>> tokens = torch.cat([first, first], dim=1)
    >>> with torch.no_grad():
    ...     guess = model(input_ids=tokens).logits[:, 40:-1].argmax(-1)
    >>> (guess == tokens[:, 41:]).float().mean().item() > 0.8
    True

    ```
    """
    import math

    import torch

    hidden = model.config.hidden_size
    head_dim, token_dims, n_circuit, inv_freq, previous_freqs, matching_dims = _copy_circuit_shape(
        model.config, max_distance
    )
    half_head = head_dim // 2
    generator = torch.Generator().manual_seed(seed)
    peak = 12.0  # previous-token query/key amplitude: ~10 logits between distance 1 and its neighbours
    match_gain = 4.0  # sharpness of the token match
    write_gain = 1.0 / math.sqrt(hidden)  # previous token's share of the residual after layer 0
    layer0 = model.model.layers[0].self_attn
    layer1 = model.model.layers[1].self_attn
    with torch.no_grad():
        embeddings = model.get_input_embeddings().weight
        embeddings.normal_(0.0, 1.0 / math.sqrt(token_dims), generator=generator)
        embeddings[:, token_dims:] = 0.0
        for h in range(n_circuit):
            rows = slice(h * head_dim, (h + 1) * head_dim)
            carried = range(h * head_dim, min((h + 1) * head_dim, token_dims))  # token dims this head carries
            for attn in (layer0, layer1):
                for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
                    proj.weight[rows] = 0.0
                    proj.bias[rows] = 0.0
                attn.o_proj.weight[:, rows] = 0.0
            # Layer 0: attend to the previous token, copy its embedding into the second half.
            for f in previous_freqs:
                layer0.q_proj.bias[h * head_dim + f] = peak * math.cos(inv_freq[f])
                layer0.q_proj.bias[h * head_dim + f + half_head] = -peak * math.sin(inv_freq[f])
                layer0.k_proj.bias[h * head_dim + f] = peak
            for c, dim in enumerate(carried):
                layer0.v_proj.weight[h * head_dim + c, dim] = 1.0
                layer0.o_proj.weight[token_dims + dim, h * head_dim + c] = write_gain
            # Layer 1: match the current token against each position's previous token, copy the match back.
            projection = torch.randn(len(matching_dims), token_dims, generator=generator) / math.sqrt(
                token_dims
            )
            for r, dim in enumerate(matching_dims):
                layer1.q_proj.weight[h * head_dim + dim, :token_dims] = match_gain * projection[r]
                layer1.k_proj.weight[h * head_dim + dim, token_dims:] = projection[r]
            for c, dim in enumerate(carried):
                layer1.v_proj.weight[h * head_dim + c, dim] = 1.0
                layer1.o_proj.weight[dim, h * head_dim + c] = 1.0
    return {
        "heads": n_circuit,
        "previous_token_frequencies": previous_freqs,
        "matching_dims": len(matching_dims),
    }


def _copy_circuit_shape(config: Any, max_distance: int) -> tuple:
    """``(head_dim, token_dims, heads, inv_freq, previous_freqs, matching_dims)`` of the copy circuit for a
    Qwen2 ``config``; ``UsageError`` when the model cannot carry it."""
    hidden, n_heads = config.hidden_size, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // n_heads
    half_head = head_dim // 2
    token_dims = hidden // 2
    n_circuit = -(-token_dims // head_dim)
    if (
        config.num_hidden_layers < 2
        or config.num_key_value_heads != n_heads
        or n_circuit > n_heads
        or not config.tie_word_embeddings
    ):
        raise UsageError(
            "install_copy_circuit needs >= 2 layers, num_key_value_heads == num_attention_heads, tied embeddings "
            f"and enough heads to carry {token_dims} dims; got {config.num_hidden_layers} layers, "
            f"{n_heads}/{config.num_key_value_heads} heads"
        )
    theta = float(config.rope_parameters["rope_theta"])
    inv_freq = [1.0 / theta ** (2 * f / head_dim) for f in range(half_head)]
    previous_freqs = list(range(min(4, half_head)))
    # Frequencies that turn less than 0.3 rad over max_distance tokens compare content, not position.
    slow = [f for f in range(half_head) if inv_freq[f] * max_distance < 0.3 and f not in previous_freqs]
    if len(slow) < 4:
        raise UsageError(
            f"rope_theta={theta:g} leaves {len(slow)} RoPE frequencies slow enough to match tokens "
            f"{max_distance} apart; raise rope_theta (Qwen2.5 uses 1e6) or the head size"
        )
    matching_dims = slow + [f + half_head for f in slow]
    return head_dim, token_dims, n_circuit, inv_freq, previous_freqs, matching_dims


def build_tiny_model(model_args: TinyModelArguments, tokenizer: Any):
    """A randomly initialised ``Qwen2ForCausalLM`` of ``model_args``' shape, sized to ``tokenizer``, with Qwen's
    conventions: eos ``<|im_end|>`` (generation also stops at ``<|endoftext|>``), pad ``<|endoftext|>``, no BOS.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import TinyModelArguments
    >>> from slmsql_hub.world.tokenizer import train_tokenizer
    >>> tok = train_tokenizer(["SELECT a FROM t"] * 10, vocab_size=300)
    >>> shape = TinyModelArguments(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
    ...                            num_key_value_heads=2)
    >>> model = build_tiny_model(shape, tok)
    >>> type(model).__name__, model.config.eos_token_id == tok.eos_token_id
    ('Qwen2ForCausalLM', True)

    ```
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=model_args.hidden_size,
        intermediate_size=model_args.intermediate_size,
        num_hidden_layers=model_args.num_hidden_layers,
        num_attention_heads=model_args.num_attention_heads,
        num_key_value_heads=model_args.num_key_value_heads,
        max_position_embeddings=model_args.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": model_args.rope_theta},
        tie_word_embeddings=model_args.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(model_args.init_seed)
        model = Qwen2ForCausalLM(config)
    if model_args.copy_circuit:
        wired = install_copy_circuit(
            model, max_distance=min(256, model_args.max_position_embeddings), seed=model_args.init_seed
        )
        logger.info("copy circuit wired into layers 0-1: %s", wired)
    model.generation_config = GenerationConfig(
        bos_token_id=None,
        eos_token_id=[tokenizer.eos_token_id, tokenizer.pad_token_id],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    )
    return model


def _corpus_blocks(
    script_args: BaseScriptArguments, model_args: TinyModelArguments, training_args: BaseTrainingConfig
) -> tuple[list[str], dict[str, int], Any, list[list[int]]]:
    """The world's corpus, the tokenizer learnt on it and its full blocks of ``training_args.max_length`` tokens;
    :class:`UsageError` when a block would not fit the model or the blocks do not fill one batch."""
    if training_args.max_length > model_args.max_position_embeddings:
        raise UsageError(
            f"max_length ({training_args.max_length}) exceeds max_position_embeddings "
            f"({model_args.max_position_embeddings}); lower max_length or raise max_position_embeddings"
        )
    documents, counts = build_corpus(script_args, seed=training_args.seed)
    tokenizer = train_tokenizer(
        _tokenizer_texts(documents),
        vocab_size=script_args.vocab_size,
        min_frequency=script_args.tokenizer_min_frequency,
        model_max_length=model_args.max_position_embeddings,
    )
    blocks = pack_blocks(documents, tokenizer, training_args.max_length)
    if len(blocks) < training_args.per_device_train_batch_size:
        raise UsageError(
            f"the corpus fills only {len(blocks)} block(s) of {training_args.max_length} tokens; lower max_length "
            "or per_device_train_batch_size, or raise corpus_repeats"
        )
    return documents, counts, tokenizer, blocks


def train_base(
    script_args: BaseScriptArguments,
    model_args: TinyModelArguments,
    training_args: BaseTrainingConfig,
) -> dict[str, Any]:
    """Learn the world's tokenizer, pretrain the tiny model on the world's corpus (``training_args.max_length``
    is the block length), save both, and return the run summary (also ``<output_dir>/run_summary.json``).

    :class:`UsageError` when the world is missing, the blocks are longer than the model's positions, or the corpus
    fills less than one batch. End to end it needs a world (tests/test_sft.py).
    """
    from datasets import Dataset
    from transformers import Trainer, default_data_collator

    clock = Stopwatch()
    threads = set_num_threads(script_args.num_threads)
    documents, counts, tokenizer, blocks = _corpus_blocks(script_args, model_args, training_args)
    model = build_tiny_model(model_args, tokenizer)
    params = count_parameters(model)
    logger.info(
        "tiny Qwen2: %.2fM parameters; corpus: %d documents -> %d blocks of %d tokens; %d threads",
        params["total"] / 1e6,
        len(documents),
        len(blocks),
        training_args.max_length,
        threads,
    )
    # Every block is full (no padding), so labels are the inputs; the model shifts them itself.
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=Dataset.from_dict({"input_ids": blocks, "labels": blocks}),
        data_collator=default_data_collator,
        processing_class=tokenizer,
    )
    output_dir = Path(training_args.output_dir)
    result, train_seconds = train_and_save(trainer, tokenizer, output_dir, script_args, model_args, training_args)
    summary = {
        "kind": "base",
        "world_dir": str(script_args.world_dir),
        "output_dir": str(output_dir),
        "corpus": {
            **counts,
            "documents": len(documents),
            "blocks": len(blocks),
            "block_length": training_args.max_length,
        },
        "tokenizer": {"vocab_size": len(tokenizer)},
        "model": {"architecture": "Qwen2ForCausalLM", **{name: getattr(model_args, name) for name in _SHAPE}},
        "parameters": params,
        **_training_counts(training_args, trainer, result),
        "train_seconds": train_seconds,
        "wall_seconds": clock.seconds(),
        "threads": threads,
        "environment": environment(),
    }
    if trainer.is_world_process_zero():  # under `accelerate launch`, one process writes the run's files
        write_run_summary(output_dir, summary)
    logger.info(
        "base model done: %d steps, final loss %s, %.1fs; saved to %s",
        summary["steps"],
        summary["final_loss"],
        summary["wall_seconds"],
        output_dir,
    )
    return summary


_SHAPE = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
"""The model shape fields a base run summary records."""


def _training_counts(training_args: BaseTrainingConfig, trainer: Any, result: Any) -> dict[str, Any]:
    """The run summary's steps, epochs, tokens seen and losses."""
    steps = int(result.global_step)
    return {
        "steps": steps,
        "epochs": float(trainer.state.epoch or 0.0),
        "tokens_seen": steps
        * training_args.per_device_train_batch_size
        * training_args.gradient_accumulation_steps
        * training_args.max_length,
        "final_loss": final_loss(trainer.state.log_history),
        "mean_train_loss": float(result.training_loss),
    }


if __name__ == "__main__":  # pragma: no cover - `slmsql train base` runs it (the CLI is above this layer)
    from ..errors import exit_not_a_command

    exit_not_a_command("slmsql_hub.training.base", "base")
