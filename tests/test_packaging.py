"""What a user gets from ``pip install slmsql-hub`` (a wheel, not this clone): every package, the metric module's
files and the model card template, so ``slmsql card`` and ``slmsql install-metric`` work without the source tree.
"""

from __future__ import annotations

import json
import os
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


def test_pyproject_lists_every_package_on_disk_and_maps_the_card_template_folder():
    config = _setuptools_config()
    on_disk = set(find_packages(where=str(ROOT), include=["slmsql_hub*"]))
    assert set(config["packages"]) == on_disk | {"slmsql_hub.model_card"}
    assert config["package-dir"] == {"slmsql_hub.model_card": "model_card"}
    assert (ROOT / "model_card" / "model_card.md").is_file()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project built as a wheel and installed (without dependencies) into a folder of its own."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist")],
        check=True, capture_output=True, cwd=tmp,
    )  # fmt: skip
    (wheel,) = (tmp / "dist").glob("slmsql_hub-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(tmp / "site"), str(wheel)], check=True, capture_output=True
    )
    return tmp / "site"


def test_wheel_ships_the_card_template_and_the_metric_module(installed):
    assert (installed / "slmsql_hub" / "model_card" / "model_card.md").read_bytes() == (
        ROOT / "model_card" / "model_card.md"
    ).read_bytes()
    for name in ("ex.py", "README.md", "requirements.txt", "app.py"):
        assert (installed / "slmsql_hub" / "metric" / name).is_file(), name


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
