"""The study's report beside a run's model card: find it, copy it into the card folder, render the card section.

``slmsql card --run-dir RUN`` ships the ablation report of RUN when there is one: ``RUN/ablations/report.json``, or
``RUN/../ablations/report.json`` (``make ablations``' folder) when its recorded ``run_dir`` is RUN. The card folder
gets ``ablations/`` (report.json, report.md, plots/), which ``slmsql push`` uploads with the model repo, and the
card an "Ablations" section from ``model_card/ablation_card.md``.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from .report import FOREST_PLOT, REPORT_JSON, REPORT_MD, claims, load_template

logger = logging.getLogger(__name__)

CARD_FOLDER = "ablations"  # inside the card folder (and the model repo)
TEMPLATE = "ablation_card.md"  # under model_card/


def find_report(run_dir: str | Path) -> Path | None:
    """The folder of RUN's ablation report (see the module docstring), or ``None``."""
    run = Path(run_dir)
    inside = run / CARD_FOLDER
    if (inside / REPORT_JSON).is_file():
        return inside
    beside = run.parent / CARD_FOLDER
    if (beside / REPORT_JSON).is_file():
        try:
            report = json.loads((beside / REPORT_JSON).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            logger.warning(
                "%s is not a readable report (%s); it is not RUN's study", beside / REPORT_JSON, err
            )
            return None
        recorded = ((report.get("config") if isinstance(report, dict) else None) or {}).get("run_dir")
        if recorded and Path(recorded).resolve() == run.resolve():
            return beside
    return None


def copy_report(report_dir: Path, card_root: Path) -> Path:
    """Copy report.json, report.md and plots/ into ``card_root/ablations``; return that folder."""
    target = card_root / CARD_FOLDER
    (target / "plots").mkdir(parents=True, exist_ok=True)
    for name in (REPORT_JSON, REPORT_MD):
        shutil.copy2(report_dir / name, target / name)
    for plot in sorted((report_dir / "plots").glob("*.png")):
        shutil.copy2(plot, target / "plots" / plot.name)
    return target


def card_section(report_dir: Path) -> str:
    """The card's "Ablations" section (markdown) from :data:`TEMPLATE` and the report's pooled table."""
    report = json.loads((report_dir / REPORT_JSON).read_text(encoding="utf-8"))
    template = load_template(TEMPLATE)
    return template.render(
        report=report, facts=claims(report["pooled"]), folder=CARD_FOLDER, forest=FOREST_PLOT
    )
