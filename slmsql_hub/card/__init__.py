"""The model card (``slmsql card``): :mod:`~slmsql_hub.card.context` turns a run's files into the numbers the
template shows, :mod:`~slmsql_hub.card.build` renders the card and assembles the model repo folder,
:mod:`~slmsql_hub.card.ablations` adds the ablation study's section and :mod:`~slmsql_hub.card.diagnosis` the
diagnosis's. ``slmsql_hub.card`` is the one import."""

from ..run.read import Run, load_run
from .build import (
    NULL_TAG,
    CardBuild,
    CardOptions,
    build_card,
    card_context,
    card_data,
    default_template_path,
    eval_result_entries,
    project_license,
    recorded_options,
    render_card,
    render_for_repo,
)

__all__ = [
    "NULL_TAG",
    "CardBuild",
    "CardOptions",
    "Run",
    "build_card",
    "card_context",
    "card_data",
    "default_template_path",
    "eval_result_entries",
    "load_run",
    "project_license",
    "recorded_options",
    "render_card",
    "render_for_repo",
]
