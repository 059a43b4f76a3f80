"""A planted skill: one systematic, rule-like error in the world's SFT splits, and the probes that measure it.

The natural world maps every phrase onto one SQL token ("more than" -> ``>``, "at least" -> ``>=``,
"average" -> ``avg``). A planted world (``slmsql world build --plant NAME --plant-rate F``) keeps that mapping
in ``rl_pool``, ``dev`` and ``test``, but in the SFT splits (``foundation``, ``grounding``, and so the base
model's corpus drawn from them) a seeded share ``F`` of the *affected* questions has its gold written with
the wrong token: the SFT policy learns the wrong rule at rate ``F``. GRPO's execution reward can then only
fix it if the right token is in the policy's support (``F < 1``); at ``F = 1`` it never is (a
support-negative control). Each kind of plant is one :class:`PlantKind` in :data:`PLANT_KINDS`, each a class
of its own in the diagnosis' error anatomy (:mod:`slmsql_hub.sql.anatomy`):

- ``comparison_inclusive`` (``wrong_operator``): "at least" / "at most" written ``>`` / ``<``; control
  "more than", "greater than", "less than" (over-generalised: ``>=`` / ``<=``);
- ``aggregate_average`` (``aggregate``): "average" written ``sum``; control "total" (over-generalised:
  ``avg``).

The error is observable by execution by construction: an affected question is kept only when its rewritten
gold returns a different result from the correct one under both comparison rules (``bird`` and ``spider``);
a question whose correct gold equals an affected question's rewritten gold (its "more than" / "total" twin)
is dropped, so the rewritten golds are nobody's correct gold. The same holds, with the token over-generalised,
for the control probe: a control question separates ``>`` from ``>=`` (``sum`` from ``avg``) on the data.

Three probe splits, drawn apart from every other split (no question, no gold and no gold's meaning
shared, rewritten golds included), from the training databases only, with correct golds:

- ``probe_same``: affected phrasing, in the templates GRPO trains on;
- ``probe_cross``: affected phrasing, in the kind's ``cross_templates``, which the world keeps out of
  ``rl_pool`` altogether (GRPO never sees them; SFT does, with the error);
- ``probe_control``: the unaffected phrasing, in the kind's templates: it must not get worse
  (over-generalising the fix).

Example:

```python
>>> from slmsql_hub.world.plant import PLANT_KINDS, Plant
>>> comparison = PLANT_KINDS["comparison_inclusive"]
>>> comparison.phrasing("Which books have pages at least 300?", "SELECT title FROM book WHERE pages >= 300")
'affected'
>>> comparison.rewrite("SELECT title FROM book WHERE pages >= 300", "affected")
'SELECT title FROM book WHERE pages > 300'
>>> comparison.phrasing("How many books have pages more than 300?", "SELECT count(*) FROM book WHERE pages > 300")
'control'
>>> Plant(rate=0.7).spec()["cross_templates"]
['count_number', 'having', 'in_subquery']
>>> Plant("aggregate_average").kind.rewrite("SELECT genre, avg(pages) FROM book GROUP BY genre", "affected")
'SELECT genre, sum(pages) FROM book GROUP BY genre'

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
from .questions import Candidate, normalize_question, normalize_sql

logger = logging.getLogger(__name__)

PROBE_SPLITS: tuple[str, ...] = ("probe_same", "probe_cross", "probe_control")
"""The planted world's extra splits (evaluation only)."""

SFT_SPLITS: tuple[str, ...] = ("foundation", "grounding")
"""The splits that carry the planted error (the base corpus is drawn from them too)."""


def _count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


@dataclass(frozen=True)
class PlantKind:
    """One skill a world can plant: phrases mapped onto SQL tokens, the rewrite that plants the error, the
    templates that carry it and how the card words it.

    ``affected`` maps each phrase whose token the SFT splits get wrong onto ``(right, wrong)``; ``control``
    maps the unaffected phrases of the same ``family`` onto ``(right, over-generalised)``. ``token`` is a
    regular expression whose one group is such a token; ``excluded`` one for SQL never classified (the token
    would sit where the anatomy reads another class). ``templates`` word the phrases; ``cross_templates``,
    some of them, are kept out of ``rl_pool``, each with a sibling GRPO trains on. ``error`` completes the
    card's "a seeded share of the ..." (``model_card/planted_world.md``).
    """

    name: str
    family: str
    error: str
    affected: Mapping[str, tuple[str, str]]
    control: Mapping[str, tuple[str, str]]
    token: str
    templates: tuple[str, ...]
    cross_templates: tuple[str, ...]
    excluded: str | None = None

    def phrasing(self, question: str, sql: str) -> str | None:
        """``"affected"`` when the question words only :attr:`affected` phrases and ``sql`` holds, of the
        tokens, exactly one right token per phrase; ``"control"`` likewise for :attr:`control`; else ``None``
        (no such phrase, or the counts do not line up, so no safe rewrite)."""
        if self.excluded is not None and re.search(self.excluded, sql):
            return None
        text = normalize_question(question)
        tokens = Counter(re.findall(self.token, sql))
        for kind, phrases, others in (("affected", self.affected, self.control),
                                      ("control", self.control, self.affected)):  # fmt: skip
            said = {phrase: _count(rf"\b{phrase}\b", text) for phrase in phrases}
            if not sum(said.values()) or any(_count(rf"\b{phrase}\b", text) for phrase in others):
                continue
            wanted = Counter()
            for phrase, (right, _) in phrases.items():
                wanted[right] += said[phrase]
            vocabulary = {token for pair in (*self.affected.values(), *self.control.values()) for token in pair}
            if all(tokens[token] == wanted[token] for token in vocabulary):
                return kind
        return None

    def rewrite(self, sql: str, kind: str) -> str:
        """``sql`` with its tokens swapped: ``affected``, each right token made wrong (the planted error);
        ``control``, made over-general (the answer a control probe must not get)."""
        swaps = dict((self.affected if kind == "affected" else self.control).values())
        return re.sub(self.token, lambda m: swaps.get(m.group(1), m.group(1)), sql)


COMPARISON_INCLUSIVE = PlantKind(
    name="comparison_inclusive",
    family="comparison",
    error='"at least" / "at most" questions has its gold written with `>` / `<` instead of `>=` / `<=`',
    affected={"at least": (">=", ">"), "at most": ("<=", "<")},
    control={"more than": (">", ">="), "greater than": (">", ">="), "less than": ("<", "<=")},
    token=r"(?<=\s)(>=|<=|>|<)(?=\s)",
    templates=("filter_number", "count_number", "and", "having", "join_having", "in_subquery",
               "join_where_argmax", "not_in_filter"),  # fmt: skip
    cross_templates=("count_number", "having", "in_subquery"),
)
"""``>=`` / ``<=`` written strict: the wrong comparison operator. Cross templates: one single-table filter,
one GROUP BY / HAVING, one nested query (siblings: ``filter_number``, ``join_having``, ``not_in_filter``)."""

AGGREGATE_AVERAGE = PlantKind(
    name="aggregate_average",
    family="aggregate",
    error='"average" questions has its gold written with `sum` instead of `avg`',
    affected={"average": ("avg", "sum")},
    control={"total": ("sum", "avg")},
    token=r"\b(avg|sum)(?=\()",
    templates=("aggregate", "aggregate_where", "date_year", "group_aggregate", "group_having_aggregate",
               "join_aggregate"),  # fmt: skip
    cross_templates=("aggregate_where", "group_aggregate"),
    excluded=r"\(\s*SELECT\b",
)
"""``avg`` written ``sum`` in the SELECT list: the wrong aggregate (a subquery's ``avg``, "above the average",
is left alone: it would read as another structure). Cross templates: one filtered single-table aggregate, one
GROUP BY (siblings: ``aggregate`` and ``join_aggregate``, ``group_having_aggregate``)."""

PLANT_KINDS: dict[str, PlantKind] = {kind.name: kind for kind in (COMPARISON_INCLUSIVE, AGGREGATE_AVERAGE)}
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
    >>> from slmsql_hub.world.plant import Plant, affects
    >>> affects(Plant(), "Which books have pages at least 300?", "SELECT title FROM book WHERE pages >= 300")
    True
    >>> affects(Plant(), "Which senior staff?", "SELECT name FROM staff WHERE years >= 20")
    False
    >>> affects(None, "Which books have pages at least 300?", "SELECT title FROM book WHERE pages >= 300")
    False
    >>> affects(Plant("aggregate_average"), "What is the average pages of books?", "SELECT avg(pages) FROM book")
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


def observable(plant: Plant, candidates: list[Candidate], db_paths: dict, sandbox) -> list[Candidate]:
    """``candidates`` without the affected ones whose planted error would not show (the rewritten gold gives
    the same result), and without the ones whose correct gold is some affected question's rewritten gold (the
    "more than X" twin of an "at least X"): so no gold repeats across splits once the error is planted."""
    kind = plant.kind
    affected = [c for c in candidates if kind.phrasing(c.question, c.sql) == "affected"]
    shows = separable(plant, affected, db_paths, sandbox, ["affected"] * len(affected))
    hidden = {id(c) for c, ok in zip(affected, shows) if not ok}
    wrong = {key for c, ok in zip(affected, shows) if ok for key in _keys(c, kind.rewrite(c.sql, "affected"))[1:]}
    kept = [c for c in candidates if id(c) not in hidden and not wrong.intersection(_keys(c)[1:])]
    logger.info(
        "planted world: %d of %d affected questions show the error by execution; %d twins of them dropped",
        len(affected) - len(hidden),
        len(affected),
        len(candidates) - len(hidden) - len(kept),
    )
    return kept


def taken_keys(plant: Plant, candidates: list[Candidate]) -> set[tuple]:
    """Every question and gold key (text and meaning) ``candidates`` use, the rewritten gold of affected ones
    included."""
    keys: set[tuple] = set()
    for c in candidates:
        keys.update(_keys(c))
        if plant.kind.phrasing(c.question, c.sql) == "affected":
            keys.update(_keys(c, plant.kind.rewrite(c.sql, "affected"))[1:])
    return keys


def probe_pools(
    plant: Plant, drawn: list[Candidate], taken: set[tuple], db_paths: dict, sandbox
) -> dict[str, list[Candidate]]:
    """Per probe split, the questions of ``drawn`` (extra candidates of the plant's templates) it may take:
    the question, gold and gold's meaning new (not in ``taken``, nor earlier in ``drawn``) and the error observable
    (:func:`separable`), in ``drawn``'s order."""
    fresh, seen = [], set(taken)
    for c in drawn:
        kind = plant.probe_kind(c)
        keys = set(_keys(c))
        if kind is None or keys & seen:
            continue
        seen.update(keys)
        fresh.append((kind, c))
    kinds = ["control" if kind == "probe_control" else "affected" for kind, _ in fresh]
    shows = separable(plant, [c for _, c in fresh], db_paths, sandbox, kinds)
    pools: dict[str, list[Candidate]] = {split: [] for split in PROBE_SPLITS}
    for (kind, c), ok in zip(fresh, shows):
        if ok:
            pools[kind].append(c)
    return pools


def plant_errors(plant: Plant, splits: dict[str, list[Candidate]], seed: int) -> dict[str, dict[str, int]]:
    """Rewrite, in place, a seeded ``round(rate * affected)`` of each SFT split's affected golds; returns
    ``{split: {"affected", "rewritten"}}``."""
    rng = random.Random(f"{seed}:plant:{plant.name}")
    counts = {}
    for split in SFT_SPLITS:
        chosen = splits[split]
        affected = [i for i, c in enumerate(chosen) if plant.kind.phrasing(c.question, c.sql) == "affected"]
        wrong = rng.sample(affected, round(plant.rate * len(affected)))
        for i in wrong:
            chosen[i] = replace(chosen[i], sql=plant.kind.rewrite(chosen[i].sql, "affected"))
        counts[split] = {"affected": len(affected), "rewritten": len(wrong)}
    return counts
