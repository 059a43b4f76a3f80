"""The optional vLLM backend (``pip install 'slmsql-hub[vllm]'``): one engine, LoRA adapters served by name."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .config import Completion, GenerationConfig, Prompt, render_prompts, stop_token_ids

if TYPE_CHECKING:  # pragma: no cover
    import torch

logger = logging.getLogger(__name__)


@dataclass
class VLLMPolicy:
    """A base model served by vLLM with LoRA adapters by name; the ``backend="vllm"`` policy.

    Built by ``load_policy(..., backend="vllm")``; it mirrors the PEFT switching API (``set_adapter``,
    ``disable_adapter``, ``active_adapter``) so :func:`use_adapter` works on both backends.

    ``llm`` is the ``vllm.LLM`` engine (LoRA enabled when adapters were given); ``lora_paths`` the adapter
    folders by name; ``active_adapter`` the one in use (``None``: the base).
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

    def _params(self, config: GenerationConfig, *, n: int, seed: int | None) -> Any:
        from vllm import SamplingParams

        return SamplingParams(
            n=n,
            temperature=float(config.temperature) if config.do_sample else 0.0,
            top_p=float(config.top_p) if config.do_sample else 1.0,
            top_k=config.top_k if config.do_sample else 0,
            max_tokens=config.max_new_tokens,
            seed=seed,
            stop_token_ids=stop_token_ids(self.llm.get_tokenizer()),
            skip_special_tokens=True,
        )

    def _run(self, texts: list[str], params: Any, progress: bool) -> list[list[Completion]]:
        outputs = self.llm.generate(texts, params, lora_request=self._lora_request(), use_tqdm=progress)
        return [
            [
                Completion(out.text, len(out.token_ids), out.finish_reason == "stop", tuple(out.token_ids))
                for out in request.outputs
            ]
            for request in outputs
        ]

    def generate(
        self, prompts: list[Prompt], config: GenerationConfig, progress: bool = True
    ) -> list[list[Completion]]:
        """Generate ``config.num_samples`` completions per prompt with ``SamplingParams(n=K)``."""
        texts = render_prompts(self.llm.get_tokenizer(), prompts)
        return self._run(texts, self._params(config, n=config.num_samples, seed=config.seed), progress)

    def generate_seeded(
        self,
        prompts: Sequence[Prompt],
        seeds: Sequence[Sequence[int]],
        config: GenerationConfig,
        progress: bool = False,
    ) -> list[list[Completion]]:
        """One completion per seed of each prompt, each its own request with ``SamplingParams(seed=...)``.

        A sample then depends on its prompt and its seed only, not on what else is in the call: the pass-rate
        filter's per-(question, sample) seeds draw the same samples when a run resumes.

        Returns ``len(seeds[i])`` completions for prompt ``i``, in input order.
        """
        texts = render_prompts(self.llm.get_tokenizer(), list(prompts))
        flat_texts = [text for text, row in zip(texts, seeds) for _ in row]
        params = [self._params(config, n=1, seed=int(seed)) for row in seeds for seed in row]
        flat = iter(group[0] for group in self._run(flat_texts, params, progress))
        return [[next(flat) for _ in row] for row in seeds]


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
