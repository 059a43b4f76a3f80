"""What a user gets from ``pip install slmsql-hub`` (a wheel, not this clone): every package, the metric module's
files and the model card template, so ``slmsql card`` and ``slmsql install-metric`` work without the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from setuptools import find_packages
from setuptools.config.pyprojecttoml import read_configuration

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "run"


def _setuptools_config() -> dict:
    return read_configuration(ROOT / "pyproject.toml", expand=False)["tool"]["setuptools"]


MAPPED = {"slmsql_hub.model_card": "model_card", "slmsql_hub.demo_space": "spaces/demo"}


def test_pyproject_lists_every_package_on_disk_and_maps_the_template_and_space_folders():
    config = _setuptools_config()
    on_disk = set(find_packages(where=str(ROOT), include=["slmsql_hub*"]))
    assert set(config["packages"]) == on_disk | set(MAPPED)
    assert config["package-dir"] == MAPPED
    assert (ROOT / "model_card" / "model_card.md").is_file() and (ROOT / "spaces" / "demo" / "app.py").is_file()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project built as a wheel and installed (without dependencies) into a folder of its own.

    Built from a copy of the source tree: setuptools keeps ``build/`` in the tree it builds, and a stale file
    there (a module deleted since) would end up in the wheel.
    """
    tmp = tmp_path_factory.mktemp("wheel")
    skip = (".git", ".venv", "outputs", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, tmp / "src", ignore=shutil.ignore_patterns(*skip))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", str(tmp / "src"), "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist")],
        check=True, capture_output=True, cwd=tmp,
    )  # fmt: skip
    (wheel,) = (tmp / "dist").glob("slmsql_hub-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(tmp / "site"), str(wheel)], check=True, capture_output=True
    )
    return tmp / "site"


def test_wheel_ships_the_card_template_the_metric_module_and_the_demo_space(installed):
    for template in ("model_card.md", "base_model_card.md"):  # the adapter's card; a local base's (slmsql push)
        assert (installed / "slmsql_hub" / "model_card" / template).read_bytes() == (
            ROOT / "model_card" / template
        ).read_bytes()
    for name in ("ex.py", "README.md", "requirements.txt", "app.py"):
        assert (installed / "slmsql_hub" / "metric" / name).is_file(), name
    assert _files(installed / "slmsql_hub" / "demo_space") == _files(ROOT / "spaces" / "demo")


def test_installed_package_dry_runs_both_spaces_from_its_own_files_outside_the_clone(installed, tmp_path):
    script = (
        "import sys\n"
        "from slmsql_hub import cli\n"
        "sys.exit(cli.main(['push', sys.argv[1], '--repo-id', 'alice/tiny-grpo', '--what',"
        " 'metric-space,demo-space', '--dry-run', '--dry-run-dir', sys.argv[2], *sys.argv[3:]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(installed), "HF_HUB_OFFLINE": "1"}
    args = [sys.executable, "-c", script, str(FIXTURE_RUN), str(tmp_path / "dry")]
    no_wheel = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert no_wheel.returncode == 2 and "pass --wheel PATH" in no_wheel.stderr  # no tree to build one from
    (wheel,) = (installed.parent / "dist").glob("slmsql_hub-*.whl")
    given = [*args, "--wheel", str(wheel)]
    done = subprocess.run(given, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    dry = tmp_path / "dry"
    demo = installed / "slmsql_hub" / "demo_space"
    pushed = _files(dry / "demo-space")
    assert pushed[f"wheels/{wheel.name}"] == wheel.read_bytes()  # the wheel given, shipped in both Spaces
    assert _files(dry / "metric-space")[f"wheels/{wheel.name}"] == wheel.read_bytes()
    shipped = {k: v for k, v in _files(demo).items() if k not in ("README.md", "requirements.txt")}
    assert {k: pushed[k] for k in shipped} == shipped and "app.py" in shipped
    installed_ex = (installed / "slmsql_hub" / "metric" / "ex.py").read_text()  # rendered for alice/ex
    assert _files(dry / "metric-space")["ex.py"].decode() == installed_ex.replace("slmsql/ex", "alice/ex")
    plan = json.loads((dry / "plan.json").read_text())
    assert [(t["what"], t["repo_id"]) for t in plan["targets"]] == [
        ("metric-space", "alice/ex"),
        ("demo-space", "alice/tiny-grpo-demo"),
    ]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but bytecode, by relative path."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_installed_package_renders_a_card_from_its_own_template_outside_the_clone(installed, tmp_path):
    script = (
        "import json, sys\n"
        "import slmsql_hub\n"
        "from slmsql_hub import cli\n"
        "from slmsql_hub.card import default_template_path\n"
        "code = cli.main(['card', '--run-dir', sys.argv[1], '--out', sys.argv[2]])\n"
        "print(json.dumps({'code': code, 'package': slmsql_hub.__file__, 'template': str(default_template_path())}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(installed)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(FIXTURE_RUN), str(tmp_path / "card")],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert Path(report["package"]).is_relative_to(installed)  # the wheel's copy, not this clone
    assert Path(report["template"]) == installed / "slmsql_hub" / "model_card" / "model_card.md"
    readme = (tmp_path / "card" / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("---\n") and "library_name: peft" in readme


def test_wheel_metadata_names_the_license_as_an_spdx_expression(installed):
    (dist_info,) = installed.glob("slmsql_hub-*.dist-info")
    metadata = (dist_info / "METADATA").read_text(encoding="utf-8")
    assert "License-Expression: Apache-2.0" in metadata
    assert "License :: OSI Approved" not in metadata


def test_wheel_holds_no_tests_recipes_or_outputs(installed):
    top = {p.name for p in installed.iterdir()}
    assert {"tests", "recipes", "outputs", "benchmarks", "spaces"}.isdisjoint(top)


def test_wheel_carries_the_apache_license_text(installed):
    (dist_info,) = installed.glob("slmsql_hub-*.dist-info")
    assert (dist_info / "licenses" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "License-File: LICENSE" in (dist_info / "METADATA").read_text(encoding="utf-8")
