"""The diagnosis end to end: load the slices (and the training band), then the policy, sample and judge, analyse,
and write ``report.json``, ``report.md``, the plot and the per-question records."""

from __future__ import annotations

import datetime
import json
import logging
import time
from pathlib import Path
from typing import Any

from ..run.files import last_commit, write_atomic
from . import analysis
from .analysis import class_stats, prediction, slice_summary
from .config import NAMESPACE, DiagnoseConfig
from .sample import load_slices, sample_slice, training_records

logger = logging.getLogger(__name__)

REPORT_FILE, REPORT_MD, PLOT_FILE, QUESTIONS_DIR = "report.json", "report.md", "diagnosis.png", "questions"
TEMPLATE = "diagnosis_report.md"


def _load_training(config: DiagnoseConfig) -> list[dict] | None:
    from ..filtering.report import read_band

    if not config.training_band:
        return None
    return [dict(row) for row in read_band(config.training_band, config.training_band_revision, "training_band")]


def _load_policy(config: DiagnoseConfig) -> tuple[Any, Any]:
    loaded = config.load_policy(config.adapter_path, adapter_revisions={"default": config.adapter_revision})
    return (loaded, loaded.llm.get_tokenizer()) if config.backend == "vllm" else loaded


def run_diagnose(config: DiagnoseConfig, *, policy: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """Diagnose ``config``'s policy on its slices and write the outputs (package docstring); returns the report.

    Data are loaded before the model, so a missing slice or band is one UsageError line and no model is loaded.
    ``policy``: an already loaded ``(model, tokenizer)``.
    """
    from ..data.prompts import build_prompts
    from ..runtime import set_num_threads
    from ..sql import Sandbox

    started = time.perf_counter()
    slices = load_slices(config)
    training_rows = _load_training(config)
    set_num_threads(config.num_threads)
    prompt_config, prompt_source = config.resolve_prompt_config(config.adapter_path)
    out = Path(str(config.output_dir)).expanduser()
    records: dict[str, list[dict]] = {}
    with Sandbox(config.sql_limits(), workers=config.sandbox_workers) as sandbox:
        prompts = {name: build_prompts(piece["rows"], prompt_config, sandbox) for name, piece in slices.items()}
        training = None
        if training_rows is not None:
            training = training_records(training_rows, build_prompts(training_rows, prompt_config, sandbox),
                                        sandbox, config)  # fmt: skip
        policy = policy or _load_policy(config)
        for name, piece in slices.items():
            logger.info("diagnosing %s: %d questions, K=%d", name, len(piece["rows"]), config.num_samples)
            records[name] = sample_slice(piece["rows"], prompts[name], piece["mode"], policy, sandbox, config)
    report = build_report(config, slices, records, training, prompt_source)
    finished = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    report["time"] = {"wall_seconds": round(time.perf_counter() - started, 1), "finished_at": finished}
    write_outputs(out, report, records, training)
    return report


def build_report(
    config: DiagnoseConfig,
    slices: dict[str, dict],
    records: dict[str, list[dict]],
    training: list[dict] | None,
    prompt_source: str = "",
) -> dict[str, Any]:
    """``report.json``'s content but ``time``: the policy, the sampler and its keys, per slice the summary, per
    error class the statistics, the prediction, and ``rule_commit`` (the git commit that last changed
    :mod:`.analysis`, ``None`` outside a checkout) for the prediction's validation."""
    return {
        "policy": {"base": config.model_name_or_path, "base_revision": config.model_revision,
                   "adapter": config.adapter_path, "adapter_revision": config.adapter_revision},  # fmt: skip
        "sampler": {
            "num_samples": config.num_samples, "temperature": config.temperature, "top_p": config.top_p,
            "top_k": config.top_k, "max_new_tokens": config.max_new_tokens, "seed": config.seed,
            "namespace": NAMESPACE,
            "key_rule": f"sample j of question q: sample_seed({config.seed}, '{NAMESPACE}:' + q, j) "
            "(the filter seeds q)",
        },  # fmt: skip
        "prompt_source": prompt_source,
        "slices": {name: {"mode": slices[name]["mode"], **slice_summary(rows)} for name, rows in records.items()},
        "training": None if training is None else {
            "band": config.training_band, "questions": len(training),
            "with_variance": sum(1 for r in training if r["scorable"] and 0 < r["c"] < r["n"]),
        },  # fmt: skip
        "min_consistency": config.min_consistency,
        **_ruled(records, training, config.min_consistency),
    }


def _ruled(records: dict[str, list[dict]], training: list[dict] | None, min_consistency: float) -> dict[str, Any]:
    """What the rule (:mod:`.analysis`) makes of the records: ``classes``, ``prediction`` and ``rule_commit`` (the
    rule that made the prediction, for its validation)."""
    stats = class_stats(records, training, min_consistency)
    return {"classes": stats, "prediction": prediction(stats), "rule_commit": last_commit(analysis.__file__)}


def reanalyse(source: str | Path, out: str | Path) -> dict[str, Any]:
    """Rebuild a finished diagnosis's report from its own records (``questions/*.jsonl``) with today's rule:
    nothing is sampled or judged again, so a changed rule is scored on the very same samples. Writes the outputs
    into ``out`` (never into ``source``); the policy, sampler, keys and slice summaries are carried over, the
    classes, the prediction and ``rule_commit`` are today's, ``reanalysed_from`` names the source's rule.

    Example: ``slmsql diagnose --reanalyse outputs/quickstart/diagnosis --reanalysis-dir /tmp/diagnosis-v2``.
    """
    from ..errors import UsageError
    from ..run.files import read_json_object, read_jsonl
    from ..run.guard import check_output, output_lock

    source = Path(source).expanduser()
    old = read_json_object(source / REPORT_FILE, "give --reanalyse a diagnosis folder (report.json, questions/)")
    out = check_output(out, [source], "--reanalysis-dir")
    questions = source / QUESTIONS_DIR
    names = [*old.get("slices", {})]
    missing = [name for name in names if not (questions / f"{name}.jsonl").is_file()]
    if not names or missing:
        raise UsageError(f"{questions}: no records of slice(s) {', '.join(missing) or '(none listed)'}; "
                         "--reanalyse needs the diagnosis's questions/ folder")  # fmt: skip
    with output_lock(out):
        records = {name: read_jsonl(questions / f"{name}.jsonl") for name in names}
        training = read_jsonl(questions / "training.jsonl") if old.get("training") else None
        report = {**old, **_ruled(records, training, old.get("min_consistency", 0.5)),
                  "reanalysed_from": {"report": str(source / REPORT_FILE), "rule_commit": old.get("rule_commit")}}  # fmt: skip
        write_outputs(out, report, records, training)
    return report


def write_outputs(out: Path, report: dict, records: dict[str, list[dict]], training: list[dict] | None) -> None:
    """``report.json``, ``report.md``, the plot and ``questions/<slice>.jsonl`` (``training.jsonl`` too)."""
    from ..render.plots import plot_diagnosis
    from ..render.templates import load_template

    (out / QUESTIONS_DIR).mkdir(parents=True, exist_ok=True)
    for name, rows in {**records, **({"training": training} if training is not None else {})}.items():
        write_atomic(out / QUESTIONS_DIR / f"{name}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    plot_diagnosis(report["slices"], report["classes"], out / PLOT_FILE)
    write_atomic(out / REPORT_FILE, json.dumps(report, indent=2) + "\n")
    write_atomic(out / REPORT_MD, load_template(TEMPLATE).render(report=report, plot=PLOT_FILE))
