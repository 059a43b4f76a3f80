"""``labelled_positions_only``: TRL's fused LM head projects only the labelled positions on CPU, with the same
log-probabilities, loss and LoRA gradients bit for bit (issue #39; ``benchmarks/bench_fused_head.py`` times it)."""

from __future__ import annotations

import torch
from _tiny_model import build_model, build_tokenizer, one_torch_thread
from peft import LoraConfig, get_peft_model
from trl.trainer import utils as trl_utils

from slmsql_hub.training.common import labelled_positions_only


def _policy():
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, hidden_size=64)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
    return get_peft_model(model, lora)


def _batch(vocab: int) -> dict[str, torch.Tensor]:
    """Two rows of 24 tokens: a prompt without labels, an answer with them, and padding on the second row."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, vocab, (2, 24), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 18:] = 0
    labels = input_ids.clone()
    labels[:, :14] = -100
    labels[attention_mask == 0] = -100
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def _scored(model, batch, monkeypatch) -> tuple[list[int], object, dict[str, torch.Tensor]]:
    """Rows the head projected on each call, the fused outputs and the LoRA gradients of their loss."""
    rows: list[int] = []
    original = trl_utils._ChunkedLogProbFunction

    class Counting:
        @staticmethod
        def apply(hidden, *rest):
            rows.append(hidden.shape[0])
            return original.apply(hidden, *rest)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Counting)
    model.zero_grad()
    outputs = model(**batch, fused_lm_head=True)
    outputs.loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}
    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", original)
    return rows, outputs, grads


def test_only_labelled_positions_are_projected_with_the_same_bits(monkeypatch):
    with one_torch_thread():
        model = _policy()
        batch = _batch(model.config.vocab_size)
        labelled = int((batch["labels"][:, 1:] != -100).sum())
        every_rows, every, every_grads = _scored(model, batch, monkeypatch)
        with labelled_positions_only():
            only_rows, only, only_grads = _scored(model, batch, monkeypatch)
    assert every_rows == [2 * 23] and only_rows == [labelled] and labelled < 2 * 23
    for field in ("log_probs", "entropy", "is_top1", "loss"):
        assert torch.equal(getattr(every, field), getattr(only, field)), field
    assert every_grads.keys() == only_grads.keys() and len(every_grads) > 0
    assert all(torch.equal(every_grads[name], only_grads[name]) for name in every_grads)
    assert any(bool(grad.abs().sum()) for grad in only_grads.values())


def test_the_switch_is_restored_after_the_block_even_on_error():
    cpu = torch.device("cpu")
    try:
        with labelled_positions_only():
            assert trl_utils._use_triton(cpu) is True
            raise RuntimeError("training failed")
    except RuntimeError:
        pass
    assert trl_utils._use_triton(cpu) is False
