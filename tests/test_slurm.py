"""`slmsql ablate --slurm`: the study as SLURM jobs (prepare, an array of shards, merge; every world of a
multi-world recipe, then the combine). Fast: the generated scripts and their dependencies, with a stand-in
`sbatch` that records its command lines. Slow: a real single-node SLURM (`.ci/slurm-up`) runs the smoke grid as an
array of 2 tasks; the merged report equals a local `slmsql ablate`'s, also after a task is cancelled mid-run and
the submission rerun."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from slmsql_hub.cli import main
from slmsql_hub.study.slurm import ACTIVE, job_states

REPO = Path(__file__).resolve().parents[1]
WORLD = REPO / "recipes" / "world"
FAKE_SBATCH = """#!/bin/bash
n=$(( $(cat "$FAKE_SLURM/next" 2>/dev/null || echo 100) + 1 )); echo $n > "$FAKE_SLURM/next"
echo "$n $*" >> "$FAKE_SLURM/calls"; echo "$n"
"""


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch):
    """A stand-in `sbatch` (ids from 101) and `scontrol` (`FAKE_STATE` for every job) first on PATH."""
    bin_dir, record = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    record.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "scontrol").write_text('#!/bin/bash\necho "JobId=${@: -1} JobState=$FAKE_STATE"\n')
    (bin_dir / "sacct").write_text("#!/bin/bash\nexit 1\n")  # no accounting: scontrol answers
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(record))
    monkeypatch.setenv("FAKE_STATE", "COMPLETED")
    return record


def _transfer_recipe(tmp_path: Path) -> Path:
    """recipes/world/transfer.yaml with its worlds' folders under tmp_path (no run folder there yet)."""
    recipe = yaml.safe_load((WORLD / "transfer.yaml").read_text(encoding="utf-8"))
    for name, arm in recipe["worlds"].items():
        arm.update(run_dir=str(tmp_path / name / "run"), output_dir=str(tmp_path / name))
    recipe.update(run_dir=recipe["worlds"]["plant70"]["run_dir"], output_dir=str(tmp_path / "plant70"))
    for key in ("grpo_recipe", "eval_recipe"):
        recipe[key] = str(WORLD / recipe[key])
    recipe["band"]["filter_recipe"] = str(WORLD / recipe["band"]["filter_recipe"])
    path = tmp_path / "transfer.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return path


def test_every_world_is_prepared_then_prepared_once_sharded_merged_and_combined(tmp_path, fake_sbatch, capsys):
    recipe = _transfer_recipe(tmp_path)
    argv = ["ablate", "--config", str(recipe), "--slurm", "--shards", "2", "--gpus-per-task", "1",
            "--array-throttle", "1", "--requeue", "--sbatch-arg=--mem=16G --qos=low"]  # fmt: skip
    assert main(argv) == 0
    jobs = json.loads((tmp_path / "slurm" / "jobs.json").read_text())["submissions"][-1]["jobs"]
    ids = {job["name"]: job["id"] for job in jobs}
    after = {job["name"]: job["after"] for job in jobs}
    for world in ("plant70", "plant100", "natural"):
        assert after[f"{world}-world"] == []
        assert after[f"{world}-prepare"] == [f"{world}-world"]
        assert after[f"{world}-shards"] == [f"{world}-prepare"]
        assert after[f"{world}-merge"] == [f"{world}-shards"]
    assert after["combine"] == ["plant70-merge", "plant100-merge", "natural-merge"]
    # sbatch got those dependencies as ids, in submission order
    calls = {line.split()[-1].rsplit("/", 1)[1].removesuffix(".sbatch"): line.split()[1:-1]
             for line in (fake_sbatch / "calls").read_text().splitlines()}  # fmt: skip
    assert list(calls) == [job["name"] for job in jobs]
    assert calls["plant70-world"] == ["--parsable"]
    merges = ":".join(ids[f"{w}-merge"] for w in ("plant70", "plant100", "natural"))
    assert calls["combine"] == ["--parsable", f"--dependency=afterok:{merges}", "--kill-on-invalid-dep=yes"]
    assert calls["plant100-shards"][1] == f"--dependency=afterok:{ids['plant100-prepare']}"

    folder = tmp_path / "slurm"
    world = (folder / "plant70-world.sbatch").read_text()
    assert f"world build --out {tmp_path / 'plant70' / 'run' / 'world'} --plant comparison_inclusive" in world
    assert f"quickstart --out {tmp_path / 'plant70' / 'run'} --until sft2" in world
    assert "--plant" not in (folder / "natural-world.sbatch").read_text()
    shards = (folder / "plant70-shards.sbatch").read_text()
    for line in ("#SBATCH --array=0,1%1", "#SBATCH --gpus-per-task=1", "#SBATCH --requeue", "#SBATCH --mem=16G",
                 "#SBATCH --qos=low", f"cd {Path.cwd()}"):  # fmt: skip
        assert line in shards.splitlines()
    assert f'{sys.executable} -m slmsql_hub ablate --config {recipe} --run-dir ' in shards
    assert shards.rstrip().endswith('--shard "${SLURM_ARRAY_TASK_ID}/2"') and "\nexec " in shards
    assert "--prepare-only" in (folder / "natural-prepare.sbatch").read_text()
    merge = (folder / "natural-merge.sbatch").read_text()
    assert f"--merge {tmp_path / 'natural' / 'shards' / '0-of-2'} {tmp_path / 'natural' / 'shards' / '1-of-2'}" in merge
    assert (folder / "combine.sbatch").read_text().rstrip().endswith(f"--config {recipe} --combine")

    # Rerun while a job is queued: nothing submitted. Once they failed: everything again (no run finished).
    os.environ["FAKE_STATE"] = "PENDING"
    assert main(argv) == 0
    assert "nothing submitted" in capsys.readouterr().out
    assert len(json.loads((folder / "jobs.json").read_text())["submissions"]) == 1
    os.environ["FAKE_STATE"] = "FAILED"
    assert main(argv) == 0
    record = json.loads((folder / "jobs.json").read_text())["submissions"]
    assert set(record[0]["states"].values()) == {"FAILED"} and len(record[1]["jobs"]) == len(jobs)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--partition", "gpu"], "--partition go with --slurm"),
        (["--slurm", "--shard", "0/2"], "--slurm does not go with --shard"),
        (["--slurm", "--slurm-status"], "does not go with --slurm-status"),
        (["--prepare-only", "--shard", "0/2"], "--prepare-only prepares for the shards"),
    ],
)
def test_bad_slurm_options_stop_in_one_line_with_exit_2(argv, says, capsys, tmp_path):
    code = main(["ablate", "--config", str(WORLD / "ablations.yaml"), "--output_dir", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_slurm_without_sbatch_says_so_in_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch there
    assert main(["ablate", "--config", str(WORLD / "ablations.yaml"), "--slurm"]) == 2
    assert "sbatch, which is not on PATH" in capsys.readouterr().err


# --- a real single-node SLURM (.ci/slurm-up) ---

SLURM_LOGS = Path("/var/log/slurm")
WAIT_S = 300


def _logs(folder: Path) -> str:
    """Every job log of the submission and the tails of the controller's and the node's logs."""
    parts = [f"--- {log} ---\n{log.read_text(errors='replace')[-4000:]}"
             for log in sorted((folder / "slurm" / "logs").glob("*"))]  # fmt: skip
    for name in ("slurmctld.log", "slurmd.log"):
        path = SLURM_LOGS / name
        if path.is_file():
            parts.append(f"--- {path} ---\n" + "\n".join(path.read_text(errors="replace").splitlines()[-40:]))
    return "\n".join(parts)


def _last(folder: Path) -> dict:
    return json.loads((folder / "slurm" / "jobs.json").read_text())["submissions"][-1]


def _wait(folder: Path) -> dict[str, str]:
    """Poll the last submission's jobs until none is queued or running; their states."""
    ids = [job["id"] for job in _last(folder)["jobs"]]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        states = job_states(ids)
        if set(ids) <= {key.split("_")[0] for key in states} and not set(states.values()) & set(ACTIVE):
            return states
        time.sleep(2)
    pytest.fail(f"jobs {ids} still running after {WAIT_S} s: {job_states(ids)}\n{_logs(folder)}")


def _verdicts(report: dict) -> dict:
    """Per (variant, seed, slice) and pooled per (variant, slice): ΔEX, its CI, p and p_holm; and the controls."""
    out: dict = {"controls": report["controls"]}
    for entry in report["variants"]:
        for name, piece in entry["slices"].items():
            out[entry["name"], entry["seed"], name] = [piece[k] for k in ("delta", "ci", "p", "p_holm")]
    for pooled in report["pooled"]:
        for name, piece in pooled["slices"].items():
            out[pooled["name"], name] = [piece[k] for k in ("delta", "ci", "p", "p_holm")]
    return out


@pytest.fixture(scope="module")
def smoke_study(tmp_path_factory):
    """The smoke run folder and recipe, and the local `slmsql ablate` report of frozen and high_lr (seed 0)."""
    from tests.test_ablate_smoke import _smoke_recipe, _smoke_run

    if shutil.which("sbatch") is None:
        pytest.skip("sbatch not on PATH: SLURM is not installed (.ci/run installs it; .ci/slurm-up starts it)")
    up = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, check=False)
    assert up.returncode == 0 and up.stdout.split()[:1] in (["idle"], ["mixed"]), (
        f"SLURM is installed but its node is not up ({up.stdout.strip()} {up.stderr.strip()}): run .ci/slurm-up"
    )
    tmp = tmp_path_factory.mktemp("slurm")
    recipe = _smoke_recipe(tmp, _smoke_run(tmp))
    argv = ["ablate", "--config", str(recipe), "--variants", "frozen", "high_lr"]
    assert main([*argv, "--output_dir", str(tmp / "local")]) == 0
    return tmp, argv, json.loads((tmp / "local" / "report.json").read_text())


def _submit(argv: list[str], out: Path, capsys) -> str:
    assert main([*argv, "--output_dir", str(out), "--slurm"]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_the_grid_as_a_slurm_array_merges_into_the_local_report(smoke_study, capsys):
    tmp, argv, local = smoke_study
    out = tmp / "array"
    printed = _submit(argv, out, capsys)
    assert "submitted: prepare" in printed and "shards" in printed and "merge" in printed
    states = _wait(out)
    assert set(states.values()) == {"COMPLETED"} and len(states) == 4, f"{states}\n{_logs(out)}"  # 2 tasks
    assert (out / "prepared.json").is_file()
    report = json.loads((out / "report.json").read_text())
    assert _verdicts(report) == _verdicts(local)
    assert [(e["name"], e["seed"]) for e in report["variants"]] == [("frozen", 0), ("high_lr", 0)]

    assert main([*argv, "--output_dir", str(out), "--slurm-status"]) == 0
    assert "COMPLETED" in capsys.readouterr().out
    assert "nothing to submit" in _submit(argv, out, capsys)  # all done: the rerun submits nothing


@pytest.mark.slow
def test_a_task_cancelled_mid_run_is_resubmitted_by_the_same_command(smoke_study, capsys):
    tmp, argv, local = smoke_study
    out = tmp / "cancelled"
    _submit(argv, out, capsys)
    array = next(job["id"] for job in _last(out)["jobs"] if job["name"] == "shards")
    started = out / "shards" / "1-of-2" / "runs" / "high_lr-seed0" / "grpo"
    deadline = time.monotonic() + WAIT_S
    while not started.exists() and time.monotonic() < deadline:  # task 1 is training high_lr
        time.sleep(0.5)
    assert started.exists(), f"task 1 never started training\n{_logs(out)}"
    subprocess.run(["scancel", f"{array}_1"], check=True)
    states = _wait(out)
    assert states[f"{array}_1"] == "CANCELLED" and states[f"{array}_0"] == "COMPLETED", f"{states}\n{_logs(out)}"
    assert not (started.parent / "result.json").exists()
    assert not list((out / "shards").glob(".*.slmsql.lock")), "the cancelled task left its folder's lock"
    merge = next(job["id"] for job in _last(out)["jobs"] if job["name"] == "merge")
    assert states[merge] != "COMPLETED"  # it waited on the array: ended with it

    printed = _submit(argv, out, capsys)  # the same command again: only shard 1 is left
    assert "submitted: prepare" in printed
    assert next(job for job in _last(out)["jobs"] if job["name"] == "shards")["array"] == [1]
    states = _wait(out)
    assert set(states.values()) == {"COMPLETED"}, f"{states}\n{_logs(out)}"
    assert _verdicts(json.loads((out / "report.json").read_text())) == _verdicts(local)
