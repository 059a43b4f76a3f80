"""Fixtures shared by the test modules (the session's environment is set in the repository's conftest.py)."""

from __future__ import annotations

import pytest
from _tiny_model import one_torch_thread as _one_torch_thread


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a whole module (its module-scoped model fixtures included): use it with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    with _one_torch_thread():
        yield


@pytest.fixture(scope="session")
def space_run(tmp_path_factory):
    """The tiny run folder of :mod:`_space_run` (a world, a base, SFT and GRPO adapters, evaluation, card),
    built once per session."""
    from _space_run import space_run_once

    return space_run_once(tmp_path_factory)
