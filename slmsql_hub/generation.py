"""Batched generation for a policy: a base model loaded once, with zero, one or several LoRA adapters.

Three callers share this module: the DAPO-style pass-rate filter (K sampled completions per prompt), the
evaluation (greedy decoding, SFT and GRPO adapters over one base) and the Space (one prompt, a few samples,
token counts shown). It offers:

- :class:`GenerationConfig`: the decoding settings, validated when built,
- :func:`load_policy`: the base model and tokenizer, with PEFT adapters loaded by name,
- :func:`use_adapter`: run a block with one adapter active, or with adapters disabled (base only),
- :func:`generate` / :func:`generate_completions`: batched greedy or sampled generation, LEFT padded, chat
  template applied, stopping at the end of the assistant turn, seeded, K samples per prompt as K rows of
  one batch (``num_return_sequences`` semantics) with each prompt encoded and prefilled once,
- :func:`generate_with_processor`: the same rendering, padding and stopping, decoding over a logits processor
  of the caller's (the pass-rate filter's per-row seeded sampler).

The ``transformers`` backend is always available; the ``vllm`` backend needs the optional extra
(``pip install 'slmsql-hub[vllm]'``). Importing this module does no I/O and imports neither torch nor vLLM.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import inspect
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tqdm.auto import tqdm

from .errors import UsageError
from .model_refs import looks_local

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

#: The end-of-turn token of Qwen-style chat templates; generation always stops there when the vocabulary has it.
END_OF_TURN = "<|im_end|>"

_VLLM_HINT = "the vLLM backend needs vLLM: install it with `pip install 'slmsql-hub[vllm]'` (or use backend='transformers')"

Backend = Literal["transformers", "vllm"]
Message = dict[str, str]
#: One prompt: a chat (list of ``{"role", "content"}`` messages, templated here) or an already templated string.
Prompt = Sequence[Message] | str


@dataclass
class GenerationConfig:
    """How to decode: greedy or sampled, how many samples per prompt, in batches of how many prompts.

    Args:
        max_new_tokens (`int`, defaults to `256`):
            Most tokens generated per completion (the end-of-turn token included).
        temperature (`float`, defaults to `1.0`):
            Softmax temperature for sampling; must be > 0. Ignored when ``do_sample=False``.
        top_p (`float`, defaults to `1.0`):
            Nucleus sampling mass in ``(0, 1]``; ``1.0`` keeps every token.
        top_k (`int`, defaults to `0`):
            Sample among the ``top_k`` most likely tokens; ``0`` turns the filter off.
        do_sample (`bool`, defaults to `False`):
            ``False``: greedy decoding (deterministic). ``True``: sample with the settings above.
        num_samples (`int`, defaults to `1`):
            Completions per prompt (the K of pass@K and of GRPO's group). ``K > 1`` needs ``do_sample=True``.
        batch_size (`int`, defaults to `8`):
            Prompts per ``generate`` call; each call decodes ``batch_size * num_samples`` sequences.
        seed (`int` or `None`, defaults to `0`):
            Seeds sampling: the same seed, prompts and ``batch_size`` give the same samples (prompts are
            batched longest first; batch ``i`` is seeded with ``seed + i``). ``None`` leaves the RNG alone.
        backend (`str`, defaults to `"transformers"`):
            ``"transformers"`` (always available) or ``"vllm"`` (needs ``pip install 'slmsql-hub[vllm]'``).
        share_prefill (`bool`, defaults to `True`):
            With ``num_samples > 1`` on the transformers backend, run each prompt through the model ONCE and
            repeat its KV cache K times, instead of letting ``num_return_sequences=K`` prefill K copies of
            the prompt. Same rows, same samples, K-1 fewer prefills (schema prompts are long, SQL answers
            short). ``False`` uses ``num_return_sequences=K`` as is.

    Example:

    ```python
    >>> from slmsql_hub.generation import GenerationConfig
    >>> config = GenerationConfig(do_sample=True, temperature=0.8, num_samples=8, batch_size=4)
    >>> config.num_samples, config.greedy
    (8, False)
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
        if not isinstance(self.share_prefill, bool) or not isinstance(self.do_sample, bool):
            raise UsageError("do_sample and share_prefill must be True or False")
        if self.backend not in ("transformers", "vllm"):
            raise UsageError(f"backend must be 'transformers' or 'vllm', got {self.backend!r}")
        if self.backend == "vllm":
            _require_vllm()

    @property
    def greedy(self) -> bool:
        """``True`` when decoding is greedy (deterministic, one completion per prompt)."""
        return not self.do_sample


@dataclass(frozen=True)
class Completion:
    """One generated completion.

    Args:
        text (`str`):
            The decoded completion, special tokens stripped, cut at the end-of-turn token.
        num_tokens (`int`):
            Tokens the model generated for it, the stop token included when it was reached.
        finished (`bool`):
            ``True`` when the model ended its turn; ``False`` when ``max_new_tokens`` cut it off.

    Example:

    ```python
    >>> from slmsql_hub.generation import Completion
    >>> Completion(text="SELECT 1", num_tokens=4, finished=True).text
    'SELECT 1'

    ```
    """

    text: str
    num_tokens: int
    finished: bool


def _require_vllm() -> None:
    if importlib.util.find_spec("vllm") is None:
        raise UsageError(_VLLM_HINT)


# ----------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------


def _check_model_ref(ref: str | Path, what: str) -> None:
    if Path(ref).expanduser().exists():
        return
    if looks_local(ref):
        raise UsageError(f"{what} {str(ref)!r} does not exist; pass an existing folder or a Hub repo id")


def _check_adapter_ref(ref: str | Path, name: str) -> None:
    _check_model_ref(ref, f"adapter {name!r}")
    path = Path(ref).expanduser()
    if path.is_dir() and not (path / "adapter_config.json").is_file():
        raise UsageError(
            f"adapter {name!r} at {str(ref)!r} has no adapter_config.json; pass the folder a PEFT adapter was "
            "saved to (model.save_pretrained), e.g. outputs/<run>/sft/stage2"
        )


def _collect_adapters(
    adapter: str | Path | None, adapters: dict[str, str | Path] | None
) -> dict[str, str | Path]:
    named: dict[str, str | Path] = {}
    if adapter is not None:
        named["default"] = adapter
    for name, ref in (adapters or {}).items():
        if not name or not isinstance(name, str):
            raise UsageError(f"adapter names must be non-empty strings, got {name!r}")
        if name in named:
            raise UsageError(
                f"adapter name {name!r} given twice; `adapter=` is loaded under the name 'default'"
            )
        named[name] = ref
    for name, ref in named.items():
        _check_adapter_ref(ref, name)
    return named


def _resolve_device(device: str | None) -> str:
    import torch

    if device is not None:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def _resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    import torch

    if dtype is None or dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if isinstance(dtype, str):
        resolved = getattr(torch, dtype, None)
        if not isinstance(resolved, torch.dtype):
            raise UsageError(f"dtype {dtype!r} is not a torch dtype; use 'float32', 'bfloat16' or 'float16'")
        return resolved
    return dtype


def load_policy(
    base_model: str | Path,
    adapter: str | Path | None = None,
    *,
    adapters: dict[str, str | Path] | None = None,
    tokenizer: str | Path | None = None,
    dtype: str | torch.dtype | None = None,
    device: str | None = None,
    backend: Backend = "transformers",
    revision: str | None = None,
    adapter_revisions: dict[str, str | None] | None = None,
) -> tuple[Any, PreTrainedTokenizerBase]:
    """Load a base model ONCE with any number of PEFT (LoRA) adapters, each under its own name.

    With adapters the model is a ``peft.PeftModel``: switch with ``model.set_adapter(name)`` or, better, the
    :func:`use_adapter` context manager, which also runs the base alone (``use_adapter(model, None)``).
    Without adapters it is the plain ``transformers`` model. The model is returned in eval mode, frozen.

    Args:
        base_model (`str` or `Path`):
            Folder or Hub id of the base causal LM (e.g. ``Qwen/Qwen2.5-Coder-1.5B-Instruct``).
        adapter (`str` or `Path`, *optional*):
            One PEFT adapter folder, loaded under the name ``"default"``.
        adapters (`dict[str, str | Path]`, *optional*):
            More adapters by name, e.g. ``{"sft": ".../sft/stage2", "grpo": ".../grpo"}``. The first one
            loaded (``adapter`` if given) is active on return.
        tokenizer (`str` or `Path`, *optional*):
            Where to load the tokenizer from; defaults to ``base_model``.
        dtype (`str` or `torch.dtype`, *optional*):
            Weights dtype; defaults to bfloat16 on a GPU that supports it, float32 otherwise.
        device (`str`, *optional*):
            ``"cuda"``, ``"cpu"``...; defaults to CUDA when available.
        backend (`str`, defaults to `"transformers"`):
            ``"vllm"`` returns a :class:`VLLMPolicy` instead (needs ``pip install 'slmsql-hub[vllm]'``).
        revision (`str`, *optional*):
            Hub revision (commit sha, tag, branch) of ``base_model``, and of the tokenizer when it comes from it.
        adapter_revisions (`dict[str, str | None]`, *optional*):
            Hub revision per adapter name (``"default"`` for ``adapter``); adapters not named use the main branch.

    Returns:
        `tuple`: ``(model, tokenizer)``, ready for :func:`generate`.

    Example:

    ```python
    >>> from slmsql_hub.generation import load_policy
    >>> load_policy("outputs/nowhere/base")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: base model 'outputs/nowhere/base' does not exist; pass an existing folder or a Hub repo id

    ```
    """
    _check_model_ref(base_model, "base model")
    named = _collect_adapters(adapter, adapters)
    pins = {name: rev for name, rev in (adapter_revisions or {}).items() if rev}
    unknown = sorted(set(pins) - set(named))
    if unknown:
        raise UsageError(f"adapter_revisions names adapter(s) {', '.join(unknown)} that are not loaded")
    if backend == "vllm":
        _require_vllm()
        if pins:  # vLLM reads LoRA adapters from folders: fetch the pinned ones first
            from huggingface_hub import snapshot_download

            named = {n: snapshot_download(str(r), revision=pins[n]) if n in pins else r for n, r in named.items()}
        return _load_vllm_policy(base_model, named, tokenizer=tokenizer, dtype=dtype, revision=revision)
    if backend != "transformers":
        raise UsageError(f"backend must be 'transformers' or 'vllm', got {backend!r}")

    from transformers import AutoModelForCausalLM, AutoTokenizer

    resolved_device = _resolve_device(device)
    resolved_dtype = _resolve_dtype(dtype, resolved_device)
    logger.info("loading base model %s (%s on %s)", base_model, resolved_dtype, resolved_device)
    model = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=resolved_dtype, revision=revision)
    model.to(resolved_device)
    tok = AutoTokenizer.from_pretrained(
        str(tokenizer if tokenizer is not None else base_model), revision=None if tokenizer else revision
    )

    if named:
        from peft import PeftModel

        items = list(named.items())
        first_name, first_ref = items[0]
        logger.info("loading adapter %r from %s", first_name, first_ref)
        model = PeftModel.from_pretrained(
            model, str(first_ref), adapter_name=first_name, is_trainable=False, revision=pins.get(first_name)
        )
        for name, ref in items[1:]:
            logger.info("loading adapter %r from %s", name, ref)
            model.load_adapter(str(ref), adapter_name=name, is_trainable=False, revision=pins.get(name))
        model.set_adapter(first_name)
        model.to(resolved_device)
    model.eval()
    model.requires_grad_(False)
    return model, tok


@contextlib.contextmanager
def use_adapter(model: Any, name: str | None) -> Iterator[Any]:
    """Run a block with adapter ``name`` active, or with every adapter disabled when ``name`` is ``None``.

    The previously active adapter and every parameter's ``requires_grad`` are restored on exit, so this is
    safe in the middle of training. Works on a ``peft.PeftModel``, a :class:`VLLMPolicy`, and (for
    ``name=None`` only) a plain model.

    Args:
        model: The policy from :func:`load_policy`.
        name (`str` or `None`): Adapter to activate; ``None`` runs the base model alone.

    Returns:
        A context manager yielding ``model``.

    Example:

    ```python
    >>> import torch
    >>> from slmsql_hub.generation import use_adapter
    >>> plain = torch.nn.Linear(2, 2)
    >>> with use_adapter(plain, None) as m:   # no adapters: base only is the model itself
    ...     m is plain
    True

    ```
    """
    if isinstance(model, VLLMPolicy):
        previous = model.active_adapter
        model.set_adapter(name)
        try:
            yield model
        finally:
            model.set_adapter(previous)
        return

    peft_config = getattr(model, "peft_config", None)
    if not peft_config:
        if name is not None:
            raise UsageError(
                f"adapter {name!r} requested but the model has no adapters; load it with load_policy"
            )
        yield model
        return
    if name is not None and name not in peft_config:
        raise UsageError(f"unknown adapter {name!r}; loaded adapters: {sorted(peft_config)}")
    # PEFT marks an adapter trainable when it (re)activates it, also on leaving disable_adapter():
    # remember every flag and put it back, so generating never unfreezes (or freezes) anything.
    grads = {key: param.requires_grad for key, param in model.named_parameters()}

    def restore_grads() -> None:
        for key, param in model.named_parameters():
            if key in grads:
                param.requires_grad_(grads[key])

    previous = model.active_adapter
    try:
        if name is None:
            with model.disable_adapter():
                yield model
        else:
            model.set_adapter(name)
            restore_grads()
            yield model
    finally:
        if name is not None:
            model.set_adapter(previous)
        restore_grads()


# ----------------------------------------------------------------------------------------------------------
# Prompts and stop tokens
# ----------------------------------------------------------------------------------------------------------


def render_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt]) -> list[str]:
    """Turn chats into prompt strings with the tokenizer's chat template and ``add_generation_prompt``.

    Strings pass through unchanged (they are taken as already templated).

    Args:
        tokenizer: A tokenizer with a chat template.
        prompts: Chats (lists of ``{"role", "content"}`` dicts) and/or strings.

    Returns:
        `list[str]`: One prompt string per input, ending where the assistant's answer starts.

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> from slmsql_hub.generation import render_prompts
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
    """Token ids that end a completion: ``<|im_end|>`` when known, the tokenizer's eos, the model's eos.

    Args:
        tokenizer: The policy's tokenizer.
        model (*optional*): The policy; its ``generation_config.eos_token_id`` (int or list) is added.

    Returns:
        `list[int]`: Distinct ids, ``<|im_end|>`` first.

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> from slmsql_hub.generation import stop_token_ids
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


def _pad_token_id(tokenizer: PreTrainedTokenizerBase, stops: list[int]) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else stops[-1]


def _tokenize_prompts(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each prompt string (the chat template already holds any special tokens)."""
    encoded = [list(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts]
    empty = [i for i, ids in enumerate(encoded) if not ids]
    if empty:
        raise UsageError(f"prompt {empty[0]} encodes to zero tokens; every prompt needs some text")
    return encoded


def _left_pad(
    encoded: Sequence[Sequence[int]], pad_id: int, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """LEFT-pad token id lists into ``(input_ids, attention_mask)``: every row ends with its prompt's last token."""
    import torch

    width = max(len(ids) for ids in encoded)
    input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, ids in enumerate(encoded):
        input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        attention_mask[row, width - len(ids) :] = 1
    return input_ids.to(device), attention_mask.to(device)


# ----------------------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------------------


def _hf_generation_config(config: GenerationConfig, stops: list[int], pad_id: int) -> Any:
    from transformers import GenerationConfig as HFGenerationConfig

    # Every decoding knob is set explicitly so a checkpoint's generation_config.json (Qwen ships
    # repetition_penalty, temperature, top_p, top_k) cannot silently change what we measure.
    common = dict(
        max_new_tokens=config.max_new_tokens,
        num_return_sequences=config.num_samples,
        num_beams=1,
        repetition_penalty=1.0,
        eos_token_id=stops,
        pad_token_id=pad_id,
        bos_token_id=None,
    )
    if config.do_sample:
        return HFGenerationConfig(
            do_sample=True,
            temperature=float(config.temperature),
            top_p=float(config.top_p),
            top_k=config.top_k,
            **common,
        )
    # Greedy: the sampling knobs at their neutral defaults (no warnings, nothing inherited).
    return HFGenerationConfig(do_sample=False, temperature=1.0, top_p=1.0, top_k=50, **common)


def _model_device(model: Any) -> Any:
    device = getattr(model, "device", None)
    if device is not None:
        return device
    return next(model.parameters()).device


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """Run a block with the model in eval mode, then put it back in train mode if it was (GRPO's policy is)."""
    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()


@contextlib.contextmanager
def _seeded(seed: int | None, device: Any) -> Iterator[None]:
    """Seed torch for one block and restore the caller's RNG state afterwards."""
    import torch

    if seed is None:
        yield
        return
    devices = [device] if getattr(device, "type", str(device)).startswith("cuda") else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def _split_completions(
    tokenizer: PreTrainedTokenizerBase, new_tokens: torch.Tensor, stops: list[int]
) -> list[Completion]:
    stop_set = set(stops)
    completions: list[Completion] = []
    for row in new_tokens.tolist():
        length = len(row)
        finished = False
        for position, token in enumerate(row):
            if token in stop_set:
                length, finished = position + 1, True
                break
        text = tokenizer.decode(row[:length], skip_special_tokens=True)
        completions.append(Completion(text=text, num_tokens=length, finished=finished))
    return completions


def _cache_kwarg(model: Any) -> str:
    """The keyword a model's forward (and generate) take a KV cache by: ``cache`` (transformers >= 5.x)
    or ``past_key_values`` (older releases)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


def _prefill_once(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, k: int) -> Any | None:
    """Run the prompts (all but their last token) through the model once; return the KV cache repeated K
    times, prompt-major like ``num_return_sequences`` expands inputs, or ``None`` when the cache can't be.

    Positions follow the left padding exactly as ``generate`` derives them from the attention mask, so the
    continuation is the one a full prefill would give.
    """
    if input_ids.shape[1] < 2:
        return None
    name = _cache_kwarg(model)
    position_ids = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    extra = (
        {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(type(base).forward).parameters else {}
    )
    output = model(
        input_ids=input_ids[:, :-1],
        attention_mask=attention_mask[:, :-1],
        position_ids=position_ids[:, :-1],
        use_cache=True,
        **extra,
    )
    cache = output.get(name)
    if cache is None:
        cache = output.get("past_key_values")
    if cache is None or not hasattr(cache, "batch_repeat_interleave"):
        return None
    cache.batch_repeat_interleave(k)
    return cache


def _generate_batch(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    hf_config: Any,
    config: GenerationConfig,
) -> torch.Tensor:
    """One ``generate`` call for a batch: ``batch * K`` rows, prompt-major."""
    k = config.num_samples
    if k > 1 and config.share_prefill:
        cache = _prefill_once(model, input_ids, attention_mask, k)
        if cache is not None:
            one_each = copy.deepcopy(hf_config)
            one_each.num_return_sequences = 1
            return model.generate(
                input_ids=input_ids.repeat_interleave(k, dim=0),
                attention_mask=attention_mask.repeat_interleave(k, dim=0),
                generation_config=one_each,
                **{_cache_kwarg(model): cache},
            )
        logger.debug("the model's cache cannot be repeated; prefilling K copies via num_return_sequences")
    return model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=hf_config)


def _generate_transformers(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    texts: list[str],
    config: GenerationConfig,
    progress: bool,
) -> list[list[Completion]]:
    import torch

    stops = stop_token_ids(tokenizer, model)
    pad_id = _pad_token_id(tokenizer, stops)
    hf_config = _hf_generation_config(config, stops, pad_id)
    device = _model_device(model)
    k = config.num_samples
    encoded = _tokenize_prompts(tokenizer, texts)
    # Longest prompts first, batched with prompts of similar length: little padding (schemas dominate the
    # prompt, so a batch mostly holds one database's questions) and an out-of-memory error shows at once.
    order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
    batches = [order[start : start + config.batch_size] for start in range(0, len(order), config.batch_size)]
    results: list[list[Completion]] = [[] for _ in texts]
    with _eval_mode(model):
        for batch_index, batch in enumerate(
            tqdm(batches, desc=f"generate (K={k})", unit="batch", disable=not progress)
        ):
            input_ids, attention_mask = _left_pad([encoded[i] for i in batch], pad_id, device)
            seed = None if config.seed is None else config.seed + batch_index
            with _seeded(seed, device), torch.inference_mode():
                output = _generate_batch(model, input_ids, attention_mask, hf_config, config)
            # Rows come back prompt-major: the batch's first prompt's K samples, then the next prompt's, ...
            completions = _split_completions(tokenizer, output[:, input_ids.shape[1] :], stops)
            for row, index in enumerate(batch):
                results[index] = completions[row * k : (row + 1) * k]
    return results


def generate_completions(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Prompt],
    config: GenerationConfig | None = None,
    progress: bool = True,
) -> list[list[Completion]]:
    """Generate ``config.num_samples`` completions per prompt, in batches, with their token counts.

    Chats are rendered with the tokenizer's chat template (``add_generation_prompt=True``); prompts are
    LEFT padded and batched longest first (results come back in input order); generation stops at
    ``<|im_end|>`` or the eos token; with ``do_sample=True`` each prompt is encoded once and sampled K times
    as K rows of one batch (``num_return_sequences=K``; with ``share_prefill`` the prompt's KV cache is
    computed once and repeated K times). The active adapter of a PEFT model is used (choose it with
    :func:`use_adapter`).

    Args:
        model: The policy from :func:`load_policy` (any ``transformers`` causal LM, PEFT-wrapped or not, or
            a :class:`VLLMPolicy` with ``backend="vllm"``).
        tokenizer: Its tokenizer.
        prompts: Chats (lists of ``{"role", "content"}``) or already templated strings.
        config (`GenerationConfig`, *optional*): Decoding settings; greedy with defaults when omitted.
        progress (`bool`, defaults to `True`): Show a tqdm bar over batches.

    Returns:
        `list[list[Completion]]`: ``len(prompts)`` lists of ``num_samples`` completions, in input order.

    Example:

    ```python
    >>> from slmsql_hub.generation import GenerationConfig, generate_completions
    >>> generate_completions(None, None, [], GenerationConfig())
    []

    ```
    """
    config = config or GenerationConfig()
    prompts = list(prompts)
    if not prompts:
        return []
    if config.backend == "vllm":
        if not isinstance(model, VLLMPolicy):
            raise UsageError("backend='vllm' needs the policy from load_policy(..., backend='vllm')")
        return model.generate(prompts, config, progress=progress)
    if isinstance(model, VLLMPolicy):
        raise UsageError("this policy was loaded with backend='vllm'; pass GenerationConfig(backend='vllm')")
    texts = render_prompts(tokenizer, prompts)
    return _generate_transformers(model, tokenizer, texts, config, progress)


def generate(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Prompt],
    config: GenerationConfig | None = None,
    progress: bool = True,
) -> list[list[str]]:
    """Generate completions as text: ``len(prompts)`` lists of ``config.num_samples`` strings, in order.

    Same as :func:`generate_completions` without the token counts.

    Args:
        model: The policy from :func:`load_policy`.
        tokenizer: Its tokenizer.
        prompts: Chats (lists of ``{"role", "content"}``) or already templated strings.
        config (`GenerationConfig`, *optional*): Decoding settings; greedy with defaults when omitted.
        progress (`bool`, defaults to `True`): Show a tqdm bar over batches.

    Returns:
        `list[list[str]]`: Decoded completions (special tokens stripped), grouped per prompt.

    Example:

    ```python
    >>> from slmsql_hub.generation import GenerationConfig, generate
    >>> generate(None, None, [], GenerationConfig(do_sample=True, num_samples=8))
    []

    ```
    """
    grouped = generate_completions(model, tokenizer, prompts, config, progress=progress)
    return [[completion.text for completion in group] for group in grouped]


def generate_with_processor(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Prompt],
    logits_processor: Any,
    *,
    num_samples: int = 1,
    max_new_tokens: int = 256,
) -> list[list[Completion]]:
    """ONE ``generate`` call over every prompt repeated ``num_samples`` times (prompt-major rows), choosing each
    token greedily over the scores that ``logits_processor(input_ids, scores)`` returns.

    A processor that adds each row's own seeded Gumbel noise makes this per-row sampling whose draws do not
    depend on the rest of the batch (:class:`~slmsql_hub.filtering.KeyedSampler`, the pass-rate filter's
    sampler). Prompts are rendered, LEFT padded, stopped and split into completions exactly as in
    :func:`generate_completions`; the model's train/eval mode is restored afterwards.

    Args:
        model: a ``transformers`` causal LM, PEFT-wrapped or not (its active adapter is used).
        tokenizer: its tokenizer.
        prompts: chats or templated strings; all of them go into one call (batch them yourself).
        logits_processor: a ``transformers`` logits processor (``(input_ids, scores) -> scores``) that sees
            ``len(prompts) * num_samples`` rows.
        num_samples (`int`, defaults to `1`): rows per prompt.
        max_new_tokens (`int`, defaults to `256`): the completion length cap.

    Returns:
        `list[list[Completion]]`: ``num_samples`` completions per prompt, in input order.

    Example:

    ```python
    >>> from slmsql_hub.generation import generate_with_processor
    >>> generate_with_processor(None, None, [], None, num_samples=4)
    []

    ```
    """
    prompts = list(prompts)
    if not prompts:
        return []
    import torch
    from transformers import LogitsProcessorList

    stops = stop_token_ids(tokenizer, model)
    pad_id = _pad_token_id(tokenizer, stops)
    encoded = _tokenize_prompts(tokenizer, render_prompts(tokenizer, prompts))
    rows = [ids for ids in encoded for _ in range(num_samples)]
    input_ids, attention_mask = _left_pad(rows, pad_id, _model_device(model))
    # Rows are already expanded, so generate() decodes one sequence per row, greedily over the processed scores.
    hf_config = _hf_generation_config(GenerationConfig(max_new_tokens=max_new_tokens), stops, pad_id)
    with _eval_mode(model), torch.inference_mode():
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=hf_config,
            logits_processor=LogitsProcessorList([logits_processor]),
        )
    completions = _split_completions(tokenizer, output[:, input_ids.shape[1] :], stops)
    return [completions[i * num_samples : (i + 1) * num_samples] for i in range(len(prompts))]


# ----------------------------------------------------------------------------------------------------------
# vLLM backend (optional extra)
# ----------------------------------------------------------------------------------------------------------


@dataclass
class VLLMPolicy:
    """A base model served by vLLM with LoRA adapters by name; the ``backend="vllm"`` policy.

    Built by ``load_policy(..., backend="vllm")``; it mirrors the PEFT switching API (``set_adapter``,
    ``disable_adapter``, ``active_adapter``) so :func:`use_adapter` works on both backends.

    Args:
        llm: The ``vllm.LLM`` engine (LoRA enabled when adapters were given).
        lora_paths (`dict[str, str]`): Adapter folders by name.
        active_adapter (`str` or `None`): The adapter in use; ``None`` runs the base.
    """

    llm: Any
    lora_paths: dict[str, str] = field(default_factory=dict)
    active_adapter: str | None = None

    def set_adapter(self, name: str | None) -> None:
        """Activate adapter ``name`` (``None``: base only)."""
        if name is not None and name not in self.lora_paths:
            raise UsageError(f"unknown adapter {name!r}; loaded adapters: {sorted(self.lora_paths)}")
        self.active_adapter = name

    @contextlib.contextmanager
    def disable_adapter(self) -> Iterator[None]:
        """Run the base model alone inside the block."""
        previous = self.active_adapter
        self.active_adapter = None
        try:
            yield
        finally:
            self.active_adapter = previous

    def _lora_request(self) -> Any:
        if self.active_adapter is None:
            return None
        from vllm.lora.request import LoRARequest

        names = list(self.lora_paths)
        # vLLM identifies adapters by a positive integer id; keep it stable per name.
        return LoRARequest(
            self.active_adapter, names.index(self.active_adapter) + 1, self.lora_paths[self.active_adapter]
        )

    def generate(
        self, prompts: list[Prompt], config: GenerationConfig, progress: bool = True
    ) -> list[list[Completion]]:
        """Generate ``config.num_samples`` completions per prompt with ``SamplingParams(n=K)``."""
        from vllm import SamplingParams

        tokenizer = self.llm.get_tokenizer()
        stops = stop_token_ids(tokenizer)
        params = SamplingParams(
            n=config.num_samples,
            temperature=float(config.temperature) if config.do_sample else 0.0,
            top_p=float(config.top_p) if config.do_sample else 1.0,
            top_k=config.top_k if config.do_sample else 0,
            max_tokens=config.max_new_tokens,
            seed=config.seed,
            stop_token_ids=stops,
            skip_special_tokens=True,
        )
        texts = render_prompts(tokenizer, prompts)
        outputs = self.llm.generate(texts, params, lora_request=self._lora_request(), use_tqdm=progress)
        return [
            [
                Completion(text=out.text, num_tokens=len(out.token_ids), finished=out.finish_reason == "stop")
                for out in request.outputs
            ]
            for request in outputs
        ]


def _load_vllm_policy(
    base_model: str | Path,
    adapters: dict[str, str | Path],
    *,
    tokenizer: str | Path | None,
    dtype: str | torch.dtype | None,
    revision: str | None = None,
) -> VLLMPolicy:
    from vllm import LLM

    ranks = []
    for ref in adapters.values():
        config_file = Path(ref).expanduser() / "adapter_config.json"
        if config_file.is_file():
            ranks.append(int(json.loads(config_file.read_text()).get("r", 8)))
    kwargs: dict[str, Any] = {}
    if adapters:
        # vLLM only accepts a few rank bounds; take the smallest that fits every adapter.
        needed = max(ranks, default=16)
        bound = next((r for r in (8, 16, 32, 64, 128, 256, 320, 512) if r >= needed), needed)
        kwargs.update(enable_lora=True, max_loras=len(adapters), max_lora_rank=bound)
    if tokenizer is not None:
        kwargs["tokenizer"] = str(tokenizer)
    elif revision:
        kwargs["tokenizer_revision"] = revision
    if revision:
        kwargs["revision"] = revision
    dtype_name = "auto" if dtype is None else str(dtype).replace("torch.", "")
    logger.info("starting vLLM for %s with adapters %s", base_model, sorted(adapters))
    llm = LLM(model=str(base_model), dtype=dtype_name, **kwargs)
    first = next(iter(adapters), None)
    return VLLMPolicy(
        llm=llm, lora_paths={name: str(ref) for name, ref in adapters.items()}, active_adapter=first
    )
