"""Every third-party module the shipped code imports is a declared dependency.

The shipped code is ``slmsql_hub/`` and the demo Space (``spaces/demo/``, in the wheel as
``slmsql_hub.demo_space``). Each ``import X`` / ``from X import`` at any depth (inside functions too) names a
top-level module; a module outside the standard library and the project must belong to a distribution that
``pyproject.toml`` lists in ``dependencies`` or an extra. The module -> distribution map is the installed one
(``importlib.metadata.packages_distributions``); a module not installed here (vLLM) must be a distribution of
the same name.
"""

from __future__ import annotations

import ast
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = (ROOT / "slmsql_hub", ROOT / "spaces" / "demo")


def third_party_imports(folder: Path) -> dict[str, str]:
    """Top-level module -> the first file importing it, over every ``.py`` file under ``folder``, leaving out
    the standard library, ``slmsql_hub`` and modules of the folder's own (the Space imports its siblings)."""
    local = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "slmsql_hub" or top in local:
                    continue
                found.setdefault(top, path.relative_to(folder).as_posix())
    return found


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_the_import_scan_sees_imports_inside_functions_and_skips_the_standard_library(tmp_path):
    (tmp_path / "sibling.py").write_text("import json\n")
    (tmp_path / "mod.py").write_text("import os, sibling\n\ndef f():\n    from pandas.api import types\n")
    assert third_party_imports(tmp_path) == {"pandas": "mod.py"}


def test_every_module_the_shipped_code_imports_is_a_declared_dependency():
    installed = packages_distributions()
    declared = declared_distributions()
    undeclared = {}
    for folder in SHIPPED:
        for module, where in third_party_imports(folder).items():
            distributions = {canonicalize_name(d) for d in installed.get(module, [module])}
            if not distributions & declared:
                undeclared[module] = f"{folder.name}/{where}"
    assert not undeclared, (
        f"imported but not declared in pyproject.toml (module: first importer): {undeclared}"
    )
