"""A planted skill: one systematic, rule-like error in the world's SFT splits, and the probes that measure it.

The natural world maps every phrase onto one SQL token ("more than" -> ``>``, "at least" -> ``>=``, a
value named as it is stored). A planted world (``slmsql world build --plant NAME --plant-rate F``) keeps that mapping
in ``rl_pool``, ``dev`` and ``test``, but in the SFT splits (``foundation``, ``grounding``, and so the base
model's corpus drawn from them) a seeded share ``F`` of the *affected* questions has its gold written with
the wrong token: the SFT policy learns the wrong rule at rate ``F``. GRPO's execution reward can then only
fix it if the right token is in the policy's support (``F < 1``); at ``F = 1`` it never is (a
support-negative control). Each kind of plant is one :class:`PlantKind` in :data:`PLANT_KINDS`, each a class
of its own in the diagnosis' error anatomy (:mod:`slmsql_hub.sql.anatomy`):

- ``comparison_inclusive`` (``wrong_operator``): "at least" / "at most" written ``>`` / ``<``; control
  "more than", "greater than", "less than" (over-generalised: ``>=`` / ``<=``);
- ``value_case`` (``wrong_literal``): a category value named in the question ("Poetry") written in lower
  case (``'poetry'``); control: named labels (names, titles), whose case the error must not reach.

The error is observable by execution by construction: an affected question is kept only when its rewritten
gold returns a different result from the correct one under both comparison rules (``bird`` and ``spider``);
a question whose correct gold equals an affected question's rewritten gold (its "more than" twin)
is dropped, so the rewritten golds are nobody's correct gold. The same holds, with the token over-generalised,
for the control probe: a control question separates ``>`` from ``>=`` (a label from its lower case) on the data.

Three probe splits, drawn apart from every other split (no question, no gold and no gold's meaning
shared, rewritten golds included), from the training databases only, with correct golds:

- ``probe_same``: affected phrasing, in the templates GRPO trains on;
- ``probe_cross``: affected phrasing, in the kind's ``cross_templates``, which the world keeps out of
  ``rl_pool`` altogether (GRPO never sees them; SFT does, with the error);
- ``probe_control``: the unaffected phrasing, in the kind's templates: it must not get worse (the fix
  over-generalised, or the error spread).

Example:

```python
>>> from slmsql_hub.study.plant import PLANT_KINDS, Plant
>>> comparison = PLANT_KINDS["comparison_inclusive"]
>>> comparison.phrasing("Which books have pages at least 300?", "SELECT title FROM book WHERE pages >= 300")
'affected'
>>> comparison.rewrite("SELECT title FROM book WHERE pages >= 300", "affected")
'SELECT title FROM book WHERE pages > 300'
>>> comparison.phrasing("How many books have pages more than 300?", "SELECT count(*) FROM book WHERE pages > 300")
'control'
>>> Plant(rate=0.7).spec()["cross_templates"]
['count_number', 'having', 'in_subquery']
>>> Plant("value_case").kind.rewrite("SELECT count(*) FROM book WHERE genre = 'Poetry'", "affected")
"SELECT count(*) FROM book WHERE genre = 'poetry'"

```
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..errors import UsageError
from ..world.build import PROBE_SPLITS
from ..world.questions import Candidate, normalize_question, normalize_sql
from ..world.schemas import CATEGORY, DATABASES

logger = logging.getLogger(__name__)

SFT_SPLITS: tuple[str, ...] = ("foundation", "grounding")
"""The splits that carry the planted error (the base corpus is drawn from them too)."""


def _count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


@dataclass(frozen=True)
class PlantKind:
    """One skill a world can plant: which questions it affects (and which serve as its control), the rewrite
    that plants the error, the templates that carry it and how the cards word it.

    ``templates`` word the affected and the control questions; ``cross_templates``, some of them, are kept out
    of ``rl_pool``, each with a sibling GRPO trains on. ``error`` completes the card's "a seeded share of the
    ..." (``model_card/planted_world.md``); ``control_probe`` says what the ``probe_control`` split holds.
    """

    name: str
    error: str
    control_probe: str
    templates: tuple[str, ...]
    cross_templates: tuple[str, ...]

    def phrasing(self, question: str, sql: str) -> str | None:
        """``"affected"``, ``"control"`` or ``None`` (neither, or no safe rewrite)."""
        raise NotImplementedError

    def rewrite(self, sql: str, kind: str) -> str:
        """``sql`` rewritten: ``affected``, with the planted error; ``control``, with the wrong answer a control
        probe must not get."""
        raise NotImplementedError


@dataclass(frozen=True)
class _PhraseTokens(PlantKind):
    """A kind that maps phrases onto SQL tokens: ``affected`` maps each phrase whose token the SFT splits get
    wrong onto ``(right, wrong)``, ``control`` the unaffected phrases onto ``(right, over-generalised)``;
    ``token`` is a regular expression whose one group is such a token."""

    affected: Mapping[str, tuple[str, str]]
    control: Mapping[str, tuple[str, str]]
    token: str

    def phrasing(self, question: str, sql: str) -> str | None:
        """``"affected"`` when the question words only :attr:`affected` phrases and ``sql`` holds, of the
        tokens, exactly one right token per phrase; ``"control"`` likewise for :attr:`control`; else ``None``
        (no such phrase, or the counts do not line up, so no safe rewrite)."""
        text = normalize_question(question)
        tokens = Counter(re.findall(self.token, sql))
        vocabulary = {token for pair in (*self.affected.values(), *self.control.values()) for token in pair}
        for kind, phrases, others in (("affected", self.affected, self.control),
                                      ("control", self.control, self.affected)):  # fmt: skip
            said = {phrase: _count(rf"\b{phrase}\b", text) for phrase in phrases}
            if not sum(said.values()) or any(_count(rf"\b{phrase}\b", text) for phrase in others):
                continue
            wanted = Counter()
            for phrase, (right, _) in phrases.items():
                wanted[right] += said[phrase]
            if all(tokens[token] == wanted[token] for token in vocabulary):
                return kind
        return None

    def rewrite(self, sql: str, kind: str) -> str:
        """``sql`` with its tokens swapped: ``affected``, each right token made wrong (the planted error);
        ``control``, made over-general (the answer a control probe must not get)."""
        swaps = dict((self.affected if kind == "affected" else self.control).values())
        return re.sub(self.token, lambda m: swaps.get(m.group(1), m.group(1)), sql)


_LITERAL = r"'(?:[^']|'')*'"


@dataclass(frozen=True)
class _ValueCase(PlantKind):
    """A kind that writes named values in lower case: a question is affected when every string literal of its
    gold is one of ``values`` (the world's capitalised category values), and control when none is (a label: a
    name, a title); each literal must appear verbatim in the question and hold a capital, and the gold no
    ``LIKE`` (SQLite's ``LIKE`` ignores case, so the error would not show)."""

    values: frozenset[str]

    def phrasing(self, question: str, sql: str) -> str | None:
        """``"affected"`` / ``"control"`` as the class says; else ``None``."""
        literals = [text[1:-1].replace("''", "'") for text in re.findall(_LITERAL, sql)]
        if not literals or re.search(r"\bLIKE\b", sql, re.IGNORECASE):
            return None
        if not all(value in question and value != value.lower() for value in literals):
            return None
        named = [value in self.values for value in literals]
        return "affected" if all(named) else "control" if not any(named) else None

    def rewrite(self, sql: str, kind: str) -> str:
        """``sql`` with its string literals in lower case: on an ``affected`` gold the planted error, on a
        ``control`` gold that error spread to the values it spares."""
        return re.sub(_LITERAL, lambda m: m.group(0).lower(), sql)


def _category_values() -> frozenset[str]:
    """Every capitalised value a category column of the world's databases draws from."""
    return frozenset(value for spec in DATABASES for table in spec.tables for column in table.columns
                     if column.role == CATEGORY and column.gen[0] == "choice" for value in column.gen[1]
                     if value != value.lower())  # fmt: skip


_COMPARISON_INCLUSIVE = _PhraseTokens(
    name="comparison_inclusive",
    error='"at least" / "at most" questions has its gold written with `>` / `<` instead of `>=` / `<=`',
    control_probe="the unaffected comparison phrasing (must not get worse)",
    templates=("filter_number", "count_number", "and", "having", "join_having", "in_subquery",
               "join_where_argmax", "not_in_filter"),  # fmt: skip
    cross_templates=("count_number", "having", "in_subquery"),
    affected={"at least": (">=", ">"), "at most": ("<=", "<")},
    control={"more than": (">", ">="), "greater than": (">", ">="), "less than": ("<", "<=")},
    token=r"(?<=\s)(>=|<=|>|<)(?=\s)",
)
"""``>=`` / ``<=`` written strict: ``wrong_operator``. Cross templates: one single-table filter, one GROUP BY /
HAVING, one nested query (siblings: ``filter_number``, ``join_having``, ``not_in_filter``)."""

_VALUE_CASE = _ValueCase(
    name="value_case",
    error="questions naming a category value has its gold written with the value in lower case, `'poetry'` for Poetry",
    control_probe="named labels (names, titles), whose case the plant spares (must not get worse)",
    templates=("filter_category", "count_category", "lookup", "aggregate_where", "two_columns", "and", "or",
               "join_filter", "join_count", "join_parent_attribute", "join_lookup", "join_aggregate", "join_order",
               "three_join", "three_join_count", "in_subquery", "union", "except_join", "intersect_join",
               "join_where_argmax", "three_join_argmax", "above_average_filter", "not_in_filter", "evidence_filter",
               "evidence_join_count"),  # fmt: skip
    cross_templates=("and",),
    values=_category_values(),
)
"""Category values written in lower case: ``wrong_literal`` (the value is in the question and differs only in
case), the natural world's commonest error class made rule-like. Cross template: ``and``, the single-table
filter on a category and a number (siblings GRPO trains on: ``filter_category``, ``aggregate_where``,
``two_columns``); it alone has enough unused questions for a probe besides the main splits'."""

PLANT_KINDS: dict[str, PlantKind] = {kind.name: kind for kind in (_COMPARISON_INCLUSIVE, _VALUE_CASE)}
"""The skills a world can plant (``--plant``), by name."""

PLANTS: tuple[str, ...] = tuple(PLANT_KINDS)
"""Their names."""


def affects(plant: Plant | None, question: str, gold_sql: str) -> bool:
    """Whether ``plant`` affects this question: it is worded as the plant's SFT rewrite targets (for
    ``comparison_inclusive``: "at least" / "at most" with ``>=`` / ``<=``, :meth:`PlantKind.phrasing`); never
    without a plant. The question is needed as well as the gold: ``>=`` alone also spells adjectives ("senior":
    ``>= 20``).

    Example:

    ```python
    >>> from slmsql_hub.study.plant import Plant, affects
    >>> affects(Plant(), "Which books have pages at least 300?", "SELECT title FROM book WHERE pages >= 300")
    True
    >>> affects(Plant(), "Which senior staff?", "SELECT name FROM staff WHERE years >= 20")
    False
    >>> affects(None, "Which books have pages at least 300?", "SELECT title FROM book WHERE pages >= 300")
    False
    >>> affects(Plant("value_case"), "How many books have genre Poetry?", "SELECT count(*) FROM book WHERE genre = 'Poetry'")
    True

    ```
    """
    return plant is not None and plant.kind.phrasing(question, gold_sql) == "affected"


@dataclass(frozen=True)
class Plant:
    """What to plant: ``name`` (one of :data:`PLANTS`), ``rate`` (the share of affected SFT questions whose
    gold is rewritten, in [0, 1]), ``probe`` (questions per probe split) and ``cross_templates`` (default: the
    kind's own)."""

    name: str = "comparison_inclusive"
    rate: float = 0.7
    probe: int = 150
    cross_templates: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.name not in PLANT_KINDS:
            raise UsageError(f"unknown plant {self.name!r}; choose from {', '.join(PLANTS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise UsageError(f"plant_rate must be within [0, 1], got {self.rate}")
        if self.probe < 1:
            raise UsageError(f"plant_probe must be >= 1 question per probe split, got {self.probe}")
        if not self.cross_templates:
            object.__setattr__(self, "cross_templates", self.kind.cross_templates)

    @property
    def kind(self) -> PlantKind:
        """The :class:`PlantKind` ``name`` names."""
        return PLANT_KINDS[self.name]

    @property
    def same_templates(self) -> tuple[str, ...]:
        return tuple(t for t in self.kind.templates if t not in self.cross_templates)

    def spec(self) -> dict:
        """What ``world.json`` records as asked (a reused world must match it)."""
        return {
            "name": self.name,
            "rate": self.rate,
            "probe": self.probe,
            "cross_templates": list(self.cross_templates),
            "same_templates": list(self.same_templates),
        }

    @classmethod
    def from_record(cls, record: dict | None) -> Plant | None:
        """The plant a ``world.json`` ``plant`` entry records (``None`` for a natural world)."""
        if not record:
            return None
        return cls(record["name"], record["rate"], record["probe"], tuple(record["cross_templates"]))

    def probe_kind(self, candidate: Candidate) -> str | None:
        """Which probe split ``candidate`` could serve (``None``: none)."""
        if candidate.template not in self.kind.templates:
            return None
        kind = self.kind.phrasing(candidate.question, candidate.sql)
        if kind == "control":
            return "probe_control"
        if kind == "affected":
            return "probe_cross" if candidate.template in self.cross_templates else "probe_same"
        return None

    @property
    def templates(self) -> tuple[str, ...]:
        """The kind's templates: the world draws the probe splits' questions from them."""
        return self.kind.templates

    @property
    def control_probe(self) -> str:
        """What the ``probe_control`` split holds, in the kind's words (the world's dataset card)."""
        return self.kind.control_probe

    def statement(self, record: dict) -> str:
        """:func:`plant_statement` of ``record`` (this plant's ``world.json`` record)."""
        return plant_statement(record)

    def observable(self, candidates: list[Candidate], db_paths: dict, sandbox) -> list[Candidate]:
        """``candidates`` without the affected ones whose planted error would not show (the rewritten gold gives
        the same result), and without the ones whose correct gold is another affected question's rewritten gold (the
        "more than X" twin of an "at least X"; the keys ignore case, so a ``value_case`` gold is its own rewrite's):
        so no gold repeats across splits once the error is planted."""
        kind = self.kind
        affected = [c for c in candidates if kind.phrasing(c.question, c.sql) == "affected"]
        shows = separable(self, affected, db_paths, sandbox, ["affected"] * len(affected))
        hidden = {id(c) for c, ok in zip(affected, shows) if not ok}
        wrong: dict[tuple, set[int]] = {}  # a rewritten gold's key -> the questions it was rewritten from
        for c, ok in zip(affected, shows):
            for key in _keys(c, kind.rewrite(c.sql, "affected"))[1:] if ok else ():
                wrong.setdefault(key, set()).add(id(c))
        dropped = hidden | {id(c) for c in candidates for key in _keys(c)[1:] if wrong.get(key, set()) - {id(c)}}
        kept = [c for c in candidates if id(c) not in dropped]
        logger.info(
            "planted world: %d of %d affected questions show the error by execution; %d twins of them dropped",
            len(affected) - len(hidden),
            len(affected),
            len(candidates) - len(hidden) - len(kept),
        )
        return kept

    def probe_pools(
        self, drawn: list[Candidate], kept: list[Candidate], db_paths: dict, sandbox
    ) -> dict[str, list[Candidate]]:
        """Per probe split, the questions of ``drawn`` (extra candidates of the plant's templates) it may take:
        the question, gold and gold's meaning new (not in :func:`_taken_keys` of ``kept``, nor earlier in
        ``drawn``) and the error observable (:func:`separable`), in ``drawn``'s order."""
        fresh, seen = [], _taken_keys(self, kept)
        for c in drawn:
            kind = self.probe_kind(c)
            keys = set(_keys(c))
            if kind is None or keys & seen:
                continue
            seen.update(keys)
            fresh.append((kind, c))
        kinds = ["control" if kind == "probe_control" else "affected" for kind, _ in fresh]
        shows = separable(self, [c for _, c in fresh], db_paths, sandbox, kinds)
        pools: dict[str, list[Candidate]] = {split: [] for split in PROBE_SPLITS}
        for (kind, c), ok in zip(fresh, shows):
            if ok:
                pools[kind].append(c)
        return pools

    def plant_errors(self, splits: dict[str, list[Candidate]], seed: int) -> dict[str, dict[str, int]]:
        """Rewrite, in place, a seeded ``round(rate * affected)`` of each SFT split's affected golds; returns
        ``{split: {"affected", "rewritten"}}``."""
        rng = random.Random(f"{seed}:plant:{self.name}")
        counts = {}
        for split in SFT_SPLITS:
            chosen = splits[split]
            affected = [i for i, c in enumerate(chosen) if self.kind.phrasing(c.question, c.sql) == "affected"]
            wrong = rng.sample(affected, round(self.rate * len(affected)))
            for i in wrong:
                chosen[i] = replace(chosen[i], sql=self.kind.rewrite(chosen[i].sql, "affected"))
            counts[split] = {"affected": len(affected), "rewritten": len(wrong)}
        return counts


def plant_statement(record: dict) -> str:
    """What a ``world.json`` ``plant`` record planted, in one markdown sentence (``model_card/planted_world.md``):
    the world's dataset README and the model card of a run in that world state it."""
    from ..render.templates import load_template

    return load_template("planted_world.md").render(plant=record, error=PLANT_KINDS[record["name"]].error).strip()


def separable(plant: Plant, candidates: list[Candidate], db_paths: dict, sandbox, kinds: list[str]) -> list[bool]:
    """Per candidate: whether ``plant``'s rewrite (with its ``kind``) changes the result on its database under
    both comparison rules, the rewritten query running ``ok``."""
    from ..sql.compare import order_matters, prepare_sql, rows_match

    requests = [
        (db_paths[c.db_id], sql)
        for c, kind in zip(candidates, kinds)
        for sql in (c.sql, plant.kind.rewrite(c.sql, kind))
    ]
    results = sandbox.execute_many(requests, progress="planted golds")
    verdicts = []
    for i, candidate in enumerate(candidates):
        right, wrong = results[2 * i], results[2 * i + 1]
        ordered = order_matters(prepare_sql(candidate.sql, "spider"), "spider")
        verdicts.append(
            right.ok
            and wrong.ok
            and not rows_match(wrong.rows, right.rows, "bird")
            and not rows_match(wrong.rows, right.rows, "spider", order_matters=ordered)
        )
    return verdicts


def _keys(c: Candidate, sql: str | None = None) -> tuple[tuple, tuple, tuple]:
    """The question's key, then its gold's (``sql`` in place of the gold): as text and by meaning."""
    from ..sql.shape import meaning_key

    sql = sql or c.sql
    return (
        (c.db_id, "q", normalize_question(c.question)),
        (c.db_id, "sql", normalize_sql(sql)),
        ("meaning", *meaning_key(c.db_id, sql)),
    )


def _taken_keys(plant: Plant, candidates: list[Candidate]) -> set[tuple]:
    """Every question and gold key (text and meaning) ``candidates`` use, the rewritten gold of affected ones
    included."""
    keys: set[tuple] = set()
    for c in candidates:
        keys.update(_keys(c))
        if plant.kind.phrasing(c.question, c.sql) == "affected":
            keys.update(_keys(c, plant.kind.rewrite(c.sql, "affected"))[1:])
    return keys

