"""Per-(question, sample) seeded sampling: :func:`sample_seed`, the Gumbel-max :class:`KeyedSampler` and
:func:`generate_keyed_samples`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..generation.config import FILTER_KEYS, check_key_namespace

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..generation import Completion, GenerationConfig, Prompt


def sample_seed(seed: int, question_id: str, index: int, namespace: str = FILTER_KEYS) -> int:
    """The seed of sample ``index`` of question ``question_id``: a stable 63-bit hash of all three and the key
    ``namespace``. Two namespaces never share a seed (up to a hash collision), so a study that samples in its
    own namespace draws fresh samples, not the ones that selected a question into the band.

    Example:

    ```python
    >>> from slmsql_hub.filtering import sample_seed
    >>> sample_seed(0, "world-rl_pool-7", 3) == sample_seed(0, "world-rl_pool-7", 3)
    True
    >>> len({sample_seed(0, "q", j) for j in range(8)})
    8
    >>> sample_seed(0, "q", 0, "study-passk") == sample_seed(0, "q", 0)
    False

    ```
    """
    check_key_namespace(namespace)
    digest = hashlib.sha256(f"slmsql-{namespace}:{seed}:{question_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


class KeyedSampler:
    """A logits processor that samples each row with its OWN random generator (Gumbel-max).

    ``model.generate`` runs greedy; this processor applies temperature and top-k (transformers' warpers) and
    top-p, then adds Gumbel noise drawn from the row's generator, so the arg-max is a sample from the filtered
    softmax. Row ``r``'s ``t``-th token always uses the ``t``-th draw of generator ``r``, whatever the other rows
    are: a row's samples depend on its seed and its own logits only, not on the batch.

    ``row_seeds``: one seed per row, in ``input_ids`` order. ``device`` defaults to that of the first logits.

    Example:

    ```python
    >>> import torch
    >>> from slmsql_hub.filtering import KeyedSampler
    >>> logits = torch.tensor([[0.0, 3.0, 1.0], [0.0, 3.0, 1.0]])
    >>> KeyedSampler([1, 2], top_k=1)(None, logits).argmax(-1).tolist()   # top_k=1 is greedy
    [1, 1]
    >>> a = KeyedSampler([5, 6])(None, logits)
    >>> b = KeyedSampler([6])(None, logits[1:])   # row 2 alone draws the same noise
    >>> torch.equal(a[1], b[0])
    True

    ```
    """

    def __init__(
        self,
        row_seeds: Sequence[int],
        *,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        device: Any = None,
    ) -> None:
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.row_seeds = [int(seed) for seed in row_seeds]
        self.generators: list[torch.Generator] = []
        if device is not None:
            self._seed_generators(device)

    def _seed_generators(self, device: Any) -> None:
        import torch

        self.generators = []
        for seed in self.row_seeds:
            generator = torch.Generator(device=device)
            generator.manual_seed(seed)
            self.generators.append(generator)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows (indices into the current ones, in order): the batch dropped the others. A kept
        row goes on with its own generator, so its draws are those it would have had in the full batch."""
        self.row_seeds = [self.row_seeds[r] for r in rows]
        if self.generators:
            self.generators = [self.generators[r] for r in rows]

    def __call__(self, input_ids: torch.Tensor | None, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if scores.shape[0] != len(self.row_seeds):
            raise ValueError(f"{scores.shape[0]} rows of logits for {len(self.row_seeds)} row seeds")
        if not self.generators:
            self._seed_generators(scores.device)
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper

        scores = TemperatureLogitsWarper(self.temperature)(input_ids, scores.float())
        vocab = scores.shape[-1]
        if self.top_k > 0:
            scores = TopKLogitsWarper(self.top_k)(input_ids, scores)
        if self.top_p < 1.0:
            # Our own nucleus rule, not TopPLogitsWarper's: that one keeps another set at the boundary
            # (ascending cumsum <= 1 - top_p), so its samples would differ.
            sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
            probs = sorted_scores.softmax(dim=-1)
            # Drop a token when the more likely tokens already hold top_p of the mass (the first never is).
            drop_sorted = (probs.cumsum(dim=-1) - probs) >= self.top_p
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            scores = scores.masked_fill(drop, float("-inf"))
        uniform = torch.stack([torch.rand(vocab, generator=g, device=scores.device) for g in self.generators])
        tiny = torch.finfo(uniform.dtype).tiny
        gumbel = -torch.log(-torch.log(uniform.clamp(min=tiny, max=1.0 - 1e-7)))
        return scores + gumbel


def generate_keyed_samples(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    keys: Sequence[str],
    config: GenerationConfig,
) -> list[list[Completion]]:
    """Sample ``config.num_samples`` completions per prompt in ONE ``generate`` call, seeded per (prompt, sample).

    Sample ``j`` of prompt ``i`` is drawn with :func:`sample_seed` ``(config.seed, keys[i], j,
    config.key_namespace)`` through
    :class:`KeyedSampler` (on vLLM: the request's ``SamplingParams(seed=...)``); see the package docstring.

    ``keys``: one stable key per prompt (the question id); ``config.seed`` must be set and ``do_sample`` true.
    All prompts go into one call. Returns ``num_samples`` completions per prompt, in input order.

    Example:

    ```python
    >>> from slmsql_hub.filtering import generate_keyed_samples
    >>> from slmsql_hub.generation import GenerationConfig
    >>> generate_keyed_samples(None, None, [], [], GenerationConfig(do_sample=True, num_samples=2))
    []

    ```
    """
    if len(prompts) != len(keys):
        raise ValueError(f"{len(prompts)} prompts but {len(keys)} keys")
    if not config.do_sample or config.seed is None:
        raise UsageError("keyed sampling needs do_sample=True and an integer seed")
    if not prompts:
        return []
    k = config.num_samples
    seeds = [[sample_seed(config.seed, key, j, config.key_namespace) for j in range(k)] for key in keys]
    from ..generation import VLLMPolicy

    if isinstance(model, VLLMPolicy) != (config.backend == "vllm"):
        raise UsageError(
            f"backend={config.backend!r} does not match the policy ({type(model).__name__}); load it with "
            "load_policy(..., backend=config.backend)"
        )
    if config.backend == "vllm":  # one request per sample, seeded with SamplingParams(seed=...)
        return model.generate_seeded(prompts, seeds, config)
    # The same rendering, padding, stop tokens and completion splitting as every other caller of generation;
    # greedy decoding over the sampler's perturbed logits IS sampling, one generator per row.
    from ..generation import generate_with_processor

    sampler = KeyedSampler(
        [seed for row in seeds for seed in row],
        temperature=config.temperature,
        top_k=config.top_k,
        top_p=config.top_p,
    )
    return generate_with_processor(
        model, tokenizer, prompts, sampler, num_samples=k, max_new_tokens=config.max_new_tokens
    )
