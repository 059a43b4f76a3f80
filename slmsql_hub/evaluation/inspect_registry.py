"""The Inspect AI tasks and model provider of slmsql-hub, registered for ``inspect eval``.

A named ``@task`` for ``world``, ``spider`` and ``bird``, and ``benchmark`` for any evaluable benchmark of the
registry (``-T name=bird_mini_dev``, or a dotted path ``-T name=mypkg.bench:ENTRY``), each
:func:`~slmsql_hub.evaluation.inspect_task.benchmark_task`, and the ``slmsql`` model provider (base + LoRA adapter). Installed with the
``[inspect]`` extra, the package's ``inspect_ai`` entry point loads this module, so the tasks are
``slmsql_hub/world``, ...; from a checkout, name the file: ``inspect eval slmsql_hub/evaluation/inspect_registry.py@world``.

Without ``inspect_ai`` the module still imports; its tasks raise the install hint when called.
"""

from __future__ import annotations

from typing import Any

from .inspect_task import MODEL_API, benchmark_task

try:
    from inspect_ai import task
    from inspect_ai.model import modelapi
except ModuleNotFoundError:  # the [inspect] extra is not installed: building a task says so

    def task(function: Any) -> Any:
        return function

    def modelapi(name: str) -> Any:
        return task


@modelapi(name=MODEL_API)
def slmsql() -> type:
    """The ``slmsql`` provider: ``--model slmsql/<base model> -M adapter=<adapter>``."""
    from .inspect_task import model_api

    return model_api()


@task
def benchmark(name: str, root: str, split: str | None = None, **options: Any) -> Any:
    """Any evaluable benchmark of the registry (:mod:`slmsql_hub.data.benchmarks`) under ``root``, its split
    ``split`` (default: the entry's), judged by its own compare mode."""
    return benchmark_task(name, root, split, **options)


@task
def world(root: str, split: str = "dev", **options: Any) -> Any:
    """The embedded world's ``split`` (``dev``, ``test`` or a probe) under ``root`` (the world folder)."""
    return benchmark_task("world", root, split, **options)


@task
def spider(root: str, split: str = "dev", **options: Any) -> Any:
    """Spider's dev set under ``root`` (``dev.json`` and ``database/``), judged by the test-suite rule."""
    return benchmark_task("spider", root, split, **options)


@task
def bird(root: str, split: str = "dev", **options: Any) -> Any:
    """BIRD's dev set under ``root`` (``dev.json`` and ``dev_databases/``), judged by set equality."""
    return benchmark_task("bird", root, split, **options)
