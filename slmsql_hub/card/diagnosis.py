"""The diagnosis beside a run's model card (issue #36).

``slmsql diagnose`` writes ``RUN/diagnosis/`` (:mod:`slmsql_hub.diagnosis`). When ``report.json`` is there,
``slmsql card`` copies the folder into the card folder's ``diagnosis/`` (report.json, report.md, the plot and
``questions/``), which ``slmsql push`` uploads with the model repo, and the card gets a "Diagnosis" section from
``model_card/diagnosis_card.md``: per slice greedy EX, the pass@K ceiling, maj@K and the all-fail share, then the
ranked prediction or the sentence saying why GRPO is unlikely to move EX. Every number is the report's. The
Space's Diagnosis tab shows the same section beside the plot. A run without a diagnosis gets neither.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..diagnosis.run import PLOT_FILE, QUESTIONS_DIR, REPORT_FILE, REPORT_MD
from ..render.templates import load_template
from ..run.layout import DIAGNOSIS_DIR, CardLayout

TEMPLATE = "diagnosis_card.md"  # under model_card/


def find_diagnosis(root: str | Path) -> Path | None:
    """The ``diagnosis/`` folder of a run or card folder ``root`` when it holds ``report.json``, else ``None``.

    Example:

    ```python
    >>> import tempfile
    >>> find_diagnosis(tempfile.mkdtemp()) is None
    True

    ```
    """
    folder = CardLayout(root).diagnosis  # the same place in a run folder and a card folder
    return folder if (folder / REPORT_FILE).is_file() else None


def ship_diagnosis(report_dir: Path, card_root: Path) -> Path:
    """Copy ``report.json``, ``report.md``, the plot and ``questions/*.jsonl`` of ``report_dir`` into
    ``card_root/diagnosis``; return that folder."""
    target = CardLayout(card_root).diagnosis
    (target / QUESTIONS_DIR).mkdir(parents=True, exist_ok=True)
    for name in (REPORT_FILE, REPORT_MD, PLOT_FILE):
        if (report_dir / name).is_file():
            shutil.copy2(report_dir / name, target / name)
    for records in sorted((report_dir / QUESTIONS_DIR).glob("*.jsonl")):
        shutil.copy2(records, target / QUESTIONS_DIR / records.name)
    return target


def diagnosis_section(report_dir: Path) -> str:
    """The card's "Diagnosis" section (markdown) from :data:`TEMPLATE` and ``report_dir/report.json``; its links
    (the full report, the plot) point into the card folder's ``diagnosis/``."""
    report = json.loads((report_dir / REPORT_FILE).read_text(encoding="utf-8"))
    plot = f"{DIAGNOSIS_DIR}/{PLOT_FILE}" if (report_dir / PLOT_FILE).is_file() else None
    return load_template(TEMPLATE).render(report=report, full_report=f"{DIAGNOSIS_DIR}/{REPORT_MD}", plot=plot)
