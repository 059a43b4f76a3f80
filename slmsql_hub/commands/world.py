"""``slmsql world build``: build (or reuse) the embedded world and print its split counts. ``slmsql world benchmark``:
write its evaluation splits as a Hub benchmark dataset folder (:mod:`slmsql_hub.data.world_benchmark`)."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..resources import PACKAGE_DIR
from ..run.guard import check_output, output_lock
from . import existing_folder, folder_to_write, number, print_result, repo_id


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "world",
        help="the embedded world: small SQLite databases, generated questions and dataset splits",
        description="Work with the embedded world, the offline stand-in for SynSQL, BIRD and Spider.",
    )
    actions = parser.add_subparsers(dest="world_command", metavar="ACTION")
    build = actions.add_parser(
        "build",
        help="build the world's databases and splits (reuses a complete one with the same seed)",
        description=(
            "Build the embedded world under --out: databases/<db>/<db>.sqlite, datasets/<split> "
            "(foundation, grounding, rl_pool, dev, test; datasets.save_to_disk with a dataset card) and "
            "world.json. Deterministic in --seed; an existing complete world with the same seed is reused."
        ),
    )
    build.add_argument("--out", required=True, type=folder_to_write, metavar="DIR", help="the world folder")
    build.add_argument("--seed", type=number(int, low=0), default=0, help="world seed (default 0)")
    build.add_argument("--overwrite", action="store_true", help="rebuild even if a world is already there")
    from ..world.build import SPLITS, WorldSizes  # light: no torch, no datasets at import

    defaults = WorldSizes()
    for split in SPLITS:
        default = getattr(defaults, split)
        build.add_argument(
            f"--{split.replace('_', '-')}",
            type=number(int, low=0),
            default=default,
            metavar="N",
            help=f"questions in {split} (default {default})",
        )
    from ..study.plant import PLANTS, Plant

    planted = Plant()
    build.add_argument(
        "--plant",
        choices=PLANTS,
        help="plant one systematic error in the SFT splits and add probe splits (comparison_inclusive: "
        '"at least" / "at most" golds written with > / <; value_case: category values written in lower case)',
    )
    build.add_argument(
        "--plant-rate",
        type=number(float, low=0, high=1),
        metavar="F",
        help=f"share of the affected SFT questions given the wrong gold (default {planted.rate})",
    )
    build.add_argument(
        "--plant-probe",
        type=number(int, low=1),
        metavar="N",
        help=f"questions per probe split (default {planted.probe})",
    )
    _add_benchmark(actions)
    parser.set_defaults(run=run)
    return parser


def _add_benchmark(actions) -> None:
    bench = actions.add_parser(
        "benchmark",
        help="write the world's dev and test splits as a Hub benchmark dataset folder (eval.yaml, card, databases)",
        description=(
            "Write --world's evaluation splits (dev, test) under --out as a dataset the Hub can host as a benchmark: "
            "data/<split>.parquet, the databases they use, README.md and eval.yaml (task ids dev and test). Upload "
            "it with `huggingface-cli upload NS/NAME OUT --repo-type dataset`, then set `dataset_ids: "
            "[world=NS/NAME]` in the eval recipe so the card's model-index and .eval_results name it."
        ),
    )
    bench.add_argument("--world", required=True, type=existing_folder, metavar="DIR", help="a built world folder")
    bench.add_argument("--out", required=True, type=folder_to_write, metavar="DIR", help="a new or empty folder")
    bench.add_argument("--repo-id", type=repo_id(), metavar="NS/NAME", help="where it will be pushed (for its card)")


def run(args: argparse.Namespace) -> int:
    if args.world_command == "benchmark":
        from ..data.world_benchmark import build_world_benchmark

        with output_lock(check_output(args.out, [args.world], "--out")):
            out = build_world_benchmark(args.world, args.out, repo_id=args.repo_id)
        return print_result(f"world benchmark at {out}: data/, databases/, README.md, eval.yaml")
    if args.world_command != "build":
        raise UsageError("choose an action: `slmsql world build --out DIR` or `slmsql world benchmark`")
    from ..study.plant import Plant
    from ..world.build import DIFFICULTIES, SPLITS, WorldSizes, build_world

    if args.plant is None and (args.plant_rate is not None or args.plant_probe is not None):
        raise UsageError("--plant-rate and --plant-probe need --plant (e.g. --plant comparison_inclusive)")
    plant = None
    if args.plant is not None:
        given = {"rate": args.plant_rate, "probe": args.plant_probe}
        plant = Plant(args.plant, **{key: value for key, value in given.items() if value is not None})
    sizes = WorldSizes(**{split: getattr(args, split) for split in SPLITS})  # --rl-pool is args.rl_pool
    with output_lock(check_output(args.out, [PACKAGE_DIR], "--out")):  # the world's sources are the package's
        manifest = build_world(args.out, seed=args.seed, sizes=sizes, overwrite=args.overwrite, plant=plant)
    lines = [f"world at {manifest.root} (seed {manifest.seed}, held-out database {manifest.held_out_db})"]
    if manifest.plant:
        sft = ", ".join(f"{s} {n['rewritten']}/{n['affected']}" for s, n in manifest.plant["sft"].items())
        lines.append(
            f"  planted {manifest.plant['name']} at rate {manifest.plant['rate']:g}: rewritten golds {sft}"
        )
    for split in manifest.split_names:
        spread = ", ".join(f"{d} {manifest.difficulty[split].get(d, 0)}" for d in DIFFICULTIES)
        lines.append(f"  {split:<10} {manifest.splits[split]:>5} questions  ({spread})")
    return print_result(*lines)
