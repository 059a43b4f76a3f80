"""The base model a pushed adapter names, so that ``AutoPeftModelForCausalLM.from_pretrained("NAMESPACE/NAME")``
(which loads ``base_model_name_or_path`` at ``revision`` from ``adapter_config.json``) works anywhere, and the
Hub links the two through the card's ``base_model``. A run's adapter names its base as training saw it, maybe a
local folder; :func:`resolve_base` decides, from the card folder alone, which repository the pushed adapter names:

1. the card's ``base_model`` when it has one (``slmsql card`` writes it for a Hub base, or from
   ``--base-model-id``): nothing else is pushed, and a revision the adapter config pins is kept, else the commit
   the run loaded it from (``run_summary.json``'s ``revisions.model_commit``: PEFT saves ``revision: null``, which
   would load whatever the base's main branch holds later);
2. else the local base ``slmsql card`` ships in ``card/base/``: it is published as its own model repository
   (``NAMESPACE/NAME-base`` unless ``--base-repo-id`` says otherwise) with a short card rendered from
   ``model_card/base_model_card.md``;
3. else the name in the adapter config, when it is a Hub id (pinned as in 1).

The adapter config and the card are rewritten only in what is uploaded (and in the dry run's folder); the card
folder on disk is left as ``slmsql card`` wrote it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..card.build import BASE_REVISION_KEY
from ..errors import UsageError
from ..refs import looks_like_hub_id, repo_id_problem
from ..render import templates
from ..run.files import read_json_object
from ..run.layout import CardLayout, StageFolder

if TYPE_CHECKING:  # pragma: no cover
    from huggingface_hub import ModelCard

logger = logging.getLogger(__name__)

ADAPTER_CONFIG = "adapter_config.json"


@dataclasses.dataclass(frozen=True)
class BaseModel:
    """The repository the pushed adapter names as its base: ``revision`` is the one the adapter config pins
    (``None``: the default branch), ``local_dir`` a local base to publish as ``repo_id`` (``None``: on the Hub).

    Example:

    ```python
    >>> BaseModel("Qwen/Qwen2.5-Coder-1.5B-Instruct").local_dir is None
    True

    ```
    """

    repo_id: str
    revision: str | None = None
    local_dir: Path | None = None


def _hub_id(name: str, where: str) -> str:
    problem = repo_id_problem(name)
    if problem is not None:
        raise UsageError(f"{where}: {name!r} is not a Hub model id ({problem})")
    return name


def read_adapter_config(card_dir: Path) -> dict[str, Any]:
    """The card folder's ``adapter_config.json`` as a dict; a missing or malformed file is a UsageError naming the fix."""
    return read_json_object(card_dir / ADAPTER_CONFIG, "rerun `slmsql card`")


def _loaded_commit(folder: Path, repo_id: str) -> str | None:
    """The commit of the Hub base ``repo_id`` that the run in ``folder`` (a card or stage folder) loaded, from its
    ``run_summary.json`` (``revisions.model_commit``, recorded by every stage); ``None`` when it names another
    base or none.

    Example:

    ```python
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> summary = {"base_model": "alice/base", "revisions": {"model_revision": "main", "model_commit": "4f2a"}}
    >>> _ = (folder / "run_summary.json").write_text(json.dumps(summary))
    >>> _loaded_commit(folder, "alice/base"), _loaded_commit(folder, "bob/base")
    ('4f2a', None)

    ```
    """
    summary = _read_json(StageFolder(folder).summary)
    if summary.get("base_model") != repo_id:
        return None
    commit = (summary.get("revisions") or {}).get("model_commit")
    return commit if isinstance(commit, str) and commit else None


def resolve_base(
    card_dir: Path, card: ModelCard, base_repo_id: str, *, revision: str | None = None
) -> BaseModel:
    """Which repository the adapter in ``card_dir`` (its loaded ``card``) names as its base, in the module
    docstring's order; a local base becomes ``base_repo_id``, pinned to ``revision`` unless that is ``main``.
    UsageError: a local base the card folder does not ship, or a name that is no Hub id.

    Example:

    ```python
    >>> import json, tempfile, pathlib
    >>> from huggingface_hub import ModelCard
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen2.5-0.5B"}))
    >>> resolve_base(folder, ModelCard("# no metadata"), "alice/x-base")
    BaseModel(repo_id='Qwen/Qwen2.5-0.5B', revision=None, local_dir=None)

    ```
    """
    config = read_adapter_config(card_dir)
    recorded = config.get("base_model_name_or_path")
    named = card.data.base_model
    if named:
        if not isinstance(named, str):
            raise UsageError(f"{card_dir / 'README.md'}: base_model names several models; an adapter has one")
        named = _hub_id(named, f"{card_dir / 'README.md'} base_model")
        return BaseModel(named, config.get("revision") or _loaded_commit(card_dir, named))
    local = CardLayout(card_dir).lineage["base"].path
    if (local / "config.json").is_file():
        branch = revision if revision and revision != "main" and not revision.startswith("refs/") else None
        return BaseModel(base_repo_id, branch, local)
    if isinstance(recorded, str) and looks_like_hub_id(recorded):
        recorded = _hub_id(recorded, f"{card_dir / ADAPTER_CONFIG} base_model_name_or_path")
        return BaseModel(recorded, config.get("revision") or _loaded_commit(card_dir, recorded))
    raise UsageError(
        f"the adapter in {card_dir} names the base model {recorded!r}, a local folder that {local} does "
        "not ship: rerun `slmsql card` (it copies a local base there), or pass `slmsql card --base-model-id HUB_ID` "
        "when the base is on the Hub"
    )


def adapter_config_for_hub(card_dir: Path, base: BaseModel) -> bytes | None:
    """The ``adapter_config.json`` bytes to upload, naming ``base`` (``base_model_name_or_path``,
    ``revision``); ``None`` when the card folder's file already does.

    Example:

    ```python
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "out/base", "r": 8}))
    >>> json.loads(adapter_config_for_hub(folder, BaseModel("alice/x-base")))
    {'base_model_name_or_path': 'alice/x-base', 'r': 8, 'revision': None}

    ```
    """
    config = read_adapter_config(card_dir)
    wanted = {"base_model_name_or_path": base.repo_id, "revision": base.revision}
    if all(config.get(key) == value for key, value in wanted.items()):
        return None
    config.update(wanted)
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _text(content: Path | bytes) -> str:
    return content.decode("utf-8") if isinstance(content, bytes) else Path(content).read_text(encoding="utf-8")


def pin_adapter_config(content: Path | bytes, repo_id: str, commit: str) -> Path | bytes:
    """An ``adapter_config.json`` (a file or its bytes) that names ``repo_id`` pinned to ``commit``; any other
    content unchanged.

    Example:

    ```python
    >>> json.loads(pin_adapter_config(b'{"base_model_name_or_path": "a/b", "revision": null}', "a/b", "c0ffee"))
    {'base_model_name_or_path': 'a/b', 'revision': 'c0ffee'}

    ```
    """
    config = json.loads(_text(content))
    if config.get("base_model_name_or_path") != repo_id or config.get("revision") == commit:
        return content
    config["revision"] = commit
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8")


def pin_card(content: Path | bytes, repo_id: str, commit: str) -> Path | bytes:
    """An adapter's card (a file or its bytes) whose metadata names ``repo_id`` at ``commit``
    (:func:`card_for_hub`); a card naming another base unchanged."""
    from huggingface_hub import ModelCard

    card = ModelCard(_text(content))
    if card.data.base_model != repo_id:
        return content
    return card_for_hub(card, BaseModel(repo_id, commit)) or content


def card_for_hub(card: ModelCard, base: BaseModel) -> bytes | None:
    """The adapter's ``README.md`` bytes to upload, its metadata naming ``base`` with ``base_model_relation:
    adapter`` and its pinned revision (:data:`BASE_REVISION_KEY`, left out when unpinned); ``None`` when it
    already does (the body is never changed).

    Example:

    ```python
    >>> from huggingface_hub import ModelCard
    >>> text = card_for_hub(ModelCard("---\\nlibrary_name: peft\\n---\\n# x\\n"), BaseModel("alice/x-base"))
    >>> print(text.decode())
    ---
    library_name: peft
    base_model: alice/x-base
    base_model_relation: adapter
    ---
    # x
    <BLANKLINE>

    ```
    """
    wanted = {"base_model": base.repo_id, "base_model_relation": "adapter", BASE_REVISION_KEY: base.revision}
    if all(card.data.get(key) == value for key, value in wanted.items()):
        return None
    for key, value in wanted.items():
        setattr(card.data, key, value)
    return str(card).encode("utf-8")


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(path, "rerun `slmsql card`") if path.is_file() else {}


def base_card(base: BaseModel, adapter_repo_id: str, *, license: str | None, adapter_url: str) -> str:
    """The base repository's card: metadata, what the model is (from ``base/run_summary.json`` and
    ``config.json``) and the one-liner that loads ``adapter_repo_id`` on it; ``base`` is a local base.

    Example:

    ```python
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"]}))
    >>> card = base_card(BaseModel("alice/x-base", None, folder), "alice/x", license="apache-2.0",
    ...                  adapter_url="https://huggingface.co/alice/x")
    >>> 'AutoPeftModelForCausalLM.from_pretrained("alice/x")' in card, "Qwen2ForCausalLM" in card
    (True, True)

    ```
    """
    from huggingface_hub import ModelCard, ModelCardData

    if base.local_dir is None:
        raise ValueError(f"{base.repo_id} is on the Hub already: it gets no card from slmsql-hub")
    record = StageFolder(base.local_dir)
    summary = _read_json(record.summary)
    config = _read_json(base.local_dir / "config.json")
    architectures = config.get("architectures") or []
    data = ModelCardData(
        library_name="transformers",
        license=license,
        pipeline_tag="text-generation",
        tags=["text-to-sql", "slmsql-hub"],
    )
    context = {
        "model_name": base.repo_id.split("/")[-1],
        "adapter_repo_id": adapter_repo_id,
        "adapter_url": adapter_url,
        "architecture": (summary.get("model") or {}).get("architecture")
        or (architectures or ["a causal LM"])[0],
        "parameters": (summary.get("parameters") or {}).get("total"),
        "from_scratch": summary.get("kind") == "base",
        "steps": summary.get("steps"),
        "final_loss": summary.get("final_loss"),
        "world_dir": summary.get("world_dir"),
        "has_record": record.summary.is_file(),
        "slmsql_hub_version": __version__,
    }
    path = templates.template_path(templates.BASE_MODEL_CARD)
    return str(templates.render(ModelCard, data, path, **context))
