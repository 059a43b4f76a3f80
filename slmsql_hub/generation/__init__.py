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
  of the caller's (the pass-rate filter's per-row seeded sampler; rows leave the batch as they finish).

Every ``transformers`` call decodes with :class:`~.kv_cache.GrowingCache` (``DynamicCache`` without its
per-token copy).

The ``transformers`` backend is always available; the ``vllm`` backend needs the optional extra
(``pip install 'slmsql-hub[vllm]'``). Importing this module does no I/O and imports neither torch nor vLLM.
"""

from .config import (
    END_OF_TURN,
    Backend,
    Completion,
    GenerationConfig,
    Message,
    Prompt,
    render_prompts,
    stop_token_ids,
)
from .hf import (
    cache_keyword,
    encode_prompts,
    forward_parameters,
    generate,
    generate_completions,
    generate_with_processor,
)
from .loading import load_policy, use_adapter
from .vllm_backend import VLLMPolicy

__all__ = [
    "END_OF_TURN",
    "Backend",
    "Completion",
    "GenerationConfig",
    "Message",
    "Prompt",
    "VLLMPolicy",
    "cache_keyword",
    "encode_prompts",
    "forward_parameters",
    "generate",
    "generate_completions",
    "generate_with_processor",
    "load_policy",
    "render_prompts",
    "stop_token_ids",
    "use_adapter",
]
