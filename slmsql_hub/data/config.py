"""The benchmark section of a recipe (:class:`BenchmarkArguments`): ``benchmarks: [NAME:SPLIT[:LIMIT], ...]`` plus
each benchmark's root folder, in the field its registry entry names (``Benchmark.root_option``: ``world_root``,
``bird_root``, ``spider_root``, ``synsql_root``) or, for a benchmark without one (BIRD mini-dev, yours),
``benchmark_roots: [NAME=ROOT]``. NAME is a registered benchmark or a dotted path ``module:ENTRY``
(:mod:`slmsql_hub.data.benchmarks`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from ..errors import UsageError
from .benchmarks import REGISTRY, get_benchmark


def _split_name(parts: list[str]) -> tuple[str, list[str]]:
    """``(benchmark, rest)`` of a ``:``-split entry: a registered name, else a dotted path ``module:ENTRY``."""
    if parts[0].lower() in REGISTRY or len(parts) < 3:
        return parts[0], parts[1:]
    return f"{parts[0]}:{parts[1]}", parts[2:]


class BenchmarkEntry(NamedTuple):
    """One ``NAME:SPLIT[:LIMIT]`` entry of ``benchmarks``; ``name`` is the registered name (``ref``: the dotted
    path as written, which ``str`` gives back).

    Example:

    ```python
    >>> BenchmarkEntry.parse("spider:dev:200")
    BenchmarkEntry(name='spider', split='dev', limit=200, ref=None)
    >>> BenchmarkEntry.parse("spider")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmarks entry 'spider' must be NAME:SPLIT or NAME:SPLIT:LIMIT, e.g. world:dev:200 or bird:train

    ```
    """

    name: str
    split: str
    limit: int | None = None
    ref: str | None = None

    @classmethod
    def parse(cls, text: str) -> BenchmarkEntry:
        parts = [part.strip() for part in str(text).split(":")]
        if len(parts) < 2 or not all(parts):
            raise UsageError(
                f"benchmarks entry {text!r} must be NAME:SPLIT or NAME:SPLIT:LIMIT, e.g. world:dev:200 or bird:train"
            )
        written, rest = _split_name(parts)
        try:
            name = get_benchmark(written).name
        except UsageError as err:
            raise UsageError(f"benchmarks entry {text!r}: {err}") from None
        if len(rest) not in (1, 2):
            raise UsageError(
                f"benchmarks entry {text!r} must be NAME:SPLIT or NAME:SPLIT:LIMIT, e.g. world:dev:200 or bird:train"
            )
        limit = None
        if len(rest) == 2:
            if not rest[1].isdigit() or int(rest[1]) < 1:
                raise UsageError(f"benchmarks entry {text!r}: LIMIT must be a whole number >= 1")
            limit = int(rest[1])
        return cls(name, rest[0], limit, written if ":" in written else None)

    def __str__(self) -> str:
        return f"{self.ref or self.name}:{self.split}" + (f":{self.limit}" if self.limit is not None else "")


@dataclass
class BenchmarkArguments:
    """Benchmarks read from their release files: ``benchmarks: [NAME:SPLIT[:LIMIT]]`` plus each one's root.

    Example:

    ```python
    >>> args = BenchmarkArguments(benchmarks=["bird:train", "spider:train:500"], bird_root="data/bird",
    ...                           spider_root="data/spider")
    >>> [(entry.name, args.root(entry.name), entry.limit) for entry in args.benchmark_entries()]
    [('bird', 'data/bird', None), ('spider', 'data/spider', 500)]
    >>> BenchmarkArguments(benchmarks=["bird_mini_dev:dev"], benchmark_roots=["bird_mini_dev=data/minidev"]).root(
    ...     "bird_mini_dev")
    'data/minidev'
    >>> BenchmarkArguments(benchmarks=["bird:train"])
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmark bird:train needs bird_root: set it to the bird folder (e.g. `bird_root: data/bird`)

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
    benchmark_roots: list[str] | None = field(
        default=None,
        metadata={"help": "NAME=ROOT for benchmarks without a <name>_root field (bird_mini_dev, registered ones)."},
    )
    omit_when_unset: ClassVar[frozenset[str]] = frozenset({"benchmark_roots"})  # saved configs stay as before

    def __post_init__(self) -> None:
        self._normalise()
        entries = self.benchmark_entries()  # first: a dotted path registers its benchmark
        self.root_map()
        seen: set[str] = set()
        for text, entry in zip(self.benchmarks, entries):
            if entry.name in seen:
                raise UsageError(f"benchmark {entry.name!r} is listed twice in benchmarks; keep one entry")
            seen.add(entry.name)
            self.check_root(text, entry.name)

    def _normalise(self) -> None:
        """Lists of stripped strings in ``benchmarks`` and ``benchmark_roots`` (``None`` when empty)."""
        if isinstance(self.benchmarks, str):
            self.benchmarks = [self.benchmarks]
        self.benchmarks = [str(b).strip() for b in (self.benchmarks or []) if str(b).strip()]
        if isinstance(self.benchmark_roots, str):
            self.benchmark_roots = [self.benchmark_roots]
        roots = [str(r).strip() for r in (self.benchmark_roots or []) if str(r).strip()]
        self.benchmark_roots = roots or None

    def benchmark_entries(self) -> list[BenchmarkEntry]:
        """The parsed ``benchmarks``, in recipe order."""
        return [BenchmarkEntry.parse(text) for text in self.benchmarks]

    def root_map(self) -> dict[str, str]:
        """``benchmark_roots`` as ``{registered name: root}``; a benchmark with its own root field is refused."""
        roots: dict[str, str] = {}
        for item in self.benchmark_roots or []:
            name, sep, root = (part.strip() for part in item.partition("="))
            if not sep or not name or not root:
                raise UsageError(f"benchmark_roots entry {item!r} must be NAME=ROOT, e.g. bird_mini_dev=data/minidev")
            entry = get_benchmark(name)
            if entry.root_option:
                raise UsageError(f"benchmark_roots entry {item!r}: {entry.name} has its own field; write "
                                 f"`{entry.root_option}: {root}`")  # fmt: skip
            if roots.setdefault(entry.name, root) != root:
                raise UsageError(f"benchmark_roots gives {entry.name} two roots; keep one")
        return roots

    def root(self, name: str) -> str | None:
        """The root folder of benchmark ``name`` (its ``root_option`` field, else its ``benchmark_roots`` entry)."""
        entry = get_benchmark(name)
        if entry.root_option:
            return getattr(self, entry.root_option)
        return self.root_map().get(entry.name)

    def check_root(self, text: str, name: str) -> None:
        """UsageError naming the field to set when benchmark ``name`` (entry ``text``) has no root."""
        if self.root(name):
            return
        entry = get_benchmark(name)
        example = "outputs/world" if entry.name == "world" else f"data/{entry.name}"
        option = entry.root_option or "benchmark_roots"
        setting = f"{option}: {example}" if entry.root_option else f"benchmark_roots: [{entry.name}={example}]"
        raise UsageError(f"benchmark {text} needs {option}: set it to the {entry.name} folder (e.g. `{setting}`)")
