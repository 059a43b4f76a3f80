"""One report across the worlds of a multi-world study (``slmsql ablate --config recipes/world/transfer.yaml
--combine``): did the planted skill transfer, and did the controls hold?

Each world's ``slmsql ablate`` writes its own ``report.json`` (:func:`~slmsql_hub.study.report.write_report`:
the seeds pooled per variant by ``pool_variants``, Holm across that world's variants). This module reads those
pooled rows as written, one row per (world, variant), and runs :func:`~slmsql_hub.study.report.add_holm` again
across the rows of *every* world, per slice: a slice a world lacks (the probes of the natural world) is absent
from its rows and out of that slice's family. Each slice keeps its world's own ``p_holm_world`` beside the new
``p_holm``; with more tests per family the new one is never smaller.

The finding is :func:`~slmsql_hub.evaluation.findings.transfer_claims` of the rows, rendered by ``model_card/transfer_finding.md`` (the report,
the model card and the Space say the same sentences):

- a variant *transferred* when ``world_probe_same`` and ``world_probe_cross`` both rose (ΔEX > 0, p_holm < 0.05)
  and ``world_probe_control`` did not fall significantly;
- the **main arm** is every variant of a world planted at a rate below 1 (the right form is in SFT's
  support) that is no control; it transferred when one of them did;
- the controls: ``frozen`` (learning rate 0; as :func:`~slmsql_hub.evaluation.findings.claims`) answers exactly
  as SFT; the **support-negative** world (planted at rate 1) raises neither probe; a **random reward**
  (``reward_funcs: [random]``) raises neither ``band_train`` nor a probe; and some variant learns ``band_train``
  (the positive control for learning).

A world without a ``report.json``, or whose report lacks some of the recipe's (variant, seed) runs, is reported
as missing, not an error: the report covers what is there.
"""

from __future__ import annotations

import copy
import datetime
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..evaluation.findings import KIND, PROBES, render_finding, slice_names, transfer_claims
from ..evaluation.stats import ALPHA
from ..render.templates import load_template
from ..run.files import write_atomic
from ..run.layout import FOREST_PLOT, REPORT_JSON, REPORT_MD
from ..runtime import code_commit
from .report import PASSK_PLOT, add_holm, collect

logger = logging.getLogger(__name__)

TEMPLATE = "transfer_report.md"
SLICES = ("band_train", "band_heldout", *PROBES, "world_dev", "world_test")
"""The transfer report's slices, in order (others a world reports follow)."""


@dataclass
class WorldReport:
    """One world of the study as the combine found it: its recipe arm, its ``report.json`` (``None``: none yet),
    the recipe's (variant, seed) runs its report lacks (``missing``), and those of them finished on disk after
    the report was written (``unreported``: rerun that world's ``slmsql ablate --report-only``)."""

    name: str
    run_dir: str
    output_dir: str
    hypothesis: str
    plant: dict | None
    expected: list[list]
    report: dict | None = None
    missing: list[list] = field(default_factory=list)
    unreported: list[list] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """What ``report.json`` records of the world."""
        return {
            "run_dir": self.run_dir,
            "output_dir": self.output_dir,
            "hypothesis": self.hypothesis,
            "plant": self.plant,
            "report": str(Path(self.output_dir) / REPORT_JSON) if self.report is not None else None,
            "expected": len(self.expected),
            "finished": len(self.expected) - len(self.missing),
            "missing": self.missing,
            "unreported": self.unreported,
        }


def default_output_dir(worlds: dict[str, Any]) -> str:
    """The folder above every world's output folder (``outputs/transfer`` for the transfer recipe).

    Example:

    ```python
    >>> from slmsql_hub.study.config import WorldArm
    >>> from slmsql_hub.study.transfer import default_output_dir
    >>> default_output_dir({"a": WorldArm("r1", "outputs/transfer/a"), "b": WorldArm("r2", "outputs/transfer/b")})
    'outputs/transfer'

    ```
    """
    return os.path.commonpath([str(Path(arm.output_dir).parent) for arm in worlds.values()])


def _read_worlds(config_path: str | Path) -> list[WorldReport]:
    """Every world of a multi-world recipe, its config loaded (and validated) as ``slmsql ablate --run-dir``
    would, and its ``report.json`` read when there is one.

    Raises:
        UsageError: a bad recipe, or one without ``worlds``.
    """
    from ..errors import UsageError
    from .config import load_ablation_config, recipe_worlds

    arms = recipe_worlds(config_path)
    if not arms:
        raise UsageError(f"{config_path} has no `worlds`; --combine joins the worlds of a multi-world recipe")
    worlds = []
    for name, arm in arms.items():
        config = load_ablation_config(config_path, run_dir=arm.run_dir)
        expected = [[v.name, seed] for v, seed in config.grid(config.variants)]
        world = WorldReport(name, arm.run_dir, config.output_dir, arm.hypothesis, arm.plant, expected)
        path = Path(config.output_dir) / REPORT_JSON
        if path.is_file():
            try:
                world.report = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                logger.warning(
                    "%s is not a readable report (%s); world %s counts as missing", path, err, name
                )
        done = {(e["name"], e["seed"]) for e in (world.report or {}).get("variants", [])}
        world.missing = [pair for pair in expected if tuple(pair) not in done]
        world.unreported = sorted([e["name"], e["seed"]] for e in collect([Path(config.output_dir)])
                                  if (e["name"], e["seed"]) not in done)  # fmt: skip
        worlds.append(world)
    return worlds


def _transfer_rows(worlds: list[WorldReport]) -> list[dict]:
    """One row per (world, variant) from each world's pooled table, Holm re-applied per slice across all worlds
    (each slice's own world's ``p_holm`` kept as ``p_holm_world``)."""
    rows = []
    for world in worlds:
        for pooled in (world.report or {}).get("pooled", []):
            row = copy.deepcopy(pooled)
            if any(value.get("unit") != "question" for value in row["slices"].values()):
                logger.warning("%s/%s: its report pooled the seeds as extra pairs (p too small); rewrite "
                               "it with `slmsql ablate --report-only`", world.name, row["name"])  # fmt: skip
            for value in row["slices"].values():
                value["p_holm_world"] = value.get("p_holm")
                for group in value.values():
                    if isinstance(group, dict) and "p" in group:
                        group["p_holm_world"] = group.get("p_holm")
            rows.append({**row, "world": world.name, "label": f"{world.name}/{row['name']}"})
    add_holm(rows)
    return rows


def _passk_curves(rows: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """Per (world, probe) panel, each variant's pooled pass@k: one world's SFT per panel."""
    curves: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        for name in PROBES:
            points = (row.get("passk") or {}).get(name)
            if points:
                curves.setdefault(f"{row['world']} {name}", {})[row["name"]] = points
    return curves


def write_transfer_report(config_path: str | Path, out: str | Path | None = None) -> dict[str, Any]:
    """Read every world's report, write ``report.json``, ``report.md`` and ``plots/`` (the forest plot; the
    probes' pass@k when sampled) into ``out`` (default :func:`default_output_dir`); return the report plus
    ``path`` (the ``report.md`` written).

    Raises:
        UsageError: a bad recipe, one without ``worlds``, or no world with a report yet.
    """
    from ..errors import UsageError
    from ..render.plots import plot_forest, plot_passk

    worlds = _read_worlds(config_path)
    out = Path(out) if out is not None else Path(default_output_dir({w.name: w for w in worlds}))
    if all(w.report is None for w in worlds):
        where = ", ".join(f"{w.name}: {w.output_dir}" for w in worlds)
        raise UsageError(
            f"no world has a report.json yet ({where}); run `slmsql ablate --run-dir` per world first"
        )
    rows = _transfer_rows(worlds)
    found = slice_names(rows)
    names = [n for n in SLICES if n in found] + [n for n in found if n not in SLICES]
    out.mkdir(parents=True, exist_ok=True)
    plots = {"forest": str(plot_forest([{**r, "name": r["label"]} for r in rows], names, out / FOREST_PLOT)
                           .relative_to(out))}  # fmt: skip
    curves = _passk_curves(rows)
    if curves:
        plots["passk"] = str(plot_passk(curves, out / PASSK_PLOT).relative_to(out))
    report: dict[str, Any] = {
        "kind": KIND,
        "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "code_commit": code_commit(),
        "config": str(config_path),
        "alpha": ALPHA,
        "slices": names,
        "worlds": {w.name: w.summary() for w in worlds},
        "rows": rows,
        "plots": plots,
    }
    facts = transfer_claims(rows, {w.name: w.plant for w in worlds})
    report["claims"] = {key: facts[key] for key in ("main_transferred", "support_negative_held",
                        "random_reward_held", "negative_control", "positive_control")}  # fmt: skip
    report["claims"]["transferred"] = [v["row"]["label"] for v in facts["transferred"]]
    write_atomic(out / REPORT_JSON, json.dumps(report, indent=2) + "\n")
    markdown = load_template(TEMPLATE).render(
        report=report, finding=render_finding(report), slices=names, probes=PROBES, alpha=ALPHA
    )
    write_atomic(out / REPORT_MD, markdown)
    return {**report, "path": str(out / REPORT_MD)}
