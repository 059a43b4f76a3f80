"""What ``slmsql push --what demo-space`` adds to ``spaces/demo/`` so the Space runs from the Hub alone: the Space's
configuration (``space_config.json``: the base model, the SFT and GRPO adapters by repository id and commit
(:func:`pin_space_config`, at push time: the plan and the dry run name branches), the example databases it may show), the run's world (its databases and the example split) when the run has one, and a
README whose ``models:`` and ``datasets:`` metadata name the run's repositories.

The Space reads ``space_config.json`` at startup (``spaces/demo/space_config.py``); ``SLMSQL_*`` variables and
command-line options still override it.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from ..run.layout import CARD_README, WORLD_MANIFEST, RunLayout
from ..run.read import model_ref
from .plan import DATASET, MODEL, SFT_MODEL, folder_files

logger = logging.getLogger(__name__)

SPACE_CONFIG = "space_config.json"
"""The Space's configuration file; ``spaces/demo/space_config.py`` reads the same name."""

SPACE_WORLD = "world"
"""Where the run's world lands in the Space repository."""

EXAMPLE_SPLIT = "dev"

MODEL_ENTRIES = ("base_model", "sft_adapter", "grpo_adapter")
"""The models ``space_config.json`` names, each ``{"repo_id", "revision"}``."""


def space_config(
    ids: dict[str, str], base: Any, revision: str | None, databases: list[str]
) -> dict[str, Any]:
    """The configuration the Space starts from: every model by repository id and revision (``base``: the
    :class:`~slmsql_hub.hub.base_model.BaseModel` the adapters name).

    Example:

    ```python
    >>> from slmsql_hub.hub.base_model import BaseModel
    >>> ids = {"model": "alice/x", "sft-model": "alice/x-sft"}
    >>> config = space_config(ids, BaseModel("alice/x-base"), None, ["world/shop"])
    >>> config["grpo_adapter"], config["base_model"]
    ({'repo_id': 'alice/x', 'revision': 'main'}, {'repo_id': 'alice/x-base', 'revision': 'main'})

    ```
    """
    branch = revision or "main"
    return {
        "base_model": {"repo_id": base.repo_id, "revision": base.revision or branch},
        "sft_adapter": {"repo_id": ids[SFT_MODEL], "revision": branch},
        "grpo_adapter": {"repo_id": ids[MODEL], "revision": branch},
        "world_dir": SPACE_WORLD if databases else None,
        "example_split": EXAMPLE_SPLIT,
        "databases": databases,
    }


def _is_commit(revision: Any) -> bool:
    return isinstance(revision, str) and re.fullmatch(r"[0-9a-f]{40}", revision) is not None


def pin_space_config(content: Path | bytes, api: Any) -> bytes | Path:
    """``space_config.json`` (a file or its bytes) with every model at a branch pinned to the commit the branch is
    at now (``api``: an ``HfApi``; call it after the models were pushed); a model the Hub does not have stays at
    its branch, with a warning.

    Example (nothing to resolve: every model is at a commit already):

    ```python
    >>> sha = "0" * 40
    >>> config = {"base_model": {"repo_id": "a/b", "revision": sha}, "sft_adapter": {"repo_id": "a/c", "revision": sha}}
    >>> json.loads(pin_space_config(json.dumps(config).encode(), api=None)) == config
    True

    ```
    """
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    text = content.decode("utf-8") if isinstance(content, bytes) else Path(content).read_text(encoding="utf-8")
    config = json.loads(text)
    for name in MODEL_ENTRIES:
        entry = config.get(name)
        if not isinstance(entry, dict) or _is_commit(entry.get("revision")):
            continue
        branch = entry.get("revision") or "main"
        try:
            entry["revision"] = api.repo_info(entry["repo_id"], revision=branch).sha
        except (RepositoryNotFoundError, RevisionNotFoundError) as err:
            logger.warning("the demo Space loads %s at %s: not pinned to a commit (%s)", entry["repo_id"], branch, err)
    return (json.dumps(config, indent=2) + "\n").encode("utf-8")


def _world_files(run_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """The run's world as the Space ships it: the manifest, every database and the example split."""
    world = RunLayout(run_dir).world
    if not (world / WORLD_MANIFEST).is_file():
        return {}, []
    files = {f"{SPACE_WORLD}/{WORLD_MANIFEST}": world / WORLD_MANIFEST}
    for sub in ("databases", f"datasets/{EXAMPLE_SPLIT}"):
        if (world / sub).is_dir():
            files.update((f"{SPACE_WORLD}/{sub}/{path}", local) for path, local in folder_files(world / sub))
    databases = sorted({path.split("/")[2] for path in files if path.startswith(f"{SPACE_WORLD}/databases/")})
    if not databases:  # a world without databases shows nothing: the Space builds its own from the seed
        return {}, []
    return files, [f"world/{db}" for db in databases]


def demo_files(
    card: Any, run_dir: Path, ids: dict[str, str], base: Any, revision: str | None
) -> dict[str, Path | bytes]:
    """``space_config.json``, the world's files and the README (``card``: the demo folder's, loaded) whose
    metadata names the run's base, SFT and GRPO repositories and, when the run has a band, its dataset."""
    world, databases = _world_files(run_dir)
    config = space_config(ids, base, revision, databases)
    sft = model_ref(RunLayout(run_dir).sft_stage2)
    if sft.hub:  # a study that took its SFT adapter from the Hub: the Space loads that one
        config["sft_adapter"] = {"repo_id": sft.name, "revision": sft.revision or "main"}
    card.data.models = [base.repo_id, config["sft_adapter"]["repo_id"], ids[MODEL]]
    band = RunLayout(run_dir).band
    card.data.datasets = [ids[DATASET]] if DATASET in ids and band.is_dir() else None
    files: dict[str, Path | bytes] = dict(world)
    files[SPACE_CONFIG] = (json.dumps(config, indent=2) + "\n").encode("utf-8")
    files[CARD_README] = str(card).encode("utf-8")
    return files
