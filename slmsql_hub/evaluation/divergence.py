"""How far one adapter's policy moved from another's, token by token, on completions the first one sampled.

Teacher forcing: each completion (its generated token ids) follows its prompt's exact token ids, and both
adapters of ONE PEFT model (:func:`~slmsql_hub.generation.use_adapter`) score every completion position. Per
position t, with p and q the two policies' next-token distributions over the whole vocabulary (softmax of the
logits, temperature 1: the models themselves, not a sampler's tempered view):

- ``kl``: KL(p ‖ q) = Σ_v p(v) (log p(v) − log q(v)), exact, not a one-sample estimate;
- ``entropy_a`` / ``entropy_b``: −Σ_v p(v) log p(v), and the same of q.

Sums over positions come back, so means pool exactly over questions, slices and seeds
(:func:`mean_divergence`). KL(p ‖ q) on p's own samples is the reverse of what a KL penalty at beta 0 would
have held GRPO to; TRL logs none at beta 0, so this is the only measure of the drift.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_SUMS = ("tokens", "kl", "entropy_a", "entropy_b")
"""The keys of :func:`divergence_sums`' result."""


def _log_probs(model: Any, adapter: str, input_ids: Any, attention_mask: Any, start: int) -> Any:
    """``(rows, positions, vocab)`` float32 log-probs of the positions that predict tokens ``start..``, each row
    run through the model whole (only those positions' logits are formed where the model takes
    ``logits_to_keep``: a long prompt's are not)."""
    import torch

    from ..generation import forward_parameters, use_adapter

    keep = input_ids.shape[1] - start + 1
    extra = {"logits_to_keep": keep} if "logits_to_keep" in forward_parameters(model) else {}
    with use_adapter(model, adapter) as active, torch.inference_mode():
        logits = active(input_ids=input_ids, attention_mask=attention_mask, **extra).logits
    return torch.log_softmax(logits[:, -keep:-1].float(), dim=-1)


def _log_probs_shared(model: Any, adapter: str, prompt: Any, completions: Any, mask: Any) -> Any:
    """:func:`_log_probs` with the prompt (``(1, P)``) run once: its KV cache is repeated for the ``(rows, W)``
    right-padded ``completions`` (``mask``: their tokens), which then run on top of it. The scores agree with
    the whole-row forward to float rounding (a split forward sums in another order), not bit for bit."""
    import torch
    from transformers import DynamicCache

    from ..generation import cache_keyword, forward_parameters, use_adapter

    rows, width = completions.shape
    extra = {"logits_to_keep": 1} if "logits_to_keep" in forward_parameters(model) else {}
    cache = DynamicCache()
    kwarg = {cache_keyword(model): cache}
    with use_adapter(model, adapter) as active, torch.inference_mode():
        first = active(input_ids=prompt, use_cache=True, **kwarg, **extra).logits[:, -1:]
        logits = [first.expand(rows, 1, first.shape[-1])]
        if width > 1:
            cache.batch_repeat_interleave(rows)
            full_mask = torch.cat([mask.new_ones((rows, prompt.shape[1])), mask[:, :-1]], dim=-1)
            logits.append(active(input_ids=completions[:, :-1], attention_mask=full_mask, use_cache=True,
                                 **kwarg).logits)  # fmt: skip
    return torch.log_softmax(torch.cat(logits, dim=1).float(), dim=-1)


def divergence_sums(
    model: Any,
    prompt_ids: Sequence[int],
    completions: Sequence[Sequence[int]],
    a: str,
    b: str,
    *,
    share_prompt: bool = True,
) -> dict[str, float]:
    """Σ over the completion tokens of ``completions`` (token ids, each sampled after ``prompt_ids``) of
    KL(a ‖ b) and of both entropies, adapters ``a`` and ``b`` of ``model``: ``{"tokens", "kl", "entropy_a",
    "entropy_b"}``. Per adapter, the prompt runs once and all of its completions (right-padded; the padding
    comes after every scored position, so a causal model's scores do not see it) run on its repeated KV cache
    (``share_prompt``; else each prompt + completion row runs whole: the prompt's work once per completion).

    Example (``a`` against itself: no divergence):

    ```python
    >>> import torch
    >>> from peft import LoraConfig, get_peft_model
    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> torch.manual_seed(0) and None
    >>> base = GPT2LMHeadModel(GPT2Config(vocab_size=11, n_embd=8, n_layer=1, n_head=1, n_positions=16))
    >>> model = get_peft_model(base, LoraConfig(r=2, target_modules=["c_attn"]), adapter_name="sft")
    >>> sums = divergence_sums(model, [1, 2, 3], [[4, 5], [6]], "sft", "sft")
    >>> sums["tokens"], sums["kl"], round(sums["entropy_a"] - sums["entropy_b"], 12)
    (3, 0.0, 0.0)

    ```
    """
    import torch

    kept = [list(c) for c in completions if len(c)]
    if not kept:
        return dict.fromkeys(_SUMS, 0.0) | {"tokens": 0}
    width, start = max(len(c) for c in kept), len(prompt_ids)
    device = next(model.parameters()).device
    tail = torch.zeros((len(kept), width), dtype=torch.long)
    scored = torch.zeros((len(kept), width), dtype=torch.bool)  # the completion tokens of each row
    for i, c in enumerate(kept):
        tail[i, : len(c)] = torch.tensor(c)
        scored[i, : len(c)] = True
    tail, scored = tail.to(device), scored.to(device)
    prompt = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)
    if share_prompt:
        def log_probs(adapter: str) -> Any:
            return _log_probs_shared(model, adapter, prompt, tail, scored.long())
    else:
        input_ids = torch.cat([prompt.expand(len(kept), start), tail], dim=-1)
        mask = torch.cat([torch.ones_like(input_ids[:, :start]), scored.long()], dim=-1)

        def log_probs(adapter: str) -> Any:
            return _log_probs(model, adapter, input_ids, mask, start)
    log_p = log_probs(a)
    log_q = log_p if b == a else log_probs(b)
    p = log_p.exp()
    kl = (p * (log_p - log_q)).sum(-1)
    entropy_a = -(p * log_p).sum(-1)
    entropy_b = -(log_q.exp() * log_q).sum(-1)
    return {
        "tokens": int(scored.sum()),
        "kl": float(kl[scored].sum()),
        "entropy_a": float(entropy_a[scored].sum()),
        "entropy_b": float(entropy_b[scored].sum()),
    }


def add_sums(total: dict[str, float], more: dict[str, float]) -> dict[str, float]:
    """``total`` plus ``more``, key by key over :data:`_SUMS` (a missing key counts 0)."""
    return {key: total.get(key, 0) + more.get(key, 0) for key in _SUMS}


def mean_divergence(sums: dict[str, float]) -> dict[str, Any]:
    """Per-token means of :func:`divergence_sums` (or of their :func:`add_sums`): ``{"tokens", "kl",
    "entropy_a", "entropy_b"}``, ``None`` means without tokens.

    Example:

    ```python
    >>> mean_divergence({"tokens": 4, "kl": 0.2, "entropy_a": 4.0, "entropy_b": 2.0})
    {'tokens': 4, 'kl': 0.05, 'entropy_a': 1.0, 'entropy_b': 0.5}

    ```
    """
    tokens = int(sums.get("tokens", 0))
    return {"tokens": tokens} | {key: (sums[key] / tokens if tokens else None) for key in _SUMS[1:]}
