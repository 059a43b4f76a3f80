"""Resuming an interrupted ``slmsql push``: ``RUN_DIR/push_progress.json`` records each target once its push
landed, so a rerun of the same command after a failure or a kill pushes only the rest.

A target is recorded with a fingerprint of everything its push sends (repository, revision, pull-request mode,
visibility, commit message, card, each file's path and sha256, the band's files): a rerun skips a target only
when its fingerprint is the recorded one, so a target whose content changed since is pushed again. The file is
rewritten atomically after each target (:func:`~slmsql_hub.run.files.write_atomic`), so a kill leaves the
targets pushed before it; it is removed when every target of a push landed, so a later push starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from ..run.files import read_json_object, write_atomic
from .targets import PushTarget, folder_files, sha256_of

logger = logging.getLogger(__name__)


def fingerprint(target: PushTarget, **settings: Any) -> str:
    """The sha256 of what pushing ``target`` with ``settings`` (``private``, ``revision``, ``create_pr``,
    ``commit_message``) sends: equal fingerprints, equal pushes.

    Example:

    ```python
    >>> space = PushTarget("metric-space", "space", "alice/ex", (("app.py", b"print(1)"),), space_sdk="gradio")
    >>> fingerprint(space, revision=None) == fingerprint(space, revision=None)
    True
    >>> fingerprint(space, revision=None) == fingerprint(space, revision="v2")
    False

    ```
    """
    files = list(target.files)
    if target.dataset_path is not None:
        files += [(f"<band>/{path}", local) for path, local in folder_files(target.dataset_path)]
    content = {
        "target": [target.what, target.repo_type, target.repo_id, target.space_sdk, target.card],
        "settings": sorted(settings.items()),
        "files": [(path, sha256_of(local)) for path, local in files],
    }
    return hashlib.sha256(json.dumps(content, default=str).encode("utf-8")).hexdigest()


class PushProgress:
    """The targets of an interrupted push that landed, in ``path`` (``None``: nothing recorded, nothing skipped).

    Example:

    ```python
    >>> import tempfile
    >>> progress = PushProgress(Path(tempfile.mkdtemp()) / "push_progress.json")
    >>> progress.pushed("model alice/x", "f1") is None
    True
    >>> progress.record("model alice/x", "f1", {"commit_oid": "abc"})
    >>> PushProgress(progress.path).pushed("model alice/x", "f1"), progress.pushed("model alice/x", "f2")
    ({'commit_oid': 'abc'}, None)
    >>> progress.finish(); progress.path.exists()
    False

    ```
    """

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path is not None else None
        self._done: dict[str, dict] = {}
        if self.path is not None and self.path.is_file():
            fix = f"remove {self.path} to push every target again"
            self._done = read_json_object(self.path, fix).get("pushed") or {}

    def pushed(self, key: str, print_: str) -> dict | None:
        """The result recorded for ``key`` when it was pushed with fingerprint ``print_``, else ``None``."""
        entry = self._done.get(key)
        return entry["result"] if isinstance(entry, dict) and entry.get("fingerprint") == print_ else None

    def record(self, key: str, print_: str, result: dict) -> None:
        """Record ``key`` as pushed (atomically: a kill leaves the file before or after this target)."""
        self._done[key] = {"fingerprint": print_, "result": result}
        if self.path is not None:
            write_atomic(self.path, json.dumps({"pushed": self._done}, indent=2) + "\n")

    def finish(self) -> None:
        """Every target landed: forget them."""
        self._done = {}
        if self.path is not None:
            self.path.unlink(missing_ok=True)

