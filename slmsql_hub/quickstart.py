"""The main job on the embedded world: every stage of the study, end to end, in one command.

``slmsql quickstart`` (``make quickstart``) builds the world, pretrains the tiny base, trains the two SFT stages,
runs the pass-rate filter, trains GRPO on the band (and attempt #1 on unfiltered data when the time budget
allows), evaluates SFT vs GRPO with paired statistics, renders the model card and writes the exact folders a
push would upload (a dry run). Each stage is the same ``slmsql`` subcommand a user would type, with the world
recipes under ``recipes/world/`` and paths pointed into one run folder (see ``/tmp``-free layout below), so the
quickstart proves the real code paths rather than a demo of its own.

A stage whose output marker exists is reused, so re-running after an interruption continues where it stopped;
``--force`` redoes everything.

Layout of the run folder (default ``outputs/quickstart``)::

    world/  base/  sft/stage1/  sft/stage2/  filter/  grpo/  grpo_attempt1/  eval/  card/  push_dry_run/
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError

logger = logging.getLogger(__name__)

DEFAULT_OUT = Path("outputs/quickstart")
DEFAULT_REPO_ID = "slmsql/world-grpo-quickstart"


@dataclass(frozen=True)
class Stage:
    """One step of the quickstart: the ``slmsql`` command that runs it and the file that proves it finished.

    ``command`` is split on spaces after ``{out}`` (the run folder), ``{recipes}`` and ``{repo}`` are filled in.
    """

    name: str
    description: str
    marker: str
    command: str
    optional: bool = False

    def argv(self, out: Path, recipes: Path, repo_id: str) -> list[str]:
        """The ``slmsql`` arguments of this stage.

        Example:

        ```python
        >>> from pathlib import Path
        >>> STAGES[0].argv(Path("runs/q"), Path("recipes/world"), "me/model")
        ['world', 'build', '--out', 'runs/q/world']

        ```
        """
        return [
            part.format(out=out.as_posix(), recipes=recipes.as_posix(), repo=repo_id)
            for part in self.command.split()
        ]


_BASE = "--model_name_or_path {out}/base"
STAGES: tuple[Stage, ...] = (
    Stage("world", "build the embedded world (databases, questions, splits)", "world/world.json",
          "world build --out {out}/world"),
    Stage("base", "pretrain the tiny Qwen2 base and its tokenizer", "base/run_summary.json",
          "train base --config {recipes}/base.yaml --world_dir {out}/world --output_dir {out}/base"),
    Stage("sft1", "SFT stage 1 (LoRA r32/a64) on the foundation split", "sft/stage1/run_summary.json",
          f"train sft --config {{recipes}}/sft_stage1.yaml {_BASE} --dataset_paths {{out}}/world/datasets/foundation"
          " --output_dir {out}/sft/stage1"),
    Stage("sft2", "SFT stage 2 continues the same adapter on the grounding split", "sft/stage2/run_summary.json",
          f"train sft --config {{recipes}}/sft_stage2.yaml {_BASE} --adapter_path {{out}}/sft/stage1"
          " --dataset_paths {out}/world/datasets/grounding --output_dir {out}/sft/stage2"),
    Stage("filter", "pass-rate filter: K samples per rl_pool question from the SFT policy",
          "filter/filter_report.json",
          f"filter --config {{recipes}}/filter.yaml {_BASE} --adapter_path {{out}}/sft/stage2"
          " --world_root {out}/world --output_dir {out}/filter"),
    Stage("grpo", "GRPO attempt #2 on the filtered band (continues the SFT adapter)", "grpo/run_summary.json",
          f"train grpo --config {{recipes}}/grpo_band.yaml {_BASE} --adapter_path {{out}}/sft/stage2"
          " --dataset_paths {out}/filter/band --output_dir {out}/grpo"),
    Stage("grpo_attempt1", "GRPO attempt #1 on unfiltered, mostly mastered data (the mechanism's control)",
          "grpo_attempt1/run_summary.json",
          f"train grpo --config {{recipes}}/grpo_attempt1.yaml {_BASE} --adapter_path {{out}}/sft/stage2"
          " --dataset_paths {out}/world/datasets/grounding --output_dir {out}/grpo_attempt1",
          optional=True),
    Stage("eval", "evaluate SFT vs GRPO on world dev + test (paired bootstrap CI, McNemar)",
          "eval/eval_results.json",
          f"eval --config {{recipes}}/eval.yaml {_BASE} --sft_adapter {{out}}/sft/stage2"
          " --grpo_adapter {out}/grpo --world_root {out}/world --output_dir {out}/eval"),
    Stage("card", "render the model card, plots and .eval_results", "card/README.md",
          "card --run-dir {out} --repo-id {repo}"),
    Stage("push_dry_run", "write the exact folders a push would upload (no network)", "push_dry_run/plan.json",
          "push {out} --repo-id {repo} --what model,dataset,metric-space,demo-space --dry-run"),
)  # fmt: skip


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
        Path(__file__).resolve().parents[1] / "recipes" / "world",
        Path.cwd() / "recipes" / "world",
    ):
        if (candidate / "base.yaml").is_file():
            return candidate
    raise UsageError(
        "cannot find the world recipes (recipes/world/base.yaml): run from a clone of slmsql-hub or pass --recipes"
    )


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
    """Run (or resume) every stage into ``out``.

    Args:
        out: the run folder.
        recipes: folder of the world recipes (default: ``recipes/world`` of the checkout).
        repo_id: the Hub id the card and the dry-run push are written for (nothing is uploaded).
        budget_s: the time budget; attempt #1 runs under ``attempt1="auto"`` only when the stages so far leave
            room for it (estimated from the band run) and for evaluation.
        attempt1: ``"auto"``, ``"always"`` or ``"never"``.
        force: delete the run folder first.
        on_stage: called as ``on_stage(index, total, stage, state)`` with state ``start``, ``done``,
            ``reused`` or ``skipped`` (the CLI prints progress with it).

    Raises:
        UsageError: a stage failed; its own error was already reported, and rerunning resumes from it.
    """
    from .cli import main as slmsql

    if attempt1 not in ("auto", "always", "never"):
        raise UsageError(f"attempt1 must be auto, always or never; got {attempt1!r}")
    out = Path(out)
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
        if (out / stage.marker).is_file():
            result.reused.append(stage.name)
            notify(i, stage, "reused")
            continue
        if stage.name == "grpo_attempt1":
            reason = _skip_attempt1(attempt1, result, time.monotonic() - started, budget_s)
            if reason:
                result.skipped[stage.name] = reason
                logger.info("skipping %s: %s", stage.name, reason)
                notify(i, stage, "skipped")
                continue
        notify(i, stage, "start")
        t0 = time.monotonic()
        code = slmsql(stage.argv(out, recipes, repo_id))
        if code != 0:
            raise UsageError(
                f"stage '{stage.name}' failed (exit {code}); fix the cause and rerun: finished stages are reused"
            )
        if not (out / stage.marker).is_file():
            raise UsageError(f"stage '{stage.name}' finished without writing {out / stage.marker}")
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
