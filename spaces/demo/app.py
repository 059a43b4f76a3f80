"""The comparison Space: the SFT and the GRPO adapter side by side, one question at a time.

Run it on a local run folder (``make quickstart`` writes ``outputs/quickstart``)::

    python spaces/demo/app.py --run-dir outputs/quickstart          # or SLMSQL_RUN_DIR=...

or on Hub models, as the real Space does (see README.md for every variable)::

    SLMSQL_BASE_MODEL=Qwen/Qwen2.5-Coder-1.5B-Instruct SLMSQL_SFT_ADAPTER=org/sft SLMSQL_GRPO_ADAPTER=org/grpo \\
        python spaces/demo/app.py

The port is ``--port``, else ``GRADIO_SERVER_PORT``, else 7860. Tabs: Compare (both adapters answer one question,
each answer runs in the sandbox and is judged against the gold; the ``/compare`` endpoint), Telemetry, Evaluation,
Ablations and About (``about.md``). Importing this module starts nothing: :func:`build_demo` builds the page,
:func:`main` loads everything and launches.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gradio as gr

# The Hub runs `python app.py` (this folder is on sys.path); loaders that exec this file by path
# (importlib.util.spec_from_file_location) need the folder too, for the backend beside it.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from space_backend import (  # noqa: E402 - after the path fix above
    DEFAULT_RUN_DIR,
    DISAGREEMENT_FILTERS,
    POLICY_LABELS,
    Answer,
    ComparisonSpace,
    SpaceSettings,
    card_summary,
    disagreements,
    env_settings,
    eval_table,
)
from space_config import config_settings  # noqa: E402

from slmsql_hub.ablate.report import FOREST_PLOT, REPORT_MD  # noqa: E402
from slmsql_hub.errors import UsageError  # noqa: E402

logger = logging.getLogger("slmsql_space")

TITLE = "slmsql-hub · SFT vs GRPO on Text-to-SQL"

COMPARE_API_DESCRIPTION = (
    "Ask the SFT adapter and the GRPO adapter the same question about one database. Inputs: `database` (a key "
    "such as `world/library`; the page's database dropdown lists them) and `question` (at most the configured "
    "number of characters). When the question is one of the database's example questions, its gold SQL runs "
    "too and each answer is judged against it. Returns, in order: SFT SQL, SFT status (Markdown), SFT result "
    "(table, row-capped), GRPO SQL, GRPO status, GRPO result, gold SQL, gold status, gold result, and a JSON "
    "object with every detail (status keys, latency, token counts, raw outputs, row counts, errors)."
)

# Plain symbols that every font has (a headless browser has no emoji font).
_STATUS_MARK = {
    "matches_gold": "✓",
    "wrong": "✗",
    "error": "✗",
    "timeout": "✗",
    "too_large": "✗",
    "refused": "✗",
    "no_sql": "✗",
    "ran": "▶",
    "unscorable": "?",
}


# ----------------------------------------------------------------------------------------------------------
# Display helpers
# ----------------------------------------------------------------------------------------------------------


def _cell(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "<blob>"
    return value


def result_frame(result: Any, display_rows: int) -> Any:
    """The first ``display_rows`` rows of an execution result as a ``DataFrame`` (empty when it failed); a repeated
    column name gets a suffix.

    Example:

    ```python
    >>> from slmsql_hub.sql import ExecResult, ExecStatus
    >>> frame = result_frame(ExecResult(ExecStatus.OK, ((1, "a"), (2, "b")), ("n", "n")), display_rows=1)
    >>> list(frame.columns), frame.values.tolist()
    (['n', 'n (2)'], [[1, 'a']])

    ```
    """
    import pandas as pd

    if result is None or not result.ok:
        return pd.DataFrame()
    seen: dict[str, int] = {}
    columns = []
    for name in result.columns:
        seen[name] = seen.get(name, 0) + 1
        columns.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    rows = [[_cell(v) for v in row] for row in result.rows[:display_rows]]
    return pd.DataFrame(rows, columns=columns)


def _rows_line(result: Any, display_rows: int) -> str:
    if result is None:
        return ""
    if not result.ok:
        return f"`{result.status.value}`: {result.error or 'no detail'}"
    total = len(result.rows)
    shown = f" (showing the first {display_rows})" if total > display_rows else ""
    return f"{total} row{'s' if total != 1 else ''}{shown} · query ran in {1000 * result.elapsed_s:.0f} ms"


def answer_status(answer: Answer, display_rows: int) -> str:
    """The Markdown status line of one column: verdict, latency, token count, then rows or the error."""
    cut = " (cut at the token limit)" if not answer.finished else ""
    head = (
        f"{_STATUS_MARK.get(answer.status, '')} **{answer.status_text}** · generated in {answer.latency_s:.2f} s · "
        f"{answer.num_tokens} tokens{cut}"
    )
    detail = _rows_line(answer.result, display_rows)
    return head + (f"\n\n{detail}" if detail else "")


def _sql_shown(answer: Answer) -> str:
    if answer.sql is not None:
        return answer.sql
    raw = "\n".join(f"-- {line}" for line in (answer.output or "(empty answer)").splitlines()[:20])
    return f"-- no SQL found in the answer; it was:\n{raw}"


def _problems_markdown(problems: Sequence[str]) -> str:
    if not problems:
        return ""
    return "### Not everything could be loaded\n\n" + "\n".join(f"- {message}" for message in problems)


def _markdown_table(rows: Sequence[dict[str, str]]) -> str:
    if not rows:
        return ""
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(row[h]).replace("|", "\\|") for h in header) + " |" for row in rows]
    return "\n".join(lines)


def _ui_errors(fn: Callable) -> Callable:
    """A failure as one line in the page (and to API clients): a :class:`UsageError` as it is, anything else
    named, with its traceback in the server's log."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        try:
            return fn(*args)
        except UsageError as err:
            raise gr.Error(str(err), print_exception=False) from None
        except Exception as err:  # noqa: BLE001 - logged with its traceback, then reported in the page
            logger.exception("%s failed", fn.__name__)
            raise gr.Error(
                f"{type(err).__name__}: {err} (details are in the Space's log)", print_exception=False
            ) from None

    return wrapper


# ----------------------------------------------------------------------------------------------------------
# The page
# ----------------------------------------------------------------------------------------------------------


def _example_choices(space: ComparisonSpace, key: str | None) -> list[tuple[str, str]]:
    if not key:
        return []
    return [
        (f"[{e.difficulty}] {e.question}" if e.difficulty else e.question, e.question)
        for e in space.examples(key)
    ]


def _compare_handler(space: ComparisonSpace) -> Callable:
    """The ``/compare`` function: both answers, then the gold, then every detail (see the API description)."""
    display_rows = space.settings.display_rows

    def compare(database: str, question: str):
        comparison = space.compare(database, question)
        outputs: list[Any] = []
        for name in ("sft", "grpo"):
            answer = comparison.answers[name]
            outputs += [
                _sql_shown(answer),
                answer_status(answer, display_rows),
                result_frame(answer.result, display_rows),
            ]
        if comparison.gold_sql is None:
            gold_status = (
                "No gold for a typed question: each answer was only run. Pick an example to judge it."
            )
        elif comparison.gold is not None and not comparison.gold.ok:
            gold_status = f"? **the gold query failed**, so neither answer can be judged. {_rows_line(comparison.gold, display_rows)}"
        else:
            gold_status = (
                f"**gold** ({comparison.database.mode} rule) · {_rows_line(comparison.gold, display_rows)}"
            )
        outputs += [
            comparison.gold_sql or "",
            gold_status,
            result_frame(comparison.gold, display_rows),
            comparison.to_dict(),
        ]
        return tuple(outputs)

    compare.__doc__ = COMPARE_API_DESCRIPTION
    return compare


class _CompareControls(NamedTuple):
    """The Compare tab's components that its events connect."""

    database: Any
    example: Any
    schema: Any
    question: Any
    button: Any
    outputs: list[Any]


def _compare_tab(space: ComparisonSpace) -> _CompareControls:
    """The Compare tab: database, example and question pickers, and one column per policy and the gold."""
    settings, data = space.settings, space.data
    display_rows = settings.display_rows
    keys = list(data.databases)
    default_key = keys[0] if keys else None
    default_schema = ""
    if default_key is not None:
        try:
            default_schema = space.schema(default_key)
        except UsageError as err:
            default_schema = f"-- {err}"
    with gr.Row():
        database = gr.Dropdown(
            choices=[(data.databases[k].label, k) for k in keys],
            value=default_key,
            label="Database",
            elem_id="database",
            scale=1,
        )
        example = gr.Dropdown(
            choices=_example_choices(space, default_key),
            value=None,
            label="Example question (with its gold SQL)",
            elem_id="example",
            scale=3,
        )
    with gr.Accordion("Schema", open=False):
        schema = gr.Code(value=default_schema, language="sql", label="Schema", interactive=False)
    with gr.Row():
        question = gr.Textbox(
            label=f"Question (at most {settings.max_question_chars} characters)",
            placeholder="Pick an example above, or type a question about the database",
            max_length=settings.max_question_chars,
            elem_id="question",
            scale=4,
        )
        button = gr.Button("Compare", variant="primary", elem_id="compare-button", scale=1)
    outputs: list[Any] = []
    with gr.Row(equal_height=False):
        for name, title in (("sft", POLICY_LABELS["sft"]), ("grpo", POLICY_LABELS["grpo"]), ("gold", "Gold")):
            with gr.Column(elem_id=f"column-{name}"):
                gr.Markdown(f"### {title}")
                outputs += [
                    gr.Code(language="sql", label=f"{title} SQL", interactive=False, elem_id=f"{name}-sql"),
                    gr.Markdown(label=f"{title} status", elem_id=f"{name}-status"),
                    gr.Dataframe(
                        label=f"{title} result (first {display_rows} rows)",
                        interactive=False,
                        max_height=360,
                        elem_id=f"{name}-result",
                    ),
                ]
    with gr.Accordion("Details (JSON)", open=False):
        outputs.append(gr.JSON(label="Details", elem_id="details"))
    gr.Markdown(
        f"Greedy decoding, at most {data.max_new_tokens} new tokens, the prompt each adapter was trained "
        f"with. Queries run read-only with a {settings.timeout_s:g} s deadline and at most "
        f"{settings.max_rows} rows."
    )
    return _CompareControls(database, example, schema, question, button, outputs)


def _wire_compare(space: ComparisonSpace, controls: _CompareControls) -> None:
    """The Compare tab's events: ``/compare`` on the button (and Enter), the schema and examples on a pick."""
    handler = _ui_errors(_compare_handler(space))
    limits = {"concurrency_limit": space.settings.concurrency, "concurrency_id": "compare"}
    inputs = [controls.database, controls.question]
    controls.button.click(
        handler,
        inputs=inputs,
        outputs=controls.outputs,
        api_name="compare",
        api_description=COMPARE_API_DESCRIPTION,
        **limits,
    )
    controls.question.submit(
        handler, inputs=inputs, outputs=controls.outputs, api_visibility="private", **limits
    )

    def pick_database(key: str | None):
        schema = space.schema(key) if key else ""
        return schema, gr.update(choices=_example_choices(space, key), value=None), ""

    def pick_example(question: str | None):
        return question or ""

    controls.database.change(
        _ui_errors(pick_database),
        inputs=[controls.database],
        outputs=[controls.schema, controls.example, controls.question],
        api_visibility="private",
    )
    controls.example.input(
        pick_example, inputs=[controls.example], outputs=[controls.question], api_visibility="private"
    )


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
    gr.Markdown(_markdown_table(space.telemetry_table()))
    for start in range(0, len(plots), 2):
        with gr.Row():
            for path, title in plots[start : start + 2]:
                gr.Image(value=path, label=title, interactive=False, show_label=True)


_DISAGREEMENT_COLUMNS = {
    "question_id": "id",
    "db_id": "database",
    "difficulty": "difficulty",
    "question": "question",
    "gold_sql": "gold SQL",
    "sft_sql": "SFT SQL",
    "sft_verdict": "SFT verdict",
    "grpo_sql": "GRPO SQL",
    "grpo_verdict": "GRPO verdict",
}


def _disagreements_handler(space: ComparisonSpace) -> Callable:
    """The browser's function: the questions of one benchmark where the policies disagree, and their count."""
    data = space.data

    def show_disagreements(benchmark: str | None, which: str):
        import pandas as pd

        shown = list(_DISAGREEMENT_COLUMNS.values())
        if not benchmark:
            return pd.DataFrame(columns=shown), "No evaluation to browse."
        records = disagreements(data.eval_results, data.eval_dir, benchmark, which)
        frame = pd.DataFrame(
            [{name: r.get(key) for key, name in _DISAGREEMENT_COLUMNS.items()} for r in records],
            columns=shown,
        )
        bench = (data.eval_results or {}).get("benchmarks", {}).get(benchmark, {})
        return frame, f"**{len(records)}** of {bench.get('n', '?')} questions: {DISAGREEMENT_FILTERS[which]}."

    return show_disagreements


def _evaluation_tab(space: ComparisonSpace) -> None:
    """The Evaluation tab: EX per benchmark with the paired statistics, then the disagreement browser."""
    data = space.data
    rows = eval_table(data.eval_results)
    benchmarks = [row["Benchmark"] for row in rows]
    if not rows:
        gr.Markdown("No evaluation found (`eval/eval_results.json`, written by `slmsql eval`).")
        return
    gr.Markdown(
        "Execution accuracy (EX, %) of both adapters on the same questions. ΔEX is GRPO − SFT; the "
        "95% CI is a paired bootstrap; p is McNemar's exact test on the questions only one policy "
        "solves.\n\n" + _markdown_table(rows)
    )
    summaries = [
        f"- **{key}**: {bench['comparison']['summary']}"
        for key, bench in (data.eval_results or {}).get("benchmarks", {}).items()
        if (bench.get("comparison") or {}).get("summary")
    ]
    gr.Markdown("\n".join(summaries))
    gr.Markdown("### Where SFT and GRPO disagree")
    with gr.Row():
        benchmark = gr.Dropdown(choices=benchmarks, value=benchmarks[0], label="Benchmark", scale=1)
        which = gr.Radio(
            choices=[(text, key) for key, text in DISAGREEMENT_FILTERS.items()],
            value="all",
            label="Show",
            scale=2,
        )
    show_disagreements = _disagreements_handler(space)
    try:
        first_frame, first_count = show_disagreements(benchmarks[0], "all")
    except UsageError as err:
        first_frame, first_count = None, f"**{err}**"
    count = gr.Markdown(first_count)
    browser = gr.Dataframe(
        value=first_frame, interactive=False, wrap=True, max_height=600, elem_id="disagreements"
    )
    for control in (benchmark, which):
        control.change(
            _ui_errors(show_disagreements),
            inputs=[benchmark, which],
            outputs=[browser, count],
            api_visibility="private",
        )


def _ablations_tab(space: ComparisonSpace) -> None:
    """The Ablations tab: the study's finding and pooled table (``report.md`` without its images), its forest plot."""
    folder = space.data.ablations
    if folder is None:
        gr.Markdown("No ablation study for this run (`slmsql ablate`; `slmsql card` ships its report in `ablations/`).")
        return
    text = (folder / REPORT_MD).read_text(encoding="utf-8").split("## Per seed")[0]
    gr.Markdown("\n".join(line for line in text.splitlines() if not line.startswith("![")))
    forest = folder / FOREST_PLOT
    if forest.is_file():
        gr.Image(value=str(forest), label="ΔEX per variant and slice (95% CI)", interactive=False, show_label=True)


def _about_tab(space: ComparisonSpace) -> None:
    """The About tab (``about.md``): the model card's summary, how the Space works, what it loaded, and the API."""
    import jinja2

    data = space.data
    loader = jinja2.FileSystemLoader(_HERE)
    template = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined).get_template("about.md")
    sources = "\n".join(f"- {what}: `{where}`" for what, where in data.sources.items()) or "- nothing loaded"
    gr.Markdown(template.render(summary=card_summary(data.card_text), sources=sources, api=COMPARE_API_DESCRIPTION))


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
        gr.Markdown(_problems_markdown(problems), elem_id="problems", visible=bool(problems))
        with gr.Tabs():
            with gr.Tab("Compare", id="compare"):
                compare = _compare_tab(space)
            with gr.Tab("Telemetry", id="telemetry"):
                _telemetry_tab(space)
            with gr.Tab("Evaluation", id="evaluation"):
                _evaluation_tab(space)
            with gr.Tab("Ablations", id="ablations"):
                _ablations_tab(space)
            with gr.Tab("About", id="about"):
                _about_tab(space)
        _wire_compare(space, compare)
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
    return demo.launch(server_name=host, server_port=port, ssr_mode=False, footer_links=["api"], **kwargs)


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
