"""The study's reports beside a run's model card: find them, copy them into the card folder, render the section.

``slmsql card --run-dir RUN`` ships the ablation report of RUN when there is one: ``RUN/ablations/report.json``, or
``RUN/../ablations/report.json`` (``make ablations``' folder) when its recorded ``run_dir`` is RUN. The card folder
gets ``ablations/`` (report.json, report.md, plots/), which ``slmsql push`` uploads with the model repo, and the
card an "Ablations" section from ``model_card/ablation_card.md``.

The **transfer report** (``slmsql ablate --combine``, :mod:`slmsql_hub.study.transfer`; its finding from
:func:`~slmsql_hub.evaluation.findings.render_finding`) covers RUN when one of its
worlds' ``run_dir`` is RUN. :func:`find_transfer` looks, in order, at ``RUN/ablations/transfer/`` (a card folder's
shipped copy), then ``transfer/report.json`` and ``report.json`` in RUN's parent and in its grandparent
(``make transfer`` puts it in ``outputs/transfer/``: the grandparent of ``outputs/transfer/worlds/plant70`` and the
parent's ``transfer/`` of ``outputs/quickstart``), and takes the first whose ``kind`` is ``transfer`` and that names
RUN. It ships as ``ablations/transfer/``, and the section adds its finding and pass@k plot. A run with no
ablation report of its own takes its world's (the world's ``output_dir`` the transfer report records).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from ..evaluation.findings import KIND, claims, render_finding
from ..render.templates import load_template
from ..run.layout import ABLATIONS_DIR, FOREST_PLOT, REPORT_JSON, REPORT_MD

logger = logging.getLogger(__name__)

TEMPLATE = "ablation_card.md"  # under model_card/
TRANSFER_DIR = "transfer"  # the transfer report's folder inside the card's ablations/


def copy_report(report_dir: Path, card_root: Path, name: str = ABLATIONS_DIR) -> Path:
    """Copy report.json, report.md and plots/ into ``card_root/<name>``; return that folder."""
    target = card_root / name
    (target / "plots").mkdir(parents=True, exist_ok=True)
    for file in (REPORT_JSON, REPORT_MD):
        shutil.copy2(report_dir / file, target / file)
    for plot in sorted((report_dir / "plots").glob("*.png")):
        shutil.copy2(plot, target / "plots" / plot.name)
    return target


def _read(path: Path) -> dict | None:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        logger.warning("%s is not a readable report (%s); it is not RUN's transfer study", path, err)
        return None
    return report if isinstance(report, dict) else None


def find_transfer(run_dir: str | Path) -> tuple[Path, str] | None:
    """The folder of the transfer report covering RUN and RUN's world in it (the module docstring's rule)."""
    run = Path(run_dir)
    shipped = run / ABLATIONS_DIR / TRANSFER_DIR
    above = (run.parent, run.parent.parent)
    for folder in (shipped, *(f for parent in above for f in (parent / TRANSFER_DIR, parent))):
        if not (folder / REPORT_JSON).is_file():
            continue
        report = _read(folder / REPORT_JSON)
        if not report or report.get("kind") != KIND:
            continue
        worlds = report.get("worlds") or {}
        if folder == shipped and report.get("card_world") in worlds:
            return folder, report["card_world"]
        for name, world in worlds.items():
            if Path(world.get("run_dir", "")).resolve() == run.resolve():
                return folder, name
    return None


def world_report(transfer: tuple[Path, str] | None) -> Path | None:
    """The ablation report folder of the transfer report's world (its ``output_dir``), when it has one."""
    if transfer is None:
        return None
    report = _read(transfer[0] / REPORT_JSON) or {}
    output = (report.get("worlds", {}).get(transfer[1]) or {}).get("output_dir")
    return Path(output) if output and (Path(output) / REPORT_JSON).is_file() else None


def ship_reports(ablations: Path | None, transfer: tuple[Path, str] | None, card_root: Path) -> None:
    """Copy the ablation report into ``card_root/ablations`` and the transfer report into its ``transfer/``,
    recording which world the card's run is (``card_world``), so the card folder alone finds it again."""
    if ablations is not None:
        copy_report(ablations, card_root)
    if transfer is not None:
        target = copy_report(transfer[0], card_root / ABLATIONS_DIR, TRANSFER_DIR)
        report = json.loads((target / REPORT_JSON).read_text(encoding="utf-8"))
        (target / REPORT_JSON).write_text(
            json.dumps({**report, "card_world": transfer[1]}, indent=2) + "\n", encoding="utf-8"
        )


def transfer_context(folder: Path, world: str) -> dict[str, Any]:
    """What the card and the Space show of a transfer report: the finding, this run's world and its plant, the
    pass@k plot (``None`` without one), relative to ``folder``."""
    report = json.loads((folder / REPORT_JSON).read_text(encoding="utf-8"))
    return {"finding": render_finding(report), "world": world, "n_worlds": len(report["worlds"]),
            "plant": report["worlds"][world]["plant"], "passk": (report.get("plots") or {}).get("passk")}  # fmt: skip


def card_section(report_dir: Path | None, transfer: tuple[Path, str] | None = None) -> str:
    """The card's "Ablations" section (markdown) from :data:`TEMPLATE`: the report's pooled table and plots, and
    the transfer report's finding when one covers the run."""
    report = json.loads((report_dir / REPORT_JSON).read_text(encoding="utf-8")) if report_dir else None
    template = load_template(TEMPLATE)
    return template.render(
        report=report, facts=claims(report["pooled"]) if report else None, folder=ABLATIONS_DIR,
        forest=FOREST_PLOT, transfer=transfer_context(*transfer) if transfer else None,
        transfer_folder=f"{ABLATIONS_DIR}/{TRANSFER_DIR}",
    )  # fmt: skip
