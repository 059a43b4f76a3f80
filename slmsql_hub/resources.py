"""Folders that live at the top of a clone and ship inside the wheel (``pyproject.toml`` maps them):
``model_card/`` as ``slmsql_hub/model_card/`` and ``spaces/demo/`` as ``slmsql_hub/demo_space/``.

Example:

```python
>>> from slmsql_hub.resources import shipped_path
>>> shipped_path("model_card/model_card.md", "model_card/model_card.md").name
'model_card.md'

```
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def shipped_path(in_clone: str, in_wheel: str) -> Path:
    """The clone's copy (``in_clone``, relative to the clone's root) when this package runs from a clone, so edits
    take effect, else the copy the wheel installed (``in_wheel``, relative to the package); the clone's path when
    neither exists, so an error names the file to restore."""
    clone = PACKAGE_DIR.parent / in_clone
    installed = PACKAGE_DIR / in_wheel
    return installed if not clone.exists() and installed.exists() else clone
