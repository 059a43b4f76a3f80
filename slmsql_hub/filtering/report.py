"""The four classes, the band dataset (written, and read back by :func:`read_band`) and ``filter_report.json``."""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..run.files import write_atomic
from ..run.layout import BAND_DIR
from ..sql.recipe_limits import LIMITS_KEY, limits_record
from .config import REPORT_FILE, RESULTS_FILE, FilterConfig

if TYPE_CHECKING:  # pragma: no cover
    from ..data.config import BenchmarkEntry
    from ..data.prompts import PromptConfig

logger = logging.getLogger(__name__)

BAND = "band"

ALL_FAIL = "all_fail"

ALL_PASS = "all_pass"

UNSCORABLE = "unscorable"

CLASSES: tuple[str, ...] = (BAND, ALL_FAIL, ALL_PASS, UNSCORABLE)
"""The four classes a question falls into, in the order the summary line shows them."""

CLASS_RULES = (
    "unscorable: no scorable sample (the gold SQL failed); otherwise p = n_correct / n_scorable and "
    "all_fail: p <= low (p == 0 included); all_pass: p >= high; band: low < p < high"
)
"""The class rules in one line (also written into ``filter_report.json``)."""


def classify(n_correct: int, n_scorable: int, low: float = 0.2, high: float = 0.8) -> str:
    """The class of one question from its sample counts (see :data:`CLASS_RULES`).

    ``n_scorable`` is 0 when the gold SQL failed. Returns ``band``, ``all_fail``, ``all_pass`` or ``unscorable``.

    Example:

    ```python
    >>> from slmsql_hub.filtering import classify
    >>> [classify(n, 8) for n in (0, 1, 2, 6, 7, 8)]
    ['all_fail', 'all_fail', 'band', 'band', 'all_pass', 'all_pass']
    >>> classify(0, 0)
    'unscorable'

    ```
    """
    if not 0 <= n_correct <= n_scorable:
        raise ValueError(f"n_correct ({n_correct}) must be between 0 and n_scorable ({n_scorable})")
    if n_scorable == 0:
        return UNSCORABLE
    pass_rate = n_correct / n_scorable
    if pass_rate <= low:
        return ALL_FAIL
    if pass_rate >= high:
        return ALL_PASS
    return BAND


def pool_shortfall(pool: BenchmarkEntry, drawn: int, excluded: int | None) -> str | None:
    """The line the log and the report carry when the pool (``pool``: its ``NAME:SPLIT:LIMIT`` entry) holds fewer
    questions than its limit asked; ``None`` when it holds them all (or no limit was set).

    Example:

    ```python
    >>> from slmsql_hub.data.config import BenchmarkEntry
    >>> pool_shortfall(BenchmarkEntry.parse("synsql:train:1367"), 400, 12)
    'the pool holds 400 questions, fewer than the 1367 synsql:train:1367 asked (after leaving out 12 SFT training questions)'
    >>> pool_shortfall(BenchmarkEntry.parse("synsql:train:400"), 400, 0) is None
    True

    ```
    """
    if pool.limit is None or drawn >= pool.limit:
        return None
    left_out = f" (after leaving out {excluded} SFT training questions)" if excluded else ""
    return f"the pool holds {drawn} questions, fewer than the {pool.limit} {pool} asked{left_out}"


def summary_line(counts: dict[str, int]) -> str:
    """The study's one-line summary: ``"494 band / 502 all-fail / 184 all-pass / 0 unscorable of 1180"``.

    Example:

    ```python
    >>> from slmsql_hub.filtering import summary_line
    >>> summary_line({"band": 494, "all_fail": 502, "all_pass": 184, "unscorable": 0})
    '494 band / 502 all-fail / 184 all-pass / 0 unscorable of 1180'

    ```
    """
    total = sum(counts.get(name, 0) for name in CLASSES)
    parts = " / ".join(f"{counts.get(name, 0)} {name.replace('_', '-')}" for name in CLASSES)
    return f"{parts} of {total}"


def _band_dataset(rows: list[dict]) -> Any:
    import datasets

    from ..data.benchmarks import BENCHMARK_COLUMNS

    features = datasets.Features(
        {
            **{name: datasets.Value("string") for name in BENCHMARK_COLUMNS},
            "pass_rate": datasets.Value("float64"),
            "n_correct": datasets.Value("int32"),
            "n_scorable": datasets.Value("int32"),
            "samples": datasets.Sequence(datasets.Value("string")),
            "sample_correct": datasets.Sequence(datasets.Value("int8")),
            "sample_verdicts": datasets.Sequence(datasets.Value("string")),
        }
    )
    columns = {name: [row[name] for row in rows] for name in features}
    return datasets.Dataset.from_dict(columns, features=features)


def _histogram(rows: list[dict], k: int) -> dict:
    by_correct = Counter(row["n_correct"] for row in rows if row["n_scorable"])
    by_rate = Counter(round(row["pass_rate"], 6) for row in rows if row["pass_rate"] is not None)
    rates = sorted(by_rate)
    return {
        "n_correct": list(range(k + 1)),
        "questions_by_n_correct": [by_correct.get(n, 0) for n in range(k + 1)],
        "pass_rate": rates,
        "questions_by_pass_rate": [by_rate[r] for r in rates],
    }


def _finish(
    config: FilterConfig,
    out: Path,
    pool: list[dict],
    done: dict[str, dict],
    prompt_config: PromptConfig,
    fingerprint: dict,
    started: float,
    started_at: str,
    generated: int,
    reused: int,
    *,
    sft: dict | None = None,
) -> dict:
    """Classify the pool, write results.jsonl in pool order, the band dataset and filter_report.json (``sft``:
    :func:`~slmsql_hub.data.sft_record.report_fields`)."""
    ordered = _write_results(config, out, pool, done)
    counts = {name: 0 for name in CLASSES}
    counts.update(Counter(row["class"] for row in ordered))
    band_dir = _write_band(out, [row for row in ordered if row["class"] == BAND])
    report = _report(config, ordered, counts, prompt_config, fingerprint, sft)
    report["time"] = {
        "started_at": started_at,
        "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "wall_seconds": round(time.perf_counter() - started, 2),
        "questions_sampled": generated,
        "questions_resumed": reused,
    }
    report["outputs"] = {
        "band": str(band_dir),
        "results": str(out / RESULTS_FILE),
        "report": str(out / REPORT_FILE),
    }
    write_atomic(out / REPORT_FILE, json.dumps(report, indent=2) + "\n")
    logger.info(
        "pass-rate filter: %s (K=%d, band %s < p < %s)",
        report["summary"],
        config.num_samples,
        config.pass_rate_low,
        config.pass_rate_high,
    )
    return report


def _write_results(config: FilterConfig, out: Path, pool: list[dict], done: dict[str, dict]) -> list[dict]:
    """The pool's results in pool order, each with its ``class``; rewrites results.jsonl with them first."""
    ordered = []
    for row in pool:
        result = dict(done[row["question_id"]])
        result["class"] = classify(
            result["n_correct"], result["n_scorable"], config.pass_rate_low, config.pass_rate_high
        )
        ordered.append(result)
    in_pool = {row["question_id"] for row in pool}
    others = [row for qid, row in done.items() if qid not in in_pool]  # from an earlier, larger pool
    write_atomic(
        out / RESULTS_FILE,
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in [*ordered, *others]),
    )
    return ordered


def _write_band(out: Path, band_rows: list[dict]) -> Path:
    """Save the band with ``datasets.save_to_disk`` (replacing an earlier one); returns its folder."""
    from ..run.guard import save_dataset

    band_dir = out / BAND_DIR
    # one shard even when empty: datasets writes no file for an empty dataset otherwise, and cannot load it back
    save_dataset(_band_dataset(band_rows), band_dir, num_shards=1)
    if not band_rows:
        logger.warning(
            "the band is empty: GRPO on it has nothing to learn from; check the policy, the temperature or the "
            "thresholds"
        )
    return band_dir


def read_band(ref: str | Path, revision: str | None = None, option: str = "band.band_dir"):
    """The band dataset ``ref`` names: the filter's ``save_to_disk`` folder (:func:`_write_band`), or a Hub
    dataset id read with ``datasets.load_dataset`` at ``revision`` (a band ``slmsql push`` published: its
    databases are downloaded and every ``db_path`` made absolute, :mod:`slmsql_hub.data.sources`). One line
    naming ``option`` when it is neither."""
    from ..data.sources import dataset_kind, load_hub_dataset
    from ..errors import UsageError
    from ..run.artifacts import load_saved_dataset

    text = str(ref)
    if dataset_kind(text, option, "run the filter first (slmsql filter)") == "hub":
        return load_hub_dataset(text, revision, option)
    folder = Path(text).expanduser()
    if not (folder / "state.json").is_file() and not (folder / "dataset_info.json").is_file():
        raise UsageError(f"no band dataset at {folder}: run the filter first (slmsql filter)")
    return load_saved_dataset(folder, "run the filter again (slmsql filter)")


def _report(
    config: FilterConfig,
    ordered: list[dict],
    counts: dict[str, int],
    prompt_config: PromptConfig,
    fingerprint: dict,
    sft: dict | None,
) -> dict:
    """``filter_report.json`` but its ``time`` and ``outputs`` sections."""
    from ..runtime import environment, loaded_revisions

    by_difficulty: dict[str, Counter] = {}
    for row in ordered:
        by_difficulty.setdefault(row["difficulty"], Counter())[row["class"]] += 1
    scored = [row["pass_rate"] for row in ordered if row["pass_rate"] is not None]
    line = summary_line(counts)
    report = {
        "summary": line,
        "counts": counts,
        "pool": len(ordered),
        "num_samples": config.num_samples,
        "pass_rate_low": config.pass_rate_low,
        "pass_rate_high": config.pass_rate_high,
        "environment": environment(),
        "class_rules": CLASS_RULES,
        "mean_pass_rate": sum(scored) / len(scored) if scored else None,
        **(sft or {"excluded_sft": None, "sft_overlap": None, "sft_record": None}),
        "policy": {
            "base": config.model_name_or_path,
            "adapter": config.adapter_path,
            **loaded_revisions(
                config.model_name_or_path,
                config.model_revision,
                config.adapter_path,
                config.adapter_revision,
            ),
            "adapter_sha256": fingerprint["adapter_sha256"],
        },
        "dataset": {
            "benchmark": config.pool.name,
            "data_root": config.pool_root,
            "split": config.pool.split,
            "limit": config.pool.limit,
            "seed": config.seed,
            "questions": len(ordered),
            "shortfall": pool_shortfall(config.pool, len(ordered), (sft or {}).get("excluded_sft")),
        },
        "generation": {
            "temperature": config.temperature,
            "top_p": config.top_p,
            "top_k": config.top_k,
            "max_new_tokens": config.max_new_tokens,
            "seed": config.seed,
            "seeding": "per question and sample: sha256(seed, question_id, j)",
            **({"backend": config.backend} if config.backend != "transformers" else {}),
        },
        "judging": {"compare_mode": config.compare_mode, "keep_distinct": config.keep_distinct},
        LIMITS_KEY: limits_record(config.sql_limits()),
        "prompt": prompt_config.record(),
        "by_difficulty": {
            d: {name: c.get(name, 0) for name in CLASSES} for d, c in sorted(by_difficulty.items())
        },
        "histogram": _histogram(ordered, config.num_samples),
    }
    return report
