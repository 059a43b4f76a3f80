"""Names of models, adapters and repositories: a local folder or a Hub id (one rule, :func:`looks_local`), Hub
repository ids (every check goes through ``huggingface_hub.utils.validate_repo_id``, here, once) and the dtypes a
recipe may ask for.

Example:

```python
>>> from slmsql_hub.refs import check_repo_id, looks_like_hub_id
>>> check_repo_id("alice/qwen-grpo"), looks_like_hub_id("outputs/quickstart/base")
('alice/qwen-grpo', False)

```
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import UsageError

DTYPES = ("auto", "float32", "bfloat16", "float16")
"""The ``dtype`` values the SFT, GRPO, filter and eval recipes accept."""


def looks_local(ref: str | Path) -> bool:
    """Whether ``ref`` can only be a local folder: a Hub id is ``name`` or ``owner/name`` with no local ``owner``.

    Example:

    ```python
    >>> looks_local("Qwen/Qwen2.5-Coder-1.5B-Instruct"), looks_local("outputs/quickstart/base"), looks_local("./base")
    (False, True, True)

    ```
    """
    text = str(ref)
    return (
        isinstance(ref, Path)
        or text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or "\\" in text
        or Path(text.split("/")[0]).is_dir()
    )


def repo_id_problem(name: str) -> str | None:
    """Why ``name`` is not a Hub repository id (``None`` when it is one)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError as err:
        return str(err)
    return None


def check_repo_id(repo_id: str | None, option: str = "--repo-id", *, namespace: bool = True) -> str:
    """``repo_id`` unchanged when the Hub accepts it (``namespace/name`` unless ``namespace=False``); else a
    UsageError naming ``option``.

    Example:

    ```python
    >>> check_repo_id("alice/qwen-grpo")
    'alice/qwen-grpo'

    ```
    """
    if not repo_id:
        raise UsageError(
            f"no repository id: pass {option} NAMESPACE/NAME (your user name or an organisation)"
        )
    problem = repo_id_problem(repo_id)
    if problem is None and namespace and repo_id.count("/") != 1:
        problem = "a namespace is needed"
    if problem is not None:
        what = "NAMESPACE/NAME" if namespace else "NAME or NAMESPACE/NAME"
        raise UsageError(
            f"{option} {repo_id!r} is not a Hub repository id: use {what} with letters, digits, '-', '_' "
            f"or '.' (no '--' or '..'; {problem})"
        )
    return repo_id


def looks_like_hub_id(name: str | None, run: Any = None) -> bool:
    """Whether ``name`` is a valid Hub id that is not a local folder (:func:`looks_local`; ``run``: a
    :class:`~slmsql_hub.run.read.Run` whose own folders are never Hub ids).

    Example:

    ```python
    >>> looks_like_hub_id("Qwen/Qwen2.5-Coder-1.5B-Instruct"), looks_like_hub_id("/models/qwen")
    (True, False)

    ```
    """
    if not name or looks_local(name) or repo_id_problem(name) is not None:
        return False
    # A path under the run's own folder (``outputs/quickstart/base``) is the run's, never a Hub id.
    return run is None or run.local(name) == Path(name)


def repo_url(repo_type: str, repo_id: str, endpoint: str | None = None) -> str:
    """The web address of a ``model``, ``dataset`` or ``space`` repository on ``endpoint`` (default
    ``HF_ENDPOINT``, else huggingface.co).

    Example:

    ```python
    >>> repo_url("space", "alice/ex", endpoint="https://huggingface.co")
    'https://huggingface.co/spaces/alice/ex'

    ```
    """
    endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    prefix = {"model": "", "dataset": "datasets/", "space": "spaces/"}[repo_type]
    return f"{endpoint}/{prefix}{repo_id}"
