"""Names of models and adapters in recipes: a local folder or a Hub id, and the dtypes a recipe may ask for."""

from __future__ import annotations

from pathlib import Path

DTYPES = ("auto", "float32", "bfloat16", "float16")
"""The ``dtype`` values the SFT, GRPO, filter and eval recipes accept."""


def looks_local(ref: str | Path) -> bool:
    """Whether ``ref`` can only be a local folder: a Hub id is ``name`` or ``owner/name`` with no local ``owner``.

    Example:

    ```python
    >>> looks_local("Qwen/Qwen2.5-Coder-1.5B-Instruct"), looks_local("outputs/quickstart/base"), looks_local("./base")
    (False, True, True)

    ```
    """
    text = str(ref)
    return (
        isinstance(ref, Path)
        or text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or "\\" in text
        or Path(text.split("/")[0]).is_dir()
    )
