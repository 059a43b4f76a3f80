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

from ..evaluation.findings import claims
from ..render.templates import load_template
from ..run.layout import ABLATIONS_DIR, FOREST_PLOT, REPORT_JSON, REPORT_MD

logger = logging.getLogger(__name__)

TEMPLATE = "ablation_card.md"  # under model_card/


def copy_report(report_dir: Path, card_root: Path) -> Path:
    """Copy report.json, report.md and plots/ into ``card_root/ablations``; return that folder."""
    target = card_root / ABLATIONS_DIR
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
        report=report, facts=claims(report["pooled"]), folder=ABLATIONS_DIR, forest=FOREST_PLOT
    )
