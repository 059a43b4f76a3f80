"""The grid loop: per (variant, seed), GRPO from the run's SFT adapter on band_train, then the paired slices.

Output folder::

    pool/                 the pool world and its filter (when the recipe enlarges the pool)
    band/                 band.json (the split), band_train/ (the dataset GRPO trains on)
    sft/<slice>.jsonl     the SFT adapter's answers, computed once
    runs/<variant>-seed<k>/grpo/           the adapter, telemetry.jsonl, run_summary.json
    runs/<variant>-seed<k>/answers/        its answers per slice
    sft/passk/, runs/<variant>-seed<k>/passk/   sampled counts per band and probe slice (``passk_samples`` > 0)
    runs/<variant>-seed<k>/result.json     the entry report.json merges (its presence = finished)
    report.json  report.md  plots/
    shards/<k>-of-<n>/    with ``--shard K/N``: one share's own output folder, laid out as above

**Several GPUs.** With ``jobs > 1`` each spawned worker takes one of the visible GPUs (``CUDA_VISIBLE_DEVICES``,
else ``torch.cuda.device_count()``), round-robin by the worker's start order, and sees only it; on a machine
without CUDA nothing is set. Each entry records the device its run used (``device``).

**Shards** (``--shard K/N``, K from 0, so a Slurm array's ``$SLURM_ARRAY_TASK_ID`` is K): the (variant, seed)
pairs of the selected grid (each variant's own ``seeds``, :meth:`~.config.AblationConfig.grid`), in recipe order, are numbered from 0 and shard K runs those whose number modulo N is
K. Each shard writes into its own folder ``<output_dir>/shards/<K>-of-<N>`` and prepares the band and the SFT
answers there itself: deterministic, so the array may be N copies of one command line with no shared writes. (A
recipe with ``pool_rl_pool`` then filters its pool in every shard: seeded, so the same band, at N times the
filter's cost.) **Prepared once** (``--prepare-only``, the SLURM path's first job, :mod:`.slurm`): the band and
the SFT answers in ``<output_dir>`` itself, then :data:`PREPARED`; a shard whose ``<output_dir>`` holds it reads
that band's rows from where ``band.json`` says they are (the pool's filter is not run again) and copies those
SFT answers, only reading what the prepare job wrote. The merge
(:func:`~slmsql_hub.study.report.merge_shards`) then checks that the shards did prepare the same band and the
same SFT answers (a mismatch means a nondeterministic preparation: it stops in one line) before the report
reads every shard's runs.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..run.files import write_atomic
from ..run.guard import save_dataset
from ..run.layout import TELEMETRY
from .band import POOL_SPLIT, BandSplit, load_band, prepare_pool, run_pool_filter
from .config import AblationConfig, Variant
from .evaluate import cached_answers, compare_slices, load_eval_settings, load_slices
from .sampled import PASSK_DIR, passk_entry, sample_counts, sample_keys, sampled_slices, sampler_settings
from .timing import GenerateTimer, split_training_time

logger = logging.getLogger(__name__)

RESULT_FILE = "result.json"
PASS_RATES = "sft_pass_rates"
"""band.json's ``{question_id: pass rate}``: the filter's SFT pass rate of each band question that has one."""
_TREND_METRICS = (
    "sql/correct_rate",
    "reward",
    "frac_reward_zero_std_exact",
    "entropy",
    "completions/mean_length",
)
"""Telemetry metrics whose trend (mean of the first vs the last quarter of steps) each entry records."""


_SHARDS_DIR = "shards"
PREPARED = "prepared.json"
"""Written last by :func:`prepare` in ``<output_dir>``: the band and the SFT answers there are the shards'."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as ``(K, N)`` with ``0 <= K < N``; one line on anything else.

    Example:

    ```python
    >>> from slmsql_hub.study.grid import parse_shard
    >>> parse_shard("1/4")
    (1, 4)
    >>> parse_shard("4/4")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: --shard 4/4: K must be in 0..3 (K counts from 0, as a Slurm array index)

    ```
    """
    from ..errors import UsageError

    k, slash, n = str(text).partition("/")
    if not slash or not k.strip().isdigit() or not n.strip().isdigit():
        raise UsageError(f"--shard {text}: expected K/N with whole numbers, e.g. 0/4 (the first of 4 shards)")
    k_, n_ = int(k), int(n)
    if n_ < 1:
        raise UsageError(f"--shard {text}: N must be at least 1")
    if k_ >= n_:
        raise UsageError(
            f"--shard {text}: K must be in 0..{n_ - 1} (K counts from 0, as a Slurm array index)"
        )
    return k_, n_


def shard_grid(pairs: list, shard: tuple[int, int] | None) -> list:
    """The share of ``pairs`` (the grid in recipe order) that shard ``(K, N)`` runs: every item whose index
    modulo N is K; all of them for ``None``.

    Example:

    ```python
    >>> from slmsql_hub.study.grid import shard_grid
    >>> pairs = [(v, s) for v in "abc" for s in (0, 1)]
    >>> shard_grid(pairs, (0, 2)), shard_grid(pairs, (1, 2))
    ([('a', 0), ('b', 0), ('c', 0)], [('a', 1), ('b', 1), ('c', 1)])

    ```
    """
    if shard is None:
        return list(pairs)
    k, n = shard
    return [pair for i, pair in enumerate(pairs) if i % n == k]


def shard_folder(output_dir: str | Path, shard: tuple[int, int]) -> Path:
    """``<output_dir>/shards/<K>-of-<N>``: where shard ``(K, N)`` writes."""
    return Path(output_dir) / _SHARDS_DIR / f"{shard[0]}-of-{shard[1]}"


def visible_devices() -> list[str]:
    """The CUDA devices this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (else ``0..count-1``);
    ``[]`` without CUDA."""
    import os

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def _worker_devices(gpus: list[str], jobs: int) -> list[str]:
    """The GPU each of ``jobs`` workers takes, round-robin over ``gpus`` (``[]`` without GPUs).

    Example:

    ```python
    >>> from slmsql_hub.study.grid import _worker_devices
    >>> _worker_devices(["2", "3"], 3), _worker_devices([], 2)
    (['2', '3', '2'], [])

    ```
    """
    return [gpus[i % len(gpus)] for i in range(jobs)] if gpus else []


def _device_record() -> dict[str, Any]:
    """Which device this process's runs use: ``{"cuda_visible_devices", "device", "name"}``."""
    import os

    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not torch.cuda.is_available():
        return {"cuda_visible_devices": visible, "device": "cpu", "name": "cpu"}
    return {"cuda_visible_devices": visible, "device": "cuda:0", "name": torch.cuda.get_device_name(0)}


def run_folder(output_dir: str | Path, variant: str, seed: int) -> Path:
    """``<output_dir>/runs/<variant>-seed<seed>``."""
    return Path(output_dir) / "runs" / f"{variant}-seed{seed}"


def _pool_band(config: AblationConfig) -> tuple[str, dict[str, Any]]:
    """Where the band is (the pool's filter, run or resumed, or the run's own band) and band.json's ``pool``."""
    out, run, settings = Path(config.output_dir), Path(config.run_dir), config.band
    band_dir = settings.band_dir or str(run / "filter" / "band")  # a folder, or a Hub dataset id
    pool: dict[str, Any] = {"source": "run", "band_dir": band_dir}
    if settings.band_revision:
        pool["band_revision"] = settings.band_revision
    if settings.pool_rl_pool is not None:
        info = prepare_pool(run / "world", out / "pool", settings.pool_rl_pool)
        values = {
            "model_name_or_path": config.base_path, "adapter_path": config.sft_path,
            "world_root": info["world"], "output_dir": str(out / "pool" / "filter"),
            "benchmarks": [f"world:{POOL_SPLIT}" + (f":{settings.pool_limit}" if settings.pool_limit is not None else "")],
        }  # fmt: skip
        if config.num_threads is not None:
            values["num_threads"] = config.num_threads
        started = time.perf_counter()
        report = run_pool_filter(settings.filter_recipe, values)
        band_dir = str(report["outputs"]["band"])
        pool = {"source": "pool", **info, "filter_summary": report["summary"], "filtered": report["pool"],
                "excluded_sft": report.get("excluded_sft"), "filter_wall_s": round(time.perf_counter() - started, 1),
                "filter_sampled": report["time"]["questions_sampled"], "band_dir": band_dir}  # fmt: skip
    return band_dir, pool


def prepare_band(config: AblationConfig, prepared: Path | None = None) -> tuple[BandSplit, dict[str, Any]]:
    """The band (see :func:`_pool_band`; ``prepared``: a folder :func:`prepare` wrote, whose band is read from
    where its band.json says), split; writes ``band/``."""
    from ..filtering.report import read_band

    out, settings = Path(config.output_dir), config.band
    if prepared is None:
        band_dir, pool = _pool_band(config)
    else:
        pool = json.loads((prepared / "band" / "band.json").read_text(encoding="utf-8"))["pool"]
        band_dir = pool["band_dir"]
    rows = read_band(band_dir, pool.get("band_revision") if pool["source"] == "run" else None)
    band = load_band(rows, band_dir, settings.split_seed, settings.heldout_share, settings.min_band)
    (out / "band").mkdir(parents=True, exist_ok=True)
    rates = {row["question_id"]: row["pass_rate"] for row in band.train + band.heldout
             if isinstance(row.get("pass_rate"), (int, float))}  # fmt: skip
    record = {**band.record(), PASS_RATES: rates, "pool": pool}
    write_atomic(out / "band" / "band.json", json.dumps(record, indent=2) + "\n")
    # band_train is what GRPO trains on, band_heldout what `slmsql diagnose --bands` reads; rewritten each time:
    # they must match band.json
    for name, split in (("band_train", band.train), ("band_heldout", band.heldout)):
        kept = {row["question_id"] for row in split}
        chosen = rows.filter(lambda ids, kept=kept: [i in kept for i in ids], input_columns="question_id",
                             batched=True)  # fmt: skip
        save_dataset(chosen, out / "band" / name)
    return band, pool


def _telemetry_trends(records: list[dict]) -> dict[str, dict[str, float]]:
    """Per :data:`_TREND_METRICS`: ``{"first", "last", "change"}``, the means of the first and last quarter.

    Example:

    ```python
    >>> from slmsql_hub.study.grid import _telemetry_trends
    >>> _telemetry_trends([{"step": s, "reward": s / 8} for s in range(1, 9)])["reward"]
    {'first': 0.1875, 'last': 0.9375, 'change': 0.75}

    ```
    """
    trends: dict[str, dict[str, float]] = {}
    for metric in _TREND_METRICS:
        values = [float(r[metric]) for r in records
                  if r.get("kind", "train") == "train" and isinstance(r.get(metric), (int, float))]  # fmt: skip
        if len(values) < 2:
            continue
        quarter = max(1, len(values) // 4)
        first, last = sum(values[:quarter]) / quarter, sum(values[-quarter:]) / quarter
        trends[metric] = {"first": first, "last": last, "change": last - first}
    return trends


def _train_variant(
    config: AblationConfig, variant: Variant, seed: int, folder: Path, band_train: Path
) -> dict:
    """GRPO for one (variant, seed) through :func:`~slmsql_hub.training.grpo.train_grpo`, timed by phase."""
    from ..recipes import parse_recipe
    from ..training.configs import GRPO_ARGUMENTS
    from ..training.grpo import train_grpo
    from ..training.telemetry import read_telemetry

    values = {**config.base_values(seed, folder / "grpo", band_train), **variant.override_values(config.run_dir)}
    parsed = parse_recipe(GRPO_ARGUMENTS, config.grpo_recipe, values=values)
    affected = affected_prompts(config.plant, parsed[0], parsed[2].seed)
    timer = GenerateTimer()
    with timer.timing():
        summary = train_grpo(*parsed)
    records = read_telemetry(folder / "grpo" / TELEMETRY)
    return {"summary": summary, "records": records, "affected_prompts": affected,
            "time": split_training_time(summary["train_seconds"], timer.seconds, records)}  # fmt: skip


def affected_prompts(plant: Any, script_args: Any, seed: int) -> int | None:
    """How many prompts of the run's training data the ``plant`` affects (:func:`~slmsql_hub.study.plant.affects`),
    after ``max_train_samples``: the rows GRPO draws (``training.grpo``'s data phase: read, shuffled with the run's
    seed, capped). ``None`` without a plant."""
    if plant is None:
        return None
    from ..training.common import shuffle_and_cap
    from ..training.grpo_data import load_prompt_rows
    from .plant import affects

    rows = shuffle_and_cap(load_prompt_rows(script_args, seed=seed), seed, script_args.max_train_samples)
    return sum(affects(plant, q, gold) for q, gold in zip(rows["question"], rows["gold_sql"]))


def unaffected_band(band_train: Path, plant: Any, out: Path) -> Path:
    """``band_train`` without the prompts ``plant`` affects, saved to ``out`` (a dose control's training set)."""
    import datasets

    from .plant import affects

    rows = datasets.load_from_disk(str(band_train))
    kept = rows.filter(lambda q, gold: not affects(plant, q, gold), input_columns=["question", "gold_sql"])
    logger.info("dose control: %d of %d band_train prompts affected by the plant, left out", len(rows) - len(kept), len(rows))
    kept.save_to_disk(str(out))
    return out


def _entry(variant: Variant, seed: int, trained: dict, slices: dict, eval_s: float) -> dict[str, Any]:
    summary = trained["summary"]
    update = summary.get("adapter_update") or {}
    return {
        "name": variant.name,
        "seed": seed,
        "hypothesis": variant.hypothesis,
        "overrides": variant.overrides,
        "adapter_update": {
            "relative_norm": update.get("relative_norm"),
            "update_norm": update.get("update_norm"),
        },
        "telemetry": {
            "mean": (summary.get("telemetry") or {}).get("mean", {}),
            "trend": _telemetry_trends(trained["records"]),
        },  # fmt: skip
        "steps": summary.get("steps"),
        "training_prompts": (summary.get("data") or {}).get("prompts"),
        "affected_prompts": trained.get("affected_prompts"),
        "drop_affected": variant.drop_affected,
        "slices": slices,
        "time": {**trained["time"], "eval_s": round(eval_s, 3)},
    }


def _evaluation(
    config: AblationConfig, band: BandSplit, prepared: Path | None = None
) -> tuple[Any, dict, dict, tuple | None]:
    """The eval settings, the slices and the SFT answers (computed once, then read from ``sft/``; copied first
    from a ``prepared`` folder's), and with ``passk_samples`` the sampler and SFT's sampled counts on the band
    and probe slices (``passk_slices`` of them, when given; ``sft/passk/``)."""
    out = Path(config.output_dir)
    if prepared is not None and not (out / "sft").exists():
        shutil.copytree(prepared / "sft", out / "sft")
    settings = load_eval_settings(config, out / "sft")
    slices = load_slices(band.train, band.heldout, config.transfer, settings)
    sft = cached_answers(config.sft_path, slices, settings, out / "sft", config.sft_adapter_revision)
    sampled = None
    rows = {name: slices[name]["rows"] for name in sampled_slices(list(slices), config.passk_slices)}
    if config.passk_samples and rows:
        sampler = sampler_settings(config, out / "sft" / PASSK_DIR)
        counts = sample_counts(
            sampler, config.sft_path, rows, out / "sft" / PASSK_DIR, config.sft_adapter_revision
        )
        sampled = (sampler, rows, counts)
    return settings, slices, sft, sampled


def _run_one(config: AblationConfig, variant: Variant, seed: int, evaluation: tuple) -> dict[str, Any]:
    """Train and evaluate one (variant, seed) from the start; write its :data:`RESULT_FILE` and return it."""
    settings, slices, sft, sampled = evaluation
    out = Path(config.output_dir)
    folder = run_folder(out, variant.name, seed)
    t0 = time.perf_counter()
    if folder.exists():
        shutil.rmtree(folder)  # an interrupted run: start it over
    band_train = out / "band" / "band_train"
    if variant.drop_affected:
        band_train = unaffected_band(band_train, config.plant, folder / "band_train")
    trained = _train_variant(config, variant, seed, folder, band_train)
    t1 = time.perf_counter()
    answers = cached_answers(folder / "grpo", slices, settings, folder / "answers")
    entry = _entry(
        variant, seed, trained, compare_slices(sft, answers, slices, settings), time.perf_counter() - t1
    )
    entry["held_out_dbs"] = {name: piece["held_out_db"] for name, piece in slices.items()}
    if sampled is not None:
        entry.update(_run_passk(sampled, folder, settings.bootstrap_seed))
    entry["device"] = _device_record()
    entry["time"]["wall_s"] = round(time.perf_counter() - t0, 3)
    write_atomic(folder / RESULT_FILE, json.dumps(entry, indent=2) + "\n")
    return entry


def _run_passk(sampled: tuple, folder: Path, bootstrap_seed: int) -> dict[str, Any]:
    """A run's ``passk`` (paired with SFT's counts) and ``passk_keys`` (per slice, the keys both were drawn
    with); its counts are drawn again unless ``folder/passk`` holds them with those keys."""
    sampler, rows, sft_counts = sampled
    counts = sample_counts(sampler, folder / "grpo", rows, folder / PASSK_DIR)
    keys = sample_keys(sampler)
    return {"passk": passk_entry(sft_counts, counts, bootstrap_seed), "passk_keys": {name: keys for name in rows}}


def _reused(folder: Path, evaluation: tuple, on_progress: Callable) -> dict[str, Any]:
    """A finished run's entry; with pass@k drawn with other keys (or none recorded), drawn again with the
    study's and written back (the adapter is kept, nothing is trained); without the study's pass@k, none."""
    entry = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
    sampled = evaluation[3]
    if sampled is None:  # a recipe that samples no pass@k (now) reports none, whatever the folder holds
        return {k: v for k, v in entry.items() if k not in ("passk", "passk_keys")}
    if sampled is not None and entry.get("passk_keys") != {name: sample_keys(sampled[0]) for name in sampled[1]}:
        on_progress(f"{folder.name}: pass@k drawn with other keys; sampling it again with the study's")
        entry.update(_run_passk(sampled, folder, evaluation[0].bootstrap_seed))
        write_atomic(folder / RESULT_FILE, json.dumps(entry, indent=2) + "\n")
    return entry


_WORKER: dict[str, Any] = {}
"""A ``jobs > 1`` worker's config and evaluation, set once per process by :func:`_start_worker`."""


def _start_worker(config: AblationConfig, band: BandSplit, devices: Any = None, parent: int | None = None) -> None:
    """End with the ``parent`` process, take this worker's GPU from the ``devices`` queue (before anything touches
    CUDA), then the evaluation."""
    if parent is not None:
        from ..runtime import die_with_parent

        die_with_parent(parent)
    if devices is not None:
        import os

        os.environ["CUDA_VISIBLE_DEVICES"] = devices.get()
    _WORKER.update(config=config, evaluation=_evaluation(config, band))


def _run_in_worker(variant: Variant, seed: int) -> dict[str, Any]:
    return _run_one(_WORKER["config"], variant, seed, _WORKER["evaluation"])


def prepare(config: AblationConfig) -> dict[str, Any]:
    """``--prepare-only``: the band and the SFT answers (and SFT's sampled counts) in ``config.output_dir``, then
    :data:`PREPARED` (its presence: prepared); returns what it holds. Rerun, it reuses what is there."""
    band, pool = prepare_band(config)
    _, slices, _, _ = _evaluation(config, band)
    record = {"band": len(band.train) + len(band.heldout), "band_dir": pool["band_dir"], "slices": list(slices)}
    write_atomic(Path(config.output_dir) / PREPARED, json.dumps(record, indent=2) + "\n")
    return record


def _prepared_folder(shard_dir: str | Path) -> Path | None:
    """The folder above a shard's (``<output_dir>`` of ``<output_dir>/shards/K-of-N``) when it holds
    :data:`PREPARED`; else ``None``."""
    parent = Path(shard_dir).parent.parent
    return parent if (parent / PREPARED).is_file() else None


def run_grid(
    config: AblationConfig,
    variants: list[Variant],
    on_progress: Callable[[str], None] = logger.info,
    shard: tuple[int, int] | None = None,
    beside: Callable[..., Any] | None = None,
) -> list[dict[str, Any]]:
    """Train and evaluate every (variant, seed) of this grid (``shard``'s share of it) not finished yet,
    ``config.jobs`` at a time; return every entry of it in (variant, seed) order. With ``jobs > 1``,
    ``beside(config, settings, slices, pool)`` (:class:`~.diagnostics.BesideGrid`) queues work behind the runs.

    A folder with :data:`RESULT_FILE` is reused as is; an unfinished one is trained again from the start. With
    ``jobs > 1`` each run goes to a spawned worker process, each worker on its own GPU where there are some; a
    run's numbers do not depend on where it ran. A shard of a prepared ``<output_dir>`` (:func:`prepare`) reads
    its band and SFT answers.
    """
    out = Path(config.output_dir)
    started = time.perf_counter()
    prepared = _prepared_folder(out) if shard is not None else None
    band, _ = prepare_band(config, prepared)
    evaluation = _evaluation(config, band, prepared)
    grid = shard_grid(config.grid(variants), shard)
    entries: dict[tuple[str, int], dict] = {}
    todo = []
    for k, (variant, seed) in enumerate(grid, start=1):
        folder = run_folder(out, variant.name, seed)
        if (folder / RESULT_FILE).is_file():
            on_progress(f"variant {k}/{len(grid)} {variant.name} seed {seed}: finished earlier, reused")
            entries[variant.name, seed] = _reused(folder, evaluation, on_progress)
        else:
            todo.append((k, variant, seed))
    walls: list[float] = []

    def clock(k: int, variant: Variant, seed: int, what: str) -> str:
        left = len(todo) - len(walls)
        eta = f"{sum(walls) / len(walls) * left / config.jobs / 60:.1f} min" if walls else "?"
        elapsed = (time.perf_counter() - started) / 60
        return (
            f"variant {k}/{len(grid)} {variant.name} seed {seed}: {what}elapsed {elapsed:.1f} min, ETA {eta}"
        )

    if config.jobs == 1:
        for k, variant, seed in todo:
            on_progress(clock(k, variant, seed, ""))
            entries[variant.name, seed] = _run_one(config, variant, seed, evaluation)
            walls.append(entries[variant.name, seed]["time"]["wall_s"])
    else:
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        context = multiprocessing.get_context("spawn")
        gpus, devices = visible_devices(), None
        if gpus:  # each worker takes the next one as it starts
            devices = context.Queue()
            for gpu in _worker_devices(gpus, config.jobs):
                devices.put(gpu)
        import os

        with ProcessPoolExecutor(config.jobs, context, _start_worker, (config, band, devices, os.getpid())) as pool:
            futures = {pool.submit(_run_in_worker, v, s): (k, v, s) for k, v, s in todo}
            placed = f" on GPUs {', '.join(gpus)} round-robin" if gpus else ""
            on_progress(f"{len(todo)} runs, {config.jobs} at a time{placed}")
            tail = beside(config, evaluation[0], evaluation[1], pool) if beside and todo else None
            pending = set(futures) | (tail.pending() if tail else set())
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    if future not in futures:
                        pending |= tail.finished(future)
                        continue
                    k, variant, seed = futures[future]
                    entries[variant.name, seed] = future.result()
                    walls.append(entries[variant.name, seed]["time"]["wall_s"])
                    on_progress(clock(k, variant, seed, f"done in {walls[-1] / 60:.1f} min; "))
                    if tail:
                        pending |= tail.run_finished(run_folder(out, variant.name, seed))
    return [entries[v.name, s] for v, s in grid]
