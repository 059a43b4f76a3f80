"""Where a GRPO step's time goes: generation, reward, and the rest (log-probs, backward, optimizer).

TRL times the whole step (``step_time``) and the project's rewards time themselves (``timing/reward/*_s``);
generation is timed here by wrapping ``transformers``' ``GenerationMixin.generate`` for the duration of a run
(every HF model and PEFT's wrapper end there). The rest is what is left of the training time.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from typing import Any


class GenerateTimer:
    """Seconds, calls and new token positions of ``GenerationMixin.generate`` while :meth:`timing` is active.

    ``new_tokens`` counts each call's output rows times the positions it added (a row that stopped early still
    counts the padding up to its batch's longest), so ``new_tokens / seconds`` is the decoding throughput the
    batch shape got, not the count of useful tokens.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.new_tokens = 0

    def tokens_per_s(self) -> float | None:
        """``new_tokens / seconds``; ``None`` before any call.

        >>> timer = GenerateTimer()
        >>> timer.tokens_per_s() is None
        True
        >>> timer.seconds, timer.new_tokens = 2.0, 100
        >>> timer.tokens_per_s()
        50.0
        """
        return self.new_tokens / self.seconds if self.seconds > 0 else None

    def _count(self, args: tuple, kwargs: dict, output: Any) -> None:
        prompt = kwargs.get("input_ids", args[0] if args else None)
        sequences = getattr(output, "sequences", output)
        if getattr(prompt, "ndim", 0) == 2 and getattr(sequences, "ndim", 0) == 2:
            self.new_tokens += sequences.shape[0] * max(0, sequences.shape[1] - prompt.shape[1])

    def _timed(self, original: Any, count: Any) -> Any:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                output = original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1
            count(args, kwargs, output)
            return output

        return timed

    @contextlib.contextmanager
    def timing(self) -> Iterator[GenerateTimer]:
        """Wrap ``GenerationMixin.generate`` and the keyed sampler's own decoding loop
        (``generation.hf._decode_dropping_finished``, which returns only the new tokens) until the block ends
        (then restore them, even on error)."""
        from transformers.generation.utils import GenerationMixin

        from ..generation import hf

        def count_new(args: tuple, kwargs: dict, output: Any) -> None:
            self.new_tokens += output.shape[0] * output.shape[1]

        originals = [(GenerationMixin, "generate", GenerationMixin.generate, lambda a, k, o: self._count(a[1:], k, o)),
                     (hf, "_decode_dropping_finished", hf._decode_dropping_finished, count_new)]  # fmt: skip
        for owner, name, original, count in originals:
            setattr(owner, name, self._timed(original, count))
        try:
            yield self
        finally:
            for owner, name, original, _ in originals:
                setattr(owner, name, original)


def split_training_time(train_s: float, generation_s: float, records: list[dict]) -> dict[str, float]:
    """``{"train_s", "generation_s", "reward_s", "other_s"}``: the reward from the telemetry's
    ``timing/reward/*_s``, ``other_s`` what is left (log-probs, backward, optimizer, logging).

    Example:

    ```python
    >>> from slmsql_hub.study.timing import split_training_time
    >>> split_training_time(10.0, 6.0, [{"timing/reward/execution_s": 0.5}, {"timing/reward/execution_s": 0.5}])
    {'train_s': 10.0, 'generation_s': 6.0, 'reward_s': 1.0, 'other_s': 3.0}

    ```
    """
    reward_s = sum(
        float(v)
        for r in records
        for k, v in r.items()
        if k.startswith("timing/reward/") and isinstance(v, (int, float))
    )
    return {
        "train_s": round(train_s, 3),
        "generation_s": round(generation_s, 3),
        "reward_s": round(reward_s, 3),
        "other_s": round(max(0.0, train_s - generation_s - reward_s), 3),
    }
