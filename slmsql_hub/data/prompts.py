"""The one chat prompt slmsql-hub trains and evaluates with.

A system turn, then a user turn holding the schema (``CREATE TABLE`` statements with sample rows, from
:func:`~slmsql_hub.sql.schema.schema_text`), the optional evidence (BIRD's external knowledge) and the
question, asking for the answer in a ```` ```sql ```` block: the format the execution reward and the metric
extract SQL from. The assistant turn used as the SFT target is :func:`format_answer`.

The wording is deliberately short: the world's tiny models train on it on two CPU cores.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..run.layout import RUN_SUMMARY
from ..runtime import bar_disabled

if TYPE_CHECKING:
    from ..sql.sandbox import Sandbox

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = "You are a SQLite expert."

_USER_TEMPLATE = "{schema}\n\n{evidence}Question: {question}\nAnswer with one SQLite query in a ```sql block."
"""Placeholders: ``{schema}``, ``{evidence}`` (the rendered evidence line, or empty), ``{question}``."""

_EVIDENCE_TEMPLATE = "Evidence: {evidence}\n"
"""Non-empty evidence, as it fills ``{evidence}``."""


def build_messages(
    question: str,
    schema: str,
    evidence: str = "",
    *,
    system_prompt: str = SYSTEM_PROMPT,
    template: str = _USER_TEMPLATE,
    evidence_template: str = _EVIDENCE_TEMPLATE,
) -> list[dict[str, str]]:
    """The chat prompt for one question: ``[{"role": "system", ...}, {"role": "user", ...}]``, ready for
    ``apply_chat_template(..., add_generation_prompt=True)``. An empty ``evidence`` (BIRD's) or
    ``system_prompt`` leaves that part out.

    UsageError: the template lacks ``{schema}`` or ``{question}``, names another placeholder, or evidence is
    given but the template has no ``{evidence}``.

    Example:

    ```python
    >>> from slmsql_hub.data.prompts import build_messages
    >>> messages = build_messages("How many pets are there?", "CREATE TABLE pet (id INTEGER);")
    >>> [m["role"] for m in messages]
    ['system', 'user']
    >>> print(messages[1]["content"])
    CREATE TABLE pet (id INTEGER);
    <BLANKLINE>
    Question: How many pets are there?
    Answer with one SQLite query in a ```sql block.

    ```
    """
    for placeholder in ("{schema}", "{question}"):
        if placeholder not in template:
            raise UsageError(f"the prompt template must contain {placeholder}; got {template!r}")
    evidence = (evidence or "").strip()
    if evidence and "{evidence}" not in template:
        raise UsageError("evidence was given but the prompt template has no {evidence} placeholder; add one")
    evidence_text = evidence_template.format(evidence=evidence) if evidence else ""
    try:
        user = template.format(schema=schema.strip(), evidence=evidence_text, question=question.strip())
    except (KeyError, IndexError, ValueError) as err:
        raise UsageError(
            f"the prompt template may only use {{schema}}, {{evidence}} and {{question}} (double other braces): "
            f"{err!r}"
        ) from err
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": user})
    return messages


def format_answer(sql: str) -> str:
    """The assistant turn for one SQL answer (the SFT target): the stripped query in a ```` ```sql ```` block.

    Example:

    ```python
    >>> from slmsql_hub.data.prompts import format_answer
    >>> print(format_answer("  SELECT count(*) FROM pet \\n"))
    ```sql
    SELECT count(*) FROM pet
    ```

    ```
    """
    return f"```sql\n{sql.strip()}\n```"


DEFAULT_PROMPT_SAMPLE_ROWS = 3
"""Sample rows per table in the schema text when neither the recipe nor the adapter says."""
DEFAULT_PROMPT_MAX_VALUE_CHARS = 40
"""Longest value shown in a sample row when neither the recipe nor the adapter says."""


@dataclass(frozen=True)
class PromptConfig:
    """Everything that shapes a prompt, in one place (recipes set it; training and evaluation share it):
    ``sample_rows`` per table in the schema (0: none), each value cut at ``max_value_chars``.

    Example:

    ```python
    >>> from slmsql_hub.data.prompts import PromptConfig
    >>> config = PromptConfig(sample_rows=0, system_prompt="")
    >>> [m["role"] for m in config.messages("How many pets?", "CREATE TABLE pet (id INTEGER);")]
    ['user']

    ```
    """

    sample_rows: int = DEFAULT_PROMPT_SAMPLE_ROWS
    max_value_chars: int = DEFAULT_PROMPT_MAX_VALUE_CHARS
    system_prompt: str = SYSTEM_PROMPT
    template: str = _USER_TEMPLATE
    evidence_template: str = _EVIDENCE_TEMPLATE

    def __post_init__(self) -> None:
        if self.sample_rows < 0:
            raise UsageError(f"PromptConfig.sample_rows must be >= 0, got {self.sample_rows}")
        if self.max_value_chars < 1:
            raise UsageError(f"PromptConfig.max_value_chars must be >= 1, got {self.max_value_chars}")
        for placeholder in ("{schema}", "{question}"):
            if placeholder not in self.template:
                raise UsageError(f"PromptConfig.template must contain {placeholder}; got {self.template!r}")
        try:
            self.template.format(schema="", evidence="", question="")
            self.evidence_template.format(evidence="")
        except (KeyError, IndexError, ValueError) as err:
            raise UsageError(
                "the prompt template may only use {schema}, {evidence} and {question}, its evidence template only "
                f"{{evidence}} (double other braces): {err!r}"
            ) from err

    def schema(self, db_path: str | os.PathLike, sandbox: Sandbox | None = None) -> str:
        """The schema text of ``db_path`` with this config's sample rows and value length."""
        from ..sql.schema import schema_text

        return schema_text(
            db_path, sandbox, sample_rows=self.sample_rows, max_value_chars=self.max_value_chars
        )

    def record(self) -> dict[str, Any]:
        """Every field by name: the ``prompt`` section of each run's summary, which :func:`resolve_prompt_config`
        reads back from an adapter.

        Example:

        ```python
        >>> PromptConfig.from_record(PromptConfig(sample_rows=1).record()) == PromptConfig(sample_rows=1)
        True

        ```
        """
        return dataclasses.asdict(self)

    def python_args(self) -> str:
        """The arguments that rebuild this config in Python, for a card's usage snippet: the two numbers always,
        the texts only where they differ from the defaults.

        Example:

        ```python
        >>> PromptConfig().python_args()
        'sample_rows=3, max_value_chars=40'
        >>> PromptConfig(sample_rows=0, system_prompt="Answer in SQLite.").python_args()
        "sample_rows=0, max_value_chars=40, system_prompt='Answer in SQLite.'"

        ```
        """
        default = PromptConfig()
        return ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in _PROMPT_FIELDS
            if name in ("sample_rows", "max_value_chars") or getattr(self, name) != getattr(default, name)
        )

    @classmethod
    def from_record(cls, recorded: Mapping[str, Any]) -> PromptConfig:
        """The config a :meth:`record` describes; missing or ``null`` fields (older runs) take the defaults."""
        return cls(**{f: recorded[f] for f in _PROMPT_FIELDS if recorded.get(f) is not None})

    def messages(self, question: str, schema: str, evidence: str = "") -> list[dict[str, str]]:
        """:func:`build_messages` with this config's system prompt and templates."""
        return build_messages(
            question,
            schema,
            evidence,
            system_prompt=self.system_prompt,
            template=self.template,
            evidence_template=self.evidence_template,
        )


_PROMPT_FIELDS = tuple(f.name for f in dataclasses.fields(PromptConfig))
"""The fields of :class:`PromptConfig`: recipes set each as ``prompt_<field>``, summaries record each by name."""
PROMPT_TEXT_FIELDS = ("system_prompt", "template", "evidence_template")
"""The fields that are text (the others are numbers of the schema text)."""


def build_prompts(
    rows: Iterable[Mapping[str, Any]],
    prompt_config: PromptConfig,
    sandbox: Sandbox | None = None,
    schema_cache: dict[tuple[str, PromptConfig], str] | None = None,
    *,
    locate: Callable[[Mapping[str, Any]], str] | None = None,
    progress: bool = False,
) -> list[list[dict[str, str]]]:
    """The chat prompt of every row: the one place a row's columns become a prompt (SFT, GRPO, the filter,
    eval, the study and the Space all call it). A row has ``question``, optionally ``evidence``, and a non-empty
    ``schema`` (used as is) or a ``db_path``, whose schema is read once per database through ``sandbox``
    (``None``: one short-lived sandbox) into ``schema_cache`` (keyed by ``(db_path, prompt_config)``; pass a dict
    to share it across calls). ``locate`` maps a row to its database file (default: its ``db_path`` as is).

    Example:

    ```python
    >>> from slmsql_hub.data.prompts import PromptConfig, build_prompts
    >>> rows = [{"question": "How many pets?", "db_path": "unused.sqlite", "schema": "CREATE TABLE pet (id INT);"}]
    >>> build_prompts(rows, PromptConfig())[0][1]["content"].splitlines()[0]
    'CREATE TABLE pet (id INT);'

    ```
    """
    from tqdm.auto import tqdm

    cache = {} if schema_cache is None else schema_cache
    prompts = []
    box, own = sandbox, False
    try:
        for row in tqdm(rows, desc="building prompts", leave=False, disable=bar_disabled(progress)):
            schema = row.get("schema")
            if not schema:
                db_path = locate(row) if locate is not None else str(row["db_path"])
                key = (db_path, prompt_config)
                if key not in cache:
                    if box is None:
                        from ..sql.sandbox import Sandbox

                        box, own = Sandbox(workers=1), True
                    cache[key] = prompt_config.schema(db_path, box)
                schema = cache[key]
            prompts.append(prompt_config.messages(row["question"], schema, row.get("evidence") or ""))
    finally:
        if own:
            box.close()
    logger.debug("%d prompt(s)", len(prompts))
    return prompts


def resolve_prompt_config(
    adapter: str | os.PathLike | None,
    sample_rows: int | None = None,
    max_value_chars: int | None = None,
    *,
    system_prompt: str | None = None,
    template: str | None = None,
    evidence_template: str | None = None,
) -> tuple[PromptConfig, str]:
    """``(PromptConfig, source)``: each given field, else that field of the ``prompt`` section of a local
    adapter's ``run_summary.json`` (what its training used), else the default; ``source`` (``recipe``,
    ``adapter`` or ``default``) says where ``sample_rows`` came from. :class:`UsageError` when that file is not
    valid JSON.

    Example:

    ```python
    >>> config, source = resolve_prompt_config("org/hub-adapter", sample_rows=0)
    >>> config.sample_rows, config.max_value_chars, config.system_prompt, source
    (0, 40, 'You are a SQLite expert.', 'recipe')

    ```
    """
    given = {
        "sample_rows": sample_rows,
        "max_value_chars": max_value_chars,
        "system_prompt": system_prompt,
        "template": template,
        "evidence_template": evidence_template,
    }
    values = {name: value for name, value in given.items() if value is not None}
    source = "recipe" if sample_rows is not None else "default"
    if len(values) < len(_PROMPT_FIELDS):
        trained = _trained_prompt(adapter)
        values = {**{k: v for k, v in trained.items() if k in _PROMPT_FIELDS and v is not None}, **values}
        if sample_rows is None and trained.get("sample_rows") is not None:
            source = "adapter"
    return PromptConfig(**values), source


def _trained_prompt(adapter: str | os.PathLike | None) -> dict[str, Any]:
    """The ``prompt`` section of a local adapter's ``run_summary.json``; ``{}`` when there is none."""
    summary_file = Path(adapter).expanduser() / RUN_SUMMARY if adapter else None
    if summary_file is None or not summary_file.is_file():
        return {}
    try:
        return json.loads(summary_file.read_text(encoding="utf-8")).get("prompt") or {}
    except json.JSONDecodeError as err:
        raise UsageError(
            f"{summary_file} is not valid JSON ({err}); fix it, or set every prompt_* field in the recipe"
        ) from err


@dataclass
class PromptArguments:
    """The prompt of a stage, as recipe fields ``prompt_<field>`` of :class:`PromptConfig` (``None``: as the
    adapter was trained, else the defaults). A new prompt template is a recipe's ``prompt_template``.

    Example:

    ```python
    >>> PromptArguments(prompt_sample_rows=0).resolve_prompt_config(None)[0].max_value_chars
    40
    >>> PromptArguments(prompt_template="Q: {question}")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: prompt_template must contain {schema}; got 'Q: {question}'
    >>> PromptArguments(prompt_sample_rows=-1)
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: prompt_sample_rows must be >= 0 (0 shows no sample rows), or null; got -1

    ```
    """

    prompt_sample_rows: int | None = field(
        default=None,
        metadata={
            "help": "Sample rows per table in the schema text; null: as the adapter was trained, else 3."
        },
    )
    prompt_max_value_chars: int | None = field(
        default=None, metadata={"help": "Longest value shown in a sample row; null: as the adapter, else 40."}
    )
    prompt_system_prompt: str | None = field(
        default=None,
        metadata={"help": "The system turn ('' for none); null: as the adapter, else 'You are a SQLite expert.'"},
    )
    prompt_template: str | None = field(
        default=None,
        metadata={
            "help": "The user turn, with {schema}, {question} and {evidence} (other braces doubled); null: as "
            "the adapter, else the project's (slmsql_hub/data/prompts.py _USER_TEMPLATE)."
        },
    )
    prompt_evidence_template: str | None = field(
        default=None,
        metadata={"help": "What non-empty evidence puts in {evidence}; null: as the adapter, else 'Evidence: {evidence}\\n'."},
    )

    def __post_init__(self) -> None:
        rows, chars = self.prompt_sample_rows, self.prompt_max_value_chars
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
            raise UsageError(
                f"prompt_sample_rows must be >= 0 (0 shows no sample rows), or null; got {rows!r}"
            )
        if chars is not None and (isinstance(chars, bool) or not isinstance(chars, int) or chars < 1):
            raise UsageError(f"prompt_max_value_chars must be >= 1, or null; got {chars!r}")
        for name in PROMPT_TEXT_FIELDS:
            value = getattr(self, f"prompt_{name}")
            if value is not None and not isinstance(value, str):
                raise UsageError(f"prompt_{name} must be a string, or null; got {value!r}")
        if self.prompt_template is not None:
            for placeholder in ("{schema}", "{question}"):
                if placeholder not in self.prompt_template:
                    raise UsageError(f"prompt_template must contain {placeholder}; got {self.prompt_template!r}")
        texts = {name: getattr(self, f"prompt_{name}") for name in PROMPT_TEXT_FIELDS}
        PromptConfig(**{name: text for name, text in texts.items() if text is not None})  # the placeholders

    def fill_prompt_defaults(self) -> None:
        """Set unset prompt fields to the defaults (for stages that start from a base model)."""
        if self.prompt_sample_rows is None:
            self.prompt_sample_rows = DEFAULT_PROMPT_SAMPLE_ROWS
        if self.prompt_max_value_chars is None:
            self.prompt_max_value_chars = DEFAULT_PROMPT_MAX_VALUE_CHARS

    def resolve_prompt_config(self, adapter: str | os.PathLike | None) -> tuple[PromptConfig, str]:
        """:func:`resolve_prompt_config` with this recipe's values."""
        return resolve_prompt_config(adapter, **{k: getattr(self, f"prompt_{k}") for k in _PROMPT_FIELDS})
