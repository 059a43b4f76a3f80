"""The benchmark section of a recipe (:class:`BenchmarkArguments`): ``benchmarks: [NAME:SPLIT[:LIMIT], ...]`` plus
one root folder per benchmark (``world_root``, ``bird_root``, ``spider_root``, ``synsql_root``). The older
spellings (``benchmarks: [bird=data/bird]`` + ``benchmark_split``; ``benchmark`` + ``data_root`` + ``split``;
``world_dir``) still load for one release, each with one logged deprecation line naming the new spelling."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import UsageError

logger = logging.getLogger(__name__)

BENCHMARK_NAMES = ("world", "spider", "bird", "synsql")
"""The benchmarks a recipe can name; each has a ``<name>_root`` field."""


class BenchmarkEntry(NamedTuple):
    """One ``NAME:SPLIT[:LIMIT]`` entry of ``benchmarks``.

    Example:

    ```python
    >>> BenchmarkEntry.parse("spider:dev:200")
    BenchmarkEntry(name='spider', split='dev', limit=200)
    >>> BenchmarkEntry.parse("spider")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmarks entry 'spider' must be NAME:SPLIT or NAME:SPLIT:LIMIT, e.g. world:dev:200 or bird:train

    ```
    """

    name: str
    split: str
    limit: int | None = None

    @classmethod
    def parse(cls, text: str) -> BenchmarkEntry:
        parts = [part.strip() for part in str(text).split(":")]
        if len(parts) not in (2, 3) or not all(parts):
            raise UsageError(
                f"benchmarks entry {text!r} must be NAME:SPLIT or NAME:SPLIT:LIMIT, e.g. world:dev:200 or bird:train"
            )
        name = parts[0].lower()
        if name not in BENCHMARK_NAMES:
            raise UsageError(
                f"benchmarks entry {text!r}: unknown benchmark {name!r}; use one of {', '.join(BENCHMARK_NAMES)}"
            )
        limit = None
        if len(parts) == 3:
            if not parts[2].isdigit() or int(parts[2]) < 1:
                raise UsageError(f"benchmarks entry {text!r}: LIMIT must be a whole number >= 1")
            limit = int(parts[2])
        return cls(name, parts[1], limit)

    def __str__(self) -> str:
        return f"{self.name}:{self.split}" + (f":{self.limit}" if self.limit is not None else "")


def _deprecated(old: str, new: str) -> None:
    logger.warning("%s is deprecated and will be removed in the next release; write %s", old, new)


@dataclass
class BenchmarkArguments:
    """Benchmarks read from their release files: ``benchmarks: [NAME:SPLIT[:LIMIT]]`` plus ``<name>_root``.

    Example:

    ```python
    >>> args = BenchmarkArguments(benchmarks=["bird:train", "spider:train:500"], bird_root="data/bird",
    ...                           spider_root="data/spider")
    >>> [(entry.name, args.root(entry.name), entry.limit) for entry in args.benchmark_entries()]
    [('bird', 'data/bird', None), ('spider', 'data/spider', 500)]
    >>> BenchmarkArguments(benchmarks=["bird:train"])
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmarks lists bird but bird_root is not set; e.g. `bird_root: data/bird`

    ```
    """

    benchmarks: list[str] = field(
        default_factory=list,
        metadata={"help": "Benchmarks as NAME:SPLIT[:LIMIT] (e.g. world:dev:200, bird:train)."},
    )
    world_root: str | None = field(default=None, metadata={"help": "The world folder (slmsql world build)."})
    bird_root: str | None = field(default=None, metadata={"help": "BIRD folder (train.json / dev.json)."})
    spider_root: str | None = field(
        default=None, metadata={"help": "Spider folder (train/dev json, database/)."}
    )
    synsql_root: str | None = field(default=None, metadata={"help": "SynSQL-2.5M folder."})
    # Deprecated spellings, read for one release (see _upgrade_old_spellings).
    benchmark_split: str | None = field(
        default=None, metadata={"help": "Deprecated: NAME:SPLIT in benchmarks."}
    )
    benchmark_limit: int | None = field(default=None, metadata={"help": "Deprecated: NAME:SPLIT:LIMIT."})
    benchmark: str | None = field(default=None, metadata={"help": "Deprecated: benchmarks: [NAME:SPLIT]."})
    data_root: str | None = field(default=None, metadata={"help": "Deprecated: <name>_root."})
    split: str | None = field(default=None, metadata={"help": "Deprecated: NAME:SPLIT in benchmarks."})
    limit: int | None = field(default=None, metadata={"help": "Deprecated: NAME:SPLIT:LIMIT in benchmarks."})
    world_dir: str | None = field(default=None, metadata={"help": "Deprecated: world_root."})

    def __post_init__(self) -> None:
        if isinstance(self.benchmarks, str):
            self.benchmarks = [self.benchmarks]
        self.benchmarks = [str(b).strip() for b in (self.benchmarks or []) if str(b).strip()]
        self._upgrade_old_spellings()
        entries = self.benchmark_entries()
        seen: set[str] = set()
        for entry in entries:
            if entry.name in seen:
                raise UsageError(f"benchmark {entry.name!r} is listed twice in benchmarks; keep one entry")
            seen.add(entry.name)
            if not self.root(entry.name):
                raise UsageError(
                    f"benchmarks lists {entry.name} but {entry.name}_root is not set; "
                    f"e.g. `{entry.name}_root: {'outputs/world' if entry.name == 'world' else 'data/' + entry.name}`"
                )

    def benchmark_entries(self) -> list[BenchmarkEntry]:
        """The parsed ``benchmarks``, in recipe order."""
        return [BenchmarkEntry.parse(text) for text in self.benchmarks]

    def root(self, name: str) -> str | None:
        """The root folder of benchmark ``name`` (``<name>_root``)."""
        return getattr(self, f"{name}_root")

    def _upgrade_old_spellings(self) -> None:
        """Rewrite the deprecated spellings into ``benchmarks`` + ``<name>_root``, one warning each."""
        if self.world_dir is not None:
            _deprecated("world_dir", f"world_root: {self.world_dir}")
            self._set_root("world", self.world_dir, "world_dir")
            self.world_dir = None
        # Old run folders' config.yaml hold benchmark_split/benchmark_limit beside no NAME=ROOT entry: nothing to read.
        if not any("=" in b for b in self.benchmarks):
            self.benchmark_split = self.benchmark_limit = None
        else:
            if self.benchmark_limit is not None and self.benchmark_limit < 1:
                raise UsageError(f"benchmark_limit must be >= 1, or null for all; got {self.benchmark_limit}")
            upgraded = [self._upgrade_entry(b) if "=" in b else b for b in self.benchmarks]
            roots = ", ".join(
                f"{BenchmarkEntry.parse(u).name}_root: {b.partition('=')[2].strip()}"
                for b, u in zip(self.benchmarks, upgraded)
                if "=" in b
            )
            _deprecated(
                "benchmarks: [NAME=ROOT] with benchmark_split/benchmark_limit",
                f"benchmarks: [{', '.join(upgraded)}]" + (f" and {roots}" if roots else ""),
            )
            self.benchmarks, self.benchmark_split, self.benchmark_limit = upgraded, None, None
        if (
            self.benchmark is not None
            or self.data_root is not None
            or self.split is not None
            or self.limit is not None
        ):
            name = (self.benchmark or "world").strip().lower()
            split = self.split or ("train" if name == "synsql" else "dev")  # the loader's default split
            if self.limit is not None and self.limit < 1:
                raise UsageError(f"limit must be >= 1, or null for all; got {self.limit}")
            entry = f"{name}:{split}" + (f":{self.limit}" if self.limit is not None else "")
            if self.benchmarks:
                raise UsageError(
                    f"benchmarks: {self.benchmarks} and the deprecated benchmark/data_root/split/limit are both "
                    f"given; keep one: benchmarks: [{entry}] and {name}_root"
                )
            if name in BENCHMARK_NAMES and self.data_root:
                self._set_root(name, self.data_root, "data_root")
            _deprecated(
                "benchmark/data_root/split/limit",
                f"benchmarks: [{entry}]" + (f" and {name}_root: {self.data_root}" if self.data_root else ""),
            )
            self.benchmarks = [*self.benchmarks, entry]
            self.benchmark = self.data_root = self.split = self.limit = None

    def _set_root(self, name: str, root: str, old_field: str) -> None:
        current = self.root(name)
        if current and current != root:
            raise UsageError(f"{old_field} {root} disagrees with {name}_root: {current}; keep {name}_root")
        setattr(self, f"{name}_root", root)

    def _upgrade_entry(self, text: str) -> str:
        name, _, root = (part.strip() for part in text.partition("="))
        name = name.lower()
        if not root or name not in BENCHMARK_NAMES:
            raise UsageError(
                f"benchmarks entry {text!r} must be NAME:SPLIT[:LIMIT] with NAME one of "
                f"{', '.join(BENCHMARK_NAMES)}, e.g. bird:train (and bird_root: data/bird)"
            )
        current = self.root(name)
        if current and current != root:
            raise UsageError(f"benchmarks entry {text!r} disagrees with {name}_root: {current}; keep one")
        setattr(self, f"{name}_root", root)
        limit = f":{self.benchmark_limit}" if self.benchmark_limit is not None else ""
        return f"{name}:{self.benchmark_split or 'train'}{limit}"
