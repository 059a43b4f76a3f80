"""A KV cache that grows in place: :class:`GrowingCache`, what every ``generate`` call of this package decodes with.

``transformers``' ``DynamicCache`` appends each step's keys and values with ``torch.cat``, copying the whole
cache once per layer and token: for the study's sampled pass@k (16 questions x 16 samples = 256 rows of ~170
prompt tokens, up to 96 new ones, on the world's tiny Qwen2) that copy was about half of ``generate``'s time
(``benchmarks/bench_kv_cache.py``). :class:`GrowingCache` keeps each layer in a buffer with room to spare (at
least double what it holds, so a sequence is copied a handful of times, not once per token) and hands attention
a view of the filled part: the same shape and the same values as ``DynamicCache``'s, so attention computes
exactly what it did (the benchmark and ``tests/test_generation.py`` check the tokens are identical).

Every method of ``DynamicLayer`` works unchanged on the view; one that replaces it (``batch_repeat_interleave``
after a shared prefill, ``reorder_cache``, ``crop``) makes the next ``update`` copy it into a fresh buffer. This
module imports ``transformers``: import it inside functions only.
"""

from __future__ import annotations

from typing import Any

from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

SPARE = 64
"""The fewest free positions a new buffer has (a buffer holds ``max(2 * needed, needed + SPARE)``)."""


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` / ``values`` are views of the filled part of a larger buffer."""

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """Write the new positions after the cached ones (growing the buffer when full); return the views."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        old = self.get_seq_length()
        new = old + key_states.shape[-2]
        if self.keys is not getattr(self, "_key_view", None) or new > self._key_buffer.shape[-2]:
            self._key_buffer = self._grown(self.keys, key_states, old, new)
            self._value_buffer = self._grown(self.values, value_states, old, new)
        self._key_buffer[:, :, old:new] = key_states
        self._value_buffer[:, :, old:new] = value_states
        self.keys = self._key_view = self._key_buffer[:, :, :new]
        self.values = self._value_buffer[:, :, :new]
        return self.keys, self.values

    @staticmethod
    def _grown(cached: Any, states: Any, old: int, new: int) -> Any:
        """A buffer for ``new`` positions and room to spare, holding ``cached``'s ``old`` ones."""
        shape = (*states.shape[:-2], max(2 * new, new + SPARE), states.shape[-1])
        buffer = states.new_empty(shape)
        if old:
            buffer[:, :, :old] = cached
        return buffer


class GrowingCache(DynamicCache):
    """A ``DynamicCache`` of :class:`GrowingLayer` layers (one per model layer, made as they are first updated).

    Example:

    ```python
    >>> import torch
    >>> from slmsql_hub.generation.kv_cache import GrowingCache
    >>> cache = GrowingCache()
    >>> keys, _ = cache.update(torch.ones(2, 1, 3, 4), torch.ones(2, 1, 3, 4), 0)
    >>> keys, _ = cache.update(torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4), 0)
    >>> tuple(keys.shape), cache.get_seq_length(), keys[0, 0, :, 0].tolist()
    ((2, 1, 4, 4), 4, [1.0, 1.0, 1.0, 0.0])

    ```
    """

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)
