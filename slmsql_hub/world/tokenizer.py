"""A small byte-level BPE tokenizer for the embedded world, shaped like Qwen2.5's.

The world's tiny model is trained from scratch, so it needs its own vocabulary: a few thousand byte-level BPE
tokens learnt from the world's own text (schemas, questions, SQL, the prompt template). Everything else
mirrors the real path (Qwen2.5-Coder): the same pre-tokenisation rule (digits one by one, punctuation runs,
newlines on their own), the ChatML special tokens (``<|endoftext|>`` pads, ``<|im_end|>`` ends a turn and is
the EOS) and the same chat template, so prompts render and generation stops exactly as they do for Qwen.

Nothing is downloaded: :func:`train_tokenizer` learns the merges from the text it is given.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ..errors import UsageError

logger = logging.getLogger(__name__)

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"  # also the EOS token
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, IM_START, IM_END)
"""The special tokens, in id order (0, 1, 2)."""

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)
"""ChatML, as Qwen2.5 renders it without tools: ``<|im_start|>role\\ncontent<|im_end|>\\n`` per turn, and
``<|im_start|>assistant\\n`` when a generation prompt is asked for. No default system turn is added (the
project's prompts always carry one)."""

# Qwen2's pre-tokenisation regex: contractions, letter runs with one leading non-letter, single digits,
# punctuation runs (with trailing newlines), newline runs, other whitespace.
_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 3072,
    min_frequency: int = 2,
    model_max_length: int = 1024,
):
    """A byte-level BPE tokenizer learnt from ``texts`` (read once), as a ``transformers.PreTrainedTokenizerFast``
    with the ChatML special tokens and :data:`CHAT_TEMPLATE`. ``vocab_size`` counts the special tokens and the
    256 bytes; :class:`UsageError` when it cannot hold them, or ``texts`` is empty.

    Example:

    ```python
    >>> from slmsql_hub.world.tokenizer import train_tokenizer
    >>> tok = train_tokenizer(["SELECT name FROM pet WHERE age > 3"] * 20, vocab_size=300)
    >>> tok.eos_token, tok.pad_token, tok.convert_tokens_to_ids("<|im_start|>")
    ('<|im_end|>', '<|endoftext|>', 1)
    >>> tok.decode(tok("SELECT name FROM pet")["input_ids"])
    'SELECT name FROM pet'
    >>> tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'

    ```
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    minimum = 256 + len(SPECIAL_TOKENS)
    if vocab_size <= minimum:
        raise UsageError(
            f"tokenizer vocab_size must be > {minimum} (256 bytes + special tokens); got {vocab_size}"
        )
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    counted = _Counted(texts)
    backend.train_from_iterator(counted, trainer=trainer)
    if counted.n == 0:
        raise UsageError(
            "cannot train a tokenizer on no text; give it the world's schemas, questions and SQL"
        )
    logger.info(
        "trained a byte-level BPE tokenizer: %d tokens from %d texts", backend.get_vocab_size(), counted.n
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START],
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


class _Counted:
    """Iterate ``texts`` once, counting the non-empty strings that pass through."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = texts
        self.n = 0

    def __iter__(self):
        for text in self._texts:
            if text:
                self.n += 1
                yield text
