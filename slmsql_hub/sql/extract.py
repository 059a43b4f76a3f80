"""Pull the SQL out of a model's answer: the same rule for the reward, the metric, evaluation and the Space.

Rule of :func:`extract_sql`, first that applies wins:

1. the **last** non-empty ```` ```sql ```` fenced block (the tag is case-insensitive: ``sql``, ``SQL``);
2. else the last non-empty fenced block with no language tag, or with a tag that names another SQL dialect
   (``sqlite``, ``postgresql``, ``mysql``: any tag containing ``sql``);
3. else, when the whole answer looks like SQL -- after whitespace and leading SQL comments (``-- …``,
   ``/* … */``) its first word is ``SELECT``, ``WITH`` or ``VALUES`` (any case) -- the stripped answer
   itself, comments included, so plain SQL predictions pass through unchanged apart from surrounding
   whitespace;
4. else ``None`` (also for ``None``, empty or whitespace-only text).

Fences are runs of three or more backticks. A tag is the word right after the opening fence when a line break
follows it (```` ```sql SELECT 1``` ```` on one line is also a ``sql`` block); the block ends at the next
fence, or at the end of the text when the closing fence is missing (a generation cut off by the token
limit). The block's text is returned stripped of surrounding whitespace.

:func:`has_sql_block` says whether rule 1 applies (the format reward uses it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["extract_sql", "first_keyword", "has_sql_block"]

_FENCE = re.compile(r"`{3,}")
_TAG = re.compile(r"[ \t]*([A-Za-z0-9_+#.-]+)?[ \t]*(\r?\n)?")
_SQL_KEYWORDS = frozenset({"select", "with", "values"})  # what a query that returns rows starts with
_QUOTES = {"'": "'", '"': '"', "`": "`", "[": "]"}  # opening -> closing quote


@dataclass(frozen=True)
class _Block:
    tag: str  # lower-cased language tag, "" when none
    body: str  # stripped content


def _blocks(text: str) -> list[_Block]:
    """The fenced blocks of ``text`` in order; an unclosed last block runs to the end of the text."""
    blocks: list[_Block] = []
    position = 0
    while True:
        opening = _FENCE.search(text, position)
        if opening is None:
            return blocks
        tag_match = _TAG.match(text, opening.end())
        word, newline = tag_match.group(1), tag_match.group(2)
        tag = ""
        content_start = opening.end()
        if word and (newline or word.lower() == "sql"):
            tag = word.lower()
            content_start = tag_match.end()
        closing = _FENCE.search(text, content_start)
        body = text[content_start : closing.start() if closing else len(text)].strip()
        blocks.append(_Block(tag=tag, body=body))
        if closing is None:
            return blocks
        position = closing.end()


def _last_sql_block(blocks: list[_Block]) -> str | None:
    for block in reversed(blocks):
        if block.tag == "sql" and block.body:
            return block.body
    return None


def extract_sql(text: str | None) -> str | None:
    """The SQL in a model's answer (or plain SQL), stripped, by the rule of the module docstring; ``None`` when
    there is none.

    Example:

    ```python
    >>> extract_sql("Draft:\\n```sql\\nSELECT 1\\n```\\nFinal:\\n```sql\\nSELECT name FROM singer\\n```")
    'SELECT name FROM singer'
    >>> extract_sql("  SELECT count(*) FROM singer;\\n")
    'SELECT count(*) FROM singer;'
    >>> extract_sql("```sql\\nSELECT age FROM singer WHERE")
    'SELECT age FROM singer WHERE'
    >>> extract_sql("/* model output */ -- note\\nSELECT count(*) FROM singer")
    '/* model output */ -- note\\nSELECT count(*) FROM singer'
    >>> extract_sql("I cannot answer that.") is None
    True

    ```
    """
    if text is None or not text.strip():
        return None
    blocks = _blocks(text)
    sql = _last_sql_block(blocks)
    if sql is not None:
        return sql
    for block in reversed(blocks):
        if block.body and (block.tag == "" or "sql" in block.tag):
            return block.body
    stripped = text.strip()
    if first_keyword(stripped) in _SQL_KEYWORDS:
        return stripped
    return None


def skip_quoted_or_comment(sql: str, i: int) -> int:
    """The index after the quoted text (``'…'``, ``"…"``, `` `…` ``, ``[…]``; doubled quotes escape) or comment
    (``--`` to the line's end, ``/* */``) that starts at ``i``; ``i`` itself when none starts there. An
    unterminated one runs to the end. The one rule of what is not code, for every SQL scanner here.

    Example:

    ```python
    >>> skip_quoted_or_comment("SELECT 'it''s' FROM t", 7), skip_quoted_or_comment("a -- b", 2), skip_quoted_or_comment("a", 0)
    (14, 6, 0)

    ```
    """
    c = sql[i]
    if c in _QUOTES:
        close = _QUOTES[c]
        j = sql.find(close, i + 1)
        while j != -1 and close != "]" and j + 1 < len(sql) and sql[j + 1] == close:  # doubled quote escape
            j = sql.find(close, j + 2)
        return len(sql) if j == -1 else j + 1
    if c == "-" and sql.startswith("--", i):
        j = sql.find("\n", i)
        return len(sql) if j == -1 else j + 1
    if c == "/" and sql.startswith("/*", i):
        j = sql.find("*/", i + 2)
        return len(sql) if j == -1 else j + 2
    return i


def first_keyword(sql: str) -> str:
    """The first word of SQL text, lower-cased, after whitespace and comments (``""`` when there is none).

    The sandbox uses it to allow only reading statements; :func:`extract_sql` to recognise plain SQL.

    Example:

    ```python
    >>> first_keyword("/* model output */ -- note\\n  Select 1")
    'select'
    >>> first_keyword("-- only a comment")
    ''

    ```
    """
    i, n = 0, len(sql)
    while i < n:
        if sql[i].isspace():
            i += 1
        elif sql.startswith(("--", "/*"), i):
            i = skip_quoted_or_comment(sql, i)
        else:
            break
    j = i
    while j < n and (sql[j].isalnum() or sql[j] == "_"):
        j += 1
    return sql[i:j].lower()


def has_sql_block(text: str | None) -> bool:
    """Whether the answer holds a non-empty ```` ```sql ```` fenced block (closed, or cut off at the end):
    exactly when :func:`extract_sql` takes its SQL from such a block.

    Example:

    ```python
    >>> has_sql_block("```sql\\nSELECT 1\\n```"), has_sql_block("SELECT 1"), has_sql_block("```\\nSELECT 1\\n```")
    (True, False, False)

    ```
    """
    if text is None or not text.strip():
        return False
    return _last_sql_block(_blocks(text)) is not None
