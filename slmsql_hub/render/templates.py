"""The Jinja templates of every card slmsql-hub writes (``model_card/*.md``; see ``model_card/README.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..refs import hub_endpoint

MODEL_CARD = "model_card.md"
BASE_MODEL_CARD = "base_model_card.md"
DATASET_CARD = "dataset_card.md"
TRAINING_CARD = "training_card.md"


def template_path(name: str) -> Path:
    """``model_card/<name>`` of the clone (so edits take effect), else the copy the wheel installs.

    Example:

    ```python
    >>> from slmsql_hub.render.templates import template_path
    >>> template_path("dataset_card.md").name
    'dataset_card.md'

    ```
    """
    from ..resources import shipped_path

    return shipped_path(f"model_card/{name}", f"model_card/{name}")


def render(card_class: Any, data: Any, path: str | Path, **context: Any) -> Any:
    """``card_class.from_template(data, template_path=path, **context)`` (a ``ModelCard`` or ``DatasetCard``);
    ``hub_url`` (the Hub the links point to, :func:`~slmsql_hub.refs.hub_endpoint`) is there unless given.
    UsageError: no template, not UTF-8 or a Jinja syntax error; ValueError: it uses a variable the context does not define (Jinja renders it empty).
    """
    import jinja2
    import jinja2.meta

    path = Path(path)
    if not path.is_file():
        raise UsageError(
            f"card template not found: {path}; restore model_card/{path.name} (or pass --template)"
        )
    context.setdefault("hub_url", hub_endpoint())
    known = set(context) | set(data.to_dict()) | {"card_data"}
    try:
        used = jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(path.read_text(encoding="utf-8")))
    except UnicodeDecodeError as err:
        raise UsageError(f"card template {path} is not UTF-8 text (byte {err.start}): re-save it as UTF-8") from None
    except jinja2.TemplateSyntaxError as err:
        raise UsageError(f"card template {path}, line {err.lineno}: Jinja syntax error ({err.message})") from None
    missing = sorted(used - known)
    if missing:
        raise ValueError(f"the template {path} uses undefined variable(s) {', '.join(missing)}")
    return card_class.from_template(data, template_path=str(path), **context)


def load_template(name: str) -> Any:
    """A ``model_card/<name>`` jinja2 template with the study's filters, ``points`` (ΔEX) and ``pvalue``, and
    ``hub_url`` (as :func:`render`)."""
    import jinja2

    from .fmt import format_p, format_points

    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["points"] = format_points
    environment.globals["hub_url"] = hub_endpoint()
    environment.filters["pvalue"] = lambda p: format_p(p).replace("p = ", "").replace("p < ", "< ")
    return environment.from_string(template_path(name).read_text(encoding="utf-8"))
