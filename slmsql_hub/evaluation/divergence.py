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
    """``(rows, positions, vocab)`` float32 log-probs of the positions that predict tokens ``start..`` (only
    those positions' logits are formed where the model takes ``logits_to_keep``: a long prompt's are not)."""
    import inspect

    import torch

    from ..generation import use_adapter

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    keep = input_ids.shape[1] - start + 1
    extra = (
        {"logits_to_keep": keep}
        if "logits_to_keep" in inspect.signature(type(base).forward).parameters
        else {}
    )
    with use_adapter(model, adapter) as active, torch.inference_mode():
        logits = active(input_ids=input_ids, attention_mask=attention_mask, **extra).logits
    return torch.log_softmax(logits[:, -keep:-1].float(), dim=-1)


def divergence_sums(
    model: Any, prompt_ids: Sequence[int], completions: Sequence[Sequence[int]], a: str, b: str
) -> dict[str, float]:
    """Σ over the completion tokens of ``completions`` (token ids, each sampled after ``prompt_ids``) of
    KL(a ‖ b) and of both entropies, adapters ``a`` and ``b`` of ``model``: ``{"tokens", "kl", "entropy_a",
    "entropy_b"}``. One forward per adapter for all of one prompt's completions (right-padded; the padding
    comes after every scored position, so a causal model's scores do not see it).

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

    rows = [list(prompt_ids) + list(c) for c in completions if len(c)]
    if not rows:
        return dict.fromkeys(_SUMS, 0.0) | {"tokens": 0}
    width = max(len(r) for r in rows)
    device = next(model.parameters()).device
    input_ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    input_ids, mask = input_ids.to(device), mask.to(device)
    start = len(prompt_ids)
    scored = mask[:, start:].bool()  # the completion tokens of each row
    log_p = _log_probs(model, a, input_ids, mask, start)
    log_q = log_p if b == a else _log_probs(model, b, input_ids, mask, start)
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
