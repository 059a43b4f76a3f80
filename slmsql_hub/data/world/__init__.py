"""The embedded world: small SQLite databases of our own design, a question generator over them and the
dataset splits the tiny end-to-end pipeline trains and evaluates on (the offline stand-in for SynSQL, BIRD and
Spider).

- :mod:`~slmsql_hub.data.world.schemas`: the databases (tables, columns, foreign keys, question words),
- :mod:`~slmsql_hub.data.world.populate`: deterministic rows and SQLite files,
- :mod:`~slmsql_hub.data.world.questions`: question templates across Spider's hardness levels,
- :mod:`~slmsql_hub.data.world.build`: :func:`build_world`, splits, dataset cards and ``world.json``.
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
