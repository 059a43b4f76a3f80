"""Publishing a run to the Hugging Face Hub (``slmsql push``): :mod:`~slmsql_hub.hub.plan` decides what goes where,
:mod:`~slmsql_hub.hub.publish` uploads it (or writes a dry run), :mod:`~slmsql_hub.hub.band` publishes the filtered
band, :mod:`~slmsql_hub.hub.base_model` the world's base model. Publishing renders cards; the card never imports
publishing. ``slmsql_hub.hub`` is the one import for publishing."""

from ..card.training import training_card
from ..refs import check_repo_id, repo_url
from .band import BAND_SHARD, BAND_SPLIT, dataset_card, load_band, portable_db_path
from .plan import NAMED_METRIC_FILES, plan_push, write_dry_run
from .publish import PushResult, push, push_training_card, space_token_note
from .targets import (
    BASE_MODEL,
    DATASET,
    DEMO_SPACE,
    METRIC_FILES,
    METRIC_SPACE,
    MODEL,
    SFT_MODEL,
    TARGETS,
    PushTarget,
    default_repo_ids,
    folder_files,
    parse_what,
)

__all__ = [
    "BAND_SHARD",
    "BAND_SPLIT",
    "BASE_MODEL",
    "DATASET",
    "DEMO_SPACE",
    "METRIC_FILES",
    "METRIC_SPACE",
    "MODEL",
    "NAMED_METRIC_FILES",
    "SFT_MODEL",
    "TARGETS",
    "PushResult",
    "PushTarget",
    "check_repo_id",
    "dataset_card",
    "default_repo_ids",
    "folder_files",
    "load_band",
    "parse_what",
    "plan_push",
    "portable_db_path",
    "push",
    "push_training_card",
    "repo_url",
    "space_token_note",
    "training_card",
    "write_dry_run",
]
