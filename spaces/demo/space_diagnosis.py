"""The Space's Diagnosis tab (issue #36): ``slmsql diagnose``'s report, shown when the card folder (or the run
folder) carries ``diagnosis/``: the model card's Diagnosis section (:mod:`slmsql_hub.card.diagnosis`, so every
number is ``report.json``'s) and the plot. Importing this module does no I/O."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from slmsql_hub.card.diagnosis import diagnosis_section
from slmsql_hub.diagnosis.run import PLOT_FILE

PLOT_LABEL = "pass@k per slice (greedy EX and maj@K marked) and the error classes"


def diagnosis_tab(folder: Path) -> None:
    """The tab's components for the diagnosis in ``folder``: the card's section without its image line, then the
    plot when the folder has it."""
    text = diagnosis_section(folder)
    gr.Markdown("\n".join(line for line in text.splitlines() if not line.startswith("![")))
    if (folder / PLOT_FILE).is_file():
        gr.Image(value=str(folder / PLOT_FILE), label=PLOT_LABEL, interactive=False, show_label=True)
