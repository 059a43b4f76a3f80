"""Import a script of ``benchmarks/`` as a module, for its smoke test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported once as module ``name`` and registered in ``sys.modules`` (a process
    pool pickles the script's functions by module name), with ``benchmarks/`` on the path for its siblings."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
