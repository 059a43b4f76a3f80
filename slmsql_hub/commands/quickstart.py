"""``slmsql quickstart``: the main job on the embedded world, every stage of the study, end to end, in one command.

``slmsql quickstart`` (``make quickstart``) builds the world, pretrains the tiny base, trains the two SFT stages,
runs the pass-rate filter, trains GRPO on the band (and attempt #1 on unfiltered data when the time budget
allows), evaluates SFT vs GRPO with paired statistics, renders the model card and writes the exact folders a
push would upload (a dry run). Each stage calls the same library function as its ``slmsql`` subcommand, with
the same recipe (``recipes/world/``) and the same overrides, which point every path into one run folder laid
out by :class:`~slmsql_hub.run.layout.RunLayout`; :meth:`Stage.argv` is the command line that does the same.

A stage whose output marker exists is reused, so re-running after an interruption continues where it stopped;
``--force`` redoes everything.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..resources import PACKAGE_DIR
from ..run.layout import RunLayout
from ..run.read import Run, read_run
from . import existing_folder, folder_to_write, number, print_result, repo_id

logger = logging.getLogger(__name__)

DEFAULT_OUT = Path("outputs/quickstart")
DEFAULT_REPO_ID = "slmsql/world-grpo-quickstart"
PUSH_TARGETS = "model,dataset,metric-space,demo-space"

Options = dict[str, str | bool]


@dataclass(frozen=True)
class Stage:
    """One step of the quickstart: the ``slmsql`` subcommand that does the same (``{out}``: the run folder), its
    ``options`` (a recipe stage's overrides; ``True`` is a bare flag), its ``recipe`` file, and the ``marker``
    file it writes last; an ``optional`` stage may be skipped for the budget."""

    name: str
    description: str
    command: str
    marker: Callable[[RunLayout], Path]
    options: Callable[[RunLayout, str], Options]
    recipe: str | None = None
    optional: bool = False

    def argv(self, out: Path, recipes: Path, repo_id: str) -> list[str]:
        """The ``slmsql`` command line that runs this stage.

        Example:

        ```python
        >>> from pathlib import Path
        >>> STAGES[0].argv(Path("runs/q"), Path("recipes/world"), "me/model")
        ['world', 'build', '--out', 'runs/q/world']

        ```
        """
        command = [part.format(out=Path(out).as_posix()) for part in self.command.split()]
        config = ["--config", (Path(recipes) / self.recipe).as_posix()] if self.recipe else []
        return [*command, *config, *_flat(self.options(RunLayout(out), repo_id))]


def _flat(options: Options) -> list[str]:
    """Options as command-line style strings: what the recipe parsers take as overrides."""
    flat: list[str] = []
    for key, value in options.items():
        flat += [key] if value is True else [key, str(value)]
    return flat


def _adapter_on_base(run: RunLayout, adapter: Path) -> Options:
    return {"--model_name_or_path": str(run.base.path), "--adapter_path": str(adapter)}


STAGES: tuple[Stage, ...] = (
    Stage("world", "build the embedded world (databases, questions, splits)", "world build",
          lambda run: run.world_manifest, lambda run, _: {"--out": str(run.world)}),
    Stage("base", "pretrain the tiny Qwen2 base and its tokenizer", "train base",
          lambda run: run.base.summary,
          lambda run, _: {"--world_dir": str(run.world), "--output_dir": str(run.base.path)},
          recipe="base.yaml"),
    Stage("sft1", "SFT stage 1 (LoRA r32/a64) on the foundation split", "train sft",
          lambda run: run.sft_stage1.summary,
          lambda run, _: {"--model_name_or_path": str(run.base.path),
                          "--dataset_paths": str(run.world_split("foundation")),
                          "--output_dir": str(run.sft_stage1.path)},
          recipe="sft_stage1.yaml"),
    Stage("sft2", "SFT stage 2 continues the same adapter on the grounding split", "train sft",
          lambda run: run.sft_stage2.summary,
          lambda run, _: {**_adapter_on_base(run, run.sft_stage1.path),
                          "--dataset_paths": str(run.world_split("grounding")),
                          "--output_dir": str(run.sft_stage2.path)},
          recipe="sft_stage2.yaml"),
    Stage("filter", "pass-rate filter: K samples per rl_pool question from the SFT policy", "filter",
          lambda run: run.filter_report,
          lambda run, _: {**_adapter_on_base(run, run.sft_stage2.path), "--world_root": str(run.world),
                          "--output_dir": str(run.filter)},
          recipe="filter.yaml"),
    Stage("grpo", "GRPO attempt #2 on the filtered band (continues the SFT adapter)", "train grpo",
          lambda run: run.grpo.summary,
          lambda run, _: {**_adapter_on_base(run, run.sft_stage2.path), "--dataset_paths": str(run.band),
                          "--output_dir": str(run.grpo.path)},
          recipe="grpo_band.yaml"),
    Stage("grpo_attempt1", "GRPO attempt #1 on unfiltered, mostly mastered data (the mechanism's control)",
          "train grpo", lambda run: run.grpo_attempt1.summary,
          lambda run, _: {**_adapter_on_base(run, run.sft_stage2.path),
                          "--dataset_paths": str(run.world_split("grounding")),
                          "--output_dir": str(run.grpo_attempt1.path)},
          recipe="grpo_attempt1.yaml", optional=True),
    Stage("eval", "evaluate SFT vs GRPO on world dev + test (paired bootstrap CI, McNemar)", "eval",
          lambda run: run.eval_results,
          lambda run, _: {"--model_name_or_path": str(run.base.path), "--sft_adapter": str(run.sft_stage2.path),
                          "--grpo_adapter": str(run.grpo.path), "--world_root": str(run.world),
                          "--output_dir": str(run.eval)},
          recipe="eval.yaml"),
    Stage("card", "render the model card, plots and .eval_results", "card",
          lambda run: run.card.readme, lambda run, repo: {"--run-dir": str(run.root), "--repo-id": repo}),
    Stage("push_dry_run", "write the exact folders a push would upload (no network)", "push {out}",
          lambda run: run.push_plan,
          lambda run, repo: {"--repo-id": repo, "--what": PUSH_TARGETS, "--dry-run": True}),
)  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# Each subcommand's library call (what `slmsql <command>` runs after parsing its arguments)
# ----------------------------------------------------------------------------------------------------------


def _world(run: RunLayout, options: Options, recipe: Path | None) -> dict[str, Any]:
    from ..world.build import WorldSizes, build_world

    manifest = build_world(str(options["--out"]), seed=0, sizes=WorldSizes(), overwrite=False)
    return {"world": str(manifest.root), "held_out_db": manifest.held_out_db}


def _train(kind: str) -> Callable[[RunLayout, Options, Path | None], dict[str, Any]]:
    def train(run: RunLayout, options: Options, recipe: Path | None) -> dict[str, Any]:
        from ..recipes import parse_recipe
        from ..training import configs

        overrides = _flat(options)
        if kind == "base":
            from ..training.base import train_base

            return train_base(*parse_recipe(configs.BASE_ARGUMENTS, recipe, overrides))
        if kind == "sft":
            from ..training.sft import train_sft

            return train_sft(*parse_recipe(configs.SFT_ARGUMENTS, recipe, overrides))
        from ..training.grpo import train_grpo

        summary = train_grpo(*parse_recipe(configs.GRPO_ARGUMENTS, recipe, overrides))
        if summary["guards"]["failed"]:
            raise UsageError(f"guards failed after training: {', '.join(summary['guards']['failed'])}")
        return summary

    return train


def _filter(run: RunLayout, options: Options, recipe: Path | None) -> dict[str, Any]:
    from ..filtering import load_filter_config, run_filter

    return run_filter(load_filter_config(recipe, _flat(options)))


def _eval(run: RunLayout, options: Options, recipe: Path | None) -> dict[str, Any]:
    from ..evaluation import load_eval_config, run_eval

    return run_eval(load_eval_config(recipe, _flat(options)))


def _card(run: RunLayout, options: Options, recipe: Path | None) -> dict[str, Any]:
    from ..card import CardOptions, build_card

    result = build_card(
        str(options["--run-dir"]), None, options=CardOptions(repo_id=str(options["--repo-id"]))
    )
    return {"card": str(result.readme), "outcome": result.outcome}


def _push_dry_run(run: RunLayout, options: Options, recipe: Path | None) -> dict[str, Any]:
    from ..hub import plan_push, write_dry_run

    targets = plan_push(str(run.root), str(options["--repo-id"]), str(options["--what"]))
    plan = write_dry_run(targets, run.push_dry_run, private=True, revision=None, create_pr=False)
    return {"targets": [target["what"] for target in plan["targets"]]}


_CALLS: dict[str, Callable[[RunLayout, Options, Path | None], dict[str, Any]]] = {
    "world build": _world,
    "train base": _train("base"),
    "train sft": _train("sft"),
    "train grpo": _train("grpo"),
    "filter": _filter,
    "eval": _eval,
    "card": _card,
    "push {out}": _push_dry_run,
}


@dataclass
class QuickstartResult:
    """What ran, what was reused, what was skipped, and how long each stage took."""

    out: Path
    ran: dict[str, float] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0


def default_recipes_dir() -> Path:
    """``recipes/world`` of the source checkout (the quickstart runs from a clone), else of the cwd."""
    for candidate in (
        PACKAGE_DIR.parent / "recipes" / "world",
        Path.cwd() / "recipes" / "world",
    ):
        if (candidate / "base.yaml").is_file():
            return candidate
    raise UsageError(
        "cannot find the world recipes (recipes/world/base.yaml): run from a clone of slmsql-hub or pass --recipes"
    )


def run_stage(stage: Stage, run: RunLayout, recipes: Path, repo_id: str) -> dict[str, Any]:
    """Run one stage into the run folder (its subcommand's library call), check it wrote its marker and return
    what the call returned; a UsageError names the stage that failed or wrote no marker."""
    logger.info("%s: slmsql %s", stage.name, " ".join(stage.argv(run.root, recipes, repo_id)))
    recipe = Path(recipes) / stage.recipe if stage.recipe else None
    options = stage.options(run, repo_id)
    try:
        result = _CALLS[stage.command](run, options, recipe)
    except UsageError as err:
        raise UsageError(
            f"stage '{stage.name}' failed: {err}; fix the cause and rerun: finished stages are reused"
        ) from err
    if not stage.marker(run).is_file():
        raise UsageError(f"stage '{stage.name}' finished without writing {stage.marker(run)}")
    return result


def run_quickstart(
    out: str | Path = DEFAULT_OUT,
    *,
    recipes: str | Path | None = None,
    repo_id: str = DEFAULT_REPO_ID,
    budget_s: float = 600.0,
    attempt1: str = "auto",
    force: bool = False,
    on_stage: Callable[[int, int, Stage, str], None] | None = None,
) -> QuickstartResult:
    """Run (or resume) every stage into ``out``; ``force`` deletes it first.

    ``repo_id`` is what the card and the dry-run push are written for (nothing is uploaded). With
    ``attempt1="auto"`` attempt #1 runs only when ``budget_s`` leaves room for it (estimated from the band run)
    and for evaluation (``"always"``, ``"never"``). ``on_stage(index, total, stage, state)`` is told ``start``,
    ``done``, ``reused`` or ``skipped``. A failed stage is a UsageError naming it; rerunning resumes from it.
    """
    if attempt1 not in ("auto", "always", "never"):
        raise UsageError(f"attempt1 must be auto, always or never; got {attempt1!r}")
    out = Path(out)
    run = RunLayout(out)
    recipes = Path(recipes) if recipes is not None else default_recipes_dir()
    if force and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    result = QuickstartResult(out=out)
    started = time.monotonic()

    def notify(i: int, stage: Stage, state: str) -> None:
        if on_stage is not None:
            on_stage(i, len(STAGES), stage, state)

    for i, stage in enumerate(STAGES, start=1):
        if stage.marker(run).is_file():
            result.reused.append(stage.name)
            notify(i, stage, "reused")
            continue
        if stage.optional:
            reason = _skip_attempt1(attempt1, result, time.monotonic() - started, budget_s)
            if reason:
                result.skipped[stage.name] = reason
                logger.info("skipping %s: %s", stage.name, reason)
                notify(i, stage, "skipped")
                continue
        notify(i, stage, "start")
        t0 = time.monotonic()
        run_stage(stage, run, recipes, repo_id)
        result.ran[stage.name] = time.monotonic() - t0
        notify(i, stage, "done")
    result.wall_s = time.monotonic() - started
    return result


def _skip_attempt1(policy: str, result: QuickstartResult, elapsed: float, budget_s: float) -> str | None:
    if policy == "never":
        return "attempt1=never"
    if policy == "always":
        return None
    band_s = result.ran.get("grpo")
    if band_s is None:  # the band run was reused: no fresh estimate, keep the quickstart short
        return "no timing of the band run in this invocation to budget it (run with --attempt1 always)"
    reserve_s = 90.0  # evaluation + card + dry run on 2 cores
    if elapsed + band_s + reserve_s > budget_s:
        return (
            f"it would not fit the {budget_s:.0f} s budget ({elapsed:.0f} s used, ~{band_s:.0f} s needed); "
            "run with --attempt1 always"
        )
    return None


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "quickstart",
        help="run every stage on the embedded world: world, base, SFT 1-2, filter, GRPO, eval, card, dry-run push",
        description="Run (or resume) the main job on the embedded world into one run folder. Finished stages "
        "are reused; --force starts over.",
    )
    parser.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        type=folder_to_write,
        help=f"the run folder (default: {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--recipes",
        default=None,
        type=existing_folder,
        help="folder of the world recipes (default: recipes/world)",
    )
    parser.add_argument(
        "--repo-id",
        default=DEFAULT_REPO_ID,
        type=repo_id(),
        help="Hub id the card and dry-run push are written for",
    )
    parser.add_argument(
        "--budget",
        type=number(float, low=0, above=True),
        default=600.0,
        help="time budget in seconds (default 600)",
    )
    parser.add_argument(
        "--attempt1",
        choices=("auto", "always", "never"),
        default="auto",
        help="GRPO attempt #1 on unfiltered data: auto runs it when it fits the budget",
    )
    parser.add_argument("--force", action="store_true", help="delete the run folder and start over")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()

    def progress(i: int, total: int, stage, state: str) -> None:
        said = f"{stage.description} ..." if state == "start" else state
        print(f"[{i}/{total}] {time.monotonic() - started:6.0f}s  {stage.name}: {said}", flush=True)  # noqa: T201

    result = run_quickstart(
        args.out,
        recipes=args.recipes,
        repo_id=args.repo_id,
        budget_s=args.budget,
        attempt1=args.attempt1,
        force=args.force,
        on_stage=progress,
    )
    run = RunLayout(args.out)
    out = run.root
    lines = [f"\nquickstart finished in {result.wall_s:.0f} s -> {out}/"]
    if result.skipped:
        lines += [f"  skipped {name}: {why}" for name, why in result.skipped.items()]
    lines += _headline(read_run(out))
    lines += [
        "",
        "Where things are:",
        f"  model card:        {run.card.readme}  (plots in {run.card.plots}/)",
        f"  evaluation:        {run.eval_results}",
        f"  GRPO telemetry:    {run.grpo.telemetry}",
        f"  filter report:     {run.filter_report}",
        f"  dry-run push:      {run.push_dry_run}/  (publish: slmsql push {out} --repo-id NAMESPACE/NAME --what all)",
        f"  open the Space:    python spaces/demo/app.py --run-dir {out}   (then http://127.0.0.1:7860)",
    ]
    return print_result(*lines)


def _headline(run: Run) -> list[str]:
    lines = []
    if (run.filter_report or {}).get("summary"):
        lines.append(f"  filter:  {run.filter_report['summary']}")
    for key, bench in (run.eval_results or {}).get("benchmarks", {}).items():
        lines.append(f"  {key}: {bench['comparison']['summary']}")
    return lines
