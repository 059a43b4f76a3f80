"""GRPO's data phase: question rows -> TRL's conversational prompt dataset (keeping ``gold_sql`` and ``db_path``
for the rewards), with unscorable golds dropped and a run too small for one generation round refused.

Example:

```python
>>> import os, sqlite3, tempfile
>>> from datasets import Dataset
>>> from slmsql_hub.data.prompts import PromptConfig
>>> from slmsql_hub.sql import Judge
>>> from slmsql_hub.training.grpo_data import build_prompt_dataset, drop_unscorable_golds
>>> db = os.path.join(tempfile.mkdtemp(), "pets.sqlite")
>>> _ = sqlite3.connect(db).execute("CREATE TABLE pet (id INTEGER, name TEXT)")
>>> rows = Dataset.from_dict({"question": ["How many pets?", "How many cats?"],
...                           "gold_sql": ["SELECT count(*) FROM pet", "SELECT * FROM cat"], "db_path": [db] * 2})
>>> dataset = build_prompt_dataset(rows, PromptConfig(sample_rows=0), progress=False)
>>> with Judge(workers=1) as judge:
...     kept, counts = drop_unscorable_golds(dataset, judge)
>>> [m["role"] for m in kept[0]["prompt"]], list(kept["gold_sql"]), kept[0]["db_path"] == db
(['system', 'user'], ['SELECT count(*) FROM pet'], True)
>>> counts
{'unscorable_gold': 1, 'gold_infra_failures': 0}

```
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .common import row_db_path
from .configs import GRPOScriptArguments, GRPOTrainingConfig

if TYPE_CHECKING:
    from datasets import Dataset

    from ..data.prompts import PromptConfig

logger = logging.getLogger(__name__)


def load_prompt_rows(script_args: GRPOScriptArguments, seed: int = 0) -> Dataset:
    """The question rows a run trains on, read as SFT reads them (:func:`~slmsql_hub.training.sft.load_training_rows`).

    Raises :class:`UsageError` when a source is missing, there are no rows, or they have no ``db_path``.
    """
    from .sft import load_training_rows

    rows = load_training_rows(script_args, seed=seed)
    if len(rows) == 0:
        sources = list(script_args.dataset_paths) + list(script_args.benchmarks)
        raise UsageError(
            f"no training rows in {', '.join(sources) or 'the configured sources'}: there is nothing to train on; "
            "check the benchmarks entries (NAME:SPLIT[:LIMIT])"
        )  # (an empty dataset folder, such as an empty band, is reported by load_datasets with its own fix)
    if "db_path" not in rows.column_names:
        raise UsageError(
            "the training rows have no db_path column, so the execution reward has no database to run on; use a "
            "world split, the filter's band, or a benchmark (benchmarks: [spider:train] with spider_root)"
        )
    return rows


def build_prompt_dataset(
    rows: Dataset,
    prompt_config: PromptConfig,
    sandbox: Any = None,
    progress: bool = True,
) -> Dataset:
    """Rows (``question``, ``gold_sql``, ``db_path``, optional ``evidence``/``schema``/``_source``) -> TRL's
    conversational prompt dataset: ``prompt`` (:func:`~slmsql_hub.data.prompts.build_prompts`), ``gold_sql`` and
    an absolute ``db_path`` (:func:`~slmsql_hub.training.common.row_db_path`)."""
    from datasets import Dataset as _Dataset

    from ..data.prompts import build_prompts

    db_paths = [row_db_path(row) for row in rows]
    prompts = build_prompts(rows, prompt_config, sandbox, locate=row_db_path, progress=progress)
    return _Dataset.from_dict({"prompt": prompts, "gold_sql": list(rows["gold_sql"]), "db_path": db_paths})


def check_one_round(n_prompts: int, training_args: GRPOTrainingConfig) -> None:
    """Refuse fewer prompts than one generation round (``generation_batch_size / num_generations``, over every
    process) takes: TRL's sampler drops an incomplete round, so such a run would train 0 steps.

    Example:

    ```python
    >>> from slmsql_hub.training.configs import GRPOTrainingConfig
    >>> args = GRPOTrainingConfig(output_dir="o", num_generations=4, per_device_train_batch_size=8,
    ...                           gradient_accumulation_steps=4, report_to="none", use_cpu=True)
    >>> check_one_round(3, args)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: 3 prompt(s), but one generation round takes 8 ...

    ```
    """
    per_round = training_args.generation_batch_size // training_args.num_generations
    if n_prompts < per_round:
        raise UsageError(
            f"{n_prompts} prompt(s), but one generation round takes {per_round} (generation_batch_size "
            f"{training_args.generation_batch_size} over {training_args.world_size} process(es) / num_generations "
            f"{training_args.num_generations}), so TRL would train 0 steps; use more prompts, fewer processes, or a "
            "smaller per_device_train_batch_size or gradient_accumulation_steps"
        )


def drop_unscorable_golds(dataset: Dataset, judge: Any) -> tuple[Dataset, dict[str, int]]:
    """The rows whose gold runs, and the counts: each gold runs once through the rewards' ``judge`` (whose cache
    then serves training); one that meets an infrastructure failure is kept (the data must not depend on load)."""
    from ..sql import Verdict

    judgements = judge.judge_many([None] * len(dataset), list(dataset["gold_sql"]), list(dataset["db_path"]))
    keep = [i for i, j in enumerate(judgements) if j.verdict is not Verdict.UNSCORABLE]
    counts = {
        "unscorable_gold": len(dataset) - len(keep),
        "gold_infra_failures": sum(j.verdict is Verdict.INFRA_FAILURE for j in judgements),
    }
    if counts["unscorable_gold"]:
        first = next(j for j in judgements if j.verdict is Verdict.UNSCORABLE)
        logger.warning(
            "dropped %d of %d prompts whose gold SQL fails under the run's limits (first: %s)",
            counts["unscorable_gold"],
            len(dataset),
            first.error,
        )
    if counts["gold_infra_failures"]:
        logger.warning(
            "%d gold queries met an infrastructure failure (kept; such rows get no reward)",
            counts["gold_infra_failures"],
        )
    return (dataset.select(keep) if counts["unscorable_gold"] else dataset), counts
