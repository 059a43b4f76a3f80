"""The embedded world: the offline stand-in for SynSQL, BIRD, Spider and Qwen2.5-Coder.

Small SQLite databases of our own design, a question generator over them, the dataset splits the tiny
end-to-end pipeline trains and evaluates on, and the tokenizer of the tiny base model
(:mod:`slmsql_hub.training.base` pretrains it on their text).

- :mod:`~slmsql_hub.world.schemas`: the databases (tables, columns, foreign keys, question words),
- :mod:`~slmsql_hub.world.populate`: deterministic rows and SQLite files,
- :mod:`~slmsql_hub.world.templates` and :mod:`~slmsql_hub.world.slots`: question templates across Spider's
  hardness levels, and what they draw,
- :mod:`~slmsql_hub.world.questions`: the generator that draws them into distinct questions,
- :mod:`~slmsql_hub.world.build`: :func:`build_world`, splits, dataset cards and ``world.json``,
- :mod:`~slmsql_hub.world.tokenizer`: a small Qwen-style byte-level BPE tokenizer learnt from the world,

Importing this package imports neither torch nor datasets; ``tokenizer`` does when called.
"""

from .build import SPLITS, WORLD_VERSION, WorldManifest, WorldSizes, build_world
from .schemas import DATABASES, HELD_OUT_DB

__all__ = [
    "DATABASES",
    "HELD_OUT_DB",
    "SPLITS",
    "WORLD_VERSION",
    "WorldManifest",
    "WorldSizes",
    "build_world",
]
