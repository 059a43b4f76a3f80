"""The run folder as a typed contract: :class:`RunLayout` names every path of a run, :func:`read_run` reads one.

``slmsql quickstart`` lays a run out as::

    world/            world.json, datasets/<split>/, databases/<db>/<db>.sqlite   (slmsql world build)
    base/             the tiny base model, run_summary.json, config.yaml          (slmsql train base)
                      or hub.json: a base taken from the Hub, by repo id and revision (a study's recipes)
    sft/stage1/ sft/stage2/   adapter, run_summary.json, config.yaml, sft_questions.json   (slmsql train sft)
                      or sft/stage2/hub.json: an SFT adapter taken from the Hub instead of trained
    filter/           filter_report.json, filter_config.json, results.jsonl, band/ (slmsql filter)
    grpo/ grpo_attempt1/      adapter, run_summary.json, config.yaml, telemetry.jsonl      (slmsql train grpo)
    eval/             eval_results.json, predictions/<benchmark>.jsonl            (slmsql eval)
    diagnosis/        report.json, report.md, diagnosis.png, questions/           (slmsql diagnose)
    card/             the model repo's folder (slmsql card), see :class:`CardLayout`
    push_dry_run/     plan.json and one folder per push target                    (slmsql push --dry-run)
    push_progress.json   the targets an interrupted push landed, skipped by its rerun  (slmsql push)
    world_benchmark/  the world's eval splits as a Hub benchmark dataset   (slmsql push --what world-benchmark)

``slmsql quickstart --recipes recipes/<study>`` writes every study in this layout; a stage a study takes from the
Hub (its ``study.yaml`` says which) has its folder, holding ``hub.json`` (``{"repo_id", "revision"}``) instead of
weights. Every writer and reader names these paths through :class:`RunLayout` (a run folder) or :class:`CardLayout` (the
card folder, also what a Hub model repo written by ``slmsql card`` holds), and reads them through one reader:
:func:`read_run` is tolerant (a run in progress reads as the stages it has; a malformed file is one
:class:`UsageError`); :func:`load_run` is the same reader plus the checks of a finished run that the model card
needs. It reads JSON and YAML only (no ``transformers``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# File and folder names of a run, said once.
RUN_SUMMARY = "run_summary.json"
STAGE_CONFIG = "config.yaml"
TELEMETRY = "telemetry.jsonl"
SFT_QUESTIONS = "sft_questions.json"
HUB_REF = "hub.json"  # a stage taken from the Hub: {"repo_id": ..., "revision": ...}
WORLD_MANIFEST = "world.json"
WORLD_PARTS = (WORLD_MANIFEST, "databases", "datasets")  # what a world folder holds; stage outputs may sit beside
FILTER_REPORT = "filter_report.json"
FILTER_STATE = "filter_config.json"
FILTER_RESULTS = "results.jsonl"
BAND_DIR = "band"
EVAL_RESULTS = "eval_results.json"
PREDICTIONS_DIR = "predictions"
CARD_README = "README.md"
PLAN_FILE = "plan.json"
_PUSH_PROGRESS = "push_progress.json"
ABLATIONS_DIR = "ablations"  # the study beside a run (`make ablations`), and inside its card folder
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
FOREST_PLOT = "plots/forest.png"
DIAGNOSIS_DIR = "diagnosis"  # `slmsql diagnose`'s report in a run, and inside its card folder

SHIPPED_ATTEMPT = "grpo"  # the GRPO folder whose adapter the card ships (attempt #2, on the pass-rate band)
ATTEMPT_FOLDERS: dict[str, int] = {"grpo_attempt1": 1, SHIPPED_ATTEMPT: 2}  # folder -> attempt number


@dataclass(frozen=True)
class StageFolder:
    """One training stage's output folder and the files every stage writes there (``config.yaml`` is the
    resolved recipe; ``telemetry.jsonl`` is GRPO's, ``sft_questions.json`` SFT's).

    Example:

    ```python
    >>> from slmsql_hub.run.layout import RunLayout
    >>> RunLayout("runs/q").sft_stage2.summary.as_posix()
    'runs/q/sft/stage2/run_summary.json'

    ```
    """

    path: Path

    @property
    def summary(self) -> Path:
        return self.path / RUN_SUMMARY

    @property
    def config(self) -> Path:
        return self.path / STAGE_CONFIG

    @property
    def telemetry(self) -> Path:
        return self.path / TELEMETRY

    @property
    def sft_questions(self) -> Path:
        return self.path / SFT_QUESTIONS

    @property
    def hub(self) -> Path:
        """``hub.json``: the stage was taken from the Hub (repo id and revision), not trained here."""
        return self.path / HUB_REF

    @property
    def finished(self) -> bool:
        """The stage saved its weights (an adapter, or the base's model) and then its summary: a run into this
        folder would replace them.

        Example:

        ```python
        >>> StageFolder(Path("no/such/run")).finished
        False

        ```
        """
        weights = ("adapter_model.safetensors", "model.safetensors")
        return self.summary.is_file() and any((self.path / name).is_file() for name in weights)

    def __fspath__(self) -> str:
        return os.fspath(self.path)


@dataclass(frozen=True)
class _Folder:
    """What a run folder and a card folder lay out alike below ``root``: ``filter/``, ``eval/``,
    ``grpo_attempt1/``; a subclass names ``grpo``, the shipped attempt."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def filter(self) -> Path:
        return self.root / "filter"

    @property
    def filter_report(self) -> Path:
        return self.filter / FILTER_REPORT

    @property
    def filter_state(self) -> Path:
        """``filter/filter_config.json``: the settings an interrupted filter resumes with."""
        return self.filter / FILTER_STATE

    @property
    def eval(self) -> Path:
        return self.root / "eval"

    @property
    def eval_results(self) -> Path:
        return self.eval / EVAL_RESULTS

    def predictions_file(self, benchmark: str) -> Path:
        """``eval/predictions/<benchmark>.jsonl``."""
        return self.eval / PREDICTIONS_DIR / f"{benchmark}.jsonl"

    @property
    def diagnosis(self) -> Path:
        """``diagnosis/``: ``slmsql diagnose``'s report (``report.json``, ``report.md``, the plot, ``questions/``)."""
        return self.root / DIAGNOSIS_DIR

    @property
    def grpo_attempt1(self) -> StageFolder:
        """GRPO attempt #1 (unfiltered data, the mechanism's control)."""
        return StageFolder(self.root / "grpo_attempt1")

    @property
    def attempts(self) -> dict[str, StageFolder]:
        """The GRPO attempt folders by name, attempt #1 first."""
        return {"grpo_attempt1": self.grpo_attempt1, SHIPPED_ATTEMPT: self.grpo}


@dataclass(frozen=True)
class RunLayout(_Folder):
    """Every path of a run folder (the module docstring says what writes each).

    Example:

    ```python
    >>> from slmsql_hub.run.layout import RunLayout
    >>> run = RunLayout("outputs/quickstart")
    >>> run.grpo.telemetry.as_posix(), run.band.as_posix(), run.eval_results.as_posix()
    ('outputs/quickstart/grpo/telemetry.jsonl', 'outputs/quickstart/filter/band', 'outputs/quickstart/eval/eval_results.json')

    ```
    """

    @property
    def world(self) -> Path:
        return self.root / "world"

    @property
    def world_manifest(self) -> Path:
        return self.world / WORLD_MANIFEST

    def world_split(self, split: str) -> Path:
        """``world/datasets/<split>`` (``foundation``, ``grounding``, ``rl_pool``, ``dev``, ``test``)."""
        return self.world / "datasets" / split

    @property
    def base(self) -> StageFolder:
        return StageFolder(self.root / "base")

    @property
    def sft_stage1(self) -> StageFolder:
        return StageFolder(self.root / "sft" / "stage1")

    @property
    def sft_stage2(self) -> StageFolder:
        return StageFolder(self.root / "sft" / "stage2")

    @property
    def grpo(self) -> StageFolder:
        """The shipped GRPO attempt (#2, on the band)."""
        return StageFolder(self.root / SHIPPED_ATTEMPT)

    @property
    def lineage(self) -> dict[str, StageFolder]:
        """The base and SFT stages by name (``base``, ``sft_stage1``, ``sft_stage2``)."""
        return {"base": self.base, "sft_stage1": self.sft_stage1, "sft_stage2": self.sft_stage2}

    @property
    def filter_results(self) -> Path:
        """``filter/results.jsonl``: per-question pass rates, appended as batches are judged."""
        return self.filter / FILTER_RESULTS

    @property
    def band(self) -> Path:
        """``filter/band``: the pass-rate band (a ``datasets`` folder), GRPO attempt #2's data."""
        return self.filter / BAND_DIR

    @property
    def card(self) -> CardLayout:
        return CardLayout(self.root / "card")

    @property
    def card_readme(self) -> Path:
        return self.card.readme

    @property
    def push_dry_run(self) -> Path:
        return self.root / "push_dry_run"

    @property
    def world_benchmark(self) -> Path:
        """``world_benchmark``: the world's evaluation splits as the benchmark dataset ``slmsql push`` publishes."""
        return self.root / "world_benchmark"

    @property
    def stage_folders(self) -> list[Path]:
        """The folders the stages write and the card and the push read, which their outputs must not overlap.

        Example:

        ```python
        >>> [p.as_posix() for p in RunLayout("runs/q").stage_folders][:3]
        ['runs/q/world', 'runs/q/base', 'runs/q/sft']

        ```
        """
        stages = [self.world, self.base.path, self.sft_stage1.path.parent, self.filter, self.eval]
        studies = [self.root / ABLATIONS_DIR, self.diagnosis]
        return stages + [folder.path for folder in self.attempts.values()] + studies

    @property
    def push_plan(self) -> Path:
        return self.push_dry_run / PLAN_FILE

    @property
    def push_progress(self) -> Path:
        return self.root / _PUSH_PROGRESS


@dataclass(frozen=True)
class CardLayout(_Folder):
    """The card folder (``RUN/card``, and a Hub model repo written by ``slmsql card``): the shipped GRPO
    attempt's files at the top, beside ``README.md``, ``eval/``, ``filter/``, ``base/``, ``grpo_attempt1/``.

    Example:

    ```python
    >>> from slmsql_hub.run.layout import CardLayout
    >>> card = CardLayout("runs/q/card")
    >>> card.grpo.telemetry.as_posix(), card.readme.as_posix()
    ('runs/q/card/telemetry.jsonl', 'runs/q/card/README.md')

    ```
    """

    @property
    def readme(self) -> Path:
        return self.root / CARD_README

    @property
    def card_readme(self) -> Path:
        """The model card, named as :attr:`RunLayout.card_readme` names a run's."""
        return self.readme

    @property
    def grpo(self) -> StageFolder:
        """The shipped attempt: the card folder itself."""
        return StageFolder(self.root)

    @property
    def lineage(self) -> dict[str, StageFolder]:
        return {"base": StageFolder(self.root / "base")}

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    @property
    def configs(self) -> Path:
        """``configs/``: each stage's recipe."""
        return self.root / "configs"

    @property
    def eval_result_files(self) -> Path:
        """``.eval_results/``: the Hub's per-benchmark result files."""
        return self.root / ".eval_results"


Layout = RunLayout | CardLayout


def layout_of(folder: str | os.PathLike) -> Layout:
    """The layout of ``folder``: a :class:`CardLayout` when a GRPO attempt's files or a card sit at its top
    (``run_summary.json``, ``telemetry.jsonl``, ``README.md``), else a :class:`RunLayout`.

    Example:

    ```python
    >>> import tempfile
    >>> from slmsql_hub.run.layout import layout_of
    >>> type(layout_of(tempfile.mkdtemp())).__name__
    'RunLayout'

    ```
    """
    root = Path(folder)
    if any((root / name).is_file() for name in (RUN_SUMMARY, TELEMETRY, CARD_README)):
        return CardLayout(root)
    return RunLayout(root)
