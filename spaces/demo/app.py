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
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
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
    disagreement_html,
    disagreements,
    env_settings,
    eval_table,
    untrained_note,
)
from space_config import config_settings  # noqa: E402
from space_sql import differences_html, format_sql  # noqa: E402
from space_views import SPACE_CSS  # noqa: E402

from slmsql_hub.ablate.report import FOREST_PLOT, REPORT_JSON, REPORT_MD  # noqa: E402
from slmsql_hub.card.ablations import TRANSFER_DIR, find_transfer, transfer_context  # noqa: E402
from slmsql_hub.errors import UsageError  # noqa: E402

logger = logging.getLogger("slmsql_space")

TITLE = "slmsql-hub · SFT vs GRPO on Text-to-SQL"

COMPARE_API_DESCRIPTION = (
    "Ask the SFT adapter and the GRPO adapter the same question about one database. Inputs: `database` (a key "
    "such as `world/library`; the page's database dropdown lists them) and `question` (at most the configured "
    "number of characters). When the question is one of the database's example questions, its gold SQL runs "
    "too and each answer is judged against it. Returns, in order: SFT SQL, SFT status (Markdown), SFT result "
    "(table, row-capped), GRPO SQL, GRPO status, GRPO result, gold SQL, gold status, gold result, and a JSON "
    "object with every detail (status keys, latency, token counts, raw outputs, row counts, errors, and "
    "`held_out`: the line saying that no adapter trained on the database, else null)."
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


def _has_rows(result: Any) -> bool:
    return result is not None and result.ok and len(result.rows) > 0


def _problems_markdown(problems: Sequence[str]) -> str:
    if not problems:
        return ""
    return "### Not everything could be loaded\n\n" + "\n".join(f"- {message}" for message in problems)


def _markdown_table(rows: Sequence[dict[str, str]]) -> str:
    """The rows as a Markdown table turned on its side: one column per row (headed by its first value), one line
    per other field, so that it fits a phone as well as a desktop.

    Example:

    ```python
    >>> print(_markdown_table([{"Benchmark": "dev", "SFT EX": "61.2"}, {"Benchmark": "test", "SFT EX": "58.0"}]))
    | Benchmark | dev | test |
    |---|---|---|
    | SFT EX | 61.2 | 58.0 |

    ```
    """
    if not rows:
        return ""
    first, *fields = list(rows[0])

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    lines = [
        line([first, *(row[first] for row in rows)]),
        "|" + "|".join("---" for _ in range(len(rows) + 1)) + "|",
    ]
    lines += [line([name, *(row[name] for row in rows)]) for name in fields]
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


def _gold_status(comparison: Any, display_rows: int) -> str:
    if comparison.gold_sql is None:
        return "No gold for a typed question: each answer was only run. Pick an example to judge it."
    if comparison.gold is not None and not comparison.gold.ok:
        return f"? **the gold query failed**, so neither answer can be judged. {_rows_line(comparison.gold, display_rows)}"
    return f"**gold** ({comparison.database.mode} rule) · {_rows_line(comparison.gold, display_rows)}"


def _details(space: ComparisonSpace, comparison: Any) -> dict[str, Any]:
    """Every detail of a comparison, with ``held_out``: the line saying no adapter trained on its database."""
    return {**comparison.to_dict(), "held_out": untrained_note(space.data.trained, comparison.database.db_id)}


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
        outputs += [
            comparison.gold_sql or "",
            _gold_status(comparison, display_rows),
            result_frame(comparison.gold, display_rows),
            _details(space, comparison),
        ]
        return tuple(outputs)

    compare.__doc__ = COMPARE_API_DESCRIPTION
    return compare


def _compare_view(space: ComparisonSpace) -> Callable:
    """The page's side of a comparison: formatted SQL, the status with the error when a query failed, a result
    table only when there are rows, the differences, the details."""
    display_rows = space.settings.display_rows

    def shown(sql: str, result: Any) -> list[Any]:
        table = result_frame(result, display_rows) if _has_rows(result) else None
        return [gr.update(value=sql, visible=bool(sql)), gr.update(value=table, visible=table is not None)]

    def view(database: str, question: str):
        comparison = space.compare(database, question)
        outputs: list[Any] = []
        for name in ("sft", "grpo"):
            answer = comparison.answers[name]
            code, table = shown(
                format_sql(answer.sql) if answer.sql is not None else _sql_shown(answer), answer.result
            )
            outputs += [code, answer_status(answer, display_rows), table]
        code, table = shown(format_sql(comparison.gold_sql), comparison.gold)
        outputs += [code, _gold_status(comparison, display_rows), table]
        sqls = {name: answer.sql for name, answer in comparison.answers.items()}
        outputs.append(differences_html(sqls["sft"], sqls["grpo"], comparison.gold_sql))
        outputs.append(_details(space, comparison))
        return tuple(outputs)

    return view


class _CompareControls(NamedTuple):
    """The Compare tab's components that its events connect: ``outputs`` the page's, ``api_outputs`` the hidden
    ones the ``/compare`` endpoint returns into (plain values, as API clients expect)."""

    database: Any
    note: Any
    example: Any
    schema: Any
    question: Any
    button: Any
    outputs: list[Any]
    api_trigger: Any
    api_outputs: list[Any]


def _database_note(space: ComparisonSpace, key: str | None) -> str:
    database = space.data.databases.get(key or "")
    return (untrained_note(space.data.trained, database.db_id) if database else None) or ""


def _compare_tab(space: ComparisonSpace) -> _CompareControls:
    """The Compare tab: database, example and question pickers, one column per policy and the gold, what differs."""
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
            min_width=220,
        )
        example = gr.Dropdown(
            choices=_example_choices(space, default_key),
            value=None,
            label="Example question (with its gold SQL)",
            elem_id="example",
            scale=3,
            min_width=300,
        )
    note = gr.Markdown(_database_note(space, default_key), elem_id="database-note")
    with gr.Accordion("Schema", open=False):
        schema = gr.Code(
            value=default_schema, language="sql", label="Schema", interactive=False, wrap_lines=True
        )
    with gr.Row():
        question = gr.Textbox(
            label=f"Question (at most {settings.max_question_chars} characters)",
            placeholder="Pick an example above, or type a question about the database",
            max_length=settings.max_question_chars,
            elem_id="question",
            scale=4,
            min_width=300,
        )
        button = gr.Button("Compare", variant="primary", elem_id="compare-button", scale=1)
    outputs: list[Any] = []
    with gr.Row(equal_height=False):
        for name, title in (("sft", POLICY_LABELS["sft"]), ("grpo", POLICY_LABELS["grpo"]), ("gold", "Gold")):
            with gr.Column(elem_id=f"column-{name}", min_width=300):
                gr.Markdown(f"### {title}")
                outputs += [
                    gr.Code(
                        language="sql",
                        label=f"{title} SQL (formatted)",
                        interactive=False,
                        wrap_lines=True,
                        visible=False,
                        elem_id=f"{name}-sql",
                    ),
                    gr.Markdown(elem_id=f"{name}-status"),
                    gr.Dataframe(
                        label=f"{title} result (first {display_rows} rows)",
                        interactive=False,
                        wrap=True,
                        max_height=360,
                        visible=False,
                        elem_id=f"{name}-result",
                    ),
                ]
    outputs.append(gr.HTML(elem_id="diff"))
    with gr.Accordion("Details (JSON)", open=False):
        outputs.append(gr.JSON(label="Details", elem_id="details"))
    with gr.Column(visible=False):  # what /compare returns: plain values (see COMPARE_API_DESCRIPTION)
        api_outputs: list[Any] = []
        for title in ("SFT", "GRPO", "Gold"):
            api_outputs += [
                gr.Code(language="sql", label=f"{title} SQL"),
                gr.Markdown(label=f"{title} status"),
                gr.Dataframe(label=f"{title} result"),
            ]
        api_outputs.append(gr.JSON(label="Details"))
        api_trigger = gr.Button("compare (API)")
    gr.Markdown(
        f"Greedy decoding, at most {data.max_new_tokens} new tokens, the prompt each adapter was trained "
        f"with. Queries run read-only with a {settings.timeout_s:g} s deadline and at most "
        f"{settings.max_rows} rows."
    )
    return _CompareControls(
        database, note, example, schema, question, button, outputs, api_trigger, api_outputs
    )


def _wire_compare(space: ComparisonSpace, controls: _CompareControls) -> None:
    """The Compare tab's events: the page's comparison on the button (and Enter), the ``/compare`` endpoint
    (same work, plain values), the schema, examples and held-out line on a pick."""
    limits = {"concurrency_limit": space.settings.concurrency, "concurrency_id": "compare"}
    inputs = [controls.database, controls.question]
    view = _ui_errors(_compare_view(space))
    for trigger in (controls.button.click, controls.question.submit):
        trigger(view, inputs=inputs, outputs=controls.outputs, api_visibility="private", **limits)
    controls.api_trigger.click(  # never clicked in the page: API clients call it by name
        _ui_errors(_compare_handler(space)),
        inputs=inputs,
        outputs=controls.api_outputs,
        api_name="compare",
        api_description=COMPARE_API_DESCRIPTION,
        **limits,
    )

    def pick_database(key: str | None):
        schema = space.schema(key) if key else ""
        return (
            schema,
            gr.update(choices=_example_choices(space, key), value=None),
            "",
            _database_note(space, key),
        )

    def pick_example(question: str | None):
        return question or ""

    controls.database.change(
        _ui_errors(pick_database),
        inputs=[controls.database],
        outputs=[controls.schema, controls.example, controls.question, controls.note],
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
            _ui_errors(show_disagreements),
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
