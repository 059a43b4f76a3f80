"""The world run's benchmark dataset on the Hub (``slmsql push --what world-benchmark``, part of ``all``).

A world run's card has ``model-index`` and ``.eval_results`` only for a benchmark with a Hub dataset, and the
embedded world has none of its own. The push publishes one: :func:`world_benchmark_target` builds the run's world
as a benchmark folder (:func:`~slmsql_hub.data.world_benchmark.build_world_benchmark`: parquet splits, databases,
dataset card, ``eval.yaml`` whose task ids are the splits) into ``RUN_DIR/world_benchmark/`` and plans it as a
dataset repository (default ``NAMESPACE/NAME-world-benchmark``), pushed before the model. The model card pushed
with it is rendered naming that dataset (:func:`~slmsql_hub.card.render_for_repo`'s ``eval_datasets``), and once
the dataset's commit is known :func:`pin_benchmark` pins it (``dataset.revision`` in both), as the adapter pins its
base. A run whose evaluation already names a dataset for the world (the eval recipe's ``dataset_ids:
[world=NS/NAME]``) keeps it: ``all`` pushes no benchmark for it.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..run.layout import CARD_README, CardLayout, RunLayout
from .targets import WORLD_BENCHMARK, PushTarget, folder_files

logger = logging.getLogger(__name__)

WORLD = "world"
"""The benchmark name the world's rows carry in ``eval_results.json``."""

EVAL_RESULTS_FOLDER = CardLayout(Path()).eval_result_files.name


def _named_explicitly(what: str | Sequence[str]) -> bool:
    """Whether ``--what`` names the world benchmark itself (not only through ``all``).

    Example:

    ```python
    >>> _named_explicitly("model,world-benchmark"), _named_explicitly("all")
    (True, False)

    ```
    """
    names = [what] if isinstance(what, str) else list(what)
    return WORLD_BENCHMARK in {part.strip() for name in names for part in name.split(",")}


def _world_entries(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The run's evaluated world benchmarks (``eval_results.json``), by key; ``{}`` without an evaluation."""
    from ..run.read import read_run

    results = read_run(run_dir).eval_results or {}
    return {k: v for k, v in (results.get("benchmarks") or {}).items() if v.get("benchmark") == WORLD}


def _prompt_config(run_dir: Path) -> Any:
    """The prompt settings the run's GRPO adapter was evaluated with (``eval_results.json``'s ``prompt``)."""
    from ..data.prompts import PromptConfig
    from ..run.read import read_run

    recorded = ((read_run(run_dir).eval_results or {}).get("prompt") or {}).get("grpo") or {}
    return PromptConfig.from_record(recorded)


def world_benchmark_targets(run_dir: str | Path, repo_id: str, what: str | Sequence[str]) -> list[PushTarget]:
    """The plan's world benchmark for ``--what`` (:func:`world_benchmark_target`, explicit when ``what`` names it):
    one target or none."""
    target = world_benchmark_target(run_dir, repo_id, explicit=_named_explicitly(what))
    return [target] if target is not None else []


def world_benchmark_target(run_dir: str | Path, repo_id: str, *, explicit: bool) -> PushTarget | None:
    """The dataset repository ``repo_id`` of the run's world benchmark, its folder (re)built in
    ``RUN_DIR/world_benchmark/``; ``None`` (nothing to push) when ``explicit`` is false and the run evaluated no
    world split or its evaluation names a dataset for the world already. UsageError: asked for explicitly on a
    run that evaluated no world split, or the run's world folder lacks a split.

    Example:

    ```python
    >>> world_benchmark_target(".", "alice/x-world-benchmark", explicit=False) is None  # no evaluation here
    True

    ```
    """
    from ..data.world_benchmark import BENCHMARK_SPLITS, build_world_benchmark
    from ..run.guard import replace_folder

    run_dir = Path(run_dir)
    entries = _world_entries(run_dir)
    if not explicit:
        named = sorted({e["dataset_id"] for e in entries.values() if e.get("dataset_id")})
        if not entries or named:
            if named:
                logger.info("world-benchmark: the run's evaluation names %s already; not pushed", ", ".join(named))
            return None
    elif not entries:
        raise UsageError(
            f"{run_dir} has no evaluation on the world (eval/eval_results.json with a world split): run `slmsql "
            "eval` on the world first, or leave world-benchmark out of --what"
        )
    layout = RunLayout(run_dir)
    evaluated = [str(e.get("split")) for e in entries.values() if e.get("split") not in BENCHMARK_SPLITS]
    splits = (*BENCHMARK_SPLITS, *dict.fromkeys(evaluated))
    folder = layout.world_benchmark
    fresh = folder.with_name(f".{folder.name}.new-{uuid.uuid4().hex[:8]}")
    try:
        build_world_benchmark(
            layout.world, fresh, splits=splits, repo_id=repo_id, prompt_config=_prompt_config(run_dir)
        )
        replace_folder(fresh, folder)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)  # left only by a failure
    return PushTarget(WORLD_BENCHMARK, "dataset", repo_id, tuple(folder_files(folder)))


def plan_entry(target: PushTarget) -> dict[str, Any]:
    """What ``plan.json`` says of the benchmark beyond its files: the task ids its ``eval.yaml`` defines (what the
    card's ``.eval_results`` name) and a note."""
    import yaml

    from ..data.world_benchmark import EVAL_YAML

    local = dict(target.files).get(EVAL_YAML)
    spec = yaml.safe_load(_text(local)) if local is not None else {}
    return {
        "task_ids": [str(task["id"]) for task in (spec or {}).get("tasks") or []],
        "note": "the world's evaluation splits (load_dataset) with their databases and eval.yaml, pushed before "
        "the model: the model card pushed with it names this dataset in model-index and .eval_results, at the "
        "commit this push makes",
    }


def eval_datasets(plan: Sequence[PushTarget]) -> dict[str, str]:
    """``{benchmark: dataset id}`` the model card should name for what ``plan`` pushes: ``{"world": id}`` when it
    holds the world benchmark.

    Example:

    ```python
    >>> eval_datasets([PushTarget("world-benchmark", "dataset", "alice/x-world-benchmark")])
    {'world': 'alice/x-world-benchmark'}

    ```
    """
    pushed = [t.repo_id for t in plan if t.what == WORLD_BENCHMARK]
    return {WORLD: pushed[0]} if pushed else {}


def _text(content: Path | bytes) -> str:
    return (content if isinstance(content, bytes) else Path(content).read_bytes()).decode("utf-8")


def _pin_eval_results(content: Path | bytes, repo_id: str, commit: str) -> Path | bytes:
    """An ``.eval_results/*.yaml`` file whose entries naming the dataset ``repo_id`` carry ``revision: commit``;
    a file naming other datasets only is returned unchanged.

    Example:

    ```python
    >>> print(_pin_eval_results(b"- dataset: {id: alice/b, task_id: dev}\\n  value: 50.0\\n", "alice/b", "abc").decode())
    - dataset:
        id: alice/b
        task_id: dev
        revision: abc
      value: 50.0
    <BLANKLINE>

    ```
    """
    import yaml

    entries = yaml.safe_load(_text(content)) or []
    named = [e for e in entries if isinstance(e, dict) and (e.get("dataset") or {}).get("id") == repo_id]
    for entry in named:
        entry["dataset"]["revision"] = commit
    return yaml.safe_dump(entries, sort_keys=False, allow_unicode=True).encode("utf-8") if named else content


def _pin_model_index(content: Path | bytes, repo_id: str, commit: str) -> Path | bytes:
    """A model card whose ``model-index`` results on the dataset ``repo_id`` name ``commit`` as its revision
    (``dataset.revision``); a card without such a result is returned unchanged."""
    from huggingface_hub import ModelCard

    card = ModelCard(_text(content))
    results = card.data.eval_results or []
    named = [r for r in results if r.dataset_type == repo_id]
    if not named:
        return content
    for result in named:
        result.dataset_revision = commit
    card.data.eval_results = results
    return str(card).encode("utf-8")


def pin_benchmark(files: Mapping[str, Path | bytes], repo_id: str, commit: str) -> dict[str, Path | bytes]:
    """The model repository's ``files`` with the card and ``.eval_results`` naming the benchmark dataset
    ``repo_id`` at ``commit`` (the commit the push just made).

    Example:

    ```python
    >>> files = {".eval_results/world_dev.yaml": b"- dataset: {id: a/b, task_id: dev}\\n  value: 1.0\\n"}
    >>> b"revision: c0ffee" in pin_benchmark(files, "a/b", "c0ffee")[".eval_results/world_dev.yaml"]
    True

    ```
    """
    pinned = dict(files)
    for path, content in files.items():
        if path.startswith(f"{EVAL_RESULTS_FOLDER}/") and path.endswith(".yaml"):
            pinned[path] = _pin_eval_results(content, repo_id, commit)
        elif path == CARD_README:
            pinned[path] = _pin_model_index(content, repo_id, commit)
    return pinned
