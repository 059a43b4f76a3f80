"""``slmsql ablate``: the hypothesis study of issue #13 — did GRPO learn, and did the learning transfer?

Every variant is a named set of overrides on the band GRPO recipe (``recipes/*/ablations.yaml``). Per
(variant, seed), GRPO continues the run's SFT adapter on ``band_train`` (one half of the pass-rate band, by a
seeded hash of the question id), then the adapter answers four slices greedily, each paired against the SFT
adapter's answers to the same questions: ``band_train`` (did it learn what it trained on?), ``band_heldout``
(in-distribution generalisation), ``world_dev`` and ``world_test`` (transfer; seen databases and the held-out
database apart). Two controls are acceptance: ``frozen`` (learning rate 0) must answer exactly as SFT, and some
variant must raise ``band_train`` EX significantly, or a null about transfer means nothing.

Modules: :mod:`.config` (the recipe, validated before any training), :mod:`.band` (the pool, its filter and the
split), :mod:`.evaluate` (answers and paired slices), :mod:`.timing` (generation / reward / the rest),
:mod:`.grid` (the resumable loop, its GPUs and shards), :mod:`.diagnostics` (template families, KL and entropy,
SFT's support on the held-out database, after the grid), :mod:`.report` (report.json, report.md, plots, the
merge of shards), :mod:`.transfer` (one report across the worlds of a multi-world recipe, ``--combine``), :mod:`.slurm`
(the study as SLURM jobs, ``--slurm``), :mod:`.plant` (the planted-skill kinds a world build takes through
:class:`~slmsql_hub.world.build.WorldPlant`).

This package is the study, not the library: it sits right under the commands and imports the library; no
library module imports it (``tests/test_imports.py``). What the card, the diagnosis and the world read of a
study's outputs lives below (:mod:`slmsql_hub.evaluation.findings`, :func:`slmsql_hub.filtering.report.read_band`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_study(
    config_path: str | Path,
    *,
    variants: list[str] | None = None,
    report_only: bool = False,
    shard: str | None = None,
    merge: list[str] | None = None,
    prepare_only: bool = False,
    diagnostics: bool = True,
    on_progress: Callable[[str], None] | None = None,
    **cli: Any,
) -> dict[str, Any]:
    """Validate, run the selected grid (unless ``report_only``), and write the merged report.

    ``cli`` holds the command line's ``run_dir``, ``output_dir``, ``seeds``, ``max_steps``, ``jobs`` (``None``: the
    recipe's). ``shard`` (``"K/N"``) runs that share of the grid in ``<output_dir>/shards/<K>-of-<N>`` and reports
    it there; ``merge`` (shard folders) runs nothing and writes the one report of those folders in ``output_dir``
    (see :mod:`.grid`); ``prepare_only`` prepares the band and the SFT answers in ``output_dir`` for the shards to
    read (:func:`~.grid.prepare`) and returns ``{"prepared": ..., "path"}`` (the record written). Between the grid
    and the report, :func:`~.diagnostics.run_diagnostics` brings every finished run's diagnostics up to date (cached; ``diagnostics=False`` skips it). Returns ``report.json``'s
    content plus ``path`` (the ``report.md`` written).

    Raises:
        UsageError: a bad recipe, an unknown variant or override, a missing run folder, a bad ``shard``, shard
            folders that do not belong together.
    """
    import dataclasses

    from ..errors import UsageError
    from ..run.guard import check_output, config_inputs, output_lock
    from ..run.layout import REPORT_MD
    from .config import load_ablation_config
    from .diagnostics import BesideGrid, run_diagnostics
    from .grid import PREPARED, parse_shard, prepare, run_grid, shard_folder
    from .report import merge_shards, write_report

    share = parse_shard(shard) if shard is not None else None
    if share is not None and (merge or report_only):
        raise UsageError("--shard runs a share of the grid; it does not go with --merge or --report_only")
    if prepare_only and (share is not None or merge or report_only):
        raise UsageError(
            "--prepare-only prepares for the shards; it does not go with --shard, --merge or --report-only"
        )
    config = load_ablation_config(config_path, **cli)
    run_inputs = {Path(config.run_dir) / Path(needed).parts[0] for needed in config.run_inputs()}
    check_output(config.output_dir, [*sorted(run_inputs), *config_inputs(config)], "output_dir")
    if share is not None:  # each shard (a Slurm array task, maybe on another node) holds its own folder's lock
        config.output_dir = str(shard_folder(config.output_dir, share))
    with output_lock(config.output_dir):
        order = [v.name for v in config.variants]
        progress = {"on_progress": on_progress} if on_progress else {}
        if merge:
            report = merge_shards(merge, config.output_dir, order, dataclasses.asdict(config))
            if diagnostics:  # the shards' runs, against the merged folder's band and SFT samples
                roots = [Path(folder) for folder in merge]
                run_diagnostics(config, roots, **progress)
                report = write_report(config.output_dir, order, dataclasses.asdict(config), roots=roots)
            return {**report, "path": str(Path(config.output_dir) / REPORT_MD)}
        selected = config.selected(variants)
        run = Path(config.run_dir)
        if not run.is_dir():
            raise UsageError(
                f"run folder {run} not found: pass --run-dir of a finished run (`slmsql quickstart` makes one)"
            )
        for needed in config.run_inputs():
            if not (run / needed).exists():
                raise UsageError(
                    f"{run} is not a finished run folder (no {needed}); run `slmsql quickstart` first"
                )
        if prepare_only:
            return {"prepared": prepare(config), "path": str(Path(config.output_dir) / PREPARED)}
        if not report_only:
            run_grid(config, selected, shard=share, beside=BesideGrid if diagnostics else None, **progress)
        try:
            if diagnostics:
                run_diagnostics(config, **progress)
            report = write_report(config.output_dir, order, dataclasses.asdict(config))
        except FileNotFoundError as err:
            raise UsageError(f"{err}; run the grid first (without --report-only)") from err
        return {**report, "path": str(Path(config.output_dir) / REPORT_MD)}
