"""The pass-rate band as it is published: its dataset card (``model_card/dataset_card.md``, numbers from
``filter_report.json``), its rows with database paths relative to the repository, and the SQLite files those
paths name (:func:`band_databases`), uploaded beside the parquet so the band trains anywhere
(:mod:`slmsql_hub.data.sources` resolves them after download).
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import __version__
from ..data.benchmarks import REGISTRY
from ..errors import UsageError
from ..refs import repo_url
from ..render import templates
from ..render.fmt import number
from ..run.artifacts import load_saved_dataset

BAND_SPLIT = "train"

BAND_SHARD = f"data/{BAND_SPLIT}-00000-of-00001.parquet"
"""Where ``Dataset.push_to_hub`` puts a one-shard split (``data/<split>-<i>-of-<n>.parquet``)."""

def dataset_card(
    report: dict,
    repo_id: str,
    *,
    model_repo_id: str | None = None,
    endpoint: str | None = None,
    n_databases: int | None = None,
) -> str:
    """The band's dataset card (``model_card/dataset_card.md``): metadata and a body whose numbers all come from
    ``filter_report.json`` (``n_databases``: how many SQLite files the repository carries). Its ``configs``
    keep ``load_dataset`` to the parquet shards, whatever else the repository holds.

    Example:

    ```python
    >>> report = {"summary": "2 band / 1 all-fail / 1 all-pass / 0 unscorable of 4", "pool": 4,
    ...           "counts": {"band": 2, "all_fail": 1, "all_pass": 1, "unscorable": 0},
    ...           "num_samples": 8, "pass_rate_low": 0.2, "pass_rate_high": 0.8,
    ...           "dataset": {"benchmark": "world", "split": "train"}}
    >>> card = dataset_card(report, "alice/qwen-grpo-band")
    >>> "| band (kept) | 2 |" in card, card.startswith("---")
    (True, True)

    ```
    """
    from huggingface_hub import DatasetCard, DatasetCardData

    counts = report.get("counts", {})
    benchmark = report.get("dataset", {}).get("benchmark") or "unknown"
    band = counts.get("band", 0)
    pretty_name = f"{repo_id.split('/')[-1]}: GRPO pass-rate band"
    data = DatasetCardData(
        pretty_name=pretty_name,
        license=REGISTRY[benchmark].license if benchmark in REGISTRY else "other",
        task_categories=["text-generation"],
        language=["en"],
        tags=["text-to-sql", "grpo", "dapo", "pass-rate-filter", "slmsql-hub"],
        size_categories=[_size_category(band)],
        configs=[
            {"config_name": "default", "data_files": [{"split": BAND_SPLIT, "path": f"data/{BAND_SPLIT}-*"}]}
        ],
    )
    classes = [
        ("band (kept)", band),
        ("all-fail", counts.get("all_fail", 0)),
        ("all-pass", counts.get("all_pass", 0)),
        ("unscorable", counts.get("unscorable", 0)),
        ("pool", report.get("pool", sum(counts.values()))),
    ]
    context = {
        "report": report,
        "repo_id": repo_id,
        "split": BAND_SPLIT,
        "benchmark": benchmark,
        "dataset": report.get("dataset", {}),
        "mean_pass_rate": number(report.get("mean_pass_rate")),
        "classes": classes,
        "by_difficulty": report.get("by_difficulty") or {},
        "policy": report.get("policy", {}),
        "generation": report.get("generation", {}),
        "judging": report.get("judging", {}),
        "limits": report.get("limits") or {},
        "n_databases": n_databases,
        "model_repo_id": model_repo_id,
        "model_url": repo_url("model", model_repo_id, endpoint) if model_repo_id else None,
        "slmsql_hub_version": __version__,
    }
    path = templates.template_path(templates.DATASET_CARD)
    return str(templates.render(DatasetCard, data, path, **context))


def _size_category(n: int) -> str:
    for limit, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if n < limit:
            return name
    return "n>1M"


def portable_db_path(path: str) -> str:
    """A database path that means something off this machine: from the ``databases/`` folder on, else
    ``<db folder>/<file>``; relative paths stay as they are.

    Example:

    ```python
    >>> portable_db_path("/home/me/outputs/quickstart/world/databases/library/library.sqlite")
    'databases/library/library.sqlite'
    >>> portable_db_path("/data/spider/database/concert_singer/concert_singer.sqlite")
    'database/concert_singer/concert_singer.sqlite'

    ```
    """
    parts = Path(path).parts
    if not Path(path).is_absolute():
        return path
    for folder in ("databases", "database", "dev_databases", "train_databases"):
        if folder in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(folder) :])
    return "/".join(parts[-2:])


def load_band(path: str | os.PathLike):
    """The band ``slmsql filter`` saved (``RunLayout.band``) as a ``datasets.Dataset`` as it is published, with
    portable ``db_path`` (:func:`portable_db_path`); a ``DatasetDict`` there is a UsageError.

    Example:

    ```python
    >>> import tempfile, datasets
    >>> folder = tempfile.mkdtemp()
    >>> datasets.Dataset.from_dict({"db_path": ["/tmp/w/databases/a/a.sqlite"]}).save_to_disk(folder)
    >>> load_band(folder)[0]["db_path"]
    'databases/a/a.sqlite'

    ```
    """
    import datasets

    band = load_saved_dataset(path, "rerun the filter")  # in memory: the map below writes no cache into it
    if not isinstance(band, datasets.Dataset):
        raise UsageError(
            f"{path} holds a DatasetDict, not the band Dataset `slmsql filter` saves; rerun the filter"
        )
    if "db_path" in band.column_names:
        band = band.map(lambda row: {"db_path": portable_db_path(row["db_path"])}, desc="portable db_path")
    return band


def band_databases(path: str | os.PathLike) -> tuple[tuple[str, Path], ...]:
    """``(path_in_repo, local file)`` of every database the band saved at ``path`` names, ``path_in_repo`` being
    the row's published ``db_path`` (:func:`portable_db_path`); a database not found here is a UsageError.

    Example:

    ```python
    >>> import pathlib, sqlite3, tempfile, datasets
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> db = root / "world" / "databases" / "a" / "a.sqlite"
    >>> db.parent.mkdir(parents=True); sqlite3.connect(db).close()
    >>> datasets.Dataset.from_dict({"db_path": [str(db)] * 2}).save_to_disk(str(root / "band"))
    >>> [(repo_path, local == db) for repo_path, local in band_databases(root / "band")]
    [('databases/a/a.sqlite', True)]

    ```
    """

    from ..training.common import resolve_db_path

    band = load_saved_dataset(path, "rerun the filter")
    if "db_path" not in band.column_names:
        return ()
    files: dict[str, Path] = {}
    for value in band.unique("db_path"):
        try:
            local = resolve_db_path(value, path)
        except UsageError as err:
            raise UsageError(
                f"the band at {path} names a database this machine does not hold ({err}); the published band "
                "carries its databases, so push from the machine that ran the filter"
            ) from err
        repo_path = portable_db_path(value)
        if files.setdefault(repo_path, local) != local:
            raise UsageError(
                f"the band at {path} names two databases that publish as {repo_path}: {files[repo_path]} and "
                f"{local}; filter one benchmark per band"
            )
    return tuple(sorted(files.items()))
