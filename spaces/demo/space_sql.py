"""SQL as the page shows it: formatted by sqlglot (the text as written when it does not parse), and the token
difference between two queries marked in HTML (``<del>``: only in the first, ``<ins>``: only in the second), as
the Compare tab's "What differs" shows it (:func:`differences_html`).

Both queries are formatted before they are compared, so a difference in layout or keyword case is no difference;
the diff is :mod:`difflib` over sqlglot's tokens, each drawn with the whitespace it had in its own query. Nothing
here imports gradio.
"""

from __future__ import annotations

import difflib
import html
import re
from typing import NamedTuple

_DIALECT = "sqlite"


def format_sql(sql: str | None) -> str:
    """One query laid out by sqlglot (one clause per line); the text as it is when it is not one query that parses.

    Example:

    ```python
    >>> print(format_sql("select name from member where city = 'Derby' and age >= 30"))
    SELECT
      name
    FROM member
    WHERE
      city = 'Derby' AND age >= 30
    >>> format_sql("SELECT * FROM t WHERE")
    'SELECT * FROM t WHERE'

    ```
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    text = (sql or "").strip()
    if not text:
        return ""
    try:
        statements = [s for s in sqlglot.parse(text, read=_DIALECT) if s is not None]
    except SqlglotError:
        return text
    if len(statements) != 1:
        return text
    return statements[0].sql(dialect=_DIALECT, pretty=True)


class _Token(NamedTuple):
    space: str  # the whitespace before the token, as its query had it
    text: str


def _tokens(text: str) -> list[_Token]:
    """``text`` as tokens with the whitespace before each: sqlglot's tokens, else words and symbols."""
    from sqlglot import tokenize
    from sqlglot.errors import SqlglotError

    try:
        spans = [(token.start, token.end + 1) for token in tokenize(text, read=_DIALECT)]
    except SqlglotError:
        spans = [match.span() for match in re.finditer(r"\w+|'(?:[^']|'')*'|\"[^\"]*\"|[^\w\s]+", text)]
    tokens, position = [], 0
    for start, end in spans:
        if start < position:  # never drop or repeat text, whatever the tokenizer reports
            continue
        tokens.append(_Token(text[position:start], text[start:end]))
        position = end
    if position < len(text):
        tokens.append(_Token(text[position:], ""))
    return tokens


def _key(token: _Token) -> str:
    return token.text.upper() if re.fullmatch(r"[A-Za-z_]+", token.text) else token.text


class SQLDiff(NamedTuple):
    """The marked-up difference of two formatted queries: ``html`` (to sit in a ``<pre>``), how many tokens only
    the first (``removed``) and only the second (``added``) has."""

    html: str
    removed: int
    added: int

    @property
    def same(self) -> bool:
        return not (self.removed or self.added)


def sql_diff(first: str, second: str) -> SQLDiff:
    """The token difference from ``first`` to ``second`` (both as :func:`format_sql` lays them out), with the
    tokens only ``first`` has in ``<del>`` and those only ``second`` has in ``<ins>``, everything escaped.

    Example:

    ```python
    >>> diff = sql_diff("SELECT name FROM t WHERE age > 30", "select name from t where age >= 30")
    >>> diff.removed, diff.added
    (1, 1)
    >>> diff.html.replace("\\n", " ")
    'SELECT   name FROM t WHERE   age <del>&gt;</del> <ins>&gt;=</ins> 30'
    >>> sql_diff("SELECT 1", "select  1").same
    True

    ```
    """
    a, b = _tokens(format_sql(first)), _tokens(format_sql(second))
    matcher = difflib.SequenceMatcher(None, [_key(t) for t in a], [_key(t) for t in b], autojunk=False)
    parts: list[str] = []
    removed = added = 0

    def span(tokens: list[_Token], tag: str, lead: str) -> int:
        body = "".join(t.space + t.text for t in tokens)[len(tokens[0].space) :]
        if body.strip():
            parts.append(f"{html.escape(lead)}<{tag}>{html.escape(body.rstrip())}</{tag}>")
        return sum(1 for t in tokens if t.text)

    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            parts += [html.escape(t.space + t.text) for t in b[b0:b1]]
            continue
        if a1 > a0:
            removed += span(a[a0:a1], "del", a[a0].space)
        if b1 > b0:  # a replacement stays on the line of what it replaces
            added += span(b[b0:b1], "ins", " " if a1 > a0 else b[b0].space)
    return SQLDiff("".join(parts).strip(), removed, added)


def sql_block(sql: str | None, elem_class: str = "sql") -> str:
    """A formatted query in a wrapping ``<pre>`` (escaped).

    Example:

    ```python
    >>> sql_block("select a from t where b < 2")
    '<pre class="sql">SELECT\\n  a\\nFROM t\\nWHERE\\n  b &lt; 2</pre>'

    ```
    """
    return f'<pre class="{elem_class}">{html.escape(format_sql(sql))}</pre>'


def differences_html(sft_sql: str | None, grpo_sql: str | None, gold_sql: str | None) -> str:
    """What differs, token by token: SFT against GRPO, then each against the gold when there is one (``<del>``:
    only in the first query, ``<ins>``: only in the second); pairs that are the same query share one line.

    Example:

    ```python
    >>> from space_sql import differences_html
    >>> page = differences_html("SELECT a FROM t WHERE x > 1", "SELECT a FROM t WHERE x >= 1", None)
    >>> "SFT → GRPO (1 token out, 1 in)" in page, "<del>&gt;</del> <ins>&gt;=</ins>" in page
    (True, True)
    >>> differences_html("SELECT a FROM t", "select a from t", "SELECT a FROM t").count("The same query")
    1

    ```
    """
    pairs = [("SFT → GRPO", sft_sql, grpo_sql)]
    if gold_sql:
        pairs += [("Gold → SFT", gold_sql, sft_sql), ("Gold → GRPO", gold_sql, grpo_sql)]
    blocks, same, missing = [], [], []
    for title, first, second in pairs:
        if first is None or second is None:
            missing.append(title)
            continue
        diff = sql_diff(first, second)
        if diff.same:
            same.append(title.replace(" → ", " and "))
            continue
        counts = f"{diff.removed} token{'s' if diff.removed != 1 else ''} out, {diff.added} in"
        blocks.append(
            f'<div class="pair"><div class="label">{html.escape(title)} ({counts})</div>'
            f'<pre class="sql diff">{diff.html}</pre></div>'
        )
    lines = []
    if same:
        lines.append(f"The same query, once formatted: {'; '.join(same)}.")
    if missing:
        lines.append(f"Nothing to compare (no SQL in an answer): {', '.join(missing)}.")
    if blocks:
        lines.append(
            "Token by token: <del>struck</del> is only in the first query, <ins>underlined</ins> only in the second."
        )
    text = "".join(
        f'<p class="legend">{html.escape(line) if "<del>" not in line else line}</p>' for line in lines
    )
    return f'<div class="differences"><h3>What differs</h3>{text}<div class="pairs">{"".join(blocks)}</div></div>'
