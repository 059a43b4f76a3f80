"""The comparison Space: the SFT and the GRPO adapter side by side, one question at a time.

Run it on the run folder of any run (``slmsql quickstart --out RUN`` writes one)::

    python spaces/demo/app.py --run-dir RUN          # or SLMSQL_RUN_DIR=RUN

or on Hub models (a pushed Space reads them from ``space_config.json``; README.md lists every variable)::

    SLMSQL_BASE_MODEL=Qwen/Qwen2.5-Coder-1.5B-Instruct SLMSQL_SFT_ADAPTER=org/sft SLMSQL_GRPO_ADAPTER=org/grpo \\
        python spaces/demo/app.py

The port is ``--port``, else ``GRADIO_SERVER_PORT``, else 7860. Tabs: Compare (:mod:`space_compare`: both adapters
answer one question, each answer runs in the sandbox and is judged against the gold; the ``/compare`` endpoint),
Telemetry, Evaluation, Ablations, Diagnosis (:mod:`space_diagnosis`, when the run has one) and About (``about.md``). Importing this module starts nothing: :func:`build_demo` builds the page,
:func:`main` loads everything and launches.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gradio as gr

# The Hub runs `python app.py` (this folder is on sys.path); loaders that exec this file by path
# (importlib.util.spec_from_file_location) need the folder too, for the backend beside it.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from space_backend import (  # noqa: E402 - after the path fix above
    DEFAULT_RUN_DIR,
    DISAGREEMENT_FILTERS,
    ComparisonSpace,
    SpaceSettings,
    card_summary,
    disagreement_html,
    disagreements,
    env_settings,
    eval_table,
)
from space_compare import COMPARE_API_DESCRIPTION, compare_tab, ui_errors, wire_compare  # noqa: E402
from space_config import config_settings  # noqa: E402
from space_diagnosis import diagnosis_tab  # noqa: E402
from space_views import SPACE_CSS, markdown_table, problems_markdown  # noqa: E402

from slmsql_hub.card.ablations import TRANSFER_DIR, find_transfer, transfer_context  # noqa: E402
from slmsql_hub.errors import UsageError  # noqa: E402
from slmsql_hub.run.layout import FOREST_PLOT, REPORT_JSON, REPORT_MD  # noqa: E402

logger = logging.getLogger("slmsql_space")

TITLE = "slmsql-hub · SFT vs GRPO on Text-to-SQL"


# ----------------------------------------------------------------------------------------------------------
# The page
# ----------------------------------------------------------------------------------------------------------


def _telemetry_tab(space: ComparisonSpace) -> None:
    """The Telemetry tab: per attempt, the headline means and the adapter update, then the training plots."""
    if not space.data.attempts:
        gr.Markdown("No GRPO telemetry found (`grpo/telemetry.jsonl`, written by `slmsql train grpo`).")
        return
    plots = space.telemetry_plots()
    gr.Markdown(
        "GRPO training telemetry, one line per attempt (attempt #1: data the SFT policy had already "
        "mastered; attempt #2: the pass-rate band). Dashed lines are the means over logged steps. "
        "The adapter update is how far the attempt moved the adapter's effective weights "
        "(‖ΔW‖/‖W‖, from its `run_summary.json`)."
    )
    gr.Markdown(markdown_table(space.telemetry_table()))
    for start in range(0, len(plots), 2):
        with gr.Row():
            for path, title in plots[start : start + 2]:
                gr.Image(value=path, label=title, interactive=False, show_label=False, min_width=320)


def _disagreements_handler(space: ComparisonSpace) -> Callable:
    """The browser's function: the questions of one benchmark where the policies disagree (as cards), and
    their count."""
    data = space.data

    def show_disagreements(benchmark: str | None, which: str):
        if not benchmark:
            return "", "No evaluation to browse."
        records = disagreements(data.eval_results, data.eval_dir, benchmark, which)
        bench = (data.eval_results or {}).get("benchmarks", {}).get(benchmark, {})
        count = f"**{len(records)}** of {bench.get('n', '?')} questions: {DISAGREEMENT_FILTERS[which]}."
        if not records and which == "all":
            count += " SFT and GRPO are right on exactly the same questions."
        return disagreement_html(records, data.trained), count

    return show_disagreements


def _evaluation_tab(space: ComparisonSpace) -> None:
    """The Evaluation tab: EX per benchmark with the paired statistics, then the disagreement browser."""
    data = space.data
    rows = eval_table(data.eval_results)
    benchmarks = [row["Benchmark"] for row in rows]
    if not rows:
        gr.Markdown("No evaluation found (`eval/eval_results.json`, written by `slmsql eval`).")
        return
    voted = (data.eval_results or {}).get("self_consistency")
    gr.Markdown(
        "Execution accuracy (EX, %) of both adapters on the same questions. ΔEX is GRPO − SFT; the "
        "95% CI is a paired bootstrap; p is McNemar's exact test on the questions only one policy "
        "solves."
        + (
            f" maj@{voted.get('k')} is execution-majority EX: per question, the answer whose result wins a vote "
            f"over {voted.get('k')} samples at temperature {voted.get('temperature')}, with the same statistics."
            if voted
            else ""
        )
        + "\n\n"
        + markdown_table(rows)
    )
    summaries = [
        f"- **{key}**{label}: {comparison['summary']}"
        for key, bench in (data.eval_results or {}).get("benchmarks", {}).items()
        for label, comparison in (
            ("", bench.get("comparison") or {}),
            (f" maj@{(bench.get('self_consistency') or {}).get('k')}",
             (bench.get("self_consistency") or {}).get("comparison") or {}),
        )  # fmt: skip
        if comparison.get("summary")
    ]
    gr.Markdown("\n".join(summaries))
    gr.Markdown("### Where SFT and GRPO disagree")
    with gr.Row():
        benchmark = gr.Dropdown(
            choices=benchmarks, value=benchmarks[0], label="Benchmark", scale=1, min_width=200
        )
        which = gr.Radio(
            choices=[(text, key) for key, text in DISAGREEMENT_FILTERS.items()],
            value="all",
            label="Show",
            scale=2,
            min_width=200,
        )
    show_disagreements = _disagreements_handler(space)
    try:
        first_cards, first_count = show_disagreements(benchmarks[0], "all")
    except UsageError as err:
        first_cards, first_count = "", f"**{err}**"
    count = gr.Markdown(first_count)
    browser = gr.HTML(first_cards, elem_id="disagreements")
    for control in (benchmark, which):
        control.change(
            ui_errors(show_disagreements),
            inputs=[benchmark, which],
            outputs=[browser, count],
            api_visibility="private",
        )


def _ablations_tab(space: ComparisonSpace) -> None:
    """The Ablations tab: the study's finding and pooled table (``report.md`` without its images), its forest and
    pass@k plots, then the transfer study's finding and pass@k plot when the card shipped one (``transfer/``)."""
    folder = space.data.ablations
    if folder is None:
        gr.Markdown(
            "No ablation study for this run (`slmsql ablate`; `slmsql card` ships its report in `ablations/`)."
        )
        return
    text = (folder / REPORT_MD).read_text(encoding="utf-8").split("## Per seed")[0]
    gr.Markdown("\n".join(line for line in text.splitlines() if not line.startswith("![")))
    plots = _report_plots(folder)
    for path, label in ((folder / FOREST_PLOT, "ΔEX per variant and slice (95% CI)"),
                        (plots.get("passk"), "Sampled pass@k per run and slice: SFT dashed, GRPO solid")):  # fmt: skip
        if path is not None and path.is_file():
            gr.Image(value=str(path), label=label, interactive=False, show_label=True)
    transfer = folder / TRANSFER_DIR
    found = find_transfer(folder.parent) if (transfer / REPORT_JSON).is_file() else None
    if found is None:
        gr.Markdown(
            "No transfer study covers this run (`slmsql ablate --combine` on a multi-world recipe; `slmsql card` "
            "ships its report in `ablations/transfer/`)."
        )
        return
    shown = transfer_context(*found)
    gr.Markdown(f"### Transfer across worlds (this run: `{shown['world']}`)\n\n{shown['finding']}")
    if shown["passk"] and (transfer / shown["passk"]).is_file():
        gr.Image(
            value=str(transfer / shown["passk"]),
            label="Sampled pass@k on the probes per world and variant: SFT dashed, GRPO solid",
            interactive=False,
            show_label=True,
        )


def _report_plots(folder: Path) -> dict[str, Path]:
    """The plots ``report.json`` names (``plots``), as paths under ``folder``; none for an unreadable report."""
    try:
        report = json.loads((folder / REPORT_JSON).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    plots = report.get("plots") if isinstance(report, dict) else None
    return {name: folder / rel for name, rel in (plots or {}).items() if isinstance(rel, str)}


def _about_tab(space: ComparisonSpace) -> None:
    """The About tab (``about.md``): the model card's summary, how the Space works, what it loaded, and the API."""
    import jinja2

    data = space.data
    loader = jinja2.FileSystemLoader(_HERE)
    template = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined).get_template("about.md")
    sources = "\n".join(f"- {what}: `{where}`" for what, where in data.sources.items()) or "- nothing loaded"
    gr.Markdown(
        template.render(summary=card_summary(data.card_text), sources=sources, api=COMPARE_API_DESCRIPTION)
    )


def build_demo(space: ComparisonSpace | None = None) -> gr.Blocks:
    """The page for ``space`` (default: from the ``SLMSQL_*`` variables), not launched (see :func:`launch`)."""
    if space is None:
        space = ComparisonSpace(SpaceSettings(**{**config_settings(), **env_settings()}))
    problems = space.data.problems
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(
            f"# {TITLE}\n"
            "Ask a question about a database: the **SFT** adapter and the **GRPO** adapter (one base model, the "
            "adapters switched with PEFT) each write a query; every query runs read-only in a sandbox and is "
            "judged against the gold when the question is an example. The study's finding — GRPO did not move "
            "execution accuracy — made visible one question at a time."
        )
        gr.Markdown(problems_markdown(problems), elem_id="problems", visible=bool(problems))
        with gr.Tabs():
            with gr.Tab("Compare", id="compare"):
                compare = compare_tab(space)
            with gr.Tab("Telemetry", id="telemetry"):
                _telemetry_tab(space)
            with gr.Tab("Evaluation", id="evaluation"):
                _evaluation_tab(space)
            with gr.Tab("Ablations", id="ablations"):
                _ablations_tab(space)
            if space.data.diagnosis is not None:
                with gr.Tab("Diagnosis", id="diagnosis"):
                    diagnosis_tab(space.data.diagnosis)
            with gr.Tab("About", id="about"):
                _about_tab(space)
        wire_compare(space, compare)
    return demo


# ----------------------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------------------


def parse_args(
    argv: Sequence[str] | None = None, environ: dict[str, str] | None = None
) -> tuple[SpaceSettings, str, int]:
    """Settings from the command line over ``SLMSQL_*`` variables over defaults; the host and port to serve on.

    Example:

    ```python
    >>> settings, host, port = parse_args(["--run-dir", "runs/a"], {"GRADIO_SERVER_PORT": "7999"})
    >>> settings.run_dir, host, port
    ('runs/a', '127.0.0.1', 7999)

    ```
    """
    environ = dict(os.environ) if environ is None else environ
    parser = argparse.ArgumentParser(
        description="The slmsql-hub comparison Space: SFT and GRPO side by side."
    )
    parser.add_argument("--run-dir", help=f"run folder (default: SLMSQL_RUN_DIR, else {DEFAULT_RUN_DIR})")
    parser.add_argument(
        "--base-model", help="base model folder or Hub id (default: SLMSQL_BASE_MODEL, else RUN_DIR/base)"
    )
    parser.add_argument(
        "--sft-adapter",
        help="SFT adapter folder or Hub id (default: SLMSQL_SFT_ADAPTER, else RUN_DIR/sft/stage2)",
    )
    parser.add_argument(
        "--grpo-adapter",
        help="GRPO adapter folder or Hub id (default: SLMSQL_GRPO_ADAPTER, else RUN_DIR/grpo)",
    )
    parser.add_argument(
        "--world-dir", help="embedded world folder (default: SLMSQL_WORLD_DIR, else RUN_DIR/world)"
    )
    parser.add_argument(
        "--spider-dir", help="a Spider-layout folder whose databases are offered too (SLMSQL_SPIDER_DIR)"
    )
    parser.add_argument(
        "--max-new-tokens", type=int, help="most tokens per answer (default: the evaluation's)"
    )
    parser.add_argument(
        "--host", default=environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), help="address to serve on"
    )
    parser.add_argument("--port", type=int, help="port (default: GRADIO_SERVER_PORT, else 7860)")
    args = parser.parse_args(argv)
    values = {**config_settings(), **env_settings(environ)}  # space_config.json (a pushed Space) < SLMSQL_*
    values.update((k, v) for k, v in vars(args).items() if v is not None and k not in ("host", "port"))
    port = args.port
    if port is None:
        raw = environ.get("GRADIO_SERVER_PORT", "7860")
        try:
            port = int(raw)
        except ValueError:
            raise UsageError(f"GRADIO_SERVER_PORT={raw!r} is not a port number") from None
    return SpaceSettings(**values), args.host, port


def launch(demo: gr.Blocks, settings: SpaceSettings, host: str, port: int, **kwargs: Any) -> Any:
    """Queue (bounded) and launch the page; extra keywords go to ``launch``."""
    demo.queue(max_size=settings.queue_size, default_concurrency_limit=settings.concurrency)
    return demo.launch(
        server_name=host, server_port=port, ssr_mode=False, footer_links=["api"], css=SPACE_CSS, **kwargs
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Load the run, the model and both adapters, and serve the page until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings, host, port = parse_args(argv)
    except UsageError as err:
        logger.error("%s", err)
        return 2
    space = ComparisonSpace(settings)
    try:
        space.preload()
        demo = build_demo(space)
        launch(demo, settings, host, port)
    finally:
        space.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
