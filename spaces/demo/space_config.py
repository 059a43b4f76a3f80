"""The configuration ``slmsql push --what demo-space`` writes into the Space (``space_config.json`` beside
``app.py``): the base model and both adapters by Hub repository id and revision, and the run's world shipped in the
Space. :func:`config_settings` turns it into :class:`~space_settings.SpaceSettings` fields, under the ``SLMSQL_*``
variables and the command line, which override it. Without the file (a local run) it gives nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from slmsql_hub.errors import UsageError
from slmsql_hub.hub.demo import BENCHMARK_DATA, MODEL_ENTRIES
from slmsql_hub.run.files import read_json_object

logger = logging.getLogger(__name__)

CONFIG_FILE = "space_config.json"
"""Written by ``slmsql push`` (``slmsql_hub/hub/demo.py`` names the same file)."""

_HERE = Path(__file__).resolve().parent

_MODELS = MODEL_ENTRIES


def model_ref_path(name: str, entry: Any, where: Path) -> str:
    """A repository id at its default branch as is; at another revision, the snapshot of that revision."""
    if isinstance(entry, str):
        return entry
    if not isinstance(entry, dict) or not isinstance(entry.get("repo_id"), str):
        raise UsageError(f"{where}: {name} must be a repository id or {{repo_id, revision}}, got {entry!r}")
    revision = entry.get("revision")
    if not revision or revision == "main":
        return entry["repo_id"]
    from huggingface_hub import snapshot_download

    return snapshot_download(entry["repo_id"], revision=revision)


def config_settings(folder: str | Path | None = None) -> dict[str, Any]:
    """:class:`SpaceSettings` fields from ``folder``'s ``space_config.json`` (default: this Space's folder);
    ``{}`` without one. A model at a revision other than ``main`` is downloaded here, at startup.

    Example:

    ```python
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> config = {"base_model": {"repo_id": "a/x-base", "revision": "main"}, "sft_adapter": "a/x-sft",
    ...           "grpo_adapter": {"repo_id": "a/x"}, "world_dir": "world", "example_split": "dev"}
    >>> _ = (folder / "space_config.json").write_text(json.dumps(config))
    >>> settings = config_settings(folder)
    >>> settings["base_model"], settings["grpo_adapter"], settings["world_dir"] == str(folder / "world")
    ('a/x-base', 'a/x', True)

    ```
    """
    root = Path(folder) if folder is not None else _HERE
    path = root / CONFIG_FILE
    if not path.is_file():
        return {}
    config = read_json_object(path, "push the Space again")
    values: dict[str, Any] = {}
    for name in _MODELS:
        if config.get(name):
            values[name] = model_ref_path(name, config[name], path)
    data = config.get(BENCHMARK_DATA)
    if isinstance(data, dict) and data.get("repo_id"):  # the run's benchmark databases, at their pinned commit
        from huggingface_hub import snapshot_download

        values["spider_dir"] = snapshot_download(
            data["repo_id"], repo_type=data.get("repo_type", "dataset"), revision=data.get("revision")
        )
    if config.get("world_dir"):
        values["world_dir"] = str(root / config["world_dir"])
    if config.get("example_split"):
        values["example_split"] = str(config["example_split"])
    logger.info("Space configuration %s: %s", path, values)
    return values
