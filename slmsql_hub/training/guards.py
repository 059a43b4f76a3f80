"""Guards for a GRPO run: checks that catch a run that trains nothing or cannot do what its recipe says; each
returns a :class:`GuardResult` that the run logs and records in ``run_summary.json``.

Why each: a frozen adapter (loaded without ``is_trainable=True``) trains nothing and TRL raises no error
(trl#6700); an adapter bit-identical after training learnt nothing (every group flat, or a learning rate of 0),
and a 1-ulp change passes the checksum but not :func:`check_adapter_update`; TRL computes the "old"
log-probabilities only when a generation batch outlives one optimizer step (``gradient_accumulation_steps %
(steps_per_generation * num_iterations) != 0``), otherwise the ratio is exactly 1 and ``clip_ratio/*`` stays 0
(the study's setting); LoRA's low-rank update needs a larger step than full fine-tuning (TRL's LoRA guidance uses
about 1e-5).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from ..run.metric_names import EXACT_ZERO_STD_METRIC

logger = logging.getLogger(__name__)

OK, WARN, FAIL = "ok", "warn", "fail"
_LORA_MIN_LEARNING_RATE = 1e-6


@dataclass
class GuardResult:
    """The outcome of one guard: ``status`` (``ok``/``warn``/``fail``), a one-line ``message`` (with the fix when
    not ok) and the numbers behind it in ``details``.

    Example:

    ```python
    >>> result = GuardResult("clipping", "warn", "epsilon cannot fire")
    >>> result.failed, result.to_dict()["status"]
    (False, 'warn')

    ```
    """

    name: str
    status: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def log(self) -> None:
        """Log at INFO (ok), WARNING (warn) or ERROR (fail)."""
        level = {OK: logging.INFO, WARN: logging.WARNING}.get(self.status, logging.ERROR)
        logger.log(level, "guard %s: %s — %s", self.name, self.status.upper(), self.message)


def check_trainable_parameters(model: Any) -> GuardResult:
    """Fail when ``model`` (PEFT-wrapped or not) has no parameter that requires gradients.

    Example:

    ```python
    >>> import torch
    >>> layer = torch.nn.Linear(4, 2)
    >>> check_trainable_parameters(layer).status
    'ok'
    >>> _ = layer.requires_grad_(False)
    >>> check_trainable_parameters(layer).status
    'fail'

    ```
    """
    from .common import count_parameters

    details = count_parameters(model)
    trainable, total = details["trainable"], details["total"]
    if trainable == 0:
        return GuardResult(
            "trainable_parameters",
            FAIL,
            "the model has 0 trainable parameters, so GRPO would train nothing (TRL raises no error, trl#6700): "
            "load the SFT adapter with PeftModel.from_pretrained(..., is_trainable=True) (what adapter_path does), "
            "or leave adapter_path unset to attach a fresh LoRA adapter",
            details,
        )
    return GuardResult(
        "trainable_parameters",
        OK,
        f"{trainable:,} of {total:,} parameters are trainable ({100.0 * trainable / max(total, 1):.2f}%)",
        details,
    )


def _trainable_state(model: Any) -> dict[str, Any]:
    """The tensors a checksum covers: the active adapter's weights for a PEFT model, else the trainable ones."""
    from peft import PeftModel, get_peft_model_state_dict

    if isinstance(model, PeftModel):
        return dict(get_peft_model_state_dict(model, adapter_name=model.active_adapter))
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def adapter_checksum(model_or_state: Any) -> str:
    """SHA-256 hex digest of an adapter's weights (names, shapes, dtypes and bytes, in name order): a PEFT
    model's active adapter, a module's trainable parameters, or a ``{name: tensor}`` state dict.

    Example:

    ```python
    >>> import torch
    >>> layer = torch.nn.Linear(4, 2)
    >>> before = adapter_checksum(layer)
    >>> before == adapter_checksum(layer)
    True
    >>> with torch.no_grad():
    ...     layer.weight[0, 0] += 1e-3
    >>> before == adapter_checksum(layer)
    False

    ```
    """
    import torch

    state = model_or_state if isinstance(model_or_state, dict) else _trainable_state(model_or_state)
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(tensor.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def check_adapter_changed(before: str, after: str) -> GuardResult:
    """Fail when the adapter's :func:`adapter_checksum` is the same before and after training.

    Example:

    ```python
    >>> check_adapter_changed("ab12", "ab12").status, check_adapter_changed("ab12", "cd34").status
    ('fail', 'ok')

    ```
    """
    details = {"before": before, "after": after}
    if before == after:
        return GuardResult(
            "adapter_changed",
            FAIL,
            "the adapter is bit-identical before and after training: the run learnt nothing. Check "
            f"{EXACT_ZERO_STD_METRIC} in telemetry.jsonl (groups without reward variance give no gradient; filter the "
            "data to the pass-rate band), the learning rate and the trainable parameters",
            details,
        )
    return GuardResult("adapter_changed", OK, f"the adapter changed ({before[:12]} -> {after[:12]})", details)


def _lora_layers(model: Any) -> Iterator[tuple[str, Any, str]]:
    """``(module name, LoRA layer, adapter name)`` of every plain (2-D) LoRA layer of the active adapter."""
    from peft.tuners.lora import LoraLayer

    adapter = getattr(model, "active_adapter", None)
    for name, module in model.named_modules():
        if isinstance(module, LoraLayer) and adapter in module.lora_A and module.lora_A[adapter].weight.dim() == 2:
            yield name, module, adapter


def lora_snapshot(model: Any) -> dict[str, tuple[Any, Any]]:
    """CPU copies of every LoRA layer's ``(A, B)`` (the active adapter's), for :func:`adapter_update` later."""
    return {
        name: (
            layer.lora_A[adapter].weight.detach().to("cpu", copy=True),
            layer.lora_B[adapter].weight.detach().to("cpu", copy=True),
        )
        for name, layer, adapter in _lora_layers(model)
    }


def adapter_update(model: Any, before: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """How far a LoRA adapter's effective update ``ΔW = s·B·A`` moved since ``before`` (:func:`lora_snapshot`),
    with 0 before training and 1 after, summed over the modules (Frobenius norms, float64)::

        relative_norm = sqrt(Σ_m ‖ΔW1_m − ΔW0_m‖²) / sqrt(Σ_m ‖W_m + ΔW0_m‖²)

    exactly 0.0 when no A or B changed (the step is computed as ``s·((B1 − B0)·A1 + B0·(A1 − A0))``), ``None``
    without LoRA modules. Also: ``update_norm``/``weight_norm`` (numerator, denominator), ``relative_to_adapter``
    (``update_norm / sqrt(Σ‖ΔW0‖²)``, ``None`` for a fresh adapter), ``modules``, ``modules_changed``.

    Example:

    ```python
    >>> import torch
    >>> from peft import LoraConfig, get_peft_model
    >>> _ = torch.manual_seed(0)
    >>> model = get_peft_model(torch.nn.Sequential(torch.nn.Linear(8, 8)), LoraConfig(r=2, target_modules=["0"]))
    >>> before = lora_snapshot(model)
    >>> adapter_update(model, before)["relative_norm"]
    0.0
    >>> with torch.no_grad():
    ...     _ = model.base_model.model[0].lora_B["default"].weight.fill_(0.01)
    >>> update = adapter_update(model, before)
    >>> 0 < update["relative_norm"] < 1, update["modules_changed"], update["relative_to_adapter"]
    (True, 1, None)

    ```
    """
    import torch

    sums = {"update": 0.0, "weight": 0.0, "adapter": 0.0}
    modules = changed = 0
    for name, layer, adapter in _lora_layers(model):
        a1 = layer.lora_A[adapter].weight.detach().to(torch.float64)
        b1 = layer.lora_B[adapter].weight.detach().to(torch.float64)
        a0, b0 = (t.to(a1.device, torch.float64) for t in before[name])
        scale = float(layer.scaling[adapter])
        start = scale * (b0 @ a0)
        step = scale * ((b1 - b0) @ a1 + b0 @ (a1 - a0))
        weight = layer.get_base_layer().weight.detach().to(torch.float64)
        if getattr(layer, "fan_in_fan_out", False):
            start, step = start.T, step.T
        sums["update"] += float(step.square().sum())
        sums["weight"] += float((weight + start).square().sum())
        sums["adapter"] += float(start.square().sum())
        modules += 1
        changed += int(not (torch.equal(a0, a1) and torch.equal(b0, b1)))
    norms = {key: math.sqrt(value) for key, value in sums.items()}
    return {
        "relative_norm": norms["update"] / norms["weight"] if modules and norms["weight"] else None,
        "update_norm": norms["update"],
        "weight_norm": norms["weight"],
        "relative_to_adapter": norms["update"] / norms["adapter"] if norms["adapter"] else None,
        "modules": modules,
        "modules_changed": changed,
    }


def check_adapter_update(update: dict[str, Any], min_relative_update: float) -> GuardResult:
    """Warn when the adapter's :func:`adapter_update` ``relative_norm`` is below ``min_relative_update``.

    Example:

    ```python
    >>> check_adapter_update({"relative_norm": 3e-9, "modules": 4, "modules_changed": 4}, 1e-6).status
    'warn'
    >>> check_adapter_update({"relative_norm": 2e-4, "modules": 4, "modules_changed": 4}, 1e-6).status
    'ok'

    ```
    """
    relative = update.get("relative_norm")
    details = {**update, "min_relative_update": min_relative_update}
    if relative is None:
        return GuardResult("adapter_update", OK, "no LoRA module to measure", details)
    moved = (
        f"the adapter's effective update moved by {relative:.3g} of the norm of the weights it adapts "
        f"({update['modules_changed']} of {update['modules']} modules changed)"
    )
    if relative < min_relative_update:
        return GuardResult(
            "adapter_update",
            WARN,
            f"{moved}, below min_relative_update={min_relative_update:g}: the policy barely moved. Check "
            f"{EXACT_ZERO_STD_METRIC} in telemetry.jsonl (flat groups give no gradient), the learning rate and "
            "the number of steps",
            details,
        )
    return GuardResult("adapter_update", OK, moved, details)


def check_clipping_can_fire(args: Any) -> GuardResult:
    """Warn when ``epsilon`` is set but the clipped policy ratio is exactly 1 at every step (``args``: a
    ``GRPOConfig`` or anything with its fields).

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> study = SimpleNamespace(epsilon=0.2, num_iterations=1, steps_per_generation=1, gradient_accumulation_steps=1)
    >>> check_clipping_can_fire(study).status
    'warn'
    >>> check_clipping_can_fire(SimpleNamespace(**{**vars(study), "num_iterations": 2})).status
    'ok'

    ```
    """
    epsilon = float(getattr(args, "epsilon", 0.0) or 0.0)
    epsilon_high = getattr(args, "epsilon_high", None)
    iterations = int(getattr(args, "num_iterations", 1) or 1)
    steps_per_generation = int(
        getattr(args, "steps_per_generation", None) or getattr(args, "gradient_accumulation_steps", 1)
    )
    accumulation = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
    details = {
        "epsilon": epsilon,
        "epsilon_high": epsilon_high,
        "num_iterations": iterations,
        "steps_per_generation": steps_per_generation,
        "gradient_accumulation_steps": accumulation,
    }
    if epsilon <= 0 and not epsilon_high:
        return GuardResult("clipping", OK, "no clipping configured (epsilon is 0)", details)
    on_policy = accumulation % (steps_per_generation * iterations) == 0
    if on_policy:
        return GuardResult(
            "clipping",
            WARN,
            f"epsilon={epsilon} is set but clipping cannot fire: with num_iterations={iterations} and "
            f"steps_per_generation={steps_per_generation} (= gradient_accumulation_steps={accumulation}) each batch "
            "is scored by the policy that sampled it, so the ratio is exactly 1 and clip_ratio stays 0; raise "
            "num_iterations (e.g. 2) or steps_per_generation if you want the trust region to act",
            details,
        )
    return GuardResult(
        "clipping",
        OK,
        f"clipping can fire (epsilon={epsilon}, batches reused across optimizer steps)",
        details,
    )


def check_lora_learning_rate(args: Any, is_lora: bool) -> GuardResult:
    """Warn when a LoRA run (``is_lora``) uses a full-fine-tuning ``args.learning_rate`` (≤ 1e-6).

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> check_lora_learning_rate(SimpleNamespace(learning_rate=1e-6), is_lora=True).status
    'warn'
    >>> check_lora_learning_rate(SimpleNamespace(learning_rate=1e-5), is_lora=True).status
    'ok'

    ```
    """
    lr = float(args.learning_rate)
    details = {"learning_rate": lr, "is_lora": bool(is_lora), "threshold": _LORA_MIN_LEARNING_RATE}
    if is_lora and lr == 0:
        return GuardResult("lora_learning_rate", WARN, "learning_rate=0 keeps the adapter as it is (a control run)", details)
    if is_lora and lr <= _LORA_MIN_LEARNING_RATE:
        return GuardResult(
            "lora_learning_rate",
            WARN,
            f"learning_rate={lr:g} is a full-fine-tuning rate; a LoRA adapter barely moves at it (TRL's LoRA "
            "guidance uses ~1e-5): raise learning_rate, e.g. `--learning_rate 1e-5`",
            details,
        )
    return GuardResult("lora_learning_rate", OK, f"learning_rate={lr:g}", details)


def guards_summary(results: list[GuardResult]) -> dict[str, Any]:
    """The guards' part of ``run_summary.json``: every result, and the names that warned or failed.

    Example:

    ```python
    >>> guards_summary([GuardResult("a", "ok", ""), GuardResult("b", "fail", "")])["failed"]
    ['b']

    ```
    """
    return {
        "results": [r.to_dict() for r in results],
        "warned": [r.name for r in results if r.status == WARN],
        "failed": [r.name for r in results if r.status == FAIL],
    }
