"""The study on a SLURM cluster (``slmsql ablate --config R --slurm``): sbatch scripts under
``<output_dir>/slurm/``, submitted with ``sbatch --parsable``, their ids and states in ``slurm/jobs.json``.

Job layout of one world (a multi-world recipe without ``--run-dir``: every world's, then ``combine``)::

    world     (a world whose run folder is unfinished) world build + quickstart --until sft2
    prepare   --prepare-only: the band and the SFT answers, once, in <output_dir>      afterok: world
    shards    an array, one task per unfinished shard: --shard $SLURM_ARRAY_TASK_ID/N  afterok: prepare
    merge     --merge <output_dir>/shards/*-of-N: the one report                        afterok: the array
    combine   --combine: the transfer report across the worlds                          afterok: every merge

Each script ``cd``s to the folder the command was run in and runs this Python (``sys.executable``), so a task
sees the same venv and the same relative paths; its last command is ``exec``'d, so a cancelled or preempted
task's SIGTERM reaches Python, which releases its output folder's lock (locks name their host: a task
resubmitted on another node could not take over one left behind). A job waiting on another carries ``--kill-on-invalid-dep=yes``:
a failed or cancelled task ends what waits on it instead of leaving it pending for ever.

**Resubmission** is the same command again: while a job of the last submission is queued or running it submits
nothing and prints their states; otherwise it records their final states and submits what is left, shards whose
runs all finished left out (a task that ran reuses the runs its shard finished, as ``--shard`` does). ``--requeue``
lets SLURM itself restart a preempted task; the restarted task trains its unfinished run again from the start.

**States** come from ``sacct``; without accounting (no slurmdbd, as on the CI's single node) from ``scontrol show
job``, which remembers a finished job for the cluster's ``MinJobAge`` seconds.
"""

from __future__ import annotations

import datetime
import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InfrastructureError, UsageError
from ..run.files import write_atomic

_SLURM_DIR = "slurm"
_JOBS_FILE = "jobs.json"
_TASK = "${SLURM_ARRAY_TASK_ID}"
"""The array index in a script's command line (left for the shell to expand)."""
ACTIVE = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING", "REQUEUE_HOLD",
          "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "STOPPED")  # fmt: skip
"""Job states that may still change: a resubmission waits for them."""


@dataclass(frozen=True)
class SlurmOptions:
    """What every job asks SLURM for (``None``: the cluster's default).

    Example:

    ```python
    >>> from slmsql_hub.study.slurm import SlurmOptions
    >>> SlurmOptions(partition="gpu", gpus_per_task=1, time="04:00:00", requeue=True,
    ...              sbatch_args=("--mem=32G --qos=high",)).directives()
    ['--ntasks=1', '--partition=gpu', '--gpus-per-task=1', '--time=04:00:00', '--requeue', '--mem=32G', '--qos=high']

    ```
    """

    partition: str | None = None
    account: str | None = None
    gpus_per_task: int | None = None
    cpus_per_task: int | None = None
    time: str | None = None
    array_throttle: int | None = None
    requeue: bool = False
    sbatch_args: tuple[str, ...] = ()

    def directives(self) -> list[str]:
        """The ``#SBATCH`` options of every job (the array throttle is the array's: :func:`_array_spec`)."""
        given = [("partition", self.partition), ("account", self.account), ("gpus-per-task", self.gpus_per_task),
                 ("cpus-per-task", self.cpus_per_task), ("time", self.time)]  # fmt: skip
        out = ["--ntasks=1"] + [f"--{name}={value}" for name, value in given if value is not None]
        out += ["--requeue"] if self.requeue else []
        return out + [arg for text in self.sbatch_args for arg in shlex.split(text)]


@dataclass(frozen=True)
class StudyArgs:
    """The ``slmsql ablate`` options every job's command line carries (``None``: the recipe's).

    Example:

    ```python
    >>> from slmsql_hub.study.slurm import StudyArgs
    >>> StudyArgs("r.yaml", seeds=(0, 1), diagnostics=False).argv()
    ['ablate', '--config', 'r.yaml', '--seeds', '0', '1', '--skip-diagnostics']

    ```
    """

    config: str
    run_dir: str | None = None
    output_dir: str | None = None
    variants: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    max_steps: int | None = None
    jobs: int | None = None
    diagnostics: bool = True

    def cli(self) -> dict[str, Any]:
        """``load_ablation_config``'s command-line values."""
        seeds = list(self.seeds) if self.seeds is not None else None
        return {"run_dir": self.run_dir, "output_dir": self.output_dir, "seeds": seeds,
                "max_steps": self.max_steps, "jobs": self.jobs}  # fmt: skip

    def argv(self) -> list[str]:
        """``ablate --config ...``: these options as the command line writes them."""
        argv = ["ablate", "--config", self.config]
        for flag, value in (("--run-dir", self.run_dir), ("--output-dir", self.output_dir),
                            ("--max-steps", self.max_steps), ("--jobs", self.jobs)):  # fmt: skip
            argv += [flag, str(value)] if value is not None else []
        for flag, values in (("--variants", self.variants), ("--seeds", self.seeds)):
            argv += [flag, *map(str, values)] if values else []
        return argv + ([] if self.diagnostics else ["--skip-diagnostics"])


@dataclass
class Job:
    """One sbatch job: its commands (``python -m slmsql_hub`` argument lists), the jobs it waits on (``afterok``)
    and, for the array, its indices."""

    name: str
    commands: list[list[str]]
    after: list[str] = field(default_factory=list)
    array: list[int] | None = None


def _quote(arg: str) -> str:
    return f'"{arg}"' if _TASK in arg else shlex.quote(arg)


def _array_spec(indices: list[int], throttle: int | None) -> str:
    """``--array``'s value: the indices, ``%throttle`` appended.

    Example:

    ```python
    >>> from slmsql_hub.study.slurm import _array_spec
    >>> _array_spec([0, 2, 3], 2), _array_spec([1], None)
    ('0,2,3%2', '1')

    ```
    """
    return ",".join(map(str, indices)) + (f"%{throttle}" if throttle else "")


def _sbatch_script(job: Job, options: SlurmOptions, submit_dir: Path, logs: Path, python: str) -> str:
    """The script of ``job``: its ``#SBATCH`` lines, ``cd`` to ``submit_dir``, then each command with ``python``."""
    log = logs / (f"{job.name}-%A_%a.out" if job.array is not None else f"{job.name}-%j.out")
    lines = ["#!/bin/bash", f"#SBATCH --job-name=slmsql-{job.name}", f"#SBATCH --output={log}"]
    if job.array is not None:
        lines.append(f"#SBATCH --array={_array_spec(job.array, options.array_throttle)}")
    lines += [f"#SBATCH {directive}" for directive in options.directives()]
    lines += ["set -euo pipefail", f"cd {shlex.quote(str(submit_dir))}", "export PYTHONUNBUFFERED=1"]
    lines += [" ".join(_quote(a) for a in [python, "-m", "slmsql_hub", *argv]) for argv in job.commands]
    lines[-1] = f"exec {lines[-1]}"  # the job's signals (scancel, preemption) go to Python, which unwinds
    return "\n".join(lines) + "\n"


def _unfinished_shards(config: Any, variants: list[str] | None, shards: int) -> list[int]:
    """The shards (of ``shards``) of ``config``'s selected grid with a (variant, seed) not finished yet."""
    from .grid import RESULT_FILE, run_folder, shard_folder, shard_grid

    pairs = [(v.name, s) for v, s in config.grid(config.selected(variants))]
    return [k for k in range(shards)
            if any(not (run_folder(shard_folder(config.output_dir, (k, shards)), v, s) / RESULT_FILE).is_file()
                   for v, s in shard_grid(pairs, (k, shards)))]  # fmt: skip


def world_jobs(args: StudyArgs, shards: int | None, merged: bool, prefix: str = "") -> tuple[list[Job], str]:
    """One world's prepare, shards and merge jobs (those still to do: ``merged``, the last merge completed) and
    its output folder; ``prefix`` names a world's jobs in a multi-world submission."""
    from .config import load_ablation_config
    from .grid import shard_folder

    config = load_ablation_config(args.config, **args.cli())
    grid = len(config.grid(config.selected(list(args.variants) if args.variants else None)))
    n = shards or grid
    if n > grid:
        raise UsageError(f"--shards {n}: the grid has {grid} (variant, seed) runs; give at most {grid}")
    todo = _unfinished_shards(config, list(args.variants) if args.variants else None, n)
    base = args.argv()
    jobs = []
    if todo:
        shard = Job(f"{prefix}shards", [[*base, "--shard", f"{_TASK}/{n}"]], [f"{prefix}prepare"], todo)
        jobs += [Job(f"{prefix}prepare", [[*base, "--prepare-only"]]), shard]
    if todo or not merged:
        folders = [str(shard_folder(config.output_dir, (k, n))) for k in range(n)]
        jobs.append(Job(f"{prefix}merge", [[*base, "--merge", *folders]], [j.name for j in jobs[-1:]]))
    return jobs, config.output_dir


def transfer_jobs(args: StudyArgs, shards: int | None, merged: dict[str, bool]) -> list[Job]:
    """A multi-world recipe's jobs: per world (``<world>/``) its preparation when its run folder is unfinished
    (``world build`` with its plant, then ``quickstart --until sft2``), its prepare, shards and merge after it;
    then ``combine`` after every merge."""
    from .config import load_ablation_config, recipe_worlds

    jobs: list[Job] = []
    for name, arm in recipe_worlds(args.config).items():
        world = StudyArgs(**{**asdict(args), "run_dir": arm.run_dir})
        config = load_ablation_config(args.config, **world.cli())
        run = Path(arm.run_dir)
        build = [] if (run / "world" / "world.json").is_file() else [
            ["world", "build", "--out", str(run / "world"), *arm.world_build_args()]]  # fmt: skip
        prepare = [] if all((run / needed).exists() for needed in config.run_inputs()) else [
            *build, ["quickstart", "--out", arm.run_dir, "--until", "sft2"]]  # fmt: skip
        own, _ = world_jobs(world, shards, merged.get(name, False), f"{name}-")
        if prepare:
            jobs.append(Job(f"{name}-world", prepare))
            own[0].after.append(f"{name}-world")
        jobs += own
    merges = [job.name for job in jobs if job.name.endswith("-merge")]
    combine = StudyArgs(args.config, variants=None, diagnostics=True).argv() + ["--combine"]
    return jobs + [Job("combine", [combine], merges)] if jobs else jobs


def job_states(ids: list[str]) -> dict[str, str]:
    """``{job or array task id: state}`` of ``ids`` (array tasks as ``<array>_<index>``)."""
    if not ids:
        return {}
    query = ["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(ids)]
    done = subprocess.run(query, capture_output=True, text=True, check=False) if shutil.which("sacct") else None
    if done is not None and done.returncode == 0 and done.stdout.strip():
        pairs = (line.split("|")[:2] for line in done.stdout.splitlines() if "|" in line)
        return {job: state.split()[0] for job, state in pairs}
    states = {}
    for job in ids:  # no accounting: scontrol, one line per job or array task
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, check=False)
        for line in shown.stdout.splitlines():
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            key = fields.get("JobId", job)
            if "ArrayTaskId" in fields:
                key = f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
            states[key] = fields.get("JobState", "UNKNOWN")
    return states


def _record(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"submissions": []}


def _sbatch(script: Path, after: list[str]) -> str:
    argv = ["sbatch", "--parsable"]
    if after:
        argv += [f"--dependency=afterok:{':'.join(after)}", "--kill-on-invalid-dep=yes"]
    done = subprocess.run([*argv, str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise InfrastructureError(f"sbatch {script} failed: {why}")
    return done.stdout.strip().split(";")[0]


def _submit_jobs(jobs: list[Job], options: SlurmOptions, folder: Path, record: dict[str, Any]) -> dict[str, str]:
    """Write each job's script under ``folder``, submit them in order (each after the ids of those it waits on)
    and record the submission in ``folder/jobs.json``, also when an ``sbatch`` fails part way."""
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    submission: dict[str, Any] = {"submitted": datetime.datetime.now().isoformat(timespec="seconds"),
                                  "options": asdict(options), "jobs": []}  # fmt: skip
    record["submissions"].append(submission)
    ids: dict[str, str] = {}
    try:
        for job in jobs:
            script = folder / f"{job.name}.sbatch"
            script.write_text(_sbatch_script(job, options, Path.cwd(), folder / "logs", sys.executable))
            ids[job.name] = _sbatch(script, [ids[name] for name in job.after])
            submission["jobs"].append({"name": job.name, "id": ids[job.name], "after": job.after,
                                       "array": job.array, "script": str(script)})  # fmt: skip
    finally:
        write_atomic(folder / _JOBS_FILE, json.dumps(record, indent=2) + "\n")
    return ids


def refresh_states(folder: Path) -> dict[str, Any]:
    """Record the current states of the last submission's jobs in ``folder/jobs.json``; return the record."""
    path = folder / _JOBS_FILE
    record = _record(path)
    if record["submissions"]:
        last = record["submissions"][-1]
        last["states"] = job_states([job["id"] for job in last["jobs"]])
        last["checked"] = datetime.datetime.now().isoformat(timespec="seconds")
        write_atomic(path, json.dumps(record, indent=2) + "\n")
    return record


def _merged_worlds(submission: dict[str, Any] | None) -> dict[str, bool]:
    """``{job name: completed}`` of the merge jobs of ``submission`` (keyed by world name; ``""`` for one world)."""
    if not submission:
        return {}
    states = submission.get("states", {})
    return {job["name"].removesuffix("merge").removesuffix("-"): states.get(job["id"]) == "COMPLETED"
            for job in submission["jobs"] if job["name"].endswith("merge")}  # fmt: skip


def check_slurm() -> None:
    """One line, exit 2, when this machine has no ``sbatch`` (SLURM's client) to submit with."""
    if shutil.which("sbatch") is None:
        raise UsageError("--slurm submits with sbatch, which is not on PATH: run it on the cluster's login node")


def slurm_folder(args: StudyArgs) -> Path:
    """Where the scripts and ``jobs.json`` go: ``<output_dir>/slurm`` (a multi-world recipe without
    ``--run-dir``: under the folder above its worlds' output folders, as ``--combine``'s report)."""
    from .config import load_ablation_config, recipe_worlds
    from .transfer import default_output_dir

    worlds = recipe_worlds(args.config)
    if worlds and args.run_dir is None:
        return Path(args.output_dir or default_output_dir(worlds)) / _SLURM_DIR
    return Path(load_ablation_config(args.config, **args.cli()).output_dir) / _SLURM_DIR


def submit_study(args: StudyArgs, options: SlurmOptions, shards: int | None = None) -> dict[str, Any]:
    """Submit what is left of the study (see the module docstring); returns ``{"folder", "active", "submitted",
    "states"}``: ``active`` the last submission's jobs still queued or running (then nothing was submitted)."""
    from .config import recipe_worlds

    folder = slurm_folder(args)
    record = refresh_states(folder)
    last = record["submissions"][-1] if record["submissions"] else None
    states = (last or {}).get("states", {})
    active = {job: state for job, state in states.items() if state in ACTIVE}
    if active:
        return {"folder": str(folder), "active": active, "submitted": {}, "states": states}
    merged = _merged_worlds(last)
    if recipe_worlds(args.config) and args.run_dir is None:
        if args.output_dir is not None:
            raise UsageError("--slurm for every world writes each world's own output_dir; drop --output-dir")
        jobs = transfer_jobs(args, shards, merged)
    else:
        jobs, _ = world_jobs(args, shards, merged.get("", False))
    submitted = _submit_jobs(jobs, options, folder, record) if jobs else {}
    return {"folder": str(folder), "active": {}, "submitted": submitted, "states": states}
