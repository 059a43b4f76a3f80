"""The model card's numbers, formatted as it prints them, from a run's files.

Each ``*_context`` / ``*_rows`` function returns the values one section of ``model_card/model_card.md`` renders
(the sentences are the template's; see ``model_card/README.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ..refs import looks_like_hub_id
from ..render.fmt import number, percent, scientific
from ..rewards import REWARDS, describe_reward
from ..run.files import read_json_object
from ..run.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC
from ..run.read import Attempt, Run
from ..sql.recipe_limits import LIMITS_KEY

_GRPO_HYPERPARAMETERS: tuple[str, ...] = (
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "max_completion_length",
    "temperature",
    "top_p",
    "beta",
    "epsilon",
    "num_iterations",
    "loss_type",
    "scale_rewards",
    "max_grad_norm",
    "dtype",
    "seed",
)
"""The resolved GRPO config's keys the hyperparameter table shows (those present)."""


_MECHANISM_METRICS: tuple[tuple[str, str, int], ...] = (
    (EXACT_ZERO_STD_METRIC, f"zero-variance groups ({EXACT_ZERO_STD_METRIC})", 3),
    (TRL_ZERO_STD_METRIC, f"TRL's {TRL_ZERO_STD_METRIC}", 3),
    ("reward_std", "reward_std", 3),
    ("grad_norm", "grad_norm", 3),
    ("completions/mean_length", "completion length (tokens)", 1),
    ("reward", "reward", 3),
    ("sql/correct_rate", "sql/correct_rate", 3),
)
"""Telemetry metrics of the attempts table: (key, label, decimals); a metric no attempt logs has no row."""


_DIFFICULTY_ORDER = ("easy", "simple", "medium", "moderate", "hard", "challenging", "extra")


def _cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _yaml_scalar(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text[:-4].strip() if text.endswith("...") else text


def is_significant_outcome(comparisons: Iterable[Mapping[str, Any]]) -> str:
    """``null`` (no comparison significant), ``improved`` (every significant one favours GRPO), ``regressed``
    (every one favours SFT) or ``mixed``.

    Example:

    ```python
    >>> from slmsql_hub.card.context import is_significant_outcome
    >>> is_significant_outcome([{"significant": False, "delta_ex": 0.01}])
    'null'
    >>> is_significant_outcome([{"significant": True, "delta_ex": 0.2}, {"significant": False, "delta_ex": 0.0}])
    'improved'

    ```
    """
    significant = [c for c in comparisons if c.get("significant")]
    if not significant:
        return "null"
    if all(c["delta_ex"] > 0 for c in significant):
        return "improved"
    if all(c["delta_ex"] < 0 for c in significant):
        return "regressed"
    return "mixed"


def _difficulty_key(name: str) -> tuple[int, str]:
    return (_DIFFICULTY_ORDER.index(name) if name in _DIFFICULTY_ORDER else len(_DIFFICULTY_ORDER), name)


def _telemetry_stats(records: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any] | None:
    """Mean (as :func:`~slmsql_hub.training.telemetry.summarize_telemetry` computes it), first, last, min and max
    of one metric over an attempt's training records; ``None`` when no record logs it.

    Example:

    ```python
    >>> from slmsql_hub.card.context import _telemetry_stats
    >>> _telemetry_stats([{"step": 1, "grad_norm": 0.2}, {"step": 2, "grad_norm": 0.4}], "grad_norm")
    {'mean': 0.30000000000000004, 'first': 0.2, 'last': 0.4, 'min': 0.2, 'max': 0.4, 'steps': 2}

    ```
    """
    values = [
        float(r[metric])
        for r in records
        if isinstance(r.get(metric), (int, float)) and not isinstance(r.get(metric), bool)
    ]
    if not values:
        return None
    return {
        "mean": sum(values) / len(values),
        "first": values[0],
        "last": values[-1],
        "min": min(values),
        "max": max(values),
        "steps": len(values),
    }


def describe_data(run: Run, attempt: Attempt, with_count: bool = True) -> str:
    data = attempt.summary.get("data") or {}
    source = data.get("source")
    sources = source if isinstance(source, list) else [source] if source else []
    band = str((run.filter_report or {}).get("outputs", {}).get("band") or "")
    names = []
    for item in sources:
        item = str(item)
        if band and (item == band or run.local(item) == run.local(band)):
            names.append("the pass-rate band")
        elif PurePosixPath(item).name == "band":
            names.append("the pass-rate band")
        elif looks_like_hub_id(item, run):  # trained from the Hub (dataset_paths)
            names.append(f"the Hub dataset `{item}`")
        else:
            names.append(f"`{PurePosixPath(item).name}`")
    what = " + ".join(names) or "unknown prompts"
    return f"{what} ({data.get('prompts', 'n/a')} prompts)" if with_count else what


def training_scope(run: Run) -> str:
    """What the adapter was trained on, stage by stage, from the run's files: each SFT stage's benchmarks (else its
    datasets' folder names; a stage taken from the Hub by its id) and the shipped GRPO attempt's data, the band
    named with the pool it was filtered from. The card's scope line sets it against what was evaluated.

    Example:

    ```python
    >>> from pathlib import Path, PurePosixPath
    >>> from slmsql_hub.run.read import Attempt, Run, Stage
    >>> sft = Stage("sft_stage2", Path("r/sft/stage2"), {}, {"benchmarks": ["bird:train", "spider:train"]})
    >>> grpo = Attempt("grpo", 2, Path("r/grpo"), {"data": {"source": ["r/filter/band"]}}, {}, [])
    >>> run = Run(Path("r"), PurePosixPath("r"), {}, [grpo], {"dataset": {"benchmark": "synsql", "split": "train"}},
    ...           stages={"sft_stage2": sft})
    >>> training_scope(run)
    'SFT stage 2: bird:train, spider:train; GRPO: the pass-rate band (of synsql:train)'

    ```
    """
    parts = []
    for name, label in (("sft_stage1", "SFT stage 1"), ("sft_stage2", "SFT stage 2")):
        if name in run.hub_stages:
            parts.append(f"{label}: the Hub adapter `{run.hub_stages[name].name}`")
        elif name in run.stages:
            config = run.stages[name].config
            named = [str(b) for b in config.get("benchmarks") or []]
            named += [f"`{PurePosixPath(str(d)).name}`" for d in config.get("dataset_paths") or []]
            parts.append(f"{label}: {', '.join(named) or 'unknown data'}")
    grpo = describe_data(run, run.shipped, with_count=False)
    pool = (run.filter_report or {}).get("dataset") or {}
    if "pass-rate band" in grpo and pool.get("benchmark"):
        grpo += f" (of {pool['benchmark']}:{pool.get('split')})"
    parts.append(f"GRPO: {grpo}")
    return "; ".join(parts)


def result_rows(run: Run) -> list[dict[str, Any]]:
    rows = []
    for key, entry in run.eval_results["benchmarks"].items():
        comparison = entry["comparison"]
        a, b = comparison.get("a", "sft"), comparison.get("b", "grpo")
        pa, pb = entry["policies"][a], entry["policies"][b]
        low, high = comparison["ci95"]
        rows.append(
            {
                "key": key,
                "benchmark": entry.get("benchmark", key),
                "split": entry.get("split", ""),
                "dataset_id": entry.get("dataset_id"),
                "mode": entry.get("mode", ""),
                "n": comparison["n"],
                "n_total": entry.get("n", comparison["n"]),
                "n_unscorable": entry.get("n_unscorable", 0),
                "sft_ex": pa["ex"],
                "grpo_ex": pb["ex"],
                "sft_correct": pa.get("correct"),
                "grpo_correct": pb.get("correct"),
                "delta_ex": comparison["delta_ex"],
                "ci95": (low, high),
                "mcnemar_p": comparison["mcnemar_p"],
                "a_only": comparison["discordant"]["a_only"],
                "b_only": comparison["discordant"]["b_only"],
                "significant": bool(comparison["significant"]),
                "verdict": comparison["verdict"],
                "summary": comparison["summary"],
                # the verdict sentence without its verdict words (the TL;DR's sentence around says them)
                "finding": comparison["summary"].removeprefix(comparison["verdict"] + ": "),
                "rule": comparison.get("rule"),
                "resamples": comparison.get("bootstrap_resamples"),
                "seed": comparison.get("bootstrap_seed"),
                "predictions_file": entry.get("predictions_file"),
                "by_difficulty": (pa.get("by_difficulty") or {}, pb.get("by_difficulty") or {}),
                "held_out": (pa.get("held_out_db") or {}, pb.get("held_out_db") or {}),
                "seen": (pa.get("seen_dbs") or {}, pb.get("seen_dbs") or {}),
                "maj": entry.get("self_consistency"),  # maj@K beside greedy EX; absent in older results
            }
        )
    return rows


def _table_cells(row: Mapping[str, Any]) -> dict[str, Any]:
    """One line of a results table (greedy or maj@K) from a row with ``result_rows``' comparison keys."""
    from ..render.fmt import format_p, format_points

    low, high = row["ci95"]
    return {
        "key": row["key"],
        "benchmark": _cell(f"{row['benchmark']} {row['split']}".strip()),
        "mode": row["mode"],
        "n": row["n"],
        "sft": f"{percent(row['sft_ex'])}",
        "grpo": f"{percent(row['grpo_ex'])}",
        "delta": format_points(row["delta_ex"]),
        "low": format_points(low),
        "high": format_points(high),
        "p": format_p(row["mcnemar_p"]).removeprefix("p = "),
        "discordant": f"{row['a_only']} / {row['b_only']}",
        "verdict": _cell(row["verdict"]),
    }


def _maj_cells(row: Mapping[str, Any]) -> dict[str, Any]:
    """The maj@K line of a result row: the same cells from its ``self_consistency`` comparison, and K."""
    comparison = row["maj"]["comparison"]
    return {
        **_table_cells(
            {
                **row,
                "n": comparison["n"],
                "sft_ex": comparison["ex_a"],
                "grpo_ex": comparison["ex_b"],
                "delta_ex": comparison["delta_ex"],
                "ci95": comparison["ci95"],
                "mcnemar_p": comparison["mcnemar_p"],
                "a_only": comparison["discordant"]["a_only"],
                "b_only": comparison["discordant"]["b_only"],
                "verdict": comparison["verdict"],
            }
        ),
        "k": row["maj"]["k"],
    }


def results_context(rows: list[dict[str, Any]]) -> dict[str, Any]:
    table = []
    difficulty = []
    for row in rows:
        table.append(_table_cells(row))
        sft_by, grpo_by = row["by_difficulty"]
        groups = [
            (name, sft_by.get(name, {}), grpo_by.get(name, {}))
            for name in sorted(set(sft_by) | set(grpo_by), key=_difficulty_key)
        ]
        sft_held, grpo_held = row["held_out"]
        if sft_held or grpo_held:
            db = sft_held.get("db_id") or grpo_held.get("db_id")
            groups.append((f"held-out database ({db})", sft_held, grpo_held))
            groups.append(("seen databases", *row["seen"]))
        for name, s, g in groups:
            difficulty.append(
                {
                    "key": row["key"],
                    "difficulty": _cell(name),
                    "n": s.get("n_scorable", s.get("n", g.get("n_scorable", g.get("n")))),
                    "sft": _group_ex(s),
                    "grpo": _group_ex(g),
                }
            )
    modes = []
    for row in rows:
        entry = next((m for m in modes if m["mode"] == row["mode"]), None)
        if entry is None:
            modes.append({"mode": row["mode"], "benchmarks": [row["key"]]})
        else:
            entry["benchmarks"].append(row["key"])
    maj_table = [_maj_cells(row) for row in rows if row.get("maj")]
    return {"results_table": table, "difficulty_table": difficulty, "modes": modes, "maj_table": maj_table}


def _group_ex(group: Mapping[str, Any]) -> str:
    """``EX (correct)`` of a breakdown group; ``n/a`` when it is missing or nothing in it was scorable."""
    if not group or group.get("ex") is None:
        return "n/a"
    return f"{percent(group['ex'])} ({group['correct']})"


def mechanism_context(run: Run) -> dict[str, Any]:
    """Per attempt: data, steps, telemetry stats and their table cells, adapter change, wall time."""
    attempts = []
    for attempt in run.attempts:
        stats = {key: _telemetry_stats(attempt.records, key) for key, _, _ in _MECHANISM_METRICS}
        checksum = attempt.summary.get("adapter_checksum") or {}
        update = attempt.summary.get("adapter_update") or {}
        attempts.append(
            {
                "label": attempt.label,
                "name": attempt.name,
                "number": attempt.number,
                "shipped": attempt.shipped,
                "data": describe_data(run, attempt),
                "data_name": describe_data(run, attempt, with_count=False),
                "steps": attempt.summary.get("steps"),
                "steps_logged": len(attempt.records),
                "stats": stats,
                "adapter_changed": checksum.get("changed"),
                "relative_update": update.get("relative_norm"),
                "wall_seconds": attempt.summary.get("wall_seconds"),
            }
        )
    metric_rows = []
    for key, label, decimals in _MECHANISM_METRICS:
        if all(a["stats"][key] is None for a in attempts):
            continue
        metric_rows.append({"key": key, "label": label})
        for a in attempts:
            s = a["stats"][key]
            a.setdefault("cells", {})[key] = (
                "n/a"
                if s is None
                else f"{number(s['mean'], decimals)} ({number(s['first'], decimals)} → {number(s['last'], decimals)})"
            )
    for a in attempts:
        a["data_cell"] = _cell(a["data"])
        a["update_text"] = scientific(a["relative_update"])
        a["wall"] = number(a["wall_seconds"], 0)
    disagree = any(
        a["stats"][EXACT_ZERO_STD_METRIC] is not None
        and a["stats"][TRL_ZERO_STD_METRIC] is not None
        and abs(a["stats"][EXACT_ZERO_STD_METRIC]["mean"] - a["stats"][TRL_ZERO_STD_METRIC]["mean"]) > 0.01
        for a in attempts
    )
    return {
        "attempts": attempts,
        "zero_std_disagree": disagree,
        "metric_rows": metric_rows,
        "any_update": any(a["relative_update"] is not None for a in attempts),
    }


def filter_context(run: Run) -> dict[str, Any] | None:
    report = run.filter_report
    if report is None:
        return None
    from ..render.plots import band_bins

    k = int(report["num_samples"])
    bins = band_bins(k, float(report["pass_rate_low"]), float(report["pass_rate_high"]))
    dataset = report.get("dataset") or {}
    generation = report.get("generation") or {}
    return {
        "summary": report["summary"],
        "counts": report["counts"],
        "pool": report["pool"],
        "k": k,
        "low": report["pass_rate_low"],
        "high": report["pass_rate_high"],
        "band_bins": f"{bins[0]}–{bins[-1]}" if bins else "none",
        "mean_pass_rate": number(report.get("mean_pass_rate")),
        "split": dataset.get("split"),
        "benchmark": dataset.get("benchmark"),
        "temperature": generation.get("temperature"),
        "max_new_tokens": generation.get("max_new_tokens"),
        "compare_mode": (report.get("judging") or {}).get("compare_mode"),
        "excluded_sft": report.get("excluded_sft"),
        "sft_overlap": report.get("sft_overlap"),
    }


def limits_context(run: Run) -> dict[str, Any] | None:
    """The SQL limits the shipped GRPO run's reward judged under, and which stages recorded other ones."""
    recorded = {
        "filter": (run.filter_report or {}).get(LIMITS_KEY),
        "GRPO": run.shipped.summary.get(LIMITS_KEY),
        "eval": run.eval_results.get(LIMITS_KEY),
    }
    limits = recorded["GRPO"]
    if not limits:
        return None
    max_ops = limits.get("max_ops")
    return {
        "timeout_s": _yaml_scalar(limits.get("timeout_s")),
        "max_ops": "no" if max_ops is None else f"{max_ops:,}",
        "max_rows": f"{limits.get('max_rows'):,}",
        "max_result_mb": None
        if limits.get("max_result_bytes") is None
        else f"{limits['max_result_bytes'] / 2**20:g}",
        "same": [stage for stage, other in recorded.items() if other == limits],
        "differ": [stage for stage, other in recorded.items() if other and other != limits],
    }


def tldr_numbers(rows: list[dict[str, Any]], mechanism: dict[str, Any]) -> dict[str, Any]:
    """The TL;DR's numbers (the template writes its sentences): the comparisons split by significance and the
    shipped attempt's zero-variance share (against attempt #1's), gradient norm and adapter change."""
    from ..render.plots import METRIC_FALLBACKS

    numbers: dict[str, Any] = {
        "significant": [r for r in rows if r["significant"]],
        "others": [r for r in rows if not r["significant"]],
        "zero_pct": None,
    }
    shipped = next((a for a in mechanism["attempts"] if a["shipped"]), None)
    if shipped is None:
        return numbers
    zero = EXACT_ZERO_STD_METRIC
    if shipped["stats"][zero] is None:
        zero = METRIC_FALLBACKS[zero]  # a run from before the exact count: the plots' fallback, TRL's share
    if shipped["stats"][zero] is None:
        return numbers
    first = next((a for a in mechanism["attempts"] if a["number"] == 1 and not a["shipped"]), None)
    first_zero = first["stats"][zero] if first is not None else None
    grad = shipped["stats"]["grad_norm"]
    return {
        **numbers,
        "zero_pct": percent(shipped["stats"][zero]["mean"], 0),
        "data_name": shipped["data_name"],
        "first_pct": None if first_zero is None else percent(first_zero["mean"], 0),
        "first_data_name": first["data_name"] if first is not None else None,
        "grad_norm": None if grad is None else number(grad["mean"]),
        "adapter_changed": shipped["adapter_changed"],
        "relative_update": None
        if shipped["relative_update"] is None
        else scientific(shipped["relative_update"]),
    }


def lineage_items(run: Run, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The adapter's lineage, one item per step (``kind``: base, sft, grpo); the template writes the sentences."""
    items: list[dict[str, Any]] = [
        {
            **base,
            "kind": "base",
            "parameters": None if base.get("parameters") is None else f"{base['parameters']:,}",
            "final_loss": number(base.get("final_loss"), 4),
        }
    ]
    for name, stage_number in (("sft_stage1", 1), ("sft_stage2", 2)):
        stage = run.stages.get(name)
        if stage is None:
            continue
        s = stage.summary
        lora = s.get("lora") or {}
        items.append(
            {
                "kind": "sft",
                "stage": stage_number,
                "r": lora.get("r"),
                "alpha": lora.get("alpha"),
                "adapter_path": s.get("adapter_path"),
                "datasets": ", ".join(f"`{d}`" for d in s.get("datasets", [])),
                "trained_on": (s.get("data") or {}).get("trained_on"),
                "steps": s.get("steps"),
                "final_loss": number(s.get("final_loss"), 4),
            }
        )
    for attempt in run.attempts:
        items.append(
            {
                "kind": "grpo",
                "label": attempt.label,
                "adapter_path": attempt.summary.get("adapter_path"),
                "data": describe_data(run, attempt),
                "steps": attempt.summary.get("steps"),
                "shipped": attempt.shipped,
            }
        )
    return items


COMPARE_RULES = {
    "bird": "BIRD semantics: the result rows of prediction and gold are compared as sets; column order matters",
    "spider": "Spider test-suite semantics: DISTINCT removed, columns may be permuted, rows compared as multisets, "
    "order checked only when the gold has ORDER BY",
}
"""Each comparison rule as the card words it."""


def reward_context(rewards: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """The card's reward paragraph: the weights line and one item per reward the run used (its sentence from
    :func:`~slmsql_hub.rewards.describe_reward`; ``judging``: the first whose score reads results, where the card
    says how queries are judged). A run that recorded no values for a reward: its ``config.yaml``'s.

    Example:

    ```python
    >>> context = reward_context({"funcs": ["result_f1", "format"], "weights": [1.0, 0.5], "format": 0.3}, {})
    >>> context["weights"], [(i["name"], i["judging"]) for i in context["items"]]
    ('result_f1 × 1.0, format × 0.5', [('result_f1', True), ('format', False)])
    >>> context["items"][1]["text"]
    '0.3 for an answer in a ```` ```sql ```` block.'

    ```
    """
    funcs = list(rewards.get("funcs") or config.get("reward_funcs") or [])
    weights = list(rewards.get("weights") or config.get("reward_weights") or [1.0] * len(funcs))
    mode = rewards.get("compare_mode", config.get("reward_compare_mode"))
    items, judged = [], False
    for spec in funcs:
        cls = REWARDS.get(spec)
        recorded = rewards.get(spec)
        if cls is not None and recorded is None:  # a run from before every reward was recorded
            recorded = {p.arg: config[p.field] for p in cls.params if p.field in config}
        if isinstance(recorded, Mapping) and cls is not None:
            recorded = {k: _yaml_scalar(v) for k, v in recorded.items()}
        elif cls is not None:
            recorded = _yaml_scalar(recorded)
        judging = bool(cls is not None and cls.scores_results and not judged)
        judged = judged or judging
        name = spec if cls is not None else (recorded or {}).get("function") or spec
        rule = f"{mode}: {COMPARE_RULES.get(str(mode), '')}"
        items.append({"name": name, "text": describe_reward(spec, recorded, rule), "judging": judging})
    return {
        "funcs": funcs,
        "weights": ", ".join(f"{f} × {_yaml_scalar(w)}" for f, w in zip(funcs, weights)),
        "items": items,
        "mode": mode,
        # runs from before `limits` was recorded; newer ones state their limits in their own row
        "timeout": _yaml_scalar(config["reward_timeout_s"]) if config.get("reward_timeout_s") is not None else None,
    }


def training_context(run: Run) -> dict[str, Any]:
    shipped = run.shipped
    config = shipped.config or shipped.summary.get("config") or {}
    hyper = [
        {"key": key, "value": _cell(_yaml_scalar(config[key]))}
        for key in _GRPO_HYPERPARAMETERS
        if key in config
    ]
    adapter_config = {}
    if (shipped.folder / "adapter_config.json").is_file():
        adapter_config = read_json_object(shipped.folder / "adapter_config.json", "rerun `slmsql train grpo`")
    targets = adapter_config.get("target_modules") or config.get("lora_target_modules") or []
    if isinstance(targets, str):
        targets = [targets]
    lora = {
        "r": adapter_config.get("r", config.get("lora_r")),
        "alpha": adapter_config.get("lora_alpha", config.get("lora_alpha")),
        "dropout": adapter_config.get("lora_dropout", config.get("lora_dropout")),
        "targets": ", ".join(sorted({str(t).split(".")[-1] for t in targets})),
    }
    reward = reward_context(shipped.summary.get("rewards") or {}, config)
    environment = dict(shipped.summary.get("environment") or {})
    device = {key: environment.pop(key, None) for key in ("device", "cuda", "gpu")}
    compute = {
        "processes": shipped.summary.get("processes"),
        "threads": shipped.summary.get("threads"),
        "train_seconds": number(shipped.summary.get("train_seconds"), 0),
        "wall_seconds": number(shipped.summary.get("wall_seconds"), 0),
        "use_cpu": bool(config.get("use_cpu")),
        "device": _device_text(device),
        "environment": ", ".join(f"{k} {v}" for k, v in environment.items()),
    }
    parameters = shipped.summary.get("parameters") or {}
    prompt = shipped.summary.get("prompt") or {}
    generation = shipped.summary.get("generation") or {}
    return {
        "hyperparameters": hyper,
        "lora": lora,
        "reward": reward,
        "compute": compute,
        "prompt": prompt,
        "generation": generation,
        "parameters": {k: f"{v:,}" for k, v in parameters.items() if isinstance(v, int)},
    }


def _device_text(recorded: Mapping[str, Any]) -> str | None:
    """The device a stage's ``environment`` records, as the card says it (``None``: not recorded, a run from
    before it was).

    Example:

    ```python
    >>> _device_text({"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "cuda": "12.8"})
    'GPU (NVIDIA H100 80GB HBM3, CUDA 12.8)'
    >>> _device_text({"device": "cpu"}), _device_text({})
    ('CPU', None)

    ```
    """
    device = recorded.get("device")
    if not device:
        return None
    if device != "cuda":
        return str(device).upper()
    details = [str(recorded["gpu"])] if recorded.get("gpu") else []
    details += [f"CUDA {recorded['cuda']}"] if recorded.get("cuda") else []
    return "GPU" + (f" ({', '.join(details)})" if details else "")


def guards_context(run: Run) -> list[dict[str, str]]:
    rows = []
    for attempt in run.attempts:
        for result in (attempt.summary.get("guards") or {}).get("results", []):
            rows.append(
                {
                    "attempt": attempt.label,
                    "name": _cell(result.get("name")),
                    "status": str(result.get("status", "")).upper(),
                    "message": _cell(result.get("message", "")),
                }
            )
    return rows
