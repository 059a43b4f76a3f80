"""Install the ``slmsql/ex`` metric script into ``evaluate``'s module cache, so it loads with no network.

``evaluate.load("owner/name")`` first asks the Hub for the script; when that fails (offline, or
``HF_EVALUATE_OFFLINE=1``) it falls back to the newest cached copy under
``<modules cache>/evaluate_modules/metrics/owner--name/<hash>/name.py``, where ``<hash>`` is
``evaluate.loading.files_to_hash([script])`` (recomputed by :func:`_script_hash`: importing ``evaluate`` costs
seconds, as it imports transformers and torch). Each folder on that path is a Python package (an
``__init__.py``) because ``evaluate`` imports the script as ``evaluate_modules.metrics.owner--name.<hash>.name``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
from pathlib import Path

from ..run.files import write_atomic

logger = logging.getLogger(__name__)

METRIC_ID = "slmsql/ex"
METRIC_SCRIPT = Path(__file__).resolve().with_name("ex.py")
_DYNAMIC_MODULES = "evaluate_modules"  # evaluate.config.MODULE_NAME_FOR_DYNAMIC_MODULES


def default_modules_cache() -> Path:
    """``evaluate``'s modules cache: the one an already imported ``evaluate`` uses, else the one it would
    resolve (``$HF_MODULES_CACHE``, else ``$HF_HOME/modules``, else ``~/.cache/huggingface/modules``).

    Example:

    ```python
    >>> default_modules_cache().name
    'modules'

    ```
    """
    config = sys.modules.get("evaluate.config")
    if config is not None:
        return Path(config.HF_MODULES_CACHE)
    hf_home = os.path.expanduser(
        os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "huggingface"))
    )
    return Path(os.getenv("HF_MODULES_CACHE", os.path.join(hf_home, "modules")))


def _script_hash(path: str | os.PathLike) -> str:
    """The folder name ``evaluate`` caches a script under (``evaluate.loading.files_to_hash([path])``): SHA-256
    of its ``readlines()`` with ``#`` comments removed and empty lines dropped, joined by newlines.

    Example:

    ```python
    >>> len(_script_hash(METRIC_SCRIPT))
    64

    ```
    """
    with open(path, encoding="utf-8") as handle:
        lines = [re.sub(r"#.*", "", line) for line in handle.readlines()]
    return hashlib.sha256("\n".join(line for line in lines if line).encode("utf-8")).hexdigest()


def install_metric(cache_dir: str | os.PathLike | None = None) -> Path:
    """Copy the metric script into the modules cache ``cache_dir`` (default: :func:`default_modules_cache`) so
    ``evaluate.load("slmsql/ex")`` works offline; returns ``<cache>/evaluate_modules/metrics/slmsql--ex/<hash>/ex.py``.

    Idempotent: installing the same script again rewrites nothing but marks it the newest cached version
    (``evaluate`` picks the most recently modified one).

    Example:

    ```python
    >>> import tempfile
    >>> path = install_metric(cache_dir=tempfile.mkdtemp())
    >>> path.parent.parent.name, path.name, len(path.parent.name)
    ('slmsql--ex', 'ex.py', 64)

    ```
    """
    modules_root = Path(cache_dir) if cache_dir is not None else default_modules_cache()
    owner_name = METRIC_ID.replace("/", "--")
    script_name = METRIC_ID.split("/")[-1] + ".py"
    dynamic = modules_root / _DYNAMIC_MODULES
    metric_dir = dynamic / "metrics" / owner_name
    target_dir = metric_dir / _script_hash(METRIC_SCRIPT)
    for package in (modules_root, dynamic, dynamic / "metrics", metric_dir, target_dir):
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").touch(exist_ok=True)

    target = target_dir / script_name
    source = METRIC_SCRIPT.read_bytes()
    if not target.is_file() or target.read_bytes() != source:
        write_atomic(target, source.decode("utf-8"))
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
