"""The Inspect AI tasks and model provider of slmsql-hub, registered for ``inspect eval``.

One ``@task`` per benchmark of :data:`~slmsql_hub.evaluation.config.EVAL_BENCHMARKS` (``world``, ``spider``,
``bird``; the test suite keeps the two lists equal), each :func:`~slmsql_hub.evaluation.inspect_task.benchmark_task`
with the benchmark named, and the ``slmsql`` model provider (base + LoRA adapter). Installed with the
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
