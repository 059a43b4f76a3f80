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


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub's web address that links point to: ``endpoint``, else ``HF_ENDPOINT``, else huggingface.co.

    Example:

    ```python
    >>> hub_endpoint("https://hub.example.org/")
    'https://hub.example.org'

    ```
    """
    return (endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def repo_url(repo_type: str, repo_id: str, endpoint: str | None = None) -> str:
    """The web address of a ``model``, ``dataset`` or ``space`` repository on ``endpoint`` (default
    ``HF_ENDPOINT``, else huggingface.co).

    Example:

    ```python
    >>> repo_url("space", "alice/ex", endpoint="https://huggingface.co")
    'https://huggingface.co/spaces/alice/ex'

    ```
    """
    prefix = {"model": "", "dataset": "datasets/", "space": "spaces/"}[repo_type]
    return f"{hub_endpoint(endpoint)}/{prefix}{repo_id}"


_HUB_LICENSES = frozenset(
    """apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
    bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc
    cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0
    cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0
    cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1
    eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research intel-research lppl-1.3c
    ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl openmdw-1.0 openrail++ osl-3.0 postgresql ofl-1.1 ncsa
    unlicense zlib pddl lgpl-lr deepfloyd-if-license fair-noncommercial-research-license llama2 llama3 llama3.1
    llama3.2 llama3.3 llama4 gemma unknown other""".split()
)
"""The license identifiers the Hub accepts in a card's ``license:`` (https://huggingface.co/docs/hub/repositories-licenses;
``huggingface_hub`` ships no such list). ``other`` needs ``license_name`` and ``license_link`` as well."""


def check_license(license_id: str, option: str = "--license") -> str:
    """``license_id`` unchanged when the Hub accepts it in a card's metadata; else a UsageError naming ``option``
    and the closest identifier.

    Example:

    ```python
    >>> check_license("apache-2.0")
    'apache-2.0'
    >>> check_license("apache2")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: --license 'apache2' is not a Hub license id (did you mean apache-2.0?); see https://huggingface.co/docs/hub/repositories-licenses

    ```
    """
    import difflib

    if license_id in _HUB_LICENSES:
        return license_id
    close = difflib.get_close_matches(license_id.lower(), sorted(_HUB_LICENSES), n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UsageError(
        f"{option} {license_id!r} is not a Hub license id{hint}; see https://huggingface.co/docs/hub/repositories-licenses"
    )


def check_hub_repo(repo_id: str, filename: str, *, what: str, revision: str | None = None) -> None:
    """Fetch ``filename`` (``config.json`` of a model, ``adapter_config.json`` of an adapter) of the Hub repository
    ``repo_id`` into the cache before anything loads, so a missing repository, revision or file is one line.

    Raises :class:`UsageError` (exit code 2) when the repository, the revision or the file does not exist (or is
    private or gated without access), or the Hub is offline (``HF_HUB_OFFLINE``) and the file not cached;
    :class:`~slmsql_hub.errors.InfrastructureError` (exit code 1) when the Hub cannot be reached or fails.
    """
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from .errors import InfrastructureError

    at = f" at revision {revision}" if revision else ""
    hub = constants.ENDPOINT
    try:
        hf_hub_download(repo_id, filename, revision=revision)
    except GatedRepoError as err:
        raise UsageError(
            f"{what} {repo_id!r} is gated: accept its terms on {hub} and log in (HF_TOKEN)"
        ) from err
    except RepositoryNotFoundError as err:
        raise UsageError(
            f"{what} {repo_id!r} not found on {hub}: check the id (or log in with HF_TOKEN / `hf auth login` if it "
            "is private), or pass a local folder"
        ) from err
    except RevisionNotFoundError as err:
        raise UsageError(f"{what} {repo_id!r} has no revision {revision!r} on {hub}") from err
    except RemoteEntryNotFoundError as err:
        raise UsageError(f"{what} {repo_id!r}{at} has no {filename}: is it the right repository?") from err
    except LocalEntryNotFoundError as err:
        if constants.HF_HUB_OFFLINE:
            raise UsageError(
                f"{what} {repo_id!r}{at} is not in the local cache and HF_HUB_OFFLINE is set: download it first, "
                "or pass a local folder"
            ) from err
        raise InfrastructureError(
            f"could not reach {hub} to fetch {what} {repo_id!r}{at}: check the network and HF_ENDPOINT, or set "
            "HF_HUB_OFFLINE=1 when it is in the local cache"
        ) from err
    except HfHubHTTPError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InfrastructureError(f"{hub} failed while fetching {what} {repo_id!r}{at}: {first}") from err
