"""Helpers shared by ``slmsql train base|sft|grpo``: loading text-to-SQL datasets, turning them into TRL's
conversational prompt-completion format, training and saving, and writing a run's summary."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..data.sources import dataset_kind, load_hub_dataset
from ..errors import UsageError
from ..recipes import save_resolved_config
from ..run.artifacts import load_saved_dataset
from ..run.files import write_atomic
from ..run.guard import staged_files
from ..run.layout import RUN_SUMMARY, STAGE_CONFIG
from ..runtime import Stopwatch

if TYPE_CHECKING:
    from datasets import Dataset

    from ..data.prompts import PromptConfig
    from ..sql.sandbox import Sandbox

logger = logging.getLogger(__name__)

_REQUIRED_COLUMNS = ("question", "gold_sql")
"""Columns every training dataset needs; it also needs ``schema`` or ``db_path``."""
ROW_COLUMNS = ("question", "gold_sql", "evidence", "schema", "db_path", "db_id")
"""The columns training keeps of a source (then adds ``_source``): what
:func:`~slmsql_hub.data.prompts.build_prompts` reads, the gold SQL and the database id."""


def load_datasets(paths: Sequence[str | os.PathLike], revision: str | None = None) -> Dataset:
    """Load and concatenate ``save_to_disk`` folders and Hub dataset ids (read with ``datasets.load_dataset`` at
    ``revision``, their databases downloaded: :mod:`slmsql_hub.data.sources`), with a ``_source`` column (each
    row's folder or Hub id, which relative ``db_path`` values resolve against).

    Raises :class:`UsageError` when a name is neither a folder nor a Hub dataset id, a folder is not a saved
    ``Dataset``, a Hub dataset does not exist, a source lacks a required column, or every source is empty (an
    empty one beside others is skipped with a warning).

    Example:

    ```python
    >>> import tempfile
    >>> from datasets import Dataset
    >>> folder = tempfile.mkdtemp()
    >>> Dataset.from_dict({"question": ["q"], "gold_sql": ["SELECT 1"], "schema": ["CREATE TABLE t (a);"]}
    ...                   ).save_to_disk(folder)
    >>> len(load_datasets([folder, folder]))
    2

    ```
    """
    from datasets import concatenate_datasets

    for raw in paths:  # every name checked before anything loads
        dataset_kind(str(raw), "dataset_paths", _BUILD_HINT)
    parts, empty = [], []
    for raw in paths:
        loaded, source = _load_one(str(raw), revision)
        if loaded is None or len(loaded) == 0:
            logger.warning("%s holds no rows; skipping it", raw)
            empty.append(str(raw))
            continue
        missing = [c for c in _REQUIRED_COLUMNS if c not in loaded.column_names]
        if "schema" not in loaded.column_names and "db_path" not in loaded.column_names:
            missing.append("schema or db_path")
        if missing:
            raise UsageError(
                f"{raw} lacks column(s) {', '.join(missing)}; it has {', '.join(loaded.column_names)}"
            )
        loaded = loaded.select_columns([c for c in ROW_COLUMNS if c in loaded.column_names])
        loaded = loaded.add_column("_source", [source] * len(loaded))
        parts.append(loaded)
    if not parts and empty:
        raise UsageError(
            f"no rows in {', '.join(empty)}: there is nothing to train on; if this is the filter's band, it is "
            "empty (see filter_report.json): widen pass_rate_low/pass_rate_high, raise num_samples, or filter a "
            "larger pool"
        )
    if not parts:
        raise UsageError("no dataset folders given; set dataset_paths")
    columns = set.intersection(*(set(p.column_names) for p in parts))
    parts = [p.select_columns([c for c in p.column_names if c in columns]) for p in parts]
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


_BUILD_HINT = "build it first (for the world: `slmsql world build --out DIR`)"


def _load_one(raw: str, revision: str | None) -> tuple[Dataset | None, str]:
    """One source's rows (``None``: a folder ``save_to_disk`` wrote without data files) and its ``_source``."""
    from datasets import Dataset

    if dataset_kind(raw, "dataset_paths", _BUILD_HINT) == "hub":
        return load_hub_dataset(raw, revision), raw
    path = Path(raw).expanduser()
    if _saved_without_data_files(path):  # datasets' save_to_disk of an empty dataset: unloadable
        return None, str(path)
    # in memory: TRL's maps write no cache into the input folder
    loaded = load_saved_dataset(path, "save it again (for the world: `slmsql world build --out DIR --overwrite`)")
    if not isinstance(loaded, Dataset):
        raise UsageError(
            f"{path} holds a DatasetDict ({', '.join(loaded)}); point dataset_paths at one split's folder"
        )
    return loaded, str(path.resolve())


def _saved_without_data_files(path: Path) -> bool:
    """True for a ``save_to_disk`` folder whose ``state.json`` lists no data file (``load_from_disk`` fails on it)."""
    state = path / "state.json"
    if not state.is_file():
        return False
    try:
        return json.loads(state.read_text(encoding="utf-8")).get("_data_files") == []
    except (OSError, ValueError):
        return False


def shuffle_and_cap(rows: Dataset, seed: int, max_samples: int | None) -> Dataset:
    """``rows`` shuffled with ``seed``, then the first ``max_samples`` (``None``: all): a run's data order."""
    rows = rows.shuffle(seed=seed)
    return rows if max_samples is None else rows.select(range(min(max_samples, len(rows))))


def resolve_db_path(value: str | os.PathLike, source: str | os.PathLike) -> Path:
    """The database a row names: absolute paths as is; relative ones against the row's dataset folder, then each
    parent folder (a world keeps its databases beside ``datasets/``), then the working directory; else
    :class:`UsageError`.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> world = pathlib.Path(tempfile.mkdtemp())
    >>> (world / "databases").mkdir(); (world / "databases" / "pets.sqlite").touch()
    >>> (world / "datasets" / "dev").mkdir(parents=True)
    >>> resolve_db_path("databases/pets.sqlite", world / "datasets" / "dev") == world / "databases" / "pets.sqlite"
    True

    ```
    """
    path = Path(value).expanduser()
    if path.is_absolute():
        if path.is_file():
            return path
        raise UsageError(f"database not found: {path}")
    source = Path(source)
    candidates = [base / path for base in (source, *source.parents)] + [Path.cwd() / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise UsageError(f"database {value!r} not found next to {source} or its parents, nor in {Path.cwd()}")


def row_db_path(row: Mapping[str, Any]) -> str:
    """A training row's database as an absolute path: its ``db_path`` resolved against its ``_source``
    (:func:`resolve_db_path`; without one, the working directory). The ``locate`` of
    :func:`~slmsql_hub.data.prompts.build_prompts` for training rows."""
    return str(resolve_db_path(row["db_path"], row.get("_source") or Path.cwd()).resolve())


def to_prompt_completion(
    dataset: Dataset,
    prompt_config: PromptConfig,
    sandbox: Sandbox | None = None,
) -> Dataset:
    """Text-to-SQL rows (``question``, ``gold_sql``, optional ``evidence``, ``schema`` or ``db_path``) -> TRL's
    conversational prompt-completion format: ``prompt`` is the system + user turns (schemas read through
    ``sandbox`` unless given), ``completion`` one assistant turn with the gold SQL in a ``sql`` block.

    Example:

    ```python
    >>> from datasets import Dataset
    >>> from slmsql_hub.data.prompts import PromptConfig
    >>> rows = Dataset.from_dict({"question": ["How many pets?"], "gold_sql": ["SELECT count(*) FROM pet"],
    ...                           "schema": ["CREATE TABLE pet (id INTEGER);"]})
    >>> example = to_prompt_completion(rows, PromptConfig())[0]
    >>> [m["role"] for m in example["prompt"]], example["completion"][0]["content"]
    (['system', 'user'], '```sql\\nSELECT count(*) FROM pet\\n```')

    ```
    """
    from datasets import Dataset as _Dataset

    from ..data.prompts import build_prompts, format_answer

    columns = dataset.column_names
    if not ("schema" in columns and all(dataset["schema"])) and "db_path" not in columns:
        raise UsageError("rows without a schema need a db_path column to read the schema from")
    prompts = build_prompts(dataset, prompt_config, sandbox, locate=row_db_path)
    completions = [[{"role": "assistant", "content": format_answer(gold_sql)}] for gold_sql in dataset["gold_sql"]]
    return _Dataset.from_dict({"prompt": prompts, "completion": completions})


def chat_lengths(dataset: Dataset, tokenizer: Any) -> list[int]:
    """Each row's chat length in tokens: ``prompt`` + ``completion`` whole, or a ``prompt`` alone with the
    generation prompt. One batched ``apply_chat_template`` call (one ``encode_batch`` in the Rust tokenizer): the
    same ids as one call per row, without a Python round trip per row (``benchmarks/bench_training_prep.py``).

    Example:

    ```python
    >>> from datasets import Dataset
    >>> from slmsql_hub.world.tokenizer import train_tokenizer
    >>> tok = train_tokenizer(["SELECT a FROM t", "How many pets?"] * 10, vocab_size=300)
    >>> rows = Dataset.from_dict({"prompt": [[{"role": "user", "content": "How many pets?"}]] * 2,
    ...                           "completion": [[{"role": "assistant", "content": "SELECT a"}],
    ...                                          [{"role": "assistant", "content": "SELECT a FROM t"}]]})
    >>> first, second = chat_lengths(rows, tok)
    >>> second > first
    True

    ```
    """
    examples = "completion" in dataset.column_names
    chats = [p + c for p, c in zip(dataset["prompt"], dataset["completion"])] if examples else list(dataset["prompt"])
    if not chats:
        return []
    encoded = tokenizer.apply_chat_template(chats, add_generation_prompt=not examples, tokenize=True, return_dict=True)
    return [len(ids) for ids in encoded["input_ids"]]


def drop_too_long(dataset: Dataset, tokenizer: Any, max_length: int | None) -> tuple[Dataset, int]:
    """Drop rows whose chat rendering exceeds ``max_length`` tokens; return the kept dataset and how many went.

    SFT examples (``prompt`` + ``completion``) are measured whole: truncating would cut the answer or its
    end-of-turn token and teach the model to stop mid-query. GRPO prompts (``prompt`` only) are measured with
    the generation prompt, against the room the completion leaves in the model's context.
    """
    if max_length is None or len(dataset) == 0:
        return dataset, 0
    examples = "completion" in dataset.column_names
    lengths = chat_lengths(dataset, tokenizer)
    keep = [i for i, n in enumerate(lengths) if n <= max_length]
    dropped = len(dataset) - len(keep)
    if dropped:
        fix = "raise max_length or shorten" if examples else "leave no room for the completion; shorten"
        logger.warning(
            "dropped %d of %d %s longer than %d tokens (longest: %d); %s the prompt (prompt_sample_rows)%s",
            dropped,
            len(dataset),
            "examples" if examples else "prompts",
            max_length,
            max(lengths),
            fix,
            "" if examples else " or max_completion_length",
        )
    return (dataset.select(keep) if dropped else dataset), dropped


def final_loss(log_history: Sequence[dict[str, Any]]) -> float | None:
    """The last training loss the Trainer logged (``None``: none).

    Example:

    ```python
    >>> final_loss([{"loss": 2.0, "step": 10}, {"loss": 1.5, "step": 20}, {"train_loss": 1.8}])
    1.5

    ```
    """
    for entry in reversed(log_history):
        if "loss" in entry:
            return float(entry["loss"])
    return None


def count_parameters(model: Any) -> dict[str, int]:
    """Total and trainable parameter counts of a torch module."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"total": int(total), "trainable": int(trainable)}


@contextmanager
def labelled_positions_only() -> Iterator[None]:
    """Inside the block, TRL's fused LM head (SFT's and GRPO's loss) projects only the positions that have a label.

    TRL 1.16 does so only where Triton runs; elsewhere (CPU) it projects every prompt and padding position too,
    then zeroes them. A row's log-probability does not depend on the rows beside it, so the scores, the loss and,
    with the head frozen (LoRA), the trained weights are the same bit for bit: ``benchmarks/bench_fused_head.py``
    times both and checks the adapters. A TRL without the switch trains as it would anyway (logged at debug).

    ```python
    >>> import torch
    >>> from trl.trainer import utils
    >>> with labelled_positions_only():
    ...     utils._use_triton(torch.device("cpu"))
    True
    >>> utils._use_triton(torch.device("cpu"))
    False

    ```
    """
    from trl.trainer import utils as trl_utils

    original = getattr(trl_utils, "_use_triton", None)
    if original is None:
        logger.debug("this TRL has no _use_triton switch: its fused LM head scores as it chooses")
        yield
        return
    trl_utils._use_triton = lambda device: True
    try:
        yield
    finally:
        trl_utils._use_triton = original


def train_and_save(trainer: Any, tokenizer: Any, output_dir: str | os.PathLike, *configs: Any) -> tuple[Any, float]:
    """``trainer.train()``, then save the model, the tokenizer and ``config.yaml`` (the resolved ``configs``) into
    ``output_dir`` (the files from the main process only, as ``save_model`` does; each renamed into place whole,
    :func:`~slmsql_hub.run.guard.staged_files`); return the ``TrainOutput`` and the training seconds. Shared by ``train base`` and ``train sft``."""
    train_clock = Stopwatch()
    with labelled_positions_only():
        result = trainer.train()
    train_seconds = train_clock.seconds()
    with staged_files(output_dir, main_process=trainer.is_world_process_zero()) as staging:
        trainer.save_model(str(staging), _internal_call=True)  # the push (push_to_hub) follows, from output_dir
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(str(staging))
            save_resolved_config(staging / STAGE_CONFIG, *configs)
    if trainer.args.push_to_hub:
        trainer.push_to_hub(commit_message="Model save", revision=trainer.args.hub_revision)
    return result, train_seconds


def write_run_summary(output_dir: str | os.PathLike, summary: dict[str, Any]) -> Path:
    """Write ``run_summary.json`` into ``output_dir`` (created if needed) and return its path.

    Example:

    ```python
    >>> import json, tempfile
    >>> path = write_run_summary(tempfile.mkdtemp(), {"kind": "sft", "final_loss": 0.5})
    >>> json.loads(path.read_text())["final_loss"]
    0.5

    ```
    """
    path = Path(output_dir) / RUN_SUMMARY
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(summary, indent=2, sort_keys=False, default=str) + "\n")
    return path


