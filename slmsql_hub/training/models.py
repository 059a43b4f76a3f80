"""Loading what SFT and GRPO train: the tokenizer, the base model and its LoRA adapter (fresh or continued).

A recipe either names an adapter to continue (``adapter_path``: SFT stage 2, GRPO after SFT), which is loaded
**trainable** with ``PeftModel.from_pretrained(..., is_trainable=True)`` and handed to TRL with no
``peft_config``, or none, and TRL attaches the fresh adapter :func:`trl.get_peft_config` describes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..refs import check_hub_repo, looks_local
from ..run.artifacts import check_model_folder
from .configs import ModelArguments

logger = logging.getLogger(__name__)


def check_local_inputs(model_args: ModelArguments, adapter_path: str | None, adapter_hint: str) -> None:
    """Fail early, with the fix, when the base model or adapter named by the recipe is missing: a local folder, or
    a Hub repository (its config fetched into the cache; see :func:`slmsql_hub.refs.check_hub_repo`).

    ``adapter_hint`` is the fix for a missing adapter (e.g. which command writes it).
    """
    name = str(model_args.model_name_or_path)
    if looks_local(name) and not Path(name).expanduser().is_dir():
        raise UsageError(
            f"base model folder not found: {Path(name).expanduser()}; train it with `slmsql train base --config "
            "recipes/world/base.yaml` or fix model_name_or_path"
        )
    if not looks_local(name):
        check_hub_repo(name, "config.json", what="base model", revision=model_args.model_revision)
    check_model_folder(name, "base", "retrain it or fix model_name_or_path")
    if adapter_path and looks_local(adapter_path):
        adapter = Path(adapter_path).expanduser()
        if not (adapter / "adapter_config.json").is_file():
            raise UsageError(f"no LoRA adapter in {adapter} (adapter_config.json missing); {adapter_hint}")
        check_model_folder(adapter, "adapter", adapter_hint)
    elif adapter_path:
        check_hub_repo(
            adapter_path, "adapter_config.json", what="adapter", revision=model_args.adapter_revision
        )


def load_model_and_tokenizer(model_args: ModelArguments, adapter_path: str | None) -> tuple[Any, Any, Any]:
    """``(model, peft_config, tokenizer)`` for ``SFTTrainer`` / ``GRPOTrainer``; ``peft_config`` is ``None`` when
    the model carries ``adapter_path``. The tokenizer is ``tokenizer_name_or_path``, else a local adapter's, else
    the model's; :class:`UsageError` when it has no chat template.
    """
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import get_peft_config

    source, revision = model_args.tokenizer_name_or_path, None
    if source is None and adapter_path and (Path(adapter_path).expanduser() / "tokenizer_config.json").is_file():
        source = adapter_path
    if source is None:
        source, revision = model_args.model_name_or_path, model_args.model_revision
    tokenizer = AutoTokenizer.from_pretrained(source, revision=revision)
    if tokenizer.chat_template is None:
        raise UsageError(f"the tokenizer from {source} has no chat template; use a chat/instruct model")

    kwargs = {"attn_implementation": model_args.attn_implementation} if model_args.attn_implementation else {}
    model = AutoModelForCausalLM.from_pretrained(
        model_args.model_name_or_path,
        dtype=model_args.torch_dtype(),
        revision=model_args.model_revision,
        use_kernels=model_args.use_kernels,
        **kwargs,
    )
    if not adapter_path:
        peft_config = get_peft_config(model_args)
        logger.info("attaching a fresh LoRA adapter (r=%d, alpha=%d)", peft_config.r, peft_config.lora_alpha)
        return model, peft_config, tokenizer
    model = PeftModel.from_pretrained(model, adapter_path, is_trainable=True, revision=model_args.adapter_revision)
    loaded = model.peft_config[model.active_adapter]
    if (loaded.r, loaded.lora_alpha) != (model_args.lora_r, model_args.lora_alpha):
        logger.warning(
            "continuing the adapter as saved (r=%s, alpha=%s); the recipe's lora_r=%s/lora_alpha=%s are not used",
            loaded.r,
            loaded.lora_alpha,
            model_args.lora_r,
            model_args.lora_alpha,
        )
    logger.info("continuing the adapter %s (loaded trainable)", adapter_path)
    return model, None, tokenizer
