"""The ``slmsql/ex`` Space: try the metric on a toy database in the browser.

Run locally with ``python -m slmsql_hub.metric.app``; on the Space, ``app.py`` sits next to ``ex.py``.
Only the bundled toy database is offered: database files are trusted input to the sandbox, so the Space does
not accept uploads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_EXAMPLES = [
    [
        "```sql\nSELECT name FROM singer WHERE age > 40\n```",
        "SELECT name FROM singer WHERE age >= 41",
        "bird",
    ],
    ["SELECT age, name FROM singer", "SELECT name, age FROM singer", "bird"],
    ["SELECT age, name FROM singer", "SELECT name, age FROM singer", "spider"],
    ["SELECT name FROM singr", "SELECT name FROM singer", "bird"],
]
_SCHEMA = """\
**Toy database** (`concert_demo.sqlite`):

- `singer(singer_id, name, country, age)`: 4 singers
- `concert(concert_id, concert_name, year, singer_id)`: 4 concerts
"""


def score(
    metric, db_path: str | os.PathLike, prediction: str, gold: str, mode: str, keep_distinct: bool
) -> str:
    """Judge one prediction (model output or SQL) against ``gold`` on ``db_path`` with ``metric`` (the loaded
    ``slmsql/ex``); returns the metric's output with ``return_details=True`` as JSON text, or ``{"error": ...}``
    for an unusable input.

    Example:

    ```python
    >>> import evaluate
    >>> from slmsql_hub.metric import METRIC_SCRIPT, make_demo_database
    >>> text = score(evaluate.load(str(METRIC_SCRIPT)), make_demo_database(), "SELECT 1", "SELECT 1", "bird", False)
    >>> json.loads(text)["details"][0]["verdict"]
    'correct'

    ```
    """
    from slmsql_hub.errors import UsageError

    if not gold.strip():
        return json.dumps({"error": "enter a gold SQL query"})
    try:
        result = metric.compute(
            predictions=[prediction],
            references=[gold],
            db_path=[str(db_path)],
            mode=mode,
            keep_distinct=bool(keep_distinct) and mode == "spider",
            timeout_s=10,
            return_details=True,
            workers=1,
        )
    except UsageError as err:
        return json.dumps({"error": str(err)})
    return json.dumps(result, indent=2)


def build_demo(metric=None, db_path: str | os.PathLike | None = None):
    """The Space's ``gradio.Blocks`` (not launched), judging with ``metric`` (default: the ``ex.py`` beside this
    file) on ``db_path`` (default: a fresh toy database)."""
    import evaluate
    import gradio as gr

    from slmsql_hub.metric import make_demo_database

    if metric is None:
        metric = evaluate.load(str(Path(__file__).resolve().with_name("ex.py")))
    db_path = db_path if db_path is not None else make_demo_database()
    readme = Path(__file__).resolve().with_name("README.md")
    card = readme.read_text(encoding="utf-8").split("---", 2)[-1] if readme.is_file() else ""

    def run(prediction, gold, mode, keep_distinct):
        return score(metric, db_path, prediction, gold, mode, keep_distinct)

    with gr.Blocks(title="slmsql/ex") as demo:
        gr.Markdown("# slmsql/ex: execution accuracy for Text-to-SQL\n\n" + _SCHEMA)
        with gr.Row():
            prediction = gr.Textbox(label="Prediction (model output or SQL)", lines=5)
            gold = gr.Textbox(label="Gold SQL", lines=5)
        with gr.Row():
            mode = gr.Radio(["bird", "spider"], value="bird", label="Comparison rule")
            keep_distinct = gr.Checkbox(label="keep DISTINCT (spider rule)")
        button = gr.Button("Judge", variant="primary")
        output = gr.Code(label="Result", language="json")
        button.click(run, inputs=[prediction, gold, mode, keep_distinct], outputs=output)
        gr.Examples(_EXAMPLES, inputs=[prediction, gold, mode])
        gr.Markdown(card)
    return demo


if __name__ == "__main__":
    build_demo().launch()
