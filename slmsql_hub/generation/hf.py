"""The ``transformers`` backend: left padding, batched ``generate`` with a shared prefill, stopping and splitting."""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from ..errors import UsageError
from ..runtime import bar_disabled
from .config import Completion, GenerationConfig, Prompt, render_prompts, stop_token_ids
from .vllm_backend import VLLMPolicy

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


def _pad_token_id(tokenizer: PreTrainedTokenizerBase, stops: list[int]) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else stops[-1]


def encode_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt]) -> list[list[int]]:
    """The token ids generation feeds the model for each prompt: rendered (:func:`render_prompts`), then
    encoded without added special tokens. Teacher forcing a sampled completion after these ids scores exactly
    the context it was sampled in.

    Example:

    ```python
    >>> encode_prompts(lambda text, add_special_tokens: {"input_ids": [ord(c) for c in text]}, ["ab"])
    [[97, 98]]

    ```
    """
    return _tokenize_prompts(tokenizer, render_prompts(tokenizer, prompts))


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
        completions.append(Completion(text, length, finished, tuple(row[:length])))
    return completions


def forward_parameters(model: Any) -> Any:
    """The parameters of the forward of ``model`` (of its base model, for a PEFT model): what it takes."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inspect.signature(type(base).forward).parameters


def cache_keyword(model: Any) -> str:
    """The keyword a model's forward (and generate) take a KV cache by: ``cache`` (transformers >= 5.x)
    or ``past_key_values`` (older releases)."""
    return "cache" if "cache" in forward_parameters(model) else "past_key_values"


def _growing_cache(model: Any) -> dict[str, Any]:
    """``{keyword: GrowingCache()}``, the cache argument each ``generate`` (and the shared prefill) gets: the
    library's ``DynamicCache`` without its per-token ``torch.cat`` (:mod:`.kv_cache`; same values)."""
    from .kv_cache import GrowingCache

    return {cache_keyword(model): GrowingCache()}


def _prefill_once(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, k: int) -> Any | None:
    """Run the prompts (all but their last token) through the model once; return the KV cache repeated K
    times, prompt-major like ``num_return_sequences`` expands inputs, or ``None`` when the cache can't be.

    Positions follow the left padding exactly as ``generate`` derives them from the attention mask, so the
    continuation is the one a full prefill would give.
    """
    if input_ids.shape[1] < 2:
        return None
    name = cache_keyword(model)
    position_ids = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    extra = {"logits_to_keep": 1} if "logits_to_keep" in forward_parameters(model) else {}
    output = model(
        input_ids=input_ids[:, :-1],
        attention_mask=attention_mask[:, :-1],
        position_ids=position_ids[:, :-1],
        use_cache=True,
        **extra,
        **_growing_cache(model),
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
                **{cache_keyword(model): cache},
            )
        logger.debug("the model's cache cannot be repeated; prefilling K copies via num_return_sequences")
    return model.generate(
        input_ids=input_ids, attention_mask=attention_mask, generation_config=hf_config, **_growing_cache(model)
    )


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
            tqdm(batches, desc=f"generate (K={k})", unit="batch", disable=bar_disabled(progress))
        ):
            input_ids, attention_mask = _left_pad([encoded[i] for i in batch], pad_id, device)
            seed = None if config.seed is None else config.seed + batch_index
            with _seeded(seed, device), torch.inference_mode():
                if config.drop_finished and not config.do_sample:
                    new = _decode_dropping_finished(
                        model, input_ids, attention_mask, _GREEDY, stops, pad_id, config.max_new_tokens
                    )
                else:
                    output = _generate_batch(model, input_ids, attention_mask, hf_config, config)
                    new = output[:, input_ids.shape[1] :]
            # Rows come back prompt-major: the batch's first prompt's K samples, then the next prompt's, ...
            completions = _split_completions(tokenizer, new, stops)
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
    """``config.num_samples`` completions per prompt (default: greedy), in input order, with the active adapter
    (:func:`use_adapter`). ``model``: a ``transformers`` causal LM (PEFT-wrapped or not), or a
    :class:`VLLMPolicy` with ``backend="vllm"``.

    Example:

    ```python
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
    """:func:`generate_completions` as text only.

    Example:

    ```python
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
    drop_finished: bool = True,
    share_prefill: bool = True,
) -> list[list[Completion]]:
    """Every prompt repeated ``num_samples`` times (prompt-major rows) decoded as ONE batch, each token chosen
    greedily over the scores ``logits_processor(input_ids, scores)`` returns (with
    :class:`~slmsql_hub.filtering.KeyedSampler`: the pass-rate filter's per-row seeded sampling). Returns
    ``num_samples`` completions per prompt, in input order.

    A processor with ``keep_rows(rows)`` (``KeyedSampler``) lets the batch shed its finished rows as it goes
    (``drop_finished``; :func:`_decode_dropping_finished`): the same tokens, as each row's logits do not depend on
    the other rows (checked bitwise on CPU in float32; on a GPU a batch's shape may flip a near-tie now and then,
    as the filter's docstring says of batches), without computing the half of the rows that ``generate`` pads
    after their end. There, ``share_prefill`` runs each prompt through the model once and repeats its KV cache
    and last logits ``num_samples`` times (the same tokens: a row's prefill does not depend on the batch's other
    rows; ``tests/test_generation.py``). Else, or with ``drop_finished=False``, one ``generate`` call decodes
    every row to the batch's longest.

    Example:

    ```python
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
    encoded = encode_prompts(tokenizer, prompts)
    with _eval_mode(model), torch.inference_mode():
        if drop_finished and hasattr(logits_processor, "keep_rows"):
            input_ids, attention_mask = _left_pad(encoded, pad_id, _model_device(model))
            new_tokens = _decode_dropping_finished(
                model, input_ids, attention_mask, logits_processor, stops, pad_id, max_new_tokens,
                num_samples=num_samples, share_prefill=share_prefill,
            )  # fmt: skip
        else:  # rows already expanded: generate() decodes one sequence per row, greedily over the scores
            rows = [ids for ids in encoded for _ in range(num_samples)]
            input_ids, attention_mask = _left_pad(rows, pad_id, _model_device(model))
            hf_config = _hf_generation_config(GenerationConfig(max_new_tokens=max_new_tokens), stops, pad_id)
            output = model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=hf_config,
                logits_processor=LogitsProcessorList([logits_processor]),
                **_growing_cache(model),
            )
            new_tokens = output[:, input_ids.shape[1] :]
    completions = _split_completions(tokenizer, new_tokens, stops)
    return [completions[i * num_samples : (i + 1) * num_samples] for i in range(len(prompts))]


class _Scores:
    """The identity processor: :func:`_decode_dropping_finished` then picks the argmax of the logits, greedy
    decoding as ``generate`` does it (no processor is active there at temperature 1 and repetition penalty 1)."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores

    def keep_rows(self, rows: list[int]) -> None:
        """Nothing to follow: the identity keeps no per-row state."""


_GREEDY = _Scores()

DROP_SHARE = 0.25
""":func:`_decode_dropping_finished` sheds finished rows once they are this share of the batch (each shedding
copies the KV cache once)."""


def _decode_dropping_finished(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    processor: Any,
    stops: list[int],
    pad_id: int,
    max_new_tokens: int,
    *,
    num_samples: int = 1,
    share_prefill: bool = True,
) -> torch.Tensor:
    """Greedy decoding over ``processor``'s scores as ``generate`` does it (positions from the left padding,
    float32 scores, stop at a stop token or ``max_new_tokens``), dropping rows that have stopped from the batch
    (their KV cache, mask and ``processor.keep_rows``). ``input_ids`` holds each prompt once; each is decoded
    ``num_samples`` times (prompt-major rows), from one shared prefill (``share_prefill``) or from its own.
    Returns the new tokens per row, ``pad_id`` after a row's end."""
    import torch

    from .kv_cache import GrowingCache

    cache = GrowingCache()
    positions = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
    extra = {"logits_to_keep": 1} if "logits_to_keep" in forward_parameters(model) else {}
    stop, kwarg = set(stops), {cache_keyword(model): cache}
    if not share_prefill:
        input_ids, attention_mask, positions = (t.repeat_interleave(num_samples, dim=0)
                                                for t in (input_ids, attention_mask, positions))  # fmt: skip
    live = list(range(input_ids.shape[0] * (num_samples if share_prefill else 1)))  # each batch row's own row
    new: list[list[int]] = [[] for _ in live]
    seen, ids, mask, pos = input_ids, input_ids, attention_mask, positions
    for step in range(max_new_tokens):
        output = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **extra, **kwarg)
        logits = output.logits[:, -1, :].to(dtype=torch.float32, copy=True)
        if step == 0 and share_prefill and num_samples > 1:  # one prefill per prompt, repeated per sample
            cache.batch_repeat_interleave(num_samples)
            logits, seen, mask, pos = (t.repeat_interleave(num_samples, dim=0) for t in (logits, seen, mask, pos))
        tokens = processor(seen, logits).argmax(-1)
        for row, token in zip(live, tokens.tolist()):
            if not new[row] or new[row][-1] not in stop:
                new[row].append(token)
        finished = torch.tensor([new[row][-1] in stop for row in live])
        if bool(finished.all()) or step == max_new_tokens - 1:
            break
        ids, pos = tokens[:, None], pos[:, -1:] + 1
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
        seen = torch.cat([seen, ids], dim=-1)
        if int(finished.sum()) >= DROP_SHARE * len(live):
            keep = (~finished).nonzero().squeeze(-1).to(ids.device)
            cache.reorder_cache(keep)
            processor.keep_rows(keep.tolist())
            ids, pos, mask, seen = ids[keep], pos[keep], mask[keep], seen[keep]
            live = [live[i] for i in keep.tolist()]
    width = max(len(tokens) for tokens in new)
    return torch.tensor([tokens + [pad_id] * (width - len(tokens)) for tokens in new], dtype=torch.long)
