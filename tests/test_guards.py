"""Guards: each fires on a constructed bad setup and stays quiet on a good one."""

from __future__ import annotations

import pytest
import torch
from _tiny_model import build_model, build_tokenizer

from slmsql_hub.training import guards
from slmsql_hub.training.configs import GRPOTrainingConfig


@pytest.fixture(scope="module")
def saved_adapter(tmp_path_factory):
    from peft import LoraConfig, get_peft_model

    folder = tmp_path_factory.mktemp("adapter")
    tokenizer = build_tokenizer()
    model = get_peft_model(
        build_model(tokenizer),
        LoraConfig(r=2, lora_alpha=4, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    model.save_pretrained(str(folder))
    return folder, tokenizer


def _load(folder, tokenizer, trainable: bool):
    from peft import PeftModel

    return PeftModel.from_pretrained(build_model(tokenizer), str(folder), is_trainable=trainable)


def test_adapter_loaded_without_is_trainable_fails_the_trainable_guard(saved_adapter):
    folder, tokenizer = saved_adapter
    frozen = _load(folder, tokenizer, trainable=False)
    result = guards.check_trainable_parameters(frozen)
    assert result.failed and result.details["trainable"] == 0
    assert "is_trainable=True" in result.message


def test_adapter_loaded_trainable_passes_with_only_lora_weights_trainable(saved_adapter):
    folder, tokenizer = saved_adapter
    model = _load(folder, tokenizer, trainable=True)
    result = guards.check_trainable_parameters(model)
    assert result.status == "ok"
    lora = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    assert result.details["trainable"] == lora < result.details["total"]


def test_checksum_covers_the_adapter_only_and_sees_one_changed_weight(saved_adapter):
    folder, tokenizer = saved_adapter
    model = _load(folder, tokenizer, trainable=True)
    before = guards.adapter_checksum(model)
    # same file, same digest
    assert guards.adapter_checksum(_load(folder, tokenizer, trainable=True)) == before
    with torch.no_grad():  # a base weight is not the adapter: the digest must not move
        model.get_base_model().model.embed_tokens.weight[0, 0] += 1.0
    assert guards.adapter_checksum(model) == before
    lora_b = next(p for n, p in model.named_parameters() if "lora_B" in n)
    with torch.no_grad():
        lora_b[0, 0] += 1e-6
    assert guards.adapter_checksum(model) != before


def test_an_optimizer_step_with_zero_gradient_leaves_the_adapter_unchanged_and_is_flagged(saved_adapter):
    folder, tokenizer = saved_adapter
    model = _load(folder, tokenizer, trainable=True)
    before = guards.adapter_checksum(model)
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.0
    )
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)  # what GRPO gets when every group has zero reward variance
    optimizer.step()
    unchanged = guards.check_adapter_changed(before, guards.adapter_checksum(model))
    assert unchanged.failed and "frac_reward_zero_std" in unchanged.message

    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.ones_like(p)
    optimizer.step()
    assert guards.check_adapter_changed(before, guards.adapter_checksum(model)).status == "ok"


def test_a_one_ulp_change_passes_the_checksum_but_the_relative_update_guard_warns(saved_adapter):
    folder, tokenizer = saved_adapter
    model = _load(folder, tokenizer, trainable=True)
    with torch.no_grad():  # a trained adapter: B is no longer zero, so SFT's update is part of the weights
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 0.05)
    before, snapshot = guards.adapter_checksum(model), guards.lora_snapshot(model)
    unmoved = guards.adapter_update(model, snapshot)
    assert unmoved["relative_norm"] == 0.0 and unmoved["modules_changed"] == 0
    assert unmoved["modules"] == len(snapshot) > 0 and unmoved["relative_to_adapter"] == 0.0

    lora_b = next(p for n, p in model.named_parameters() if "lora_B" in n)
    with torch.no_grad():
        lora_b[0, 0] = torch.nextafter(lora_b[0, 0], torch.tensor(1.0))  # one ulp
    # bit-identity sees a change
    assert guards.check_adapter_changed(before, guards.adapter_checksum(model)).status == "ok"
    tiny = guards.adapter_update(model, snapshot)
    assert 0.0 < tiny["relative_norm"] < 1e-9 and tiny["modules_changed"] == 1
    warned = guards.check_adapter_update(tiny, min_relative_update=1e-6)
    assert warned.status == "warn" and "min_relative_update=1e-06" in warned.message

    with torch.no_grad():  # a real step: every B moves by 1e-2
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(1e-2)
    moved = guards.adapter_update(model, snapshot)
    assert moved["relative_norm"] > 1e-3 and moved["modules_changed"] == moved["modules"]
    assert guards.check_adapter_update(moved, min_relative_update=1e-6).status == "ok"
    # the formula, by hand: sqrt(sum ||s (B1 A1 - B0 A0)||^2) / sqrt(sum ||W + s B0 A0||^2)
    update_sq = weight_sq = 0.0
    for name, layer in model.named_modules():
        if name in snapshot:
            a0, b0 = (t.double() for t in snapshot[name])
            a1, b1 = layer.lora_A["default"].weight.double(), layer.lora_B["default"].weight.double()
            s = layer.scaling["default"]
            update_sq += float((s * (b1 @ a1 - b0 @ a0)).square().sum())
            weight_sq += float((layer.base_layer.weight.double() + s * b0 @ a0).square().sum())
    assert moved["relative_norm"] == pytest.approx((update_sq / weight_sq) ** 0.5, rel=1e-9)


def test_clipping_guard_warns_for_the_study_setting_and_not_when_batches_are_reused():
    def config(**kw):
        return GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, **kw)

    study = config(epsilon=0.2, num_iterations=1)
    assert guards.check_clipping_can_fire(study).status == "warn"
    assert guards.check_clipping_can_fire(config(epsilon=0.2, num_iterations=2)).status == "ok"
    # a generation batch spread over two optimizer steps: the second step's ratio is not 1
    reused = config(epsilon=0.2, per_device_train_batch_size=8, steps_per_generation=2)
    assert guards.check_clipping_can_fire(reused).status == "ok"
    # accumulation alone does not help: completions are still scored by the policy that sampled them
    accumulated = config(epsilon=0.2, per_device_train_batch_size=8, gradient_accumulation_steps=2)
    assert guards.check_clipping_can_fire(accumulated).status == "warn"
    assert guards.check_clipping_can_fire(config(epsilon=0.0)).status == "ok"


def test_learning_rate_guard_warns_only_for_lora_at_full_fine_tuning_rates():
    def config(lr):
        return GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, learning_rate=lr)

    assert guards.check_lora_learning_rate(config(1e-6), is_lora=True).status == "warn"
    assert "1e-5" in guards.check_lora_learning_rate(config(1e-6), is_lora=True).message
    assert guards.check_lora_learning_rate(config(1e-5), is_lora=True).status == "ok"
    assert guards.check_lora_learning_rate(config(1e-6), is_lora=False).status == "ok"


def test_summary_lists_warned_and_failed_guards(saved_adapter):
    folder, tokenizer = saved_adapter
    results = [
        guards.check_trainable_parameters(_load(folder, tokenizer, trainable=False)),
        guards.check_lora_learning_rate(
            GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True), is_lora=True
        ),
    ]
    summary = guards.guards_summary(results)
    assert summary["failed"] == ["trainable_parameters"]
    assert summary["warned"] == ["lora_learning_rate"]
    assert [r["name"] for r in summary["results"]] == ["trainable_parameters", "lora_learning_rate"]
