"""The study's per-run sampling and greedy answers with the library's ``DynamicCache`` (old) and the package's
``GrowingCache`` (:mod:`slmsql_hub.generation.kv_cache`), finished rows dropped and one prefill per prompt (new),
side by side in one run on a real slice (issue #39).

Both paths run the study's own functions on the same loaded policy: sampled pass@k counts
(:func:`slmsql_hub.study.sampled.sample_counts`, the filter's keyed sampler in the study's keys, ``passk_samples``
samples per question) and the greedy answers (:func:`slmsql_hub.study.evaluate.answer`). The old path is the
new one with ``slmsql_hub.generation.hf._growing_cache`` returning no cache (``generate`` then makes its
``DynamicCache``). It prints each path's wall and CPU seconds (this process; the judge's workers do the same
work in both) and their ratio, checks that every sampled token, every per-question ``(n, c)`` and every greedy
verdict and SQL are identical, and compares both with what the study recorded under ``<output_dir>/sft/``
when those were drawn with the same keys. Exit 1 on any difference.

Usage (a copy of a study's outputs; nothing is written under it)::

    python benchmarks/bench_kv_cache.py --config recipes/world/transfer.yaml \\
        --run-dir outputs/transfer/worlds/plant70 --output-dir outputs/transfer/plant70 \\
        --slice band_heldout --questions 32
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slmsql_hub import generation
from slmsql_hub.filtering.report import read_band
from slmsql_hub.generation import hf
from slmsql_hub.run.files import read_jsonl
from slmsql_hub.study.band import load_band
from slmsql_hub.study.config import load_ablation_config
from slmsql_hub.study.evaluate import answer, load_eval_settings, load_slices
from slmsql_hub.study.sampled import (
    PASSK_DIR,
    load_sampler_policy,
    read_keys,
    sample_counts,
    sample_keys,
    sampler_settings,
)


def study_slice(config: Any, name: str, eval_settings: Any) -> dict:
    """One of the study's slices (``{"rows", "held_out_db", "mode"}``: the band halves as ``band/band.json``
    split them, or a ``transfer`` benchmark such as ``world_probe_same``)."""
    record = json.loads((Path(config.output_dir) / "band" / "band.json").read_text(encoding="utf-8"))
    settings, source = config.band, record["pool"]["band_dir"]
    band = load_band(read_band(source), source, settings.split_seed, settings.heldout_share, settings.min_band)
    slices = load_slices(band.train, band.heldout, config.transfer, eval_settings)
    if name not in slices:
        raise SystemExit(f"--slice {name}: the study has {', '.join(slices)}")
    return slices[name]


PATHS = ("old", "cache", "drop", "new")
"""old: ``DynamicCache``, every row decoded to the batch's longest (the study's code before #39); cache: the
``GrowingCache`` only; drop: the ``GrowingCache`` and finished rows dropped, every row prefilled on its own; new:
as drop, with one prefill per prompt repeated for its samples (greedy runs old and new only)."""


def timed(path: str, work: Callable[[], Any]) -> tuple[Any, float, float]:
    """``work()`` on one of :data:`PATHS`: its result, wall and CPU seconds."""
    real_cache, real_decode = hf._growing_cache, generation.generate_with_processor
    if path == "old":
        hf._growing_cache = lambda model: {}
    if path in ("old", "cache"):
        generation.generate_with_processor = functools.partial(real_decode, drop_finished=False)
    if path == "drop":
        generation.generate_with_processor = functools.partial(real_decode, share_prefill=False)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        result = work()
    finally:
        hf._growing_cache, generation.generate_with_processor = real_cache, real_decode
    return result, time.perf_counter() - wall, time.process_time() - cpu


def recorded(folder: Path, name: str, keys: dict, rows: list[dict]) -> tuple[list | None, list | None]:
    """The counts (when drawn with ``keys``) and greedy answers for ``rows`` the study recorded for an adapter
    (``folder``: ``<output_dir>/sft`` or a run's folder)."""
    ids = {row["question_id"] for row in rows}
    counts = answers = None
    if (folder / PASSK_DIR / f"{name}.jsonl").is_file() and read_keys(folder / PASSK_DIR) == keys:
        counts = [c for c in read_jsonl(folder / PASSK_DIR / f"{name}.jsonl") if c["question_id"] in ids]
    greedy = folder / f"{name}.jsonl" if folder.name == "sft" else folder / "answers" / f"{name}.jsonl"
    if greedy.is_file():
        answers = [a for a in read_jsonl(greedy) if a["question_id"] in ids]
    return counts, answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="recipes/world/transfer.yaml")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--output-dir", required=True, help="the study's output (band/, sft/), read only")
    parser.add_argument("--slice", default="band_heldout", help="a study slice, e.g. band_heldout, world_probe_same")
    parser.add_argument("--run", default=None, help="a run folder under runs/ (e.g. plant70-seed0); default: SFT")
    parser.add_argument("--questions", type=int, default=32, help="the slice's first N questions (0: all)")
    parser.add_argument("--samples", type=int, default=None, help="per question (default: passk_samples)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    import dataclasses

    config = load_ablation_config(args.config, run_dir=args.run_dir, output_dir=args.output_dir)
    work = Path(tempfile.mkdtemp(prefix="bench-kv-"))
    eval_settings = load_eval_settings(config, work)
    whole = study_slice(config, args.slice, eval_settings)
    rows = whole["rows"][: args.questions or None]
    piece = {args.slice: {**whole, "rows": rows}}
    study = Path(config.output_dir)
    recorded_in = study / "runs" / args.run if args.run else study / "sft"
    adapter = str(recorded_in / "grpo") if args.run else config.sft_path
    settings = sampler_settings(config, work, args.samples)
    settings = dataclasses.replace(settings, adapter_path=adapter)
    policy = load_sampler_policy(settings, adapter)
    out: dict[str, Any] = {"questions": len(rows), "samples": settings.num_samples}
    results = {}
    for path in PATHS:
        folder = work / path
        counts, wall, cpu = timed(path, lambda folder=folder: sample_counts(
            settings, adapter, {args.slice: rows}, folder / "passk", policy=policy)[args.slice])
        out[path] = {"sampled_wall_s": wall, "sampled_cpu_s": cpu}
        greedy = None
        if path in ("old", "new"):
            greedy, g_wall, g_cpu = timed(
                path, lambda folder=folder: answer(adapter, piece, eval_settings, folder)[args.slice])
            out[path].update(greedy_wall_s=g_wall, greedy_cpu_s=g_cpu)
        results[path] = (counts, greedy)
        print(f"{path}: " + ", ".join(f"{k} {v:.1f}" for k, v in out[path].items()), flush=True)
    for key in out["new"]:
        out[f"ratio_{key}"] = out["old"][key] / out["new"][key]
    out["ratio_sampled_cpu_s_cache_only"] = out["old"]["sampled_cpu_s"] / out["cache"]["sampled_cpu_s"]
    out["ratio_sampled_cpu_s_shared_prefill"] = out["drop"]["sampled_cpu_s"] / out["new"]["sampled_cpu_s"]
    print("old / new: " + ", ".join(f"{k[6:]} {v:.2f}" for k, v in out.items() if k.startswith("ratio_")))
    same = results["old"] == results["new"] and results["old"][0] == results["cache"][0] == results["drop"][0]
    print(f"identical (n, c) per question and greedy verdicts + SQL: {same}")
    counts, answers = recorded(recorded_in, args.slice, sample_keys(settings), rows)
    out["identical"] = same
    if counts is not None and settings.num_samples == config.passk_samples:
        out["matches_recorded_counts"] = counts == results["new"][0]
        print(f"new (n, c) == the study's recorded counts: {out['matches_recorded_counts']}")
    if answers is not None:
        out["matches_recorded_greedy"] = answers == results["new"][1]
        print(f"new greedy answers == the study's recorded answers: {out['matches_recorded_greedy']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if same and all(v for k, v in out.items() if k.startswith("matches_")) else 1


if __name__ == "__main__":
    sys.exit(main())
