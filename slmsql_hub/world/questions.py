"""The world's question generator: draws templates by weight over one database and keeps distinct questions.

A template (:mod:`~slmsql_hub.world.templates`) is one SQL shape with several paraphrases of its question; its
slots (tables, columns, values) come from the schema and the data (:mod:`~slmsql_hub.world.slots`). Wording
maps systematically onto SQL: tables are named by their own noun, columns by their own words ("year published"
-> ``year_published``), values appear verbatim, comparison words map to one operator each ("more than" ->
``>``, "at least" -> ``>=``). That makes the questions learnable by a small model, while joins, grouping,
nesting and set operations keep them from being trivial.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from .populate import Rows
from .schemas import DatabaseSpec
from .slots import Context, NoFit
from .templates import TEMPLATES, Template

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    """One generated question before its gold is executed; ``template``, ``family`` and ``label`` come from
    its :class:`~slmsql_hub.world.templates.Template` (``label`` is used when ``spider_hardness`` cannot parse
    the gold)."""

    db_id: str
    question: str
    sql: str
    template: str
    family: str
    label: str
    evidence: str = ""


def normalize_question(text: str) -> str:
    """Lower-case, single-spaced text without trailing punctuation: the key questions are deduplicated by.

    Example:

    ```python
    >>> from slmsql_hub.world.questions import normalize_question
    >>> normalize_question("  How many  Books are there? ")
    'how many books are there'

    ```
    """
    return " ".join(text.lower().split()).rstrip("?.! ")


def normalize_sql(sql: str) -> str:
    """Lower-case, single-spaced SQL: the key golds are deduplicated by."""
    return " ".join(sql.lower().split()).rstrip("; ")


def generate_candidates(
    spec: DatabaseSpec,
    rows: Rows,
    n: int,
    *,
    seed: int = 0,
    templates: tuple[Template, ...] = TEMPLATES,
    max_draws_per_question: int = 12,
    patience: int = 1000,
    stream: str = "questions",
) -> list[Candidate]:
    """Up to ``n`` questions for one database, distinct by normalized question and by normalized SQL, in
    generation order; deterministic in ``seed``. Templates are drawn by weight; a draw that does not fit or
    repeats is dropped. Gives up after ``n * max_draws_per_question`` draws, or ``patience`` draws in a row that
    add nothing. ``stream`` names the random stream (another name draws other questions from the same seed).

    Example:

    ```python
    >>> from slmsql_hub.world.populate import generate_rows
    >>> from slmsql_hub.world.questions import generate_candidates
    >>> from slmsql_hub.world.schemas import LIBRARY
    >>> candidates = generate_candidates(LIBRARY, generate_rows(LIBRARY), 50)
    >>> len(candidates), candidates[0].db_id
    (50, 'library')

    ```
    """
    rng = random.Random(f"{seed}:{spec.db_id}:{stream}")
    ctx = Context(spec, rows, rng)
    weights = [t.weight for t in templates]
    seen_questions: set[str] = set()
    seen_sql: set[str] = set()
    out: list[Candidate] = []
    misses = 0
    for _ in range(n * max_draws_per_question):
        if len(out) >= n or misses >= patience:
            break
        misses += 1
        template = rng.choices(templates, weights=weights, k=1)[0]
        try:
            made = template.make(ctx)
        except NoFit:
            continue
        if made is None:
            continue
        question, sql, evidence = made if len(made) == 3 else (*made, "")
        q_key, s_key = normalize_question(question), normalize_sql(sql)
        if q_key in seen_questions or s_key in seen_sql:
            continue
        misses = 0
        seen_questions.add(q_key)
        seen_sql.add(s_key)
        out.append(
            Candidate(spec.db_id, question, sql, template.id, template.family, template.label, evidence)
        )
    if len(out) < n:
        logger.info("%s: %d distinct questions (asked for %d)", spec.db_id, len(out), n)
    return out
