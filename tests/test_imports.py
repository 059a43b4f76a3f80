"""Importing the package does nothing but define things: no file written, no socket, no subprocess, and the
CLI and the light modules (card, hub, plots, the execution core) load no torch, TRL or Gradio. The layers
contract (pyproject.toml) holds: no module imports a higher layer, at any depth, so no library module imports
the study."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl", "peft", "datasets", "evaluate", "gradio", "matplotlib")


def _run(code: str, tmp_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cli_and_light_modules_load_no_heavy_library(tmp_path):
    report = _run(
        f"""
        import json, sys
        from slmsql_hub import cli
        cli.build_parser()  # every subcommand registered: `slmsql --help` stays fast
        import slmsql_hub.card, slmsql_hub.hub, slmsql_hub.render.plots, slmsql_hub.run.layout, slmsql_hub.sql
        import slmsql_hub.evaluation, slmsql_hub.generation, slmsql_hub.training, slmsql_hub.run.metric_names
        print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))
        """,
        tmp_path,
    )
    assert report == []


def test_importing_every_module_writes_nothing_and_opens_no_socket_or_process(tmp_path):
    report = _run(
        f"""
        import importlib, json, os, pkgutil, sys
        for name in {HEAVY!r}:  # their own first-import caches are theirs, not ours
            importlib.import_module(name)
        import slmsql_hub

        WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
        seen = []

        def hook(event, args):
            if event == "open":
                path, mode, flags = (list(args) + [None, None])[:3]
                writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                    isinstance(flags, int) and flags & WRITE_FLAGS
                )
                if writes:
                    seen.append(f"open {{path}} {{mode or flags}}")
            elif event in ("socket.connect", "socket.bind", "subprocess.Popen", "os.system", "os.mkdir",
                           "os.remove", "os.rename", "os.rmdir", "shutil.rmtree", "shutil.copyfile"):
                seen.append(f"{{event}} {{args[:2]!r}}")

        sys.addaudithook(hook)
        modules = []
        for info in pkgutil.walk_packages(slmsql_hub.__path__, "slmsql_hub."):
            importlib.import_module(info.name)
            modules.append(info.name)
        print(json.dumps({{"modules": modules, "seen": seen}}))
        """,
        tmp_path,
    )
    assert len(report["modules"]) > 30 and "slmsql_hub.sql.sandbox" in report["modules"]
    assert report["seen"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_layers_contract_holds_at_every_depth():
    """`lint-imports` (import-linter's `layers` contract in pyproject.toml, also run by `make lint`): every import
    statement, inside functions and under TYPE_CHECKING too, goes to the module's own layer or a lower one."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_no_library_module_imports_the_study_at_any_depth():
    """The seam of issue #33: the study (``slmsql_hub.study``: ablations, transfer, planting) sits on the library,
    and only the command layer reaches it; the world builds a planted world through its ``WorldPlant`` hook."""
    import grimp

    graph = grimp.build_graph("slmsql_hub")
    study = {"slmsql_hub.study", "slmsql_hub.study.plant", "slmsql_hub.study.band", "slmsql_hub.study.transfer"}
    assert study <= graph.modules and not {"slmsql_hub.ablate", "slmsql_hub.world.plant"} & graph.modules
    users = graph.find_downstream_modules("slmsql_hub.study", as_package=True)
    top = ("slmsql_hub.commands", "slmsql_hub.cli", "slmsql_hub.__main__")
    assert sorted(m for m in users if not m.startswith(top)) == []
    assert graph.find_shortest_chain(importer="slmsql_hub.world.build", imported="slmsql_hub.study.plant") is None


def test_no_two_modules_import_each_other_at_any_depth():
    """The layers contract orders packages; inside one package, modules must not form a cycle either (an import
    inside a function counts: ``hub/plan`` and ``hub/publish`` once imported each other through function bodies).
    grimp is import-linter's own graph."""
    import grimp

    graph = grimp.build_graph("slmsql_hub")
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                cycles.add(" -> ".join((module, *chain)))
    assert sorted(cycles) == []
