"""The push targets' names, what one push sends (:class:`PushTarget`) and the files of a folder that go up: the
vocabulary that the plan (:mod:`~slmsql_hub.hub.plan`), the push (:mod:`~slmsql_hub.hub.publish`) and the target
builders (:mod:`~slmsql_hub.hub.demo`, :mod:`~slmsql_hub.hub.world_benchmark`, :mod:`~slmsql_hub.hub.progress`)
share, below all of them so that no two hub modules import each other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from ..card.build import CARD_OPTIONS_FILE
from ..errors import UsageError
from ..run.layout import CARD_README

MODEL = "model"

SFT_MODEL = "sft-model"
"""The SFT adapter the GRPO adapter started from, as its own repository (``NAMESPACE/NAME-sft``)."""

BASE_MODEL = "base-model"
"""The plan entry (and dry-run folder) of a local base model pushed with ``model`` as its own repository."""

DATASET = "dataset"

METRIC_SPACE = "metric-space"

DEMO_SPACE = "demo-space"

DEMO_DATA = "demo-data"
"""The plan entry (and dry-run folder) of the run's benchmark databases, a dataset repository pushed with
``demo-space`` when the run was evaluated on Spider or BIRD (``NAMESPACE/NAME-demo-data``), which the Space reads."""

WORLD_BENCHMARK = "world-benchmark"
"""A world run's evaluation splits as a benchmark dataset, pushed before the model: :mod:`~slmsql_hub.hub.world_benchmark`."""

TARGETS: tuple[str, ...] = (WORLD_BENCHMARK, MODEL, SFT_MODEL, DATASET, METRIC_SPACE, DEMO_SPACE)
"""The ``--what`` choices, in the order they are pushed."""

METRIC_FILES: tuple[str, ...] = ("ex.py", CARD_README, "app.py", "requirements.txt")
"""The files of ``slmsql_hub/metric/`` that make the ``ex`` Space (the card is its README)."""

STALE_MODEL_FILES: tuple[str, ...] = ("trl_model_card.md",)
"""Deleted from the model repository on push when present: TRL's draft card, which ours replaces."""

PROJECT_HOME = "https://huggingface.co/slmsql"
"""pyproject's Homepage, a page no push makes: pushed files name what was pushed instead."""

_CACHE_FOLDERS = (".git", ".cache", "__pycache__", ".ipynb_checkpoints", ".pytest_cache")

IGNORE_PATTERNS: tuple[str, ...] = (
    *(pattern for name in _CACHE_FOLDERS for pattern in (f"{name}/*", f"*/{name}/*")),
    ".DS_Store",
    "*/.DS_Store",
    *(f"*{suffix}" for suffix in (".pyc", ".partial", ".tmp", ".lock")),
    CARD_OPTIONS_FILE,
)
"""Never uploaded (``upload_folder``'s ``ignore_patterns``; :func:`folder_files` lists with them too)."""


@dataclasses.dataclass(frozen=True)
class PushTarget:
    """One repository to push to (``what``: one of :data:`TARGETS` or :data:`BASE_MODEL`) and what goes in it.

    ``files`` are ``(path_in_repo, content)`` pairs sorted by path, content a local path or bytes written for
    the upload (a rewritten ``adapter_config.json``, a generated card); the dataset's parquet shard is not among
    them (``datasets`` writes it from ``dataset_path``, with ``card`` as its README), its databases are.

    Example:

    ```python
    >>> target = PushTarget("metric-space", "space", "alice/ex", space_sdk="gradio")
    >>> target.repo_type, target.files
    ('space', ())

    ```
    """

    what: str
    repo_type: str
    repo_id: str
    files: tuple[tuple[str, Path | bytes], ...] = ()
    dataset_path: Path | None = None
    space_sdk: str | None = None
    card: str | None = None

    def private(self, private: bool | None) -> bool:
        """Whether the repository is created private: ``private`` when given, else models and datasets are
        private and Spaces public (the Hub builds a Space from ``requirements.txt``, whose wheel URL pip can
        read without a token only in a public repository)."""
        return private if private is not None else self.repo_type != "space"


def parse_what(text: str | Sequence[str]) -> tuple[str, ...]:
    """The targets named by ``--what`` (comma-separated names of :data:`TARGETS`, or ``all``), de-duplicated, in
    push order; an unknown or empty name is a UsageError.

    Example:

    ```python
    >>> parse_what("dataset,model")
    ('model', 'dataset')
    >>> parse_what("all")
    ('world-benchmark', 'model', 'sft-model', 'dataset', 'metric-space', 'demo-space')

    ```
    """
    names = [text] if isinstance(text, str) else list(text)
    wanted = {part.strip() for name in names for part in name.split(",") if part.strip()}
    if "all" in wanted:
        return TARGETS
    unknown = sorted(wanted - set(TARGETS))
    if unknown or not wanted:
        raise UsageError(
            f"--what {','.join(names)!r}: choose among {', '.join(TARGETS)} (comma-separated) or all"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return tuple(name for name in TARGETS if name in wanted)


def default_repo_ids(repo_id: str) -> dict[str, str]:
    """``{target: repo_id}`` for every target and :data:`BASE_MODEL`, derived from the model's ``NAMESPACE/NAME``
    (the metric Space is one per namespace, as ``evaluate.load("NAMESPACE/ex")`` expects).

    Example:

    ```python
    >>> default_repo_ids("alice/qwen-grpo")["base-model"]
    'alice/qwen-grpo-base'
    >>> default_repo_ids("alice/qwen-grpo")["metric-space"]
    'alice/ex'

    ```
    """
    namespace = repo_id.split("/")[0]
    return {
        MODEL: repo_id,
        BASE_MODEL: f"{repo_id}-base",
        SFT_MODEL: f"{repo_id}-sft",
        DATASET: f"{repo_id}-band",
        METRIC_SPACE: f"{namespace}/ex",
        DEMO_SPACE: f"{repo_id}-demo",
        DEMO_DATA: f"{repo_id}-demo-data",
        WORLD_BENCHMARK: f"{repo_id}-world-benchmark",
    }


def folder_files(folder: str | os.PathLike) -> list[tuple[str, Path]]:
    """Every file under ``folder`` as sorted ``(path_in_repo, local_path)`` pairs, without what
    :data:`IGNORE_PATTERNS` leaves out (hidden folders the Hub uses, like ``.eval_results/``, are kept).

    Example:

    ```python
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / ".eval_results").mkdir(); (root / ".eval_results" / "dev.yaml").write_text("[]")
    2
    >>> (root / "__pycache__").mkdir(); (root / "__pycache__" / "x.pyc").write_bytes(b"")
    0
    >>> [path for path, _ in folder_files(root)]
    ['.eval_results/dev.yaml']

    ```
    """
    from huggingface_hub.utils import filter_repo_objects

    root = Path(folder)
    files = {path.relative_to(root).as_posix(): path for path in root.rglob("*") if path.is_file()}
    return sorted(
        (name, files[name]) for name in filter_repo_objects(files, ignore_patterns=list(IGNORE_PATTERNS))
    )


def sha256_of(content: Path | bytes) -> str:
    """The hex sha256 of a file (``huggingface_hub``'s, as the Hub computes it) or of bytes."""
    from huggingface_hub.utils.sha import sha_fileobj

    if isinstance(content, bytes):
        return hashlib.sha256(content).hexdigest()
    with open(content, "rb") as handle:
        return sha_fileobj(handle).hex()
