"""Install the ``slmsql/ex`` metric script into ``evaluate``'s module cache, so it loads with no network.

``evaluate.load("owner/name")`` first asks the Hub for the script; when that fails (offline, or
``HF_EVALUATE_OFFLINE=1``) it falls back to the newest cached copy under
``<modules cache>/evaluate_modules/metrics/owner--name/<hash>/name.py``, where ``<hash>`` is
``evaluate.loading.files_to_hash([script])``: a 64-character SHA-256 folder name, which is how the fallback
recognises a cached version. The modules cache is ``$HF_MODULES_CACHE``, by default ``$HF_HOME/modules``.
Each folder on that path is a Python package (an ``__init__.py``) because ``evaluate`` imports the script
as ``evaluate_modules.metrics.owner--name.<hash>.name``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

METRIC_ID = "slmsql/ex"
METRIC_SCRIPT = Path(__file__).resolve().with_name("ex.py")


def install_metric(cache_dir: str | os.PathLike | None = None) -> Path:
    """Copy the metric script into ``evaluate``'s module cache so ``evaluate.load("slmsql/ex")`` works offline.

    Idempotent: installing the same script again rewrites nothing but marks it the newest cached version
    (``evaluate`` picks the most recently modified one).

    Args:
        cache_dir: the modules cache to install into; by default ``evaluate``'s (``$HF_MODULES_CACHE``, else
            ``$HF_HOME/modules``).

    Returns:
        The path of the installed script, ``<cache>/evaluate_modules/metrics/slmsql--ex/<hash>/ex.py``.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.metric import install_metric
    >>> path = install_metric(cache_dir=tempfile.mkdtemp())
    >>> path.parent.parent.name, path.name, len(path.parent.name)
    ('slmsql--ex', 'ex.py', 64)

    ```
    """
    from evaluate import config
    from evaluate.loading import files_to_hash

    modules_root = Path(cache_dir) if cache_dir is not None else Path(config.HF_MODULES_CACHE)
    owner_name = METRIC_ID.replace("/", "--")
    script_name = METRIC_ID.split("/")[-1] + ".py"
    dynamic = modules_root / config.MODULE_NAME_FOR_DYNAMIC_MODULES
    metric_dir = dynamic / "metrics" / owner_name
    target_dir = metric_dir / files_to_hash([str(METRIC_SCRIPT)])
    for package in (modules_root, dynamic, dynamic / "metrics", metric_dir, target_dir):
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").touch(exist_ok=True)

    target = target_dir / script_name
    source = METRIC_SCRIPT.read_bytes()
    if not target.is_file() or target.read_bytes() != source:
        partial = target.with_suffix(".py.partial")
        partial.write_bytes(source)
        os.replace(partial, target)
        logger.info("installed %s at %s", METRIC_ID, target)
    else:
        os.utime(target)  # the newest cached version is the one evaluate loads
        logger.info("%s already installed at %s", METRIC_ID, target)
    meta = target.with_suffix(".json")
    meta.write_text(
        json.dumps({"original file path": str(METRIC_SCRIPT), "local file path": str(target)}),
        encoding="utf-8",
    )
    return target
