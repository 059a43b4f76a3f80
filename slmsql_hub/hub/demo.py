"""What ``slmsql push --what demo-space`` adds to ``spaces/demo/`` so the Space runs from the Hub alone: the Space's
configuration (``space_config.json``: the base model, the SFT and GRPO adapters by repository id and commit
(:func:`pin_space_config`, at push time: the plan and the dry run name branches), the example databases it may show), the run's world (its databases and the example split) when the run has one, and a
README whose ``models:`` and ``datasets:`` metadata name the run's repositories.

The Space reads ``space_config.json`` at startup (``spaces/demo/space_config.py``); ``SLMSQL_*`` variables and
command-line options still override it.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from ..run.layout import CARD_README, WORLD_MANIFEST, RunLayout
from ..run.read import model_ref
from .targets import DATASET, MODEL, SFT_MODEL, folder_files

logger = logging.getLogger(__name__)

SPACE_CONFIG = "space_config.json"
"""The Space's configuration file; ``spaces/demo/space_config.py`` reads the same name."""

_SPACE_WORLD = "world"
"""Where the run's world lands in the Space repository."""

_EXAMPLE_SPLIT = "dev"

MODEL_ENTRIES = ("base_model", "sft_adapter", "grpo_adapter")
"""The models ``space_config.json`` names, each ``{"repo_id", "revision"}``."""


def space_config(
    ids: dict[str, str], base: Any, revision: str | None, databases: list[str]
) -> dict[str, Any]:
    """The configuration the Space starts from: every model by repository id and revision (``base``: the
    :class:`~slmsql_hub.hub.base_model.BaseModel` the adapters name).

    Example:

    ```python
    >>> from slmsql_hub.hub.base_model import BaseModel
    >>> ids = {"model": "alice/x", "sft-model": "alice/x-sft"}
    >>> config = space_config(ids, BaseModel("alice/x-base"), None, ["world/shop"])
    >>> config["grpo_adapter"], config["base_model"]
    ({'repo_id': 'alice/x', 'revision': 'main'}, {'repo_id': 'alice/x-base', 'revision': 'main'})

    ```
    """
    branch = revision or "main"
    return {
        "base_model": {"repo_id": base.repo_id, "revision": base.revision or branch},
        "sft_adapter": {"repo_id": ids[SFT_MODEL], "revision": branch},
        "grpo_adapter": {"repo_id": ids[MODEL], "revision": branch},
        "world_dir": _SPACE_WORLD if databases else None,
        "example_split": _EXAMPLE_SPLIT,
        "databases": databases,
    }


def _is_commit(revision: Any) -> bool:
    return isinstance(revision, str) and re.fullmatch(r"[0-9a-f]{40}", revision) is not None


def pin_space_config(content: Path | bytes, api: Any) -> bytes | Path:
    """``space_config.json`` (a file or its bytes) with every model at a branch pinned to the commit the branch is
    at now (``api``: an ``HfApi``; call it after the models were pushed); a model the Hub does not have stays at
    its branch, with a warning.

    Example (nothing to resolve: every model is at a commit already):

    ```python
    >>> sha = "0" * 40
    >>> config = {"base_model": {"repo_id": "a/b", "revision": sha}, "sft_adapter": {"repo_id": "a/c", "revision": sha}}
    >>> json.loads(pin_space_config(json.dumps(config).encode(), api=None)) == config
    True

    ```
    """
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    text = content.decode("utf-8") if isinstance(content, bytes) else Path(content).read_text(encoding="utf-8")
    config = json.loads(text)
    for name in (*MODEL_ENTRIES, BENCHMARK_DATA):
        entry = config.get(name)
        if not isinstance(entry, dict) or _is_commit(entry.get("revision")):
            continue
        branch = entry.get("revision") or "main"
        try:
            entry["revision"] = api.repo_info(entry["repo_id"], repo_type=entry.get("repo_type"), revision=branch).sha
        except (RepositoryNotFoundError, RevisionNotFoundError) as err:
            logger.warning("the demo Space loads %s at %s: not pinned to a commit (%s)", entry["repo_id"], branch, err)
    return (json.dumps(config, indent=2) + "\n").encode("utf-8")


def _world_files(run_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """The run's world as the Space ships it: the manifest, every database and the example split."""
    world = RunLayout(run_dir).world
    if not (world / WORLD_MANIFEST).is_file():
        return {}, []
    files = {f"{_SPACE_WORLD}/{WORLD_MANIFEST}": world / WORLD_MANIFEST}
    for sub in ("databases", f"datasets/{_EXAMPLE_SPLIT}"):
        if (world / sub).is_dir():
            files.update((f"{_SPACE_WORLD}/{sub}/{path}", local) for path, local in folder_files(world / sub))
    databases = sorted({path.split("/")[2] for path in files if path.startswith(f"{_SPACE_WORLD}/databases/")})
    if not databases:  # a world without databases shows nothing: the Space builds its own from the seed
        return {}, []
    return files, [f"world/{db}" for db in databases]


BENCHMARK_DATA = "benchmark_data"
"""``space_config.json``'s entry naming the dataset repository of the run's benchmark databases (and its
``repo_type``); the Space downloads it at that revision and shows it as a Spider-layout folder."""

_DATABASE_CAP_BYTES = 64 * 2**20
"""The largest database (all ``.sqlite`` files of its folder) the benchmark repository ships: 64 MB, set from the
dev databases' real sizes. Spider dev, measured on our copy (19 of its 20 databases, 0.9 MB together): the five
largest are ``world_1`` 312 KB, ``flight_2`` 76 KB, ``car_1`` 64 KB, ``student_transcripts_tracking`` and
``dog_kennels`` 48 KB; ``wta_1``, absent from our copy, was not measured (a few MB by its tables). BIRD dev, as the
Hugging Face mirror of the release's ``dev_databases`` (``premai-io/birdbench``, commit 8ce15c7, folder
``validation/dev_databases``) lists them: ``card_games`` 262 MB, ``debit_card_specializing`` 34.6 MB,
``thrombosis_prediction`` 7.33 MB, ``student_club`` 2.64 MB, ``superhero`` 238 KB; the sizes of the other six
(``european_football_2``, ``codebase_community``, ``formula_1``, ``california_schools``, ``financial``,
``toxicology``) were not found, so which of them fit is not known here. So every Spider database fits and BIRD's
largest known one does not: a CPU Space should not download hundreds of MB at start-up.

What does not fit: the database is left out (the push logs it, the repository's README lists it with its size)
and its questions are no examples; the Space compares on the others; when none fits, it shows the embedded world."""

_MAX_EXAMPLES = 200
"""The example questions the Space lists at most: the run's SFT/GRPO disagreements first, then the rest."""


def _evaluated(run: Any) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """``(database path by question id, predictions)`` of every non-world benchmark the run
    evaluated whose release folder (the eval config's ``<name>_root`` or ``benchmark_roots`` entry) is here."""
    from dataclasses import fields

    from ..data.benchmarks import load_benchmark
    from ..data.config import BenchmarkArguments
    from ..run.files import read_jsonl

    results = run.eval_results or {}
    config = results.get("config") or {}
    roots = BenchmarkArguments(**{f.name: config.get(f.name) for f in fields(BenchmarkArguments)
                                  if f.init and f.name != "benchmarks"})  # fmt: skip
    found = []
    for key, bench in (results.get("benchmarks") or {}).items():
        name = bench.get("benchmark")
        if name == "world" or not bench.get("predictions_file"):
            continue
        root = roots.root(name)
        if not root or not Path(root).is_dir():
            logger.warning("%s: its databases are not at %s (the eval config's root of %s); the demo leaves it out",
                           key, root, name)  # fmt: skip
            continue
        rows = load_benchmark(name, root, bench.get("split"), skip_missing_db=True)
        paths = {row["question_id"]: row["db_path"] for row in rows}
        found.append((paths, read_jsonl(run.eval_dir / bench["predictions_file"])))
    return found


def benchmark_files(run_dir: Path, cap_bytes: int = _DATABASE_CAP_BYTES) -> dict[str, Path | bytes]:
    """The run's evaluated databases in Spider's layout (``database/<db_id>/*.sqlite``, each at most
    ``cap_bytes``), ``dev.json`` of example questions (the SFT/GRPO disagreements first, :data:`_MAX_EXAMPLES`)
    and a README saying where they come from and what was left out; ``{}`` when the run evaluated only the world
    (which the Space ships as it is) or none of its databases is here.

    Example: ``benchmark_files(Path("outputs/qwen2.5-coder-1.5b"))["dev.json"]``.
    """
    from ..run.read import read_run

    run = read_run(run_dir)
    files: dict[str, Path | bytes] = {}
    left_out: dict[str, int] = {}
    examples: list[tuple[bool, dict[str, str]]] = []
    for paths, predictions in _evaluated(run) if run.eval_results else []:
        for row in predictions:
            db = Path(paths.get(row.get("question_id"), "")).parent
            if row.get("db_id") in left_out or not db.name:
                continue
            sqlite = sorted(db.glob("*.sqlite"))
            size = sum(f.stat().st_size for f in sqlite)
            if size > cap_bytes or not sqlite:
                left_out[row["db_id"]] = size
                continue
            files.update((f"database/{db.name}/{f.name}", f) for f in sqlite)
            scored = row.get("sft_correct") in (0, 1) and row.get("grpo_correct") in (0, 1)
            differ = scored and row["sft_correct"] != row["grpo_correct"]
            examples.append((not differ, {"db_id": db.name, "question": row["question"], "query": row["gold_sql"]}))
    for db_id, size in left_out.items():
        logger.warning("demo: database %s (%.1f MB) is over the %.1f MB cap: left out", db_id, size / 2**20, cap_bytes / 2**20)
    if not files:
        return {}
    chosen = [example for _, example in sorted(examples, key=lambda pair: pair[0])[:_MAX_EXAMPLES]]
    files["dev.json"] = (json.dumps(chosen, indent=1) + "\n").encode("utf-8")
    files[CARD_README] = _benchmark_readme(run_dir, len(chosen), left_out, cap_bytes).encode("utf-8")
    return files


def _benchmark_readme(run_dir: Path, n_examples: int, left_out: dict[str, int], cap_bytes: int) -> str:
    over = ", ".join(f"`{db}` ({size / 2**20:.0f} MB)" for db, size in left_out.items()) or "none"
    return (
        "---\ntags:\n- text-to-sql\n- slmsql-hub\n---\n\n# The databases of an slmsql-hub run's evaluation\n\n"
        f"The SQLite databases of the questions `{Path(run_dir).name}` was evaluated on, in Spider's layout "
        f"(`database/<db_id>/<db_id>.sqlite`), with `dev.json`: {n_examples} of its questions, those where the SFT "
        "and GRPO adapters disagreed first. The run's demo Space reads this repository at a pinned commit.\n\n"
        f"Left out, over the {cap_bytes // 2**20} MB cap: {over}. The benchmarks' own licenses apply to the "
        "databases.\n"
    )


def demo_files(
    card: Any,
    run_dir: Path,
    ids: dict[str, str],
    base: Any,
    revision: str | None,
    benchmark_repo: str | None = None,
) -> dict[str, Path | bytes]:
    """``space_config.json``, the world's files and the README (``card``: the demo folder's, loaded) whose
    metadata names the run's base, SFT and GRPO repositories and, when the run has a band, its dataset;
    ``benchmark_repo``: the dataset repository of the run's benchmark databases (:func:`benchmark_files`)."""
    world, databases = _world_files(run_dir)
    config = space_config(ids, base, revision, databases)
    if benchmark_repo:
        config[BENCHMARK_DATA] = {"repo_id": benchmark_repo, "revision": revision or "main", "repo_type": "dataset"}
    sft = model_ref(RunLayout(run_dir).sft_stage2)
    if sft.hub:  # a study that took its SFT adapter from the Hub: the Space loads that one
        config["sft_adapter"] = {"repo_id": sft.name, "revision": sft.revision or "main"}
    card.data.models = [base.repo_id, config["sft_adapter"]["repo_id"], ids[MODEL]]
    band = RunLayout(run_dir).band
    named = [ids[DATASET]] if DATASET in ids and band.is_dir() else []
    card.data.datasets = [*named, *([benchmark_repo] if benchmark_repo else [])] or None
    files: dict[str, Path | bytes] = dict(world)
    files[SPACE_CONFIG] = (json.dumps(config, indent=2) + "\n").encode("utf-8")
    files[CARD_README] = str(card).encode("utf-8")
    return files
