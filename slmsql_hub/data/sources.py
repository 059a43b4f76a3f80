"""Where a training dataset comes from: a ``save_to_disk`` folder, or a Hub dataset id read with
``datasets.load_dataset``. A published band (``slmsql push --what dataset``) carries the SQLite files its rows
name by a ``db_path`` relative to the repository (``databases/<db>/<db>.sqlite``); they are downloaded from the
same repository and revision and the rows get their absolute local paths, so the rewards run on them as on a
local band.

:func:`dataset_kind` decides which a name is (an existing folder, else a Hub id, else one line) without loading
anything, so a recipe naming neither fails before any model loads.

Example:

```python
>>> import tempfile
>>> dataset_kind(tempfile.mkdtemp()), dataset_kind("alice/qwen-grpo-band")
('folder', 'hub')

```
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InfrastructureError, UsageError
from ..refs import looks_local, repo_id_problem, repo_url

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

_TRAIN_SPLIT = "train"
"""The split read from a Hub dataset with several (the band has only this one)."""


def dataset_kind(ref: str, option: str = "dataset_paths", hint: str = "") -> str:
    """``"folder"`` when ``ref`` is an existing folder, ``"hub"`` when it can only be a Hub dataset id;
    otherwise a UsageError naming ``option`` (and ``hint``, how to make the folder).

    Example:

    ```python
    >>> dataset_kind("outputs/none/band")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: dataset folder not found: outputs/none/band; fix dataset_paths
    >>> dataset_kind("my band")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: dataset_paths entry 'my band' is neither a dataset folder nor a Hub dataset id...

    ```
    """
    path = Path(ref).expanduser()
    if path.is_dir():
        return "folder"
    if check_dataset_name(ref, option) == "folder":
        raise UsageError(f"dataset folder not found: {path}; {hint + ' or ' if hint else ''}fix {option}")
    return "hub"


def check_dataset_name(ref: str, option: str = "dataset_paths") -> str:
    """``"folder"`` when ``ref`` can only be a local path, ``"hub"`` when it is a Hub dataset id, looking at
    the name alone (a recipe is checked when parsed, before its folders exist); else a UsageError naming
    ``option``.

    Example:

    ```python
    >>> check_dataset_name("outputs/world/band"), check_dataset_name("alice/qwen-grpo-band")
    ('folder', 'hub')

    ```
    """
    if looks_local(ref):
        return "folder"
    problem = repo_id_problem(ref)
    if problem is not None:
        raise UsageError(
            f"{option} entry {ref!r} is neither a dataset folder nor a Hub dataset id (NAMESPACE/NAME): {problem}"
        )
    return "hub"


def load_hub_dataset(repo_id: str, revision: str | None = None, option: str = "dataset_paths") -> Dataset:
    """The rows of Hub dataset ``repo_id`` at ``revision`` (``None``: main): its only split, else ``train``;
    every relative ``db_path`` is downloaded from the repository and replaced by its absolute local path.

    UsageError (one line): no such dataset or revision, several splits and none is ``train``, or a database the
    rows name that the repository does not hold. InfrastructureError: the Hub could not be reached.
    """
    import datasets
    from datasets.exceptions import DatasetNotFoundError
    from huggingface_hub.errors import (
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = repo_url("dataset", repo_id)
    at = f" at revision {revision}" if revision else ""
    try:
        loaded = datasets.load_dataset(repo_id, revision=revision)
    except (DatasetNotFoundError, RepositoryNotFoundError, RevisionNotFoundError) as err:
        raise UsageError(
            f"{option} entry {repo_id!r}: no such folder here, and no dataset {where}{at} "
            f"({_first_line(err)}); fix the name or the revision, or log in for a private dataset"
        ) from err
    except (ConnectionError, LocalEntryNotFoundError, OSError) as err:
        raise InfrastructureError(
            f"could not read dataset {repo_id}{at} from the Hub ({_first_line(err)}); check the network, "
            "HF_ENDPOINT and HF_HUB_OFFLINE"
        ) from err
    rows = _one_split(loaded, repo_id)
    if "db_path" not in rows.column_names:
        return rows
    wanted = sorted({p for p in rows.unique("db_path") if p and not Path(p).is_absolute()})
    if not wanted:
        return rows
    folder = _download_databases(repo_id, revision, wanted)
    missing = [p for p in wanted if not (folder / p).is_file()]
    if missing:
        raise UsageError(
            f"dataset {repo_id}{at} names {len(missing)} database(s) its repository does not hold (first: "
            f"{missing[0]}); push the band again with `slmsql push RUN_DIR --what dataset`, which uploads them"
        )
    logger.info("%s: %d rows, %d database(s) in %s", repo_id, len(rows), len(wanted), folder)
    return rows.map(
        lambda path: {"db_path": path if not path or Path(path).is_absolute() else str(folder / path)},
        input_columns="db_path",
        desc="local db_path",
    )


def _one_split(loaded, repo_id: str) -> Dataset:
    import datasets

    if isinstance(loaded, datasets.Dataset):
        return loaded
    if len(loaded) == 1:
        return next(iter(loaded.values()))
    if _TRAIN_SPLIT in loaded:
        return loaded[_TRAIN_SPLIT]
    raise UsageError(
        f"dataset {repo_id} has splits {', '.join(loaded)} and none is {_TRAIN_SPLIT!r}: publish the training "
        "rows as one split"
    )


def _download_databases(repo_id: str, revision: str | None, paths: list[str]) -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=paths))


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
