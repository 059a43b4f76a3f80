"""The Space's settings: where the run folder is (``--run-dir`` / ``SLMSQL_RUN_DIR``), or the Hub ids of the base
model and both adapters for the real Space, plus the safety limits (question length, rows shown, sandbox deadline,
queue concurrency). :func:`env_settings` reads them from ``SLMSQL_*`` variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slmsql_hub.errors import UsageError
from slmsql_hub.quickstart import DEFAULT_OUT

DEFAULT_RUN_DIR = str(DEFAULT_OUT)
"""The run folder used when neither ``--run-dir`` nor ``SLMSQL_RUN_DIR`` is given."""


@dataclass(frozen=True)
class SpaceSettings:
    """What the Space serves and under which limits.

    ``run_dir`` is a run folder (``world/``, ``base/``, ``sft/stage2/``, ``grpo/``, ``eval/``, ``card/``);
    ``base_model``, ``sft_adapter``, ``grpo_adapter`` and ``world_dir`` (folders or Hub ids) replace its parts,
    and a Hub repo written by ``slmsql card`` / ``slmsql push`` also carries the telemetry, evaluation and
    card. With Hub models and no world, the world is built at startup (deterministic in ``world_seed``, about
    15 s) into ``cache_dir`` (default ``~/.cache/slmsql-hub``). ``spider_dir`` (``database/<db>/<db>.sqlite``,
    optionally ``dev.json``) adds databases judged with Spider's test-suite rule. ``max_new_tokens`` ``None``
    uses the evaluation's setting, else 256. ``concurrency`` comparisons run at once (generation itself is
    serialized); the queue holds ``queue_size`` more. ``max_rows`` rows make a result too large;
    ``display_rows`` are shown.

    Example:

    ```python
    >>> from space_settings import SpaceSettings
    >>> SpaceSettings().run_dir
    'outputs/quickstart'
    >>> SpaceSettings(max_question_chars=0)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: max_question_chars must be a positive integer, got 0

    ```
    """

    run_dir: str = DEFAULT_RUN_DIR
    base_model: str | None = None
    sft_adapter: str | None = None
    grpo_adapter: str | None = None
    world_dir: str | None = None
    world_seed: int = 0
    spider_dir: str | None = None
    example_split: str = "dev"
    max_new_tokens: int | None = None
    timeout_s: float = 10.0
    max_rows: int = 10_000
    display_rows: int = 50
    max_question_chars: int = 500
    concurrency: int = 2
    queue_size: int = 64
    device: str | None = None
    dtype: str = "auto"
    sandbox_workers: int = 2
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_rows",
            "display_rows",
            "max_question_chars",
            "concurrency",
            "queue_size",
            "sandbox_workers",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        if self.max_new_tokens is not None and (
            not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1
        ):
            raise UsageError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            raise UsageError(f"timeout_s must be > 0 seconds, got {self.timeout_s!r}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise UsageError(f"dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")

    @property
    def hub_models(self) -> bool:
        """Whether a model or adapter is set explicitly (the real Space sets Hub ids)."""
        return any((self.base_model, self.sft_adapter, self.grpo_adapter))


def env_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """:class:`SpaceSettings` fields from ``SLMSQL_*`` environment variables (only those that are set).

    Variables: ``SLMSQL_RUN_DIR``, ``SLMSQL_BASE_MODEL``, ``SLMSQL_SFT_ADAPTER``, ``SLMSQL_GRPO_ADAPTER``,
    ``SLMSQL_WORLD_DIR``, ``SLMSQL_WORLD_SEED``, ``SLMSQL_SPIDER_DIR``, ``SLMSQL_EXAMPLE_SPLIT``,
    ``SLMSQL_MAX_NEW_TOKENS``, ``SLMSQL_TIMEOUT_S``, ``SLMSQL_MAX_QUESTION_CHARS``, ``SLMSQL_CONCURRENCY``,
    ``SLMSQL_QUEUE_SIZE``, ``SLMSQL_DEVICE``, ``SLMSQL_DTYPE``, ``SLMSQL_CACHE_DIR``.

    Raises :class:`UsageError` on a number that does not parse.

    Example:

    ```python
    >>> from space_settings import env_settings
    >>> env_settings({"SLMSQL_RUN_DIR": "runs/a", "SLMSQL_CONCURRENCY": "3", "HOME": "/root"})
    {'run_dir': 'runs/a', 'concurrency': 3}

    ```
    """
    environ = os.environ if environ is None else environ
    kinds: dict[str, type] = {
        "run_dir": str,
        "base_model": str,
        "sft_adapter": str,
        "grpo_adapter": str,
        "world_dir": str,
        "world_seed": int,
        "spider_dir": str,
        "example_split": str,
        "max_new_tokens": int,
        "timeout_s": float,
        "max_question_chars": int,
        "concurrency": int,
        "queue_size": int,
        "device": str,
        "dtype": str,
        "cache_dir": str,
    }
    values: dict[str, Any] = {}
    for name, kind in kinds.items():
        variable = f"SLMSQL_{name.upper()}"
        raw = environ.get(variable)
        if raw is None or not raw.strip():
            continue
        try:
            values[name] = kind(raw.strip())
        except ValueError:
            raise UsageError(f"{variable}={raw!r} is not a valid {kind.__name__}") from None
    return values
