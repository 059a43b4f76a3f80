"""The GPU check (issue #39): the world's stages on CUDA in bf16, small, timed, in one command.

    make gpu-check                                            # wheels/ installed offline, then the line below
    python benchmarks/gpu_check.py --out outputs/gpu_check    # needs CUDA
    python benchmarks/gpu_check.py --smoke --out /tmp/gc      # CPU, float32, tiny sizes (tests/test_gpu_check.py)

It builds the world, pretrains the tiny base, trains both SFT stages, runs the pass-rate filter, trains GRPO on
the unfiltered grounding questions (attempt #1's data: a barely trained policy leaves the filter's band empty)
and evaluates SFT against GRPO, each through the package's own stage function with the world recipe
(``recipes/world/*.yaml``) whose CPU pin is lifted and whose sizes are cut with ``dataclasses.replace``. It
prints, and writes to ``OUT/gpu_check.json``: each stage's wall time, its mean training step time (GRPO: every
step), generation throughput (new token positions per second of ``generate``,
:class:`~slmsql_hub.study.timing.GenerateTimer`), peak GPU memory (``torch.cuda.max_memory_allocated``, reset
per stage) and the share of GRPO's step time spent in the reward (``benchmarks/bench_reward.py``). SFT on CUDA
is what crashed on the offline H200 (transformers' Hub kernels); the recipes keep ``use_kernels: false`` and the
check runs with ``HF_HUB_OFFLINE=1``, so a fetch fails at once instead of hanging. A stage that raises ends the
check with its traceback; the JSON still holds the stages before it and names the one that failed.

The GPU machine is assumed to have torch with CUDA, transformers, peft, accelerate, numpy, safetensors,
tokenizers and huggingface_hub, and no network; TRL and datasets (with pyarrow and pandas, which they import)
and sqlglot come as wheels (``benchmarks/gpu_wheels.txt``, fetched by ``benchmarks/gpu_wheels.sh``), which
``make gpu-check`` installs with ``pip install --no-index``. A missing module is one line naming it, exit 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

STARTED = time.perf_counter()  # the budget counts from here: imports and model loading included
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slmsql_hub.errors import UsageError  # noqa: E402  (after the checkout is on the path)

if TYPE_CHECKING:
    from slmsql_hub.run.layout import RunLayout

RECIPES = REPO / "recipes" / "world"
ASSUMED = ("torch", "transformers", "peft", "accelerate", "numpy", "safetensors", "tokenizers", "huggingface_hub")
"""What the GPU machine must bring itself (with CUDA for torch)."""
CARRIED = ("trl", "datasets", "pyarrow", "pandas", "sqlglot")
"""What ``benchmarks/gpu_wheels.txt`` brings (their dependencies come along)."""
REPORT = "gpu_check.json"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much each stage does; ``None`` keeps the recipe's value."""

    base_steps: int
    sft_steps: int
    filter_questions: int
    filter_samples: int
    grpo_steps: int
    eval_questions: int
    new_tokens: int | None = None
    grpo_generations: int | None = None
    budget_s: float = 300.0


GPU = Sizes(base_steps=400, sft_steps=100, filter_questions=64, filter_samples=8, grpo_steps=10, eval_questions=100)
"""Sized for one H100 in well under 5 minutes (a guess until it has run: see benchmarks/README.md)."""
SMOKE = Sizes(
    base_steps=6, sft_steps=2, filter_questions=4, filter_samples=2, grpo_steps=2, eval_questions=4,
    new_tokens=16, grpo_generations=2, budget_s=180.0,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the stages run: device, training precision, the weights' dtype and torch's threads (``None``: the
    recipe's)."""

    device: str
    bf16: bool
    dtype: str
    num_threads: int | None = None

    def fields(self) -> dict[str, Any]:
        """The recipe fields that say it (each stage's dataclasses take those they have).

        >>> CPU.fields()
        {'device': 'cpu', 'use_cpu': True, 'bf16': False, 'dtype': 'float32', 'num_threads': 1}
        """
        threads = {"num_threads": self.num_threads} if self.num_threads else {}
        return {"device": self.device, "use_cpu": self.device == "cpu", "bf16": self.bf16, "dtype": self.dtype,
                **threads}  # fmt: skip


CUDA = Target(device="cuda", bf16=True, dtype="bfloat16")
CPU = Target(device="cpu", bf16=False, dtype="float32", num_threads=1)  # one thread: the CI's cores are shared


def _configure(instances: tuple, **changes: Any) -> tuple:
    """Each dataclass of a parsed recipe with the ``changes`` it has a field for (``dataclasses.replace``)."""
    out = []
    for instance in instances:
        names = {f.name for f in dataclasses.fields(instance) if f.init}
        out.append(dataclasses.replace(instance, **{k: v for k, v in changes.items() if k in names}))
    return tuple(out)


def _training(arguments: tuple, recipe: str, target: Target, out: Path, **changes: Any) -> tuple:
    """A training recipe, moved to ``target``, writing to ``out``, saving only at the end."""
    from slmsql_hub.recipes import parse_recipe

    changes = {**target.fields(), "output_dir": str(out), "save_strategy": "no", **changes}
    return _configure(parse_recipe(arguments, RECIPES / recipe), **changes)


def stage_base(run: RunLayout, sizes: Sizes, target: Target) -> dict:
    from slmsql_hub.training import configs
    from slmsql_hub.training.base import train_base

    args = _training(configs.BASE_ARGUMENTS, "base.yaml", target, run.base.path, world_dir=str(run.world),
                     max_steps=sizes.base_steps)  # fmt: skip
    return train_base(*args)


def stage_sft(stage: int) -> Callable[[RunLayout, Sizes, Target], dict]:
    def sft(run: RunLayout, sizes: Sizes, target: Target) -> dict:
        from slmsql_hub.training import configs
        from slmsql_hub.training.sft import train_sft

        split, adapter = ("foundation", None) if stage == 1 else ("grounding", str(run.sft_stage1.path))
        folder = run.sft_stage1.path if stage == 1 else run.sft_stage2.path
        args = _training(configs.SFT_ARGUMENTS, f"sft_stage{stage}.yaml", target, folder,
                         model_name_or_path=str(run.base.path), dataset_paths=[str(run.world_split(split))],
                         adapter_path=adapter, max_steps=sizes.sft_steps)  # fmt: skip
        return train_sft(*args)

    return sft


def stage_filter(run: RunLayout, sizes: Sizes, target: Target) -> dict:
    from slmsql_hub.filtering import load_filter_config, run_filter

    (config,) = _configure(
        (load_filter_config(RECIPES / "filter.yaml"),),
        model_name_or_path=str(run.base.path), adapter_path=str(run.sft_stage2.path), world_root=str(run.world),
        benchmarks=[f"world:rl_pool:{sizes.filter_questions}"], num_samples=sizes.filter_samples,
        **target.fields(), output_dir=str(run.filter),
        **({"max_new_tokens": sizes.new_tokens} if sizes.new_tokens else {}),
    )  # fmt: skip
    return run_filter(config, progress=False)


def stage_grpo(run: RunLayout, sizes: Sizes, target: Target) -> dict:
    from slmsql_hub.training import configs
    from slmsql_hub.training.grpo import train_grpo

    shape = {"max_completion_length": sizes.new_tokens} if sizes.new_tokens else {}
    if sizes.grpo_generations:
        shape |= {"num_generations": sizes.grpo_generations, "per_device_train_batch_size": 2 * sizes.grpo_generations}
    # TRL derives both from the batch in __post_init__; None lets it derive them again for the new one.
    args = _training(configs.GRPO_ARGUMENTS, "grpo_attempt1.yaml", target, run.grpo.path,
                     model_name_or_path=str(run.base.path), adapter_path=str(run.sft_stage2.path),
                     dataset_paths=[str(run.world_split("grounding"))], max_steps=sizes.grpo_steps,
                     logging_steps=1, generation_batch_size=None, steps_per_generation=None, **shape)  # fmt: skip
    return train_grpo(*args)


def stage_eval(run: RunLayout, sizes: Sizes, target: Target) -> dict:
    from slmsql_hub.evaluation import load_eval_config, run_eval

    n = sizes.eval_questions
    (config,) = _configure(
        (load_eval_config(RECIPES / "eval.yaml"),),
        model_name_or_path=str(run.base.path), sft_adapter=str(run.sft_stage2.path),
        grpo_adapter=str(run.grpo.path), world_root=str(run.world), benchmarks=[f"world:dev:{n}", f"world:test:{n}"],
        **target.fields(), output_dir=str(run.eval),
        **({"max_new_tokens": sizes.new_tokens} if sizes.new_tokens else {}),
    )  # fmt: skip
    return run_eval(config, progress=False)


def stage_world(run: RunLayout, sizes: Sizes, target: Target) -> dict:
    from slmsql_hub.world.build import WorldSizes, build_world

    build_world(run.world, seed=0, sizes=WorldSizes())
    return {}


STAGES: dict[str, Callable[[RunLayout, Sizes, Target], dict]] = {
    "world": stage_world, "base": stage_base, "sft1": stage_sft(1), "sft2": stage_sft(2),
    "filter": stage_filter, "grpo": stage_grpo, "eval": stage_eval,
}  # fmt: skip


def _step_times(name: str, summary: dict, run: RunLayout) -> dict:
    """Mean step time of a training stage; for GRPO every step and where its time went."""
    if "train_seconds" not in summary or not summary.get("steps"):
        return {}
    times = {"steps": summary["steps"], "train_s": summary["train_seconds"],
             "mean_step_s": summary["train_seconds"] / summary["steps"]}  # fmt: skip
    if name == "grpo":
        from bench_reward import reward_share, step_rows

        rows = step_rows(run.grpo.telemetry)
        times |= {"step_s": [row["step_s"] for row in rows], "reward": reward_share(rows),
                  "guards_failed": summary["guards"]["failed"]}  # fmt: skip
    return times


def measure(name: str, run: RunLayout, sizes: Sizes, target: Target) -> dict:
    """Run one stage and return its wall time, step times, generation throughput and peak GPU memory (MiB)."""
    import torch

    from slmsql_hub.study.timing import GenerateTimer, split_training_time
    from slmsql_hub.training.telemetry import read_telemetry

    cuda = target.device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    with GenerateTimer().timing() as timer:
        summary = STAGES[name](run, sizes, target)
    result = {
        "wall_s": round(time.perf_counter() - started, 3),
        "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
        "generate": {"calls": timer.calls, "seconds": round(timer.seconds, 3), "new_tokens": timer.new_tokens,
                     "tokens_per_s": timer.tokens_per_s()},
        **_step_times(name, summary, run),
    }  # fmt: skip
    if name == "grpo":
        records = read_telemetry(run.grpo.telemetry)
        result["split"] = split_training_time(summary["train_seconds"], timer.seconds, records)
    return result


def _missing_modules() -> list[str]:
    return [name for name in (*ASSUMED, *CARRIED) if importlib.util.find_spec(name) is None]


def _check_start(args: argparse.Namespace) -> Target:
    """Refuse, in one line, a machine that lacks a module or CUDA, or an output that holds a previous run."""
    missing = _missing_modules()
    if missing:
        carried = [m for m in missing if m in CARRIED]
        how = (f"carry the wheels: `bash benchmarks/gpu_wheels.sh` where there is network (PYTHON_VERSION="
               f"{sys.version_info.major}.{sys.version_info.minor} for this python), copy wheels/ beside the "
               "checkout, then `make gpu-check` installs them offline") if carried else (
               f"this machine must bring {', '.join(ASSUMED)} itself (not carried)")  # fmt: skip
        raise UsageError(f"missing module(s) {', '.join(missing)}: {how}")
    import torch

    if not args.smoke and not torch.cuda.is_available():
        raise UsageError("no CUDA device here: the GPU check needs one (on CPU run it with --smoke)")
    from slmsql_hub.run.guard import check_output

    out = check_output(args.out, [REPO / "recipes", REPO / "slmsql_hub"], "--out")
    if out.exists() and any(out.iterdir()) and not args.force:
        raise UsageError(f"--out {out} holds a previous run; remove it or pass --force")
    return CPU if args.smoke else CUDA


def _device_record(target: Target, smoke: bool) -> dict:
    import torch

    name = torch.cuda.get_device_name() if target.device == "cuda" else "cpu"
    return {"device": target.device, "name": name, "dtype": target.dtype, "bf16": target.bf16, "smoke": smoke}


def run_check(out: Path, sizes: Sizes, target: Target) -> dict:
    """Every stage into ``out``, measured; ``out/gpu_check.json`` is written even when a stage raises."""
    from slmsql_hub.run.layout import RunLayout
    from slmsql_hub.runtime import environment

    run = RunLayout(out)
    report: dict[str, Any] = {"device": _device_record(target, target == CPU), "environment": environment(),
                              "sizes": dataclasses.asdict(sizes), "stages": {}, "failed_stage": None}  # fmt: skip
    started = time.perf_counter()
    try:
        for name in STAGES:
            report["failed_stage"] = name
            report["stages"][name] = measure(name, run, sizes, target)
        report["failed_stage"] = None
    finally:
        report["wall_s"] = round(time.perf_counter() - started, 3)
        report["process_s"] = round(time.perf_counter() - STARTED, 3)
        report["within_budget"] = report["process_s"] <= sizes.budget_s
        (out / REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_report(report: dict) -> None:
    """The stage table, GRPO's reward share and the total against the budget."""
    print(f"device: {report['device']['name']} ({report['device']['dtype']})")  # noqa: T201
    print(f"{'stage':<7} {'wall s':>8} {'step s':>8} {'gen tok/s':>10} {'peak GPU MiB':>13}")  # noqa: T201
    for name, stage in report["stages"].items():
        print(  # noqa: T201
            f"{name:<7} {stage['wall_s']:>8.1f} {_number(stage.get('mean_step_s'), '.4f'):>8} "
            f"{_number(stage['generate']['tokens_per_s'], '.0f'):>10} {_number(stage['peak_gpu_mib'], '.0f'):>13}"
        )
    grpo = report["stages"].get("grpo")
    if grpo:
        split, share = grpo["split"], grpo["reward"]["share"]
        print(  # noqa: T201
            f"GRPO: reward {_number(share, '.1%')} of step time; of training: generation {split['generation_s']} s, "
            f"reward {split['reward_s']} s, other {split['other_s']} s of {split['train_s']} s"
        )
    verdict = "within" if report["within_budget"] else "OVER"
    print(  # noqa: T201
        f"stages {report['wall_s']:.0f} s, {report['process_s']:.0f} s since start ({verdict} the "
        f"{report['sizes']['budget_s']:.0f} s budget)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="outputs/gpu_check", help="output folder (default outputs/gpu_check)")
    parser.add_argument("--smoke", action="store_true", help="CPU, float32, tiny sizes: checks the script, not a GPU")
    parser.add_argument("--force", action="store_true", help="delete a previous run in --out first")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        target = _check_start(args)
    except UsageError as err:
        print(f"gpu_check: {err}", file=sys.stderr)  # noqa: T201
        return 2
    from slmsql_hub.run.guard import output_lock

    out = Path(args.out)
    with output_lock(out):
        if args.force and out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        report = run_check(out, SMOKE if args.smoke else GPU, target)
    print_report(report)
    print(f"written: {out / REPORT}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
