"""A tiny Qwen2-style causal LM and tokenizer built in memory, for fast generation tests.

The tokenizer is a byte-level BPE trained on a few sentences (so any text is encodable and decodes back
to itself) with Qwen's special tokens and a Qwen-style chat template; the model is a randomly initialised
``Qwen2ForCausalLM`` of about 30k parameters. Building both takes well under a second.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = (
    "SELECT name FROM singer WHERE age > 30",
    "SELECT count(*) FROM concert GROUP BY year ORDER BY year DESC",
    "How many singers are there? List the names of all stadiums.",
    "Answer with one SQLite query. The schema follows.",
    "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, age INTEGER)",
)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread inside the block: the tiny model gains nothing from threads, and the CI box's cores
    are shared."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def build_tokenizer(
    vocab_size: int = 320, eos_token: str = "<|im_end|>", corpus: Sequence[str] = _CORPUS
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer learnt on ``corpus``, with ``<|im_start|>``/``<|im_end|>`` and a chat template.

    ``eos_token="<|endoftext|>"`` mimics a Qwen *base* checkpoint, whose eos is not the end of a chat turn.
    """
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos_token,
        pad_token="<|endoftext|>",
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in (eos_token, "<|endoftext|>")],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(
    tokenizer: PreTrainedTokenizerFast,
    seed: int = 0,
    hidden_size: int = 32,
    initializer_range: float = 0.3,
    max_position_embeddings: int = 512,
) -> Qwen2ForCausalLM:
    """A randomly initialised two-layer ``Qwen2ForCausalLM`` sized for ``tokenizer``."""
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        initializer_range=initializer_range,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.eval()
    return model


def train_to_answer(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    pairs: list[tuple[list[dict[str, str]], str]],
    steps: int = 80,
    lr: float = 3e-2,
) -> Qwen2ForCausalLM:
    """Overfit ``model`` so that each chat is answered with its target text (used verbatim, tokens and all).

    A few dozen Adam steps on a handful of sequences: well under a second for the tiny model. After ``steps``
    it trains on, 20 steps at a time (up to 4x ``steps`` more), until every target token is the argmax under
    teacher forcing, so greedy decoding gives the targets on any machine's float kernels.
    """
    rows = []
    for messages, target in pairs:
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids + target_ids, len(prompt_ids)))
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (ids, prompt_len) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, prompt_len : len(ids)] = torch.tensor(ids[prompt_len:])
        mask[row, : len(ids)] = 1
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()

    def step() -> torch.Tensor:
        output = model(input_ids=input_ids, attention_mask=mask, labels=labels)
        optimizer.zero_grad()
        output.loss.backward()
        optimizer.step()
        return output.logits

    def memorised(logits: torch.Tensor) -> bool:
        predicted, targets = logits[:, :-1].argmax(-1), labels[:, 1:]
        return bool(((predicted == targets) | (targets == -100)).all())

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for _ in range(steps):
            step()
        for _ in range(4 * steps // 20 if steps else 0):
            with torch.no_grad():
                if memorised(model(input_ids=input_ids, attention_mask=mask).logits):
                    break
            for _ in range(20):
                step()
    model.eval()
    return model


def save_trained_adapter(
    base: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    folder,
    target_modules: list[str],
    pairs: list[tuple[list[dict[str, str]], str]],
    steps: int,
    lr: float,
) -> None:
    """Save to ``folder`` a LoRA adapter (r=8, alpha 16) over a copy of ``base``, initialised from seed 0
    (B = 0, so with ``steps=0`` it changes nothing) and trained ``steps`` steps to answer ``pairs``
    (:func:`train_to_answer`)."""
    import copy

    from peft import LoraConfig, get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = get_peft_model(
            copy.deepcopy(base), LoraConfig(r=8, lora_alpha=16, target_modules=target_modules)
        )
    if steps:
        train_to_answer(model, tokenizer, pairs, steps=steps, lr=lr)
    model.save_pretrained(folder)


def save_random_adapter(
    folder, tokenizer: PreTrainedTokenizerFast, seed: int, target_modules=("q_proj", "v_proj"), lora_alpha=16
) -> None:
    """Save to ``folder`` a LoRA adapter (r=4) of the tiny model whose A and B are random (non-zero), drawn
    from ``seed`` alone."""
    from peft import LoraConfig, get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lora = LoraConfig(
            r=4, lora_alpha=lora_alpha, target_modules=list(target_modules), init_lora_weights=False
        )
        get_peft_model(build_model(tokenizer), lora).save_pretrained(folder)


def save_random_policy(root, adapters: dict[str, int], target_modules=("q_proj", "v_proj")):
    """Save a random tiny base (model + tokenizer) to ``root/base`` and one random, non-zero LoRA adapter per
    ``{name: seed}`` to ``root/<name>`` (:func:`save_random_adapter`). Returns ``root``."""
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    for name, seed in adapters.items():
        save_random_adapter(root / name, tokenizer, seed, target_modules)
    return root
