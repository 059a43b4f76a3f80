"""The one chat prompt slmsql-hub trains and evaluates with.

A system turn, then a user turn holding the schema (``CREATE TABLE`` statements with sample rows, from
:func:`~slmsql_hub.sql.schema.schema_text`), the optional evidence (BIRD's external knowledge) and the
question, asking for the answer in a ```` ```sql ```` block: the format the execution reward and the metric
extract SQL from. The assistant turn used as the SFT target is :func:`format_answer`.

The wording is deliberately short: the world's tiny models train on it on two CPU cores.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..run.layout import RUN_SUMMARY

if TYPE_CHECKING:
    from ..sql.sandbox import Sandbox

SYSTEM_PROMPT = "You are a SQLite expert."

USER_TEMPLATE = "{schema}\n\n{evidence}Question: {question}\nAnswer with one SQLite query in a ```sql block."
"""Placeholders: ``{schema}``, ``{evidence}`` (the rendered evidence line, or empty), ``{question}``."""

EVIDENCE_TEMPLATE = "Evidence: {evidence}\n"
"""Non-empty evidence, as it fills ``{evidence}``."""


def build_messages(
    question: str,
    schema: str,
    evidence: str = "",
    *,
    system_prompt: str = SYSTEM_PROMPT,
    template: str = USER_TEMPLATE,
    evidence_template: str = EVIDENCE_TEMPLATE,
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

    sample_rows: int = 3
    max_value_chars: int = 40
    system_prompt: str = SYSTEM_PROMPT
    template: str = USER_TEMPLATE
    evidence_template: str = EVIDENCE_TEMPLATE

    def __post_init__(self) -> None:
        if self.sample_rows < 0:
            raise UsageError(f"PromptConfig.sample_rows must be >= 0, got {self.sample_rows}")
        if self.max_value_chars < 1:
            raise UsageError(f"PromptConfig.max_value_chars must be >= 1, got {self.max_value_chars}")
        for placeholder in ("{schema}", "{question}"):
            if placeholder not in self.template:
                raise UsageError(f"PromptConfig.template must contain {placeholder}; got {self.template!r}")

    def schema(self, db_path: str | os.PathLike, sandbox: Sandbox | None = None) -> str:
        """The schema text of ``db_path`` with this config's sample rows and value length."""
        from ..sql.schema import schema_text

        return schema_text(
            db_path, sandbox, sample_rows=self.sample_rows, max_value_chars=self.max_value_chars
        )

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


def build_prompts(
    rows: Iterable[Mapping[str, Any]],
    prompt_config: PromptConfig,
    sandbox: Sandbox | None = None,
    schema_cache: dict[tuple[str, PromptConfig], str] | None = None,
) -> list[list[dict[str, str]]]:
    """The chat prompt of every row (``question``, ``db_path``, optionally ``evidence`` and ``schema``, used as is
    when non-empty). Each database's schema is read once through ``sandbox`` into ``schema_cache`` (keyed by
    ``(db_path, prompt_config)``; pass a dict to share it across calls).

    Example:

    ```python
    >>> from slmsql_hub.data.prompts import PromptConfig, build_prompts
    >>> rows = [{"question": "How many pets?", "db_path": "unused.sqlite", "schema": "CREATE TABLE pet (id INT);"}]
    >>> build_prompts(rows, PromptConfig())[0][1]["content"].splitlines()[0]
    'CREATE TABLE pet (id INT);'

    ```
    """
    cache = {} if schema_cache is None else schema_cache
    prompts = []
    for row in rows:
        schema = row.get("schema")
        if not schema:
            key = (str(row["db_path"]), prompt_config)
            if key not in cache:
                cache[key] = prompt_config.schema(row["db_path"], sandbox)
            schema = cache[key]
        prompts.append(prompt_config.messages(row["question"], schema, row.get("evidence") or ""))
    return prompts


DEFAULT_PROMPT_SAMPLE_ROWS = 3
"""Sample rows per table in the schema text when neither the recipe nor the adapter says."""
DEFAULT_PROMPT_MAX_VALUE_CHARS = 40
"""Longest value shown in a sample row when neither the recipe nor the adapter says."""


def resolve_prompt_config(
    adapter: str | os.PathLike | None, sample_rows: int | None = None, max_value_chars: int | None = None
) -> tuple[PromptConfig, str]:
    """``(PromptConfig, source)``: the given values, else the ``prompt`` section of a local adapter's
    ``run_summary.json``, else the defaults; ``source`` (``recipe``, ``adapter`` or ``default``) says where
    ``sample_rows`` came from. :class:`UsageError` when that file is not valid JSON.

    Example:

    ```python
    >>> config, source = resolve_prompt_config("org/hub-adapter", sample_rows=0)
    >>> config.sample_rows, config.max_value_chars, source
    (0, 40, 'recipe')

    ```
    """
    source = "recipe" if sample_rows is not None else "default"
    summary_file = Path(adapter).expanduser() / RUN_SUMMARY if adapter else None
    if (
        (sample_rows is None or max_value_chars is None)
        and summary_file is not None
        and summary_file.is_file()
    ):
        try:
            trained = json.loads(summary_file.read_text(encoding="utf-8")).get("prompt") or {}
        except json.JSONDecodeError as err:
            raise UsageError(
                f"{summary_file} is not valid JSON ({err}); fix it or set prompt_sample_rows"
            ) from err
        if sample_rows is None and "sample_rows" in trained:
            sample_rows, source = int(trained["sample_rows"]), "adapter"
        if max_value_chars is None and "max_value_chars" in trained:
            max_value_chars = int(trained["max_value_chars"])
    return (
        PromptConfig(
            sample_rows=DEFAULT_PROMPT_SAMPLE_ROWS if sample_rows is None else sample_rows,
            max_value_chars=DEFAULT_PROMPT_MAX_VALUE_CHARS if max_value_chars is None else max_value_chars,
        ),
        source,
    )


@dataclass
class PromptArguments:
    """How the schema text of a prompt is built (``None``: as the adapter was trained, else the defaults).

    Example:

    ```python
    >>> PromptArguments(prompt_sample_rows=0).resolve_prompt_config(None)[0].max_value_chars
    40
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

    def __post_init__(self) -> None:
        rows, chars = self.prompt_sample_rows, self.prompt_max_value_chars
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
            raise UsageError(
                f"prompt_sample_rows must be >= 0 (0 shows no sample rows), or null; got {rows!r}"
            )
        if chars is not None and (isinstance(chars, bool) or not isinstance(chars, int) or chars < 1):
            raise UsageError(f"prompt_max_value_chars must be >= 1, or null; got {chars!r}")

    def fill_prompt_defaults(self) -> None:
        """Set unset prompt fields to the defaults (for stages that start from a base model)."""
        if self.prompt_sample_rows is None:
            self.prompt_sample_rows = DEFAULT_PROMPT_SAMPLE_ROWS
        if self.prompt_max_value_chars is None:
            self.prompt_max_value_chars = DEFAULT_PROMPT_MAX_VALUE_CHARS

    def resolve_prompt_config(self, adapter: str | os.PathLike | None) -> tuple[PromptConfig, str]:
        """:func:`resolve_prompt_config` with this recipe's values."""
        return resolve_prompt_config(adapter, self.prompt_sample_rows, self.prompt_max_value_chars)
