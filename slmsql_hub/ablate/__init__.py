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
:mod:`.grid` (the resumable loop), :mod:`.report` (report.json, report.md, plots).
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
    on_progress: Callable[[str], None] | None = None,
    **cli: Any,
) -> dict[str, Any]:
    """Validate, run the selected grid (unless ``report_only``), and write the merged report.

    ``cli`` holds the command line's ``run_dir``, ``output_dir``, ``seeds``, ``max_steps``, ``jobs`` (``None``: the
    recipe's). Returns ``report.json``'s content plus ``path`` (the ``report.md`` written).

    Raises:
        UsageError: a bad recipe, an unknown variant or override, a missing run folder.
    """
    import dataclasses

    from ..errors import UsageError
    from ..run.layout import REPORT_MD
    from .config import load_ablation_config
    from .grid import run_grid
    from .report import write_report

    config = load_ablation_config(config_path, **cli)
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
    if not report_only:
        run_grid(config, selected, **({"on_progress": on_progress} if on_progress else {}))
    try:
        report = write_report(
            config.output_dir, [v.name for v in config.variants], dataclasses.asdict(config)
        )
    except FileNotFoundError as err:
        raise UsageError(f"{err}; run the grid first (without --report-only)") from err
    return {**report, "path": str(Path(config.output_dir) / REPORT_MD)}
