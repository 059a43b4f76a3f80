"""What both backends share: :class:`GenerationConfig`, :class:`Completion`, prompt rendering and stop tokens."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerBase


#: The end-of-turn token of Qwen-style chat templates; generation always stops there when the vocabulary has it.
END_OF_TURN = "<|im_end|>"

_VLLM_HINT = "the vLLM backend needs vLLM: install it with `pip install 'slmsql-hub[vllm]'` (or use backend='transformers')"

Backend = Literal["transformers", "vllm"]

FILTER_KEYS = "filter"
"""The filter's key namespace (keyed sampling, :func:`~slmsql_hub.filtering.sample_seed`): its seeds are those
of every filter run from before namespaces existed."""

Message = dict[str, str]


#: One prompt: a chat (list of ``{"role", "content"}`` messages, templated here) or an already templated string.
Prompt = Sequence[Message] | str


def check_key_namespace(namespace: object) -> None:
    """One line (:class:`UsageError`) unless ``namespace`` is a non-empty name without ``:`` (the separator of
    the hashed key, so no two namespaces spell the same key).

    Example:

    ```python
    >>> check_key_namespace("study-passk")
    >>> check_key_namespace("a:b")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: key_namespace must be a non-empty name without ':' (e.g. 'filter'), got 'a:b'

    ```
    """
    if not isinstance(namespace, str) or not namespace or ":" in namespace:
        raise UsageError(f"key_namespace must be a non-empty name without ':' (e.g. 'filter'), got {namespace!r}")


@dataclass
class GenerationConfig:
    """How to decode: greedy or sampled, how many samples per prompt, in batches of how many prompts.

    ``do_sample=False`` is greedy; ``num_samples`` (K) > 1 needs sampling. Seeding: the same seed, prompts and
    ``batch_size`` give the same samples (prompts are batched longest first; batch ``i`` is seeded with
    ``seed + i``); ``None`` leaves the RNG alone. ``share_prefill`` (transformers, K > 1) runs each prompt through
    the model once and repeats its KV cache K times instead of ``num_return_sequences=K`` prefilling K copies:
    same samples, K-1 fewer prefills. ``drop_finished`` (transformers, greedy) decodes each batch in the package's
    own loop, which drops the rows that have stopped instead of padding them to the batch's longest: the same
    tokens (a row's logits do not depend on the other rows; bitwise on CPU in float32, while on a GPU a batch's shape
    may flip a near-tie now and then). ``backend="vllm"`` needs ``pip install 'slmsql-hub[vllm]'``.
    ``key_namespace``: keyed sampling's namespace (:func:`~slmsql_hub.filtering.generate_keyed_samples`).

    Example:

    ```python
    >>> config = GenerationConfig(do_sample=True, temperature=0.8, num_samples=8, batch_size=4)
    >>> config.num_samples, config.batch_size
    (8, 4)
    >>> GenerationConfig(num_samples=4)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: num_samples=4 with do_sample=False would return 4 identical greedy completions; set do_sample=True to sample K completions per prompt

    ```
    """

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    do_sample: bool = False
    num_samples: int = 1
    batch_size: int = 8
    seed: int | None = 0
    backend: Backend = "transformers"
    share_prefill: bool = True
    drop_finished: bool = True
    key_namespace: str = FILTER_KEYS

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "num_samples", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise UsageError(f"top_k must be an integer >= 0 (0 turns it off), got {self.top_k!r}")
        if not isinstance(self.temperature, (int, float)) or not self.temperature > 0:
            raise UsageError(
                f"temperature must be > 0 (use do_sample=False for greedy), got {self.temperature!r}"
            )
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise UsageError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise UsageError(f"seed must be an integer or None, got {self.seed!r}")
        if self.num_samples > 1 and not self.do_sample:
            raise UsageError(
                f"num_samples={self.num_samples} with do_sample=False would return {self.num_samples} identical "
                "greedy completions; set do_sample=True to sample K completions per prompt"
            )
        if not all(isinstance(getattr(self, name), bool) for name in ("do_sample", "share_prefill", "drop_finished")):
            raise UsageError("do_sample, share_prefill and drop_finished must be True or False")
        check_key_namespace(self.key_namespace)
        if self.backend not in ("transformers", "vllm"):
            raise UsageError(f"backend must be 'transformers' or 'vllm', got {self.backend!r}")
        if self.backend == "vllm":
            _require_vllm()


@dataclass(frozen=True)
class Completion:
    """One completion: ``text`` without special tokens, cut at the end of the turn; ``num_tokens`` generated,
    the stop token included; ``finished`` false when ``max_new_tokens`` cut it off; ``token_ids`` the
    ``num_tokens`` ids generated (what teacher forcing replays: the text need not re-encode to them).

    Example:

    ```python
    >>> Completion(text="SELECT 1", num_tokens=4, finished=True).text
    'SELECT 1'

    ```
    """

    text: str
    num_tokens: int
    finished: bool
    token_ids: tuple[int, ...] = field(default=(), compare=False, repr=False)


def _require_vllm() -> None:
    if importlib.util.find_spec("vllm") is None:
        raise UsageError(_VLLM_HINT)


def render_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt]) -> list[str]:
    """Chats as prompt strings through the tokenizer's chat template (``add_generation_prompt``); strings pass
    through as already templated.

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> fake = SimpleNamespace(chat_template="...", apply_chat_template=lambda m, **kw: m[-1]["content"] + "|A:")
    >>> render_prompts(fake, [[{"role": "user", "content": "Q"}], "raw prompt"])
    ['Q|A:', 'raw prompt']

    ```
    """
    rendered: list[str] = []
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            rendered.append(prompt)
            continue
        if not isinstance(prompt, Sequence) or not all(isinstance(m, dict) for m in prompt):
            raise UsageError(
                f"prompt {index} is neither a string nor a list of {{'role', 'content'}} messages: {prompt!r:.80}"
            )
        if getattr(tokenizer, "chat_template", None) is None:
            raise UsageError(
                "the tokenizer has no chat template; pass already templated prompt strings or a chat tokenizer"
            )
        rendered.append(
            tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)
        )
    return rendered


def stop_token_ids(tokenizer: PreTrainedTokenizerBase, model: Any = None) -> list[int]:
    """Distinct token ids that end a completion: ``<|im_end|>`` when known, the tokenizer's eos, then the
    ``model``'s ``generation_config.eos_token_id`` (int or list).

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> tok = SimpleNamespace(get_vocab=lambda: {"<|im_end|>": 7, "<|endoftext|>": 3}, eos_token_id=3)
    >>> stop_token_ids(tok)
    [7, 3]

    ```
    """
    ids: list[int] = []
    vocab = tokenizer.get_vocab()
    if END_OF_TURN in vocab:
        ids.append(int(vocab[END_OF_TURN]))
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.append(int(tokenizer.eos_token_id))
    model_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(model_eos, int):
        ids.append(model_eos)
    elif isinstance(model_eos, (list, tuple)):
        ids.extend(int(i) for i in model_eos)
    distinct = list(dict.fromkeys(ids))
    if not distinct:
        raise UsageError(
            "the tokenizer has neither <|im_end|> nor an eos token, so generation could never stop"
        )
    return distinct
