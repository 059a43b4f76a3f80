"""Loading a policy (a base model with PEFT adapters by name) and switching adapters."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..refs import DTYPES, check_hub_repo, looks_local
from ..run.artifacts import check_model_folder
from ..sql.recipe_limits import SQLLimitsArguments
from .config import Backend, _require_vllm
from .vllm_backend import VLLMPolicy, _load_vllm_policy

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

HUB_KERNELS_HELP = (
    "transformers' Hub kernels (`kernels`), which it turns on by default and fetches from the Hub on a GPU: off "
    "here, so a run needs no download (an offline GPU node fails otherwise) and its numbers do not depend on one"
)


def _check_model_ref(ref: str | Path, what: str, kind: str = "base") -> None:
    if Path(ref).expanduser().exists():
        check_model_folder(ref, kind)
        return
    if looks_local(ref):
        raise UsageError(f"{what} {str(ref)!r} does not exist; pass an existing folder or a Hub repo id")


def _check_adapter_ref(ref: str | Path, name: str) -> None:
    path = Path(ref).expanduser()
    if path.is_dir() and not (path / "adapter_config.json").is_file():
        raise UsageError(
            f"adapter {name!r} at {str(ref)!r} has no adapter_config.json; pass the folder a PEFT adapter was "
            "saved to (model.save_pretrained), e.g. outputs/<run>/sft/stage2"
        )
    _check_model_ref(ref, f"adapter {name!r}", "adapter")


def check_local_model_refs(base_model: str | Path, adapters: dict[str, str | Path]) -> None:
    """A base model or adapter given as a local path must be there and whole (its configs parse, its safetensors
    are complete: :func:`slmsql_hub.run.artifacts.check_model_folder`); Hub ids are not looked up."""
    _check_model_ref(base_model, "base model")
    for name, ref in adapters.items():
        _check_adapter_ref(ref, name)


def check_model_refs(
    base_model: str | Path,
    adapters: dict[str, str | Path],
    *,
    revision: str | None = None,
    adapter_revisions: dict[str, str | None] | None = None,
) -> None:
    """The base model, then each adapter: a local one checked (:func:`check_local_model_refs`), any other must be
    a Hub repository (its config fetched into the cache: :func:`slmsql_hub.refs.check_hub_repo`), so a missing
    or broken one is one line before anything loads, not a traceback from transformers or PEFT."""

    def on_hub(ref: str | Path) -> bool:  # a missing local folder is _check_model_ref's to report
        return not looks_local(ref) and not Path(ref).expanduser().exists()

    pins = adapter_revisions or {}
    if on_hub(base_model):
        check_hub_repo(str(base_model), "config.json", what="base model", revision=revision)
    else:
        _check_model_ref(base_model, "base model")
    for name, ref in adapters.items():
        if on_hub(ref):
            check_hub_repo(str(ref), "adapter_config.json", what=f"{name} adapter", revision=pins.get(name))
        else:
            _check_adapter_ref(ref, name)


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
    use_kernels: bool = False,
) -> tuple[Any, PreTrainedTokenizerBase]:
    """``(model, tokenizer)``: a base model loaded ONCE, in eval mode and frozen, with PEFT (LoRA) adapters by
    name (a ``peft.PeftModel``; switch with :func:`use_adapter`), else the plain ``transformers`` model.

    ``adapter`` loads as ``"default"``, ``adapters`` by their names; the first is active on return.
    ``dtype`` defaults to bfloat16 on a GPU that has it, else float32; ``device`` to CUDA when present.
    ``revision`` pins ``base_model`` (and its tokenizer), ``adapter_revisions`` the adapters by name.
    ``use_kernels``: transformers' Hub kernels (:data:`HUB_KERNELS_HELP`).
    ``backend="vllm"`` returns a :class:`VLLMPolicy`.

    Example:

    ```python
    >>> load_policy("outputs/nowhere/base")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: base model 'outputs/nowhere/base' does not exist; pass an existing folder or a Hub repo id

    ```
    """
    named = _collect_adapters(adapter, adapters)
    pins = {name: rev for name, rev in (adapter_revisions or {}).items() if rev}
    unknown = sorted(set(pins) - set(named))
    if unknown:
        raise UsageError(f"adapter_revisions names adapter(s) {', '.join(unknown)} that are not loaded")
    check_model_refs(base_model, named, revision=revision, adapter_revisions=pins)
    if backend == "vllm":
        _require_vllm()
        if pins:  # vLLM reads LoRA adapters from folders: fetch the pinned ones first
            from huggingface_hub import snapshot_download

            named = {
                n: snapshot_download(str(r), revision=pins[n]) if n in pins else r for n, r in named.items()
            }
        return _load_vllm_policy(base_model, named, tokenizer=tokenizer, dtype=dtype, revision=revision)
    if backend != "transformers":
        raise UsageError(f"backend must be 'transformers' or 'vllm', got {backend!r}")

    from transformers import AutoModelForCausalLM, AutoTokenizer

    resolved_device = _resolve_device(device)
    resolved_dtype = _resolve_dtype(dtype, resolved_device)
    logger.info("loading base model %s (%s on %s)", base_model, resolved_dtype, resolved_device)
    model = AutoModelForCausalLM.from_pretrained(
        str(base_model), dtype=resolved_dtype, revision=revision, use_kernels=use_kernels
    )
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
    """Run a block with adapter ``name`` active (``None``: every adapter disabled) on a ``peft.PeftModel``, a
    :class:`VLLMPolicy` or (``None`` only) a plain model; the active adapter and ``requires_grad`` are restored
    on exit, so it is safe in the middle of training.

    Example:

    ```python
    >>> import torch
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
    if name is not None and name == model.active_adapter:  # nothing to switch, nothing to put back
        yield model
        return
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


BACKENDS = ("transformers", "vllm")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class InferenceArguments(SQLLimitsArguments):
    """What the filter and the evaluation share: the base model, decoding budget, sandbox and output folder.

    Example:

    ```python
    >>> InferenceArguments(model_name_or_path="m", output_dir="o", batch_size=0)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: batch_size must be a positive integer; got 0

    ```
    """

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Base model: a local folder or a Hub id."}
    )
    model_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (commit sha or tag) of model_name_or_path; null: main."}
    )
    tokenizer_name_or_path: str | None = field(
        default=None, metadata={"help": "Tokenizer location; null uses the base model's."}
    )
    dtype: str = field(default="auto", metadata={"help": "Weights' dtype.", "choices": list(DTYPES)})
    device: str | None = field(default=None, metadata={"help": "cuda, cpu...; null picks CUDA when present."})
    use_kernels: bool = field(default=False, metadata={"help": HUB_KERNELS_HELP})
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads for this run."})
    backend: str = field(
        default="transformers",
        metadata={"help": "Generation backend: transformers or vllm.", "choices": list(BACKENDS)},
    )
    seed: int = field(default=0, metadata={"help": "Seeds the LIMIT subset (and the filter's sampling)."})
    skip_missing_db: bool = field(
        default=False, metadata={"help": "Drop questions whose database is missing."}
    )
    max_new_tokens: int = field(default=256, metadata={"help": "Most tokens per completion."})
    batch_size: int = field(
        default=8, metadata={"help": "Questions per generate call (the filter: per save)."}
    )
    keep_distinct: bool = field(default=False, metadata={"help": "Spider comparison: keep DISTINCT."})
    timeout_s: float | None = field(default=None, metadata={"help": "Deprecated: use sql_timeout_s."})
    sandbox_workers: int | None = field(default=None, metadata={"help": "Sandbox processes (null: CPUs)."})
    output_dir: str | None = field(default=None, metadata={"help": "Where this stage writes its outputs."})

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.backend not in BACKENDS:
            raise UsageError(f"backend must be 'transformers' or 'vllm'; got {self.backend!r}")
        for name in ("max_new_tokens", "batch_size"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise UsageError(f"{name} must be a positive integer; got {value!r}")
        for name in ("sandbox_workers", "num_threads"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise UsageError(f"{name} must be a positive integer, or null; got {value!r}")
        if not _is_int(self.seed):
            raise UsageError(f"seed must be an integer; got {self.seed!r}")
        self.resolve_sql_limits(deprecated_timeout="timeout_s")

    def load_policy(self, adapter: str | None = None, **adapter_kwargs: Any) -> Any:
        """:func:`~slmsql_hub.generation.load_policy` of this base model (tokenizer, dtype, device, backend,
        revision) with ``adapter`` or ``adapters=``/``adapter_revisions=``."""
        return load_policy(
            self.model_name_or_path,
            adapter,
            tokenizer=self.tokenizer_name_or_path,
            dtype=self.dtype,
            device=self.device,
            backend=self.backend,
            revision=self.model_revision,
            use_kernels=self.use_kernels,
            **adapter_kwargs,
        )
