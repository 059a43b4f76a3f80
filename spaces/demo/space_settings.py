"""The Space's settings: the run folder, or the Hub ids of the base model and both adapters, and the safety limits;
:func:`env_settings` reads them from ``SLMSQL_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slmsql_hub.commands.quickstart import DEFAULT_OUT
from slmsql_hub.errors import UsageError

DEFAULT_RUN_DIR = str(DEFAULT_OUT)


@dataclass(frozen=True)
class SpaceSettings:
    """What the Space serves and under which limits.

    ``base_model``, ``sft_adapter``, ``grpo_adapter`` and ``world_dir`` (folders or Hub ids) replace parts of
    ``run_dir``; a Hub GRPO repo written by ``slmsql card`` also carries the telemetry, evaluation and card. With
    Hub models and no world, the world is built at startup from ``world_seed`` into ``cache_dir`` (default
    ``~/.cache/slmsql-hub``). ``spider_dir`` (``database/<db>/<db>.sqlite``, optionally ``dev.json``) adds
    Spider databases. ``max_new_tokens`` ``None``: the evaluation's, else 256. ``concurrency`` comparisons run at
    once, ``queue_size`` more wait; more than ``max_rows`` rows is too large, ``display_rows`` are shown.

    Example:

    ```python
    >>> from space_settings import SpaceSettings
    >>> from slmsql_hub.commands.quickstart import DEFAULT_OUT
    >>> SpaceSettings().run_dir == str(DEFAULT_OUT)  # the quickstart's own default folder
    True
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
    """:class:`SpaceSettings` fields from the ``SLMSQL_<FIELD>`` variables that are set (the README lists them);
    :class:`UsageError` on a number that does not parse.

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
