"""The card's plots: GRPO telemetry against step, the pass-rate histogram, the ablation forest and curves.

Every plot is a PNG drawn with matplotlib's object API on the Agg canvas (no ``pyplot`` global state), imported
only when a plot is drawn; the data are ``telemetry.jsonl`` records and ``filter_report.json``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..run.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC

logger = logging.getLogger(__name__)

TELEMETRY_PLOTS: dict[str, tuple[str, str, str]] = {
    "frac_reward_zero_std": (
        EXACT_ZERO_STD_METRIC,
        "Groups with zero reward variance (no gradient)",
        "share of groups",
    ),
    "reward_std": ("reward_std", "Reward standard deviation within groups", "reward std"),
    "grad_norm": ("grad_norm", "Gradient norm (before clipping)", "grad norm"),
    "completion_length": ("completions/mean_length", "Mean completion length", "tokens"),
}
"""File stem -> (telemetry metric, title, y label)."""

METRIC_FALLBACKS: dict[str, str] = {EXACT_ZERO_STD_METRIC: TRL_ZERO_STD_METRIC}
"""Metric -> what to show for runs that did not log it (runs from before the exact zero-variance count)."""


def logged_metric(attempts: Mapping[str, Iterable[Mapping[str, Any]]], metric: str) -> str | None:
    """The key to plot or quote for ``metric``: itself when some record logs it, else its fallback when logged.

    Example:

    ```python
    >>> from slmsql_hub.render.plots import logged_metric
    >>> logged_metric({"a": [{"step": 1, "frac_reward_zero_std": 0.5}]}, "frac_reward_zero_std_exact")
    'frac_reward_zero_std'
    >>> logged_metric({"a": [{"step": 1, "frac_reward_zero_std_exact": 0.5}]}, "frac_reward_zero_std_exact")
    'frac_reward_zero_std_exact'
    >>> logged_metric({"a": [{"step": 1}]}, "grad_norm") is None
    True

    ```
    """
    for key in (metric, METRIC_FALLBACKS.get(metric)):
        if key is not None and any(
            isinstance(r.get(key), (int, float)) for records in attempts.values() for r in records
        ):
            return key
    return None


_HISTOGRAM_PLOT = "pass_rate_histogram"

_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")
_BAND_COLOR = "#1f77b4"
_OUTSIDE_COLOR = "#bbbbbb"
_DPI = 110


def _figure(width: float = 6.4, height: float = 3.6):
    """A figure on the Agg canvas, outside pyplot (nothing global is created or kept)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # Fixed margins rather than a layout engine: each layout pass redraws the figure, and drawing is the cost.
    figure = Figure(figsize=(width, height), dpi=_DPI)
    figure.subplots_adjust(left=0.1, right=0.97, bottom=0.14, top=0.86)
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Any, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # No software/date metadata: the same data always give the same bytes.
    figure.savefig(path, format="png", metadata={"Software": None})
    return path


def _series(records: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[int], list[float]]:
    """(steps, values) of ``metric`` over the training records that log it as a finite number."""
    steps, values = [], []
    for record in records:
        if record.get("kind", "train") != "train":
            continue
        value, step = record.get(metric), record.get("step")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            if isinstance(step, int):
                steps.append(step)
                values.append(float(value))
    return steps, values


def _plot_metric(
    attempts: Mapping[str, Sequence[Mapping[str, Any]]],
    metric: str,
    path: str | os.PathLike,
    title: str | None = None,
    ylabel: str | None = None,
) -> Path:
    """Plot one metric against the step, one line per attempt (label -> ``telemetry.jsonl`` records), its mean in
    the legend; save the PNG at ``path``. ValueError: no attempt logs ``metric``.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.render.plots import _plot_metric
    >>> records = [{"step": s, "frac_reward_zero_std": 1 / s} for s in range(1, 6)]
    >>> path = _plot_metric({"attempt #2": records}, "frac_reward_zero_std", pathlib.Path(tempfile.mkdtemp()) / "f.png")
    >>> path.read_bytes()[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True

    ```
    """
    figure = _figure()
    axes = figure.add_subplot()
    drawn = 0
    for index, (label, records) in enumerate(attempts.items()):
        steps, values = _series(records, metric)
        if not steps:
            continue
        mean = sum(values) / len(values)
        color = _COLORS[index % len(_COLORS)]
        axes.plot(
            steps,
            values,
            marker="o",
            markersize=2.5,
            linewidth=1.4,
            color=color,
            label=f"{label} (mean {mean:.{1 if abs(mean) >= 10 else 3}f})",
        )
        axes.axhline(mean, color=color, linewidth=0.8, linestyle="--", alpha=0.6)
        drawn += 1
    if not drawn:
        raise ValueError(f"no telemetry record logs {metric!r}; nothing to plot")
    if metric.startswith("frac_"):
        axes.set_ylim(-0.03, 1.03)
    axes.set_title(title or metric, fontsize=11)
    axes.set_xlabel("step")
    axes.set_ylabel(ylabel or metric)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    return _save(figure, path)


def band_bins(num_samples: int, low: float, high: float) -> list[int]:
    """The numbers of correct samples (out of ``num_samples``) whose pass rate lies in the band ``low < p < high``.

    Example:

    ```python
    >>> from slmsql_hub.render.plots import band_bins
    >>> band_bins(8, 0.2, 0.8)
    [2, 3, 4, 5, 6]

    ```
    """
    return [j for j in range(num_samples + 1) if low < j / num_samples < high]


def _plot_pass_rate_histogram(report: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Plot ``filter_report.json``'s questions per number of correct samples, the band shaded; save as PNG.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.render.plots import _plot_pass_rate_histogram
    >>> report = {"num_samples": 4, "pass_rate_low": 0.2, "pass_rate_high": 0.8, "pool": 10,
    ...           "counts": {"band": 5, "all_fail": 3, "all_pass": 2, "unscorable": 0},
    ...           "histogram": {"n_correct": [0, 1, 2, 3, 4], "questions_by_n_correct": [3, 1, 2, 2, 2]}}
    >>> _plot_pass_rate_histogram(report, pathlib.Path(tempfile.mkdtemp()) / "h.png").name
    'h.png'

    ```
    """
    k = int(report["num_samples"])
    low, high = float(report["pass_rate_low"]), float(report["pass_rate_high"])
    histogram = report["histogram"]
    bins = list(histogram["n_correct"])
    heights = list(histogram["questions_by_n_correct"])
    inside = set(band_bins(k, low, high))
    counts = report.get("counts", {})
    figure = _figure()
    axes = figure.add_subplot()
    colors = [_BAND_COLOR if j in inside else _OUTSIDE_COLOR for j in bins]
    bars = axes.bar(bins, heights, color=colors, edgecolor="white", width=0.85)
    axes.bar_label(bars, fontsize=8, padding=2)
    if inside:
        axes.axvspan(min(inside) - 0.5, max(inside) + 0.5, color=_BAND_COLOR, alpha=0.08, linewidth=0)
        top = max(heights) if heights else 1
        axes.text(
            (min(inside) + max(inside)) / 2,
            top * 1.12,
            f"band: {counts.get('band', sum(h for j, h in zip(bins, heights) if j in inside))} questions "
            f"({low:g} < p < {high:g})",
            ha="center",
            fontsize=9,
            color=_BAND_COLOR,
        )
        axes.set_ylim(0, top * 1.25)
        for name, side in (
            ("all_fail", [j for j in bins if j < min(inside)]),
            ("all_pass", [j for j in bins if j > max(inside)]),
        ):
            if side and name in counts:
                axes.text(
                    sum(side) / len(side),
                    top * 1.12,
                    f"{name.replace('_', '-')}: {counts[name]}",
                    ha="center",
                    fontsize=9,
                    color="#666666",
                )
    axes.set_xticks(bins, [f"{j}/{k}" for j in bins])
    axes.set_xlabel(f"correct samples out of K = {k} (pass rate p)")
    axes.set_ylabel("questions")
    scored = sum(heights)
    unscorable = counts.get("unscorable", 0)
    subtitle = f"{scored} scored questions" + (f", {unscorable} unscorable (not shown)" if unscorable else "")
    axes.set_title(f"Pass rates of the SFT policy on the GRPO pool\n{subtitle}", fontsize=11)
    axes.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def write_card_plots(
    attempts: Mapping[str, Sequence[Mapping[str, Any]]],
    filter_report: Mapping[str, Any] | None,
    out_dir: str | os.PathLike,
) -> dict[str, Path]:
    """Draw the :data:`TELEMETRY_PLOTS` some attempt logs and, given a filter report, the pass-rate histogram into
    ``out_dir``; returns file stem -> path.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.render.plots import write_card_plots
    >>> records = [{"step": s, "reward_std": 0.1 * s, "grad_norm": 0.2} for s in range(1, 4)]
    >>> sorted(write_card_plots({"attempt #2": records}, None, tempfile.mkdtemp()))
    ['grad_norm', 'reward_std']

    ```
    """
    out = Path(out_dir)
    written: dict[str, Path] = {}
    for stem, (metric, title, ylabel) in TELEMETRY_PLOTS.items():
        key = logged_metric(attempts, metric)
        if key is None:
            logger.warning("no attempt logs %s: plots/%s.png is not drawn", metric, stem)
            continue
        written[stem] = _plot_metric(attempts, key, out / f"{stem}.png", title=title, ylabel=ylabel)
    if filter_report is not None:
        written[_HISTOGRAM_PLOT] = _plot_pass_rate_histogram(filter_report, out / f"{_HISTOGRAM_PLOT}.png")
    return written


def plot_forest(rows: Sequence[Mapping[str, Any]], slices: Sequence[str], path: str | os.PathLike) -> Path:
    """ΔEX ± 95% CI per variant (rows) and slice (one panel each), in points, with 0 marked; save as PNG.

    Each row is ``{"name": ..., "slices": {slice: {"delta", "ci", "p_holm"}}}`` (fractions); a point is
    filled when its Holm-corrected p is below 0.05.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.render.plots import plot_forest
    >>> rows = [{"name": "frozen", "slices": {"dev": {"delta": 0.0, "ci": [0.0, 0.0], "p_holm": 1.0}}}]
    >>> plot_forest(rows, ["dev"], pathlib.Path(tempfile.mkdtemp()) / "f.png").suffix
    '.png'

    ```
    """
    height = 0.32 * len(rows) + 1.7
    figure = _figure(width=2.6 * len(slices) + 1.4, height=height)
    figure.subplots_adjust(left=0.12, right=0.98, bottom=0.55 / height, top=1 - 0.75 / height, wspace=0.08)
    names = [str(row["name"]) for row in rows]
    first = None
    for index, name in enumerate(slices):
        axes = figure.add_subplot(1, len(slices), index + 1, sharex=first)  # one scale: panels compare
        first = first or axes
        for y, row in enumerate(rows):
            entry = row["slices"].get(name)
            if not entry:
                continue
            delta, (low, high) = 100 * entry["delta"], entry["ci"]
            significant = (entry.get("p_holm") if entry.get("p_holm") is not None else 1.0) < 0.05
            color = _COLORS[1] if delta >= 0 else _COLORS[0]
            axes.plot([100 * low, 100 * high], [y, y], color=color, linewidth=1.4)
            axes.plot([delta], [y], "o", color=color, markersize=5, markerfacecolor=color if significant else "white")
        axes.axvline(0.0, color="#444444", linewidth=0.8)
        axes.set_yticks(range(len(rows)))
        axes.set_yticklabels(names if index == 0 else [""] * len(rows), fontsize=8)
        axes.invert_yaxis()
        axes.set_title(name, fontsize=9)
        axes.set_xlabel("ΔEX (points)", fontsize=8)
        axes.tick_params(axis="x", labelsize=7)
        axes.grid(alpha=0.3, axis="x")
    figure.suptitle("GRPO − SFT, 95% CI (filled: Holm p < 0.05)", fontsize=10)
    return _save(figure, path)


def plot_curves(
    runs: Mapping[str, Sequence[Mapping[str, Any]]], metric: str, path: str | os.PathLike, window: int = 10
) -> Path:
    """One telemetry metric against the step for many runs (a rolling mean over ``window`` steps); save as PNG.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.render.plots import plot_curves
    >>> runs = {"high_lr": [{"step": s, "sql/correct_rate": s / 20} for s in range(1, 21)]}
    >>> plot_curves(runs, "sql/correct_rate", pathlib.Path(tempfile.mkdtemp()) / "c.png").suffix
    '.png'

    ```
    """
    from matplotlib import colormaps

    figure = _figure(width=7.2, height=4.0)
    figure.subplots_adjust(right=0.74)
    axes = figure.add_subplot()
    palette = colormaps["tab20"]
    for index, (label, records) in enumerate(runs.items()):
        steps, values = _series(records, metric)
        if not steps:
            continue
        smooth = [sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
                  for i in range(len(values))]  # fmt: skip
        axes.plot(steps, smooth, linewidth=1.3, color=palette(index % 20), label=label)
    if metric.endswith("_rate") or metric.startswith("frac_"):
        axes.set_ylim(-0.03, 1.03)
    axes.set_title(f"{metric} (rolling mean of {window} steps)", fontsize=10)
    axes.set_xlabel("step")
    axes.set_ylabel(metric)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(figure, path)


def plot_passk(
    curves: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], path: str | os.PathLike
) -> Path:
    """pass@k against k, one panel per slice: each run's GRPO curve (``b``) and SFT's (``a``, dashed, from the
    first run: every run pairs against the same SFT samples); save as PNG.

    ``curves``: ``{slice: {run label: [{"k", "a", "b"}, ...]}}``, as the ablation entries' ``passk`` hold them.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.render.plots import plot_passk
    >>> points = [{"k": 1, "a": 0.5, "b": 0.7}, {"k": 2, "a": 0.75, "b": 0.8}]
    >>> plot_passk({"band_train": {"high_lr s0": points}}, pathlib.Path(tempfile.mkdtemp()) / "p.png").suffix
    '.png'

    ```
    """
    from matplotlib import colormaps

    names = list(curves)
    width = 3.2 * max(1, len(names)) + 2.2  # 2.2 inches on the right for the legend
    figure = _figure(width=width, height=3.6)
    figure.subplots_adjust(left=0.6 / width, right=1 - 2.1 / width, bottom=0.14, top=0.86, wspace=0.25)
    palette = colormaps["tab20"]
    # one color per label across the panels, and one legend of every label (panels may hold different runs)
    labels = dict.fromkeys(label for runs in curves.values() for label in runs)
    colors = {label: palette(i % 20) for i, label in enumerate(labels)}
    legend: dict[str, Any] = {}
    for column, name in enumerate(names):
        axes = figure.add_subplot(1, max(1, len(names)), column + 1)
        runs = curves[name]
        for index, (label, points) in enumerate(runs.items()):
            ks = [p["k"] for p in points]
            if index == 0:
                (legend["SFT"],) = axes.plot(ks, [p["a"] for p in points], "k--", linewidth=1.3, label="SFT")
            (legend[label],) = axes.plot(ks, [p["b"] for p in points], marker="o", markersize=3, linewidth=1.1,
                                         color=colors[label], label=label)  # fmt: skip
        axes.set_xscale("log", base=2)
        ticks = sorted({p["k"] for points in runs.values() for p in points})
        axes.set_xticks(ticks, [str(k) for k in ticks])
        axes.set_ylim(-0.03, 1.03)
        axes.set_title(name, fontsize=10)
        axes.set_xlabel("k")
        axes.grid(alpha=0.3)
        if column == 0:
            axes.set_ylabel("pass@k")
        if column == len(names) - 1:
            axes.legend(
                list(legend.values()), list(legend), fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5)
            )
    return _save(figure, path)


def plot_diagnosis(
    slices: Mapping[str, Mapping[str, Any]], classes: Sequence[Mapping[str, Any]], path: str | os.PathLike
) -> Path:
    """The diagnosis in two panels: pass@k against k per slice (greedy EX and maj@K marked at k = 1 and K), and
    the questions each error class affects (in support or not); save as PNG.

    Example:

    ```python
    >>> import pathlib, tempfile
    >>> from slmsql_hub.render.plots import plot_diagnosis
    >>> slices = {"world_dev": {"pass_at_k": [{"k": 1, "value": 0.4}, {"k": 4, "value": 0.7}], "greedy_ex": 0.5,
    ...                         "maj_at_k": 0.55}}
    >>> classes = [{"class": "wrong_literal", "affected": 10, "support": 0.6}]
    >>> plot_diagnosis(slices, classes, pathlib.Path(tempfile.mkdtemp()) / "d.png").suffix
    '.png'

    ```
    """
    figure = _figure(width=10.0, height=3.8)
    figure.subplots_adjust(left=0.07, right=0.98, bottom=0.16, top=0.88, wspace=0.6)
    curves, bars = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    for index, (name, summary) in enumerate(slices.items()):
        points, color = summary["pass_at_k"], _COLORS[index % len(_COLORS)]
        if not points:
            continue
        ks = [p["k"] for p in points]
        curves.plot(ks, [p["value"] for p in points], marker="o", markersize=3, color=color, label=name)
        for k, value, marker in ((ks[0], summary["greedy_ex"], "s"), (ks[-1], summary["maj_at_k"], "^")):
            if value is not None:
                curves.plot([k], [value], marker, color=color, markerfacecolor="white")
    curves.set_xscale("log", base=2)
    curves.set_ylim(-0.03, 1.03)
    curves.set_title("pass@k (square: greedy EX, triangle: maj@K)", fontsize=9)
    curves.set_xlabel("k")
    curves.grid(alpha=0.3)
    curves.legend(fontsize=7)
    shown = [c for c in classes if c["affected"]]
    names = [c["class"] for c in shown]
    inside = [round(c["affected"] * (c["support"] or 0)) for c in shown]
    bars.barh(names, inside, color=_BAND_COLOR, label="in support")
    bars.barh(names, [c["affected"] - i for c, i in zip(shown, inside)], left=inside, color=_OUTSIDE_COLOR,
              label="out of support")  # fmt: skip
    bars.invert_yaxis()
    bars.tick_params(axis="y", labelsize=7)
    bars.set_title("evaluation questions affected per error class", fontsize=9)
    bars.legend(fontsize=7)
    return _save(figure, path)
