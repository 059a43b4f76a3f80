"""The Telemetry, Evaluation and About tabs' content, computed from what :mod:`space_data` found: Markdown tables
(:func:`markdown_table`), the per-benchmark table, the questions where SFT and GRPO disagree (as cards, each
answer's SQL marked against the gold), the line that says no adapter trained on a database, the model card's
summary, what could not be loaded (:func:`problems_markdown`), and the page's style (:data:`SPACE_CSS`)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slmsql_hub.errors import UsageError
from slmsql_hub.run.files import read_jsonl

# SQL wraps (a long WHERE stays on screen, at any width); the diff marks what one query has and the other not.
SPACE_CSS = """
pre.sql { white-space: pre-wrap; overflow-wrap: anywhere; overflow-x: hidden; max-width: 100%; margin: 0;
  padding: 8px 10px; border-radius: 6px; font-family: var(--font-mono); font-size: 13px; line-height: 1.45;
  background: var(--code-background-fill); border: 1px solid var(--border-color-primary); }
.sql del, .legend del { background: #ffd7d5; color: #82071e; text-decoration: line-through; }
.sql ins, .legend ins { background: #ccffd8; color: #055d20; text-decoration: underline; }
.pairs, .answers { display: grid; grid-template-columns: repeat(auto-fit, minmax(260px, 1fr)); gap: 10px; }
.pair .label, .answer .label { font-weight: 600; margin: 4px 0; }
.card { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 10px 12px; margin: 0 0 12px; }
.card .head { color: var(--body-text-color-subdued); font-size: 13px; }
.card .question { font-weight: 600; margin: 4px 0 8px; }
.answer .label .error { font-weight: 400; font-size: 13px; color: var(--body-text-color-subdued); }
.held-out { display: inline-block; font-size: 12px; padding: 1px 8px; border-radius: 10px;
  background: #fff4ce; color: #5c4400; margin: 2px 0; }
#database-note p { background: #fff4ce; color: #5c4400; padding: 6px 10px; border-radius: 6px; }
@media (max-width: 640px) {
  .prose table { display: block; overflow-x: auto; max-width: 100%; }
  .prose th, .prose td { white-space: nowrap; word-break: normal; }
  .prose pre, .prose pre code { white-space: pre-wrap; overflow-wrap: anywhere; }
  .prose code { overflow-wrap: anywhere; }
}
"""


def _points(value: Any, signed: bool = True) -> str:
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    text = f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"
    return text.replace("-", "−")


def markdown_table(rows: Sequence[dict[str, str]]) -> str:
    """The rows as a Markdown table turned on its side: one column per row (headed by its first value), one line
    per other field, so that it fits a phone as well as a desktop.

    Example:

    ```python
    >>> from space_views import markdown_table
    >>> print(markdown_table([{"Benchmark": "dev", "SFT EX": "61.2"}, {"Benchmark": "test", "SFT EX": "58.0"}]))
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


def problems_markdown(problems: Sequence[str]) -> str:
    """The page's list of what could not be loaded, under a heading; nothing when all was.

    Example:

    ```python
    >>> from space_views import problems_markdown
    >>> print(problems_markdown(["No evaluation found."]))
    ### Not everything could be loaded
    <BLANKLINE>
    - No evaluation found.
    >>> problems_markdown([])
    ''

    ```
    """
    if not problems:
        return ""
    return "### Not everything could be loaded\n\n" + "\n".join(f"- {message}" for message in problems)


def eval_table(eval_results: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """One row of display strings per benchmark: both EX, ΔEX with its 95% CI, McNemar's p, discordant pairs;
    and, when the evaluation voted (``self_consistency``), both maj@K with the same paired statistics.

    Example:

    ```python
    >>> from space_views import eval_table
    >>> results = {"benchmarks": {"world_dev": {"n": 250, "n_scorable": 250, "mode": "bird",
    ...     "policies": {"sft": {"ex": 0.612}, "grpo": {"ex": 0.62}},
    ...     "comparison": {"delta_ex": 0.008, "ci95": [-0.024, 0.04], "mcnemar_p": 0.81,
    ...                    "discordant": {"a_only": 9, "b_only": 11}, "n": 250, "verdict": "no significant difference"}}}}
    >>> row = eval_table(results)[0]
    >>> row["SFT EX"], row["GRPO EX"], row["ΔEX (points)"], row["95% CI (points)"], row["McNemar p"]
    ('61.2', '62.0', '+0.8', '[−2.4, +4.0]', '0.81')
    >>> results["benchmarks"]["world_dev"]["self_consistency"] = {"k": 8, "comparison": {"ex_a": 0.64,
    ...     "ex_b": 0.7, "delta_ex": 0.06, "ci95": [0.01, 0.11], "mcnemar_p": 0.03, "verdict": "grpo better"}}
    >>> row = eval_table(results)[0]
    >>> row["SFT maj@8"], row["GRPO maj@8"], row["maj@8 ΔEX (points)"], row["maj@8 McNemar p"]
    ('64.0', '70.0', '+6.0', '0.03')

    ```
    """
    rows = []
    for key, bench in ((eval_results or {}).get("benchmarks") or {}).items():
        comparison = bench.get("comparison") or {}
        policies = bench.get("policies") or {}
        row = {
            "Benchmark": key,
            "Mode": str(bench.get("mode", "")),
            "n": str(comparison.get("n", bench.get("n_scorable", bench.get("n", "")))),
            "SFT EX": _points((policies.get("sft") or {}).get("ex"), signed=False),
            "GRPO EX": _points((policies.get("grpo") or {}).get("ex"), signed=False),
            **_comparison_cells(comparison),
        }
        voted = bench.get("self_consistency")
        if voted:  # maj@K beside greedy EX, with the same paired statistics (results of an eval that voted)
            k, voted_comparison = voted.get("k", "K"), voted.get("comparison") or {}
            row[f"SFT maj@{k}"] = _points(voted_comparison.get("ex_a"), signed=False)
            row[f"GRPO maj@{k}"] = _points(voted_comparison.get("ex_b"), signed=False)
            row.update({f"maj@{k} {name}": value for name, value in _comparison_cells(voted_comparison).items()})
        rows.append(row)
    return rows


def _comparison_cells(comparison: Mapping[str, Any]) -> dict[str, str]:
    """A paired comparison's cells: ΔEX, its 95% CI, McNemar's p, the discordant pairs, the verdict."""
    ci = comparison.get("ci95") or [None, None]
    p = comparison.get("mcnemar_p")
    discordant = comparison.get("discordant") or {}
    return {
        "ΔEX (points)": _points(comparison.get("delta_ex")),
        "95% CI (points)": f"[{_points(ci[0])}, {_points(ci[1])}]",
        "McNemar p": "n/a" if not isinstance(p, (int, float)) else f"{p:.2f}",
        "SFT-only / GRPO-only": f"{discordant.get('a_only', 'n/a')} / {discordant.get('b_only', 'n/a')}",
        "Verdict": str(comparison.get("verdict", "")),
    }


DISAGREEMENT_FILTERS: dict[str, str] = {
    "all": "every question where exactly one policy is correct",
    "sft_only": "SFT correct, GRPO not",
    "grpo_only": "GRPO correct, SFT not",
    "sql_differs": "every question where the two wrote different SQL",
}


def disagreements(
    eval_results: Mapping[str, Any] | None, eval_dir: Path | None, benchmark: str, which: str = "all"
) -> list[dict[str, Any]]:
    """The prediction records of one benchmark that exactly one policy answers correctly, filtered by ``which``
    (:data:`DISAGREEMENT_FILTERS`; ``sql_differs``: those where the two wrote different SQL, right or wrong);
    :class:`UsageError` on an unknown benchmark or filter or missing predictions.

    Example:

    ```python
    >>> import json, pathlib, tempfile
    >>> from space_views import disagreements
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> (folder / "predictions").mkdir()
    >>> lines = [{"question_id": "q1", "sft_correct": 1, "grpo_correct": 0},
    ...          {"question_id": "q2", "sft_correct": 1, "grpo_correct": 1},
    ...          {"question_id": "q3", "sft_correct": None, "grpo_correct": 1}]
    >>> _ = (folder / "predictions" / "world_dev.jsonl").write_text("".join(json.dumps(x) + "\\n" for x in lines))
    >>> results = {"benchmarks": {"world_dev": {"predictions_file": "predictions/world_dev.jsonl"}}}
    >>> [r["question_id"] for r in disagreements(results, folder, "world_dev")]
    ['q1']

    ```
    """
    benchmarks = (eval_results or {}).get("benchmarks") or {}
    if benchmark not in benchmarks:
        raise UsageError(f"no benchmark {benchmark!r} in the evaluation; choose one of {sorted(benchmarks)}")
    if which not in DISAGREEMENT_FILTERS:
        raise UsageError(f"unknown filter {which!r}; choose one of {sorted(DISAGREEMENT_FILTERS)}")
    relative = benchmarks[benchmark].get("predictions_file") or f"predictions/{benchmark}.jsonl"
    path = Path(eval_dir or ".") / relative
    if not path.is_file():
        raise UsageError(f"the predictions of {benchmark} are missing ({path}); rerun `slmsql eval`")
    records = []
    for record in read_jsonl(path):
        if which == "sql_differs":
            if record.get("sft_sql") != record.get("grpo_sql"):
                records.append(record)
            continue
        sft, grpo = record.get("sft_correct"), record.get("grpo_correct")
        if sft is None or grpo is None or sft == grpo:
            continue
        if which == "all" or (which == "sft_only") == bool(sft):
            records.append(record)
    return records


def untrained_note(trained: Mapping[str, list[str]] | None, db_id: str) -> str | None:
    """One line saying that no adapter trained on a question about ``db_id`` (``None`` when one did, or when
    the run does not record what they trained on).

    Example:

    ```python
    >>> from space_views import untrained_note
    >>> trained = {"sft": ["clinic", "library"], "grpo": ["clinic", "library"]}
    >>> untrained_note(trained, "library") is None
    True
    >>> print(untrained_note(trained, "farm_coop"))
    **Held out:** no adapter trained on a question about farm_coop (both trained on clinic and library only), ...

    ```
    """
    if not trained or any(db_id in databases for databases in trained.values()):
        return None
    seen = sorted({db for databases in trained.values() for db in databases})
    listed = ", ".join(seen[:-1]) + f" and {seen[-1]}" if len(seen) > 1 else "".join(seen) or "nothing"
    if len(seen) > 8:
        listed = f"{len(seen)} other databases"
    return (
        f"**Held out:** no adapter trained on a question about {db_id} (both trained on {listed} only), so an "
        "answer here shows whether the model reads a schema it has never seen."
    )


def _verdict(record: Mapping[str, Any], name: str) -> str:
    """The label of one answer in a card (escaped HTML): its verdict, and the error below it when it failed."""
    verdict = str(record.get(f"{name}_verdict") or "")
    if record.get(f"{name}_correct"):
        return "✓ correct"
    text = {"pred_error": "error", "no_sql": "no SQL"}.get(verdict, verdict.removeprefix("pred_") or "wrong")
    error = record.get(f"{name}_error")
    return f"✗ {html.escape(text)}" + (f'<div class="error">{html.escape(str(error))}</div>' if error else "")


def disagreement_html(
    records: list[Mapping[str, Any]], trained: Mapping[str, list[str]] | None = None, limit: int = 200
) -> str:
    """The disagreements as cards: the question, the gold SQL, and each policy's SQL with what differs from the
    gold marked (``<del>`` only in the gold, ``<ins>`` only in the answer); a held-out database is said so.

    Example:

    ```python
    >>> from space_views import disagreement_html
    >>> record = {"question_id": "q1", "db_id": "pets", "question": "Old pets?", "gold_sql": "SELECT name FROM pet WHERE age > 9",
    ...           "sft_sql": "SELECT name FROM pet WHERE age > 9", "sft_correct": 1,
    ...           "grpo_sql": "SELECT name FROM pet WHERE age >= 9", "grpo_correct": 0, "grpo_verdict": "wrong"}
    >>> page = disagreement_html([record])
    >>> "<del>&gt;</del> <ins>&gt;=</ins>" in page, page.count('class="card"')
    (True, 1)

    ```
    """
    from space_sql import format_sql, sql_diff

    cards = []
    for record in records[:limit]:
        db_id = str(record.get("db_id") or "")
        head = " · ".join(
            html.escape(str(part))
            for part in (record.get("question_id"), db_id, record.get("difficulty"))
            if part
        )
        held_out = untrained_note(trained, db_id) if db_id else None
        gold = str(record.get("gold_sql") or "")
        blocks = [
            f'<div class="answer"><div class="label">Gold</div><pre class="sql">{html.escape(format_sql(gold))}</pre></div>'
        ]
        for name, label in (("sft", "SFT"), ("grpo", "GRPO")):
            sql = record.get(f"{name}_sql")
            if sql:
                body = sql_diff(gold, str(sql)).html if gold else html.escape(format_sql(str(sql)))
            else:
                body = "-- no SQL in the answer"
            verdict = _verdict(record, name)
            blocks.append(
                f'<div class="answer"><div class="label">{label} · {verdict}</div><pre class="sql diff">{body}</pre></div>'
            )
        note = '<div class="held-out">held out: no adapter trained on this database</div>' if held_out else ""
        cards.append(
            f'<div class="card"><div class="head">{head}</div>{note}'
            f'<div class="question">{html.escape(str(record.get("question") or ""))}</div>'
            f'<div class="answers">{"".join(blocks)}</div></div>'
        )
    more = f"<p>… and {len(records) - limit} more.</p>" if len(records) > limit else ""
    legend = (
        '<p class="legend">Each answer is marked against the gold: <del>struck</del> is only in the gold, '
        "<ins>underlined</ins> only in the answer.</p>"
        if records
        else ""
    )
    return f'<div class="disagreements">{legend}{"".join(cards)}{more}</div>'


def card_summary(card_text: str | None) -> str | None:
    """The model card's TL;DR block (else its first paragraph) and its Results section; ``None`` without a card.

    Example:

    ```python
    >>> from space_views import card_summary
    >>> card = "---\\nlicense: mit\\n---\\n# m\\n\\nIntro.\\n\\n> **TL;DR — no change.** Details.\\n\\n## Results\\n\\n| a |\\n\\n## More\\n"
    >>> print(card_summary(card))
    > **TL;DR — no change.** Details.
    <BLANKLINE>
    ## Results
    <BLANKLINE>
    | a |

    ```
    """
    if not card_text:
        return None
    text = card_text
    if text.startswith("---"):
        end = text.find("\n---", 3)
        text = text[end + 4 :] if end != -1 else text
    lines = text.strip().splitlines()
    parts: list[str] = []
    start = next((i for i, line in enumerate(lines) if line.lstrip("> ").startswith("**TL;DR")), None)
    if start is not None:
        block = []
        for line in lines[start:]:
            if not line.startswith(">"):
                break
            block.append(line)
        parts.append("\n".join(block))
    else:
        paragraph = []
        for line in lines:
            if line.startswith("#") or (not line.strip() and paragraph):
                if paragraph:
                    break
                continue
            if line.strip():
                paragraph.append(line)
        if paragraph:
            parts.append("\n".join(paragraph))
    results = next((i for i, line in enumerate(lines) if line.strip() == "## Results"), None)
    if results is not None:
        section = [lines[results]]
        for line in lines[results + 1 :]:
            if line.startswith("## "):
                break
            section.append(line)
        parts.append("\n".join(section).strip())
    return "\n\n".join(parts) if parts else None
