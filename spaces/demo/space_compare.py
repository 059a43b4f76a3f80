"""The Compare tab: the SFT and the GRPO adapter answer one question about one database, each answer runs in the
sandbox and is judged against the gold when the question is an example. :func:`compare_tab` draws it,
:func:`wire_compare` connects the page's view and the ``/compare`` endpoint (:data:`COMPARE_API_DESCRIPTION`);
:func:`ui_errors` is how every tab's event reports a failure. :mod:`app` builds the page around it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import gradio as gr
from space_backend import POLICY_LABELS, Answer, ComparisonSpace, untrained_note
from space_sql import differences_html, format_sql

from slmsql_hub.errors import UsageError

logger = logging.getLogger("slmsql_space")  # the page's log, as app.py's

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


def _cell(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "<blob>"
    return value


def result_frame(result: Any, display_rows: int) -> Any:
    """The first ``display_rows`` rows of an execution result as a ``DataFrame`` (empty when it failed); a repeated
    column name gets a suffix.

    Example:

    ```python
    >>> from space_compare import result_frame
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


def ui_errors(fn: Callable) -> Callable:
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


class CompareControls(NamedTuple):
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


def _default_schema(space: ComparisonSpace, key: str | None) -> str:
    if key is None:
        return ""
    try:
        return space.schema(key)
    except UsageError as err:
        return f"-- {err}"


def _answer_columns(display_rows: int) -> list[Any]:
    """One column per policy and the gold (formatted SQL, status, result table), then the difference and details."""
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
    return outputs


def _api_outputs() -> tuple[list[Any], Any]:
    """The hidden components ``/compare`` returns (plain values, see COMPARE_API_DESCRIPTION) and its trigger."""
    with gr.Column(visible=False):
        api_outputs: list[Any] = []
        for title in ("SFT", "GRPO", "Gold"):
            api_outputs += [
                gr.Code(language="sql", label=f"{title} SQL"),
                gr.Markdown(label=f"{title} status"),
                gr.Dataframe(label=f"{title} result"),
            ]
        api_outputs.append(gr.JSON(label="Details"))
        return api_outputs, gr.Button("compare (API)")


def compare_tab(space: ComparisonSpace) -> CompareControls:
    """The Compare tab: database, example and question pickers, one column per policy and the gold, what differs."""
    settings, data = space.settings, space.data
    keys = list(data.databases)
    default_key = keys[0] if keys else None
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
            value=_default_schema(space, default_key),
            language="sql",
            label="Schema",
            interactive=False,
            wrap_lines=True,
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
    outputs = _answer_columns(settings.display_rows)
    api_outputs, api_trigger = _api_outputs()
    gr.Markdown(
        f"Greedy decoding, at most {data.max_new_tokens} new tokens, the prompt each adapter was trained "
        f"with. Queries run read-only with a {settings.timeout_s:g} s deadline and at most "
        f"{settings.max_rows} rows."
    )
    return CompareControls(
        database, note, example, schema, question, button, outputs, api_trigger, api_outputs
    )


def question_validator(space: ComparisonSpace) -> Callable:
    """The Compare events' ``validator``: Gradio runs it when a request arrives, before queueing it, so an empty
    or over-long question is refused at once (:meth:`ComparisonSpace.check_question`), not after the queue."""

    def validate(database: str | None, question: str | None) -> tuple[Any, Any]:
        try:
            space.check_question(question)
        except UsageError as err:
            return gr.validate(True, ""), gr.validate(False, str(err))
        return gr.validate(True, ""), gr.validate(True, "")

    return validate


def wire_compare(space: ComparisonSpace, controls: CompareControls) -> None:
    """The Compare tab's events: the page's comparison on the button (and Enter), the ``/compare`` endpoint
    (same work, plain values), the schema, examples and held-out line on a pick."""
    limits = {
        "concurrency_limit": space.settings.concurrency,
        "concurrency_id": "compare",
        "validator": question_validator(space),  # runs before the request is queued
    }
    inputs = [controls.database, controls.question]
    view = ui_errors(_compare_view(space))
    for trigger in (controls.button.click, controls.question.submit):
        trigger(view, inputs=inputs, outputs=controls.outputs, api_visibility="private", **limits)
    controls.api_trigger.click(  # never clicked in the page: API clients call it by name
        ui_errors(_compare_handler(space)),
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
        ui_errors(pick_database),
        inputs=[controls.database],
        outputs=[controls.schema, controls.example, controls.question, controls.note],
        api_visibility="private",
    )
    controls.example.input(
        pick_example, inputs=[controls.example], outputs=[controls.question], api_visibility="private"
    )
