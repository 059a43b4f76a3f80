"""The wheel a pushed Space installs: exactly the running version of slmsql-hub, uploaded into the Space repository
and pinned by URL in its ``requirements.txt``.

The package is on no package index, so a Space's ``slmsql-hub`` requirement would not resolve; and a Space is built
by the Hub from ``requirements.txt`` before its other files are in place, so the pin is a URL of the wheel in the
Space's own repository (``slmsql-hub @ https://huggingface.co/spaces/NS/NAME/resolve/main/wheels/...whl``), which
pip fetches without a token only when the Space is public (``docs/usage.md`` says what a private Space needs).

The wheel is built from the source tree this package runs from (``pip wheel --no-deps --no-build-isolation`` on a
copy of the files the wheel ships, cached by their content), or given (``slmsql push --wheel``) when the package
itself was installed from a wheel.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

from .. import __version__
from ..errors import InfrastructureError, UsageError
from ..refs import repo_url
from ..resources import PACKAGE_DIR

logger = logging.getLogger(__name__)

_PACKAGE_NAME = "slmsql-hub"
WHEEL_FOLDER = "wheels"
"""Where the wheel lands in a Space repository."""

_TREE = ("pyproject.toml", "README.md", "LICENSE", "slmsql_hub", "model_card", "spaces/demo")
"""What a wheel is built from (pyproject's packages and their data); ``build/`` and caches never go in."""

_SKIP = ("__pycache__", "*.pyc", ".*_cache", "build", "*.egg-info")


def _source_root() -> Path | None:
    """The source checkout this package runs from (its ``pyproject.toml`` names slmsql-hub), else ``None``."""
    root = PACKAGE_DIR.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and f'name = "{_PACKAGE_NAME}"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256(__version__.encode())
    for entry in _TREE:
        path = root / entry
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            relative = file.relative_to(root).as_posix()
            if any(part == "__pycache__" or part.endswith("_cache") for part in relative.split("/")):
                continue
            if file.suffix == ".pyc":
                continue
            digest.update(relative.encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _check_wheel(path: str | os.PathLike) -> Path:
    """``path`` when it is a wheel of this very version of slmsql-hub; else a UsageError naming the fix."""
    wheel = Path(path)
    prefix = f"{_PACKAGE_NAME.replace('-', '_')}-{__version__}-"
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise UsageError(f"--wheel {wheel}: no such wheel file (build one with `pip wheel --no-deps .`)")
    if not wheel.name.startswith(prefix):
        raise UsageError(
            f"--wheel {wheel.name} is not slmsql-hub {__version__}, the version that is pushing: a Space must "
            "install the version that wrote it"
        )
    return wheel


def package_wheel(given: str | os.PathLike | None = None) -> Path:
    """The wheel of the running slmsql-hub: ``given`` (checked by :func:`_check_wheel`), else built from the source
    tree (cached by content). UsageError: installed from a wheel and none given; InfrastructureError: pip failed."""
    if given is not None:
        return _check_wheel(given)
    root = _source_root()
    if root is None:
        raise UsageError(
            f"slmsql-hub {__version__} is installed, not run from its source tree, so no wheel can be built for "
            "the Spaces to install: pass --wheel PATH (the wheel it was installed from)"
        )
    cache = Path(tempfile.gettempdir()) / "slmsql-hub-wheels" / _tree_digest(root)
    built = sorted(cache.glob("*.whl")) if cache.is_dir() else []
    if built:
        return built[0]
    with tempfile.TemporaryDirectory(prefix="slmsql-wheel-") as tmp:
        src = Path(tmp) / "src"
        for entry in _TREE:
            path = root / entry
            if path.is_dir():
                shutil.copytree(path, src / entry, ignore=shutil.ignore_patterns(*_SKIP))
            elif path.is_file():
                (src / entry).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, src / entry)
        dist = Path(tmp) / "dist"
        logger.info("building the slmsql-hub %s wheel the Spaces install, from %s", __version__, root)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "wheel", str(src), "--no-deps",
             "--no-build-isolation", "-w", str(dist)],
            capture_output=True, text=True, cwd=tmp,
        )  # fmt: skip
        wheels = sorted(dist.glob("*.whl"))
        if done.returncode != 0 or not wheels:
            tail = " ".join((done.stderr or done.stdout).split())[-300:]
            raise InfrastructureError(
                f"building the slmsql-hub wheel failed ({tail}); pass --wheel PATH instead"
            )
        cache.mkdir(parents=True, exist_ok=True)
        target = cache / wheels[0].name
        shutil.copyfile(wheels[0], target.with_suffix(".partial"))
        os.replace(target.with_suffix(".partial"), target)
    return target


def wheel_requirement(
    space_id: str, wheel_name: str, *, revision: str | None = None, endpoint: str | None = None
) -> str:
    """The requirement that installs the wheel pushed into the Space ``space_id`` (what ``pip install`` takes).

    Example:

    ```python
    >>> wheel_requirement("alice/ex", "slmsql_hub-0.1.0-py3-none-any.whl", endpoint="https://huggingface.co")
    'slmsql-hub @ https://huggingface.co/spaces/alice/ex/resolve/main/wheels/slmsql_hub-0.1.0-py3-none-any.whl'

    ```
    """
    quoted = urllib.parse.quote(revision or "main", safe="")
    return f"{_PACKAGE_NAME} @ {repo_url('space', space_id, endpoint)}/resolve/{quoted}/{WHEEL_FOLDER}/{wheel_name}"


def pinned_requirements(
    text: str, space_id: str, wheel_name: str, *, revision: str | None = None, endpoint: str | None = None
) -> str:
    """``requirements.txt`` with its slmsql-hub line pinned to the wheel in the Space ``space_id`` (added when
    missing); the other lines are kept.

    Example:

    ```python
    >>> print(pinned_requirements("slmsql-hub\\nnumpy\\n", "alice/ex", "slmsql_hub-0.1.0-py3-none-any.whl",
    ...                           endpoint="https://huggingface.co"), end="")
    slmsql-hub @ https://huggingface.co/spaces/alice/ex/resolve/main/wheels/slmsql_hub-0.1.0-py3-none-any.whl
    numpy

    ```
    """
    pin = wheel_requirement(space_id, wheel_name, revision=revision, endpoint=endpoint)
    lines, pinned = [], False
    for line in text.splitlines():
        if _requirement_name(line) == _PACKAGE_NAME:
            if not pinned:
                lines.append(pin)
            pinned = True
        else:
            lines.append(line)
    if not pinned:
        lines.insert(0, pin)
    return "\n".join(lines) + "\n"


def _requirement_name(line: str) -> str | None:
    """The canonical project name a ``requirements.txt`` line asks for (``None``: a comment, option or path)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(line.split(" #")[0].strip()).name)
    except InvalidRequirement:
        return None
