"""Nothing lost, nothing half-written (issue #34): no command writes over its inputs, one writer per output,
finished artifacts are replaced only with ``--overwrite``, and a failed or killed write leaves the old state.

The matrix runs every writing command in-process against tiny inputs, with the output equal to an input, inside
one, containing one, or a symlink to one: each is one stderr line, exit code 2, and every input file hashes the
same afterwards. Only the SIGKILL test spawns a process.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import REPO

from slmsql_hub import cli
from slmsql_hub.errors import UsageError
from slmsql_hub.run import guard
from slmsql_hub.run.files import write_atomic

WORLD = REPO / "recipes" / "world"
FIXTURE_RUN = REPO / "tests" / "fixtures" / "run"


def _hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (symlinks not followed)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _toy_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (10,)])
    return path


def _folder(path: Path, name: str = "weights.bin") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_bytes(os.urandom(64))
    return path


# Each case: (argv given the output path, the input the output overlaps), built under `root` (all inputs).
def _ex(root: Path):
    _toy_db(root / "db" / "toy" / "toy.sqlite")
    (root / "pred.sql").write_text("SELECT count(*) FROM t\n")
    (root / "gold.sql").write_text("SELECT count(*) FROM t\ttoy\n")
    argv = ["ex", "--pred", str(root / "pred.sql"), "--gold", str(root / "gold.sql"), "--db-root", str(root / "db")]
    return (lambda out: [*argv, "--out", str(out)]), root / "gold.sql"


def _world_folder(path: Path) -> Path:
    """A world's parts (its databases, splits and manifest); the world recipes write their stages beside them."""
    _folder(path / "databases" / "toy", "toy.sqlite"), _folder(path / "datasets" / "dev", "data.arrow")
    (path / "world.json").write_text("{}")
    return path


def _recipe(command: list[str], recipe: str, fields: dict[str, Path]):
    """A recipe command reading the folders ``fields`` names; the output overlaps the first (a world's databases)."""

    def case(root: Path):
        given = {key: (_world_folder if key.startswith("world") else _folder)(root / value) for key, value in fields.items()}
        overrides = [item for key, value in given.items() for item in (f"--{key}", str(value))]
        first = next(iter(given.values()))
        first = first / "databases" if (first / "world.json").is_file() else first
        return (lambda out: [*command, "--config", str(WORLD / recipe), *overrides, "--output_dir", str(out)]), first

    return case


def _run_folder(root: Path) -> Path:
    shutil.copytree(FIXTURE_RUN, root / "run")
    return root / "run"


def _card(root: Path):
    run = _run_folder(root)
    return (lambda out: ["card", "--run-dir", str(run), "--out", str(out)]), run / "grpo"


def _push(root: Path):
    run = _run_folder(root)
    argv = ["push", str(run), "--repo-id", "alice/x", "--what", "model", "--dry-run"]
    return (lambda out: [*argv, "--dry-run-dir", str(out)]), run / "grpo"


def _world(root: Path, monkeypatch):
    sources = _folder(root / "sources")
    monkeypatch.setattr("slmsql_hub.commands.world.PACKAGE_DIR", sources)
    return (lambda out: ["world", "build", "--out", str(out)]), sources


def _quickstart(root: Path):
    shutil.copytree(WORLD, root / "recipes")
    return (lambda out: ["quickstart", "--recipes", str(root / "recipes"), "--out", str(out)]), root / "recipes"


def _ablate(root: Path):
    run = root / "run"
    _folder(run / "base"), _folder(run / "sft" / "stage2")
    (run / "world").mkdir()
    (run / "world" / "world.json").write_text("{}")
    argv = ["ablate", "--config", str(WORLD / "ablations.yaml"), "--run-dir", str(run)]
    return (lambda out: [*argv, "--output-dir", str(out)]), run / "sft"


CASES = {
    "ex": _ex,
    "eval": _recipe(
        ["eval"], "eval.yaml",
        {"model_name_or_path": Path("base"), "sft_adapter": Path("sft"), "grpo_adapter": Path("grpo"),
         "world_root": Path("world")},
    ),
    "filter": _recipe(
        ["filter"], "filter.yaml",
        {"world_root": Path("world"), "model_name_or_path": Path("base"), "adapter_path": Path("sft")},
    ),
    "train base": _recipe(["train", "base"], "base.yaml", {"world_dir": Path("world")}),
    "train sft": _recipe(
        ["train", "sft"], "sft_stage1.yaml", {"dataset_paths": Path("data"), "model_name_or_path": Path("base")}
    ),
    "train grpo": _recipe(
        ["train", "grpo"], "grpo_band.yaml",
        {"adapter_path": Path("sft"), "dataset_paths": Path("band"), "model_name_or_path": Path("base")},
    ),
    "card": _card,
    "push": _push,
    "world build": _world,
    "quickstart": _quickstart,
    "ablate": _ablate,
}  # fmt: skip


def _overlapping(kind: str, the_input: Path, root: Path) -> Path:
    if kind == "equal":
        return the_input
    if kind == "inside":
        return the_input / "out"
    if kind == "contains":
        return the_input.parent
    link = root / "link"
    link.symlink_to(the_input, target_is_directory=the_input.is_dir())
    return link


@pytest.mark.parametrize("kind", ["equal", "inside", "contains", "symlink"])
@pytest.mark.parametrize("command", sorted(CASES))
def test_an_output_overlapping_an_input_is_one_line_and_touches_nothing(command, kind, tmp_path, capsys, monkeypatch):
    root = tmp_path / "inputs"
    root.mkdir()
    make = CASES[command]
    argv, the_input = make(root, monkeypatch) if command == "world build" else make(root)
    out = _overlapping(kind, the_input, root)
    before = _hashes(root)
    capsys.readouterr()
    assert cli.main(argv(out)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"slmsql {command.split()[0]}: error: "), err
    assert "the input" in err or (command == "ex" and kind == "contains" and "is a folder" in err), err
    assert _hashes(root) == before
    assert not list(root.parent.rglob(f"*{guard.LOCK_SUFFIX}"))  # no lock left behind


# -- finished artifacts -------------------------------------------------------------------------------------------


def test_a_stage_may_write_inside_the_world_folder_as_the_world_recipes_do(tmp_path):
    world = _world_folder(tmp_path / "world")
    inputs = guard.config_inputs(type("Config", (), {"world_root": str(world)})())
    assert guard.check_output(world / "eval", inputs, "output_dir") == world / "eval"
    with pytest.raises(UsageError, match="inside the input"):
        guard.check_output(world / "datasets" / "eval", inputs, "output_dir")


def test_ex_never_writes_into_a_database(tmp_path, capsys):
    argv, _ = _ex(tmp_path)
    db = tmp_path / "db" / "toy" / "toy.sqlite"
    before = _hashes(tmp_path)
    for out in (db, tmp_path / "db" / "toy" / "verdicts.jsonl"):
        assert cli.main([*argv(out), "--overwrite"]) == 2
        assert "the input" in capsys.readouterr().err
    assert _hashes(tmp_path) == before


def test_ex_out_onto_an_existing_file_needs_overwrite(tmp_path, capsys):
    argv, _ = _ex(tmp_path)
    out = tmp_path / "verdicts.jsonl"
    out.write_text("mine\n")
    assert cli.main(argv(out)) == 2
    assert "pass --overwrite" in capsys.readouterr().err and out.read_text() == "mine\n"
    assert cli.main([*argv(out), "--overwrite"]) == 0
    assert json.loads(out.read_text().splitlines()[0])["correct"] == 1


def test_train_onto_a_finished_run_needs_overwrite(tmp_path, capsys):
    argv, _ = _recipe(["train", "grpo"], "grpo_band.yaml", {"adapter_path": Path("sft")})(tmp_path)
    out = _folder(tmp_path / "grpo", "adapter_model.safetensors")
    (out / "run_summary.json").write_text("{}")
    before = _hashes(out)
    assert cli.main(argv(out)) == 2
    assert "holds a finished run; pass --overwrite" in capsys.readouterr().err
    assert _hashes(out) == before


def test_card_onto_a_finished_card_needs_overwrite(tmp_path, capsys):
    argv, _ = _card(tmp_path)
    out = tmp_path / "card"
    out.mkdir()
    (out / "README.md").write_text("my card")
    assert cli.main(argv(out)) == 2
    assert "holds a finished card; pass --overwrite" in capsys.readouterr().err
    assert (out / "README.md").read_text() == "my card"


# -- one writer per output ----------------------------------------------------------------------------------------

_HOLD = """
import sys, time
from pathlib import Path
from slmsql_hub.run.guard import output_lock
out = Path(sys.argv[1])
with output_lock(out):
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text("first writer")
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_writer_is_refused_naming_the_first(tmp_path, capsys):
    out = tmp_path / "card"
    first = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert first.stdout.readline().strip() == "held"
        argv, _ = _card(tmp_path)
        assert cli.main([*argv(out), "--overwrite"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert f"being written by pid {first.pid} on host {socket.gethostname()}" in err
        assert (out / "README.md").read_text() == "first writer"
    finally:
        first.kill()
        first.wait()


def test_two_cards_at_once_into_one_folder_one_completes_and_the_other_is_refused(tmp_path):
    argv, _ = _card(tmp_path)
    out = tmp_path / "card"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [
        subprocess.Popen([sys.executable, "-m", "slmsql_hub", *argv(out)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    done = sorted((proc.wait(timeout=300), proc.stdout.read(), proc.stderr.read()) for proc in runs)
    (ok, stdout, _), (refused, _, err) = done
    assert (ok, refused) == (0, 2), done
    errors = [line for line in err.splitlines() if line.startswith("slmsql card: error: ")]
    assert errors == [err.strip().splitlines()[-1]] and "Traceback" not in err
    assert "being written by pid" in errors[0] or "holds a finished card" in errors[0]
    assert len(_hashes(out)) == json.loads(stdout)["files"] and _leftovers(tmp_path) == []


@pytest.mark.parametrize("command", ["card", "ex", "train grpo"])
def test_an_output_finished_while_waiting_for_its_lock_is_not_replaced(command, tmp_path, capsys, monkeypatch):
    """The finished check runs under the lock: a writer that finished just before this one took the lock is
    refused too, not replaced (a check before the lock would let it through)."""
    root = tmp_path / "in"
    root.mkdir()
    argv, _ = CASES[command](root)
    out = tmp_path / ("verdicts.jsonl" if command == "ex" else "out")
    acquire, theirs = guard._acquire, {}

    def another_writer_finishes_first(output, lock):
        if command == "ex":
            out.write_text("theirs\n")
        else:
            _folder(out, "README.md" if command == "card" else "adapter_model.safetensors")
            (out / "run_summary.json").write_text("{}")
        theirs.update(_hashes(tmp_path))
        return acquire(output, lock)

    monkeypatch.setattr(guard, "_acquire", another_writer_finishes_first)
    assert cli.main(argv(out)) == 2
    assert "holds a finished" in capsys.readouterr().err
    assert theirs and _hashes(tmp_path) == theirs


def test_a_stale_lock_is_taken_over_and_another_hosts_never(tmp_path, caplog):
    out = tmp_path / "filter"
    lock = guard.lock_path(out)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": int(dead.stdout)}))
    with guard.output_lock(out) as held:
        assert json.loads(held.read_text())["pid"] == os.getpid()
    assert "stale lock" in caplog.text and not lock.exists()
    lock.write_text(json.dumps({"host": "node-17", "pid": 1234}))
    with pytest.raises(UsageError, match="pid 1234 on host node-17 .* remove the lock"):
        with guard.output_lock(out):
            pass
    assert lock.exists()  # never taken over nor removed
    with guard.output_lock(out, main_process=False) as held:  # a non-main rank writes under its launcher's lock
        assert held is None


def test_taking_over_a_killed_writers_lock_puts_back_the_folder_it_had_moved_aside(tmp_path):
    out, dead = tmp_path / "card", subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)  # fmt: skip
    _folder(tmp_path / ".card.old-1a2b3c4d", "README.md")  # killed between replace_folder's two renames
    _folder(tmp_path / ".card.tmp-5e6f7a8b", "README.md")
    before = _hashes(tmp_path / ".card.old-1a2b3c4d")
    guard.lock_path(out).write_text(json.dumps({"host": socket.gethostname(), "pid": int(dead.stdout)}))
    with guard.output_lock(out):
        assert _hashes(out) == before and _leftovers(tmp_path) == []


# -- atomic writes ------------------------------------------------------------------------------------------------


def _refusing_rename(monkeypatch):
    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name or ".old-" in p.name)


def test_a_failed_rename_keeps_the_old_verdicts_report_and_folder(tmp_path, monkeypatch, capsys):
    argv, _ = _ex(tmp_path)
    verdicts, report, band = tmp_path / "v.jsonl", tmp_path / "report.json", tmp_path / "band"
    verdicts.write_text("old\n"), report.write_text("{}"), _folder(band, "data.arrow")
    before = _hashes(band)
    _refusing_rename(monkeypatch)
    assert cli.main([*argv(verdicts), "--overwrite"]) == 1  # a full disk is the machine's failure
    assert "No space left" in capsys.readouterr().err
    with pytest.raises(OSError):
        write_atomic(report, '{"new": 1}')
    with pytest.raises(OSError), guard.atomic_folder(band) as tmp:
        (tmp / "data.arrow").write_text("new rows")
    assert verdicts.read_text() == "old\n" and report.read_text() == "{}" and _hashes(band) == before
    assert _leftovers(tmp_path) == []


def test_a_failed_rename_keeps_the_old_card(tmp_path, monkeypatch):
    from slmsql_hub.card import build_card

    run = _run_folder(tmp_path)
    out = build_card(run, tmp_path / "card").folder
    before = _hashes(out)
    _refusing_rename(monkeypatch)
    with pytest.raises(OSError):
        build_card(run, out)
    assert _hashes(out) == before and _leftovers(tmp_path) == []


def test_sigkill_of_ex_leaves_no_partial_verdicts(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    argv, _ = _ex(root)
    lines = "SELECT count(*) FROM t\n" * 3000
    (root / "pred.sql").write_text(lines)
    (root / "gold.sql").write_text("SELECT count(*) FROM t\ttoy\n" * 3000)
    out = tmp_path / "verdicts.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for delay in (0.5, 1.5, 3.0):
        proc = subprocess.Popen(
            [sys.executable, "-m", "slmsql_hub", *argv(out), "--overwrite"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if out.exists():  # the old file or the whole new one, never a part (a kill leaves its lock, taken over)
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            assert len(rows) == 3000


def _kill_while_staging(argv: list[str], out: Path) -> None:
    """Start ``slmsql ARGV``, SIGKILL it as soon as its staging folder beside ``out`` appears (the card renders its
    plots there for seconds), and wait for it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "slmsql_hub", *argv], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(out.parent.glob(f".{out.name}.tmp-*")):
            assert proc.poll() is None and time.monotonic() < deadline, "the card never started staging"
            time.sleep(0.005)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_sigkill_of_card_mid_write_leaves_the_old_card_or_none_and_a_rerun_finishes(tmp_path):
    run = _run_folder(tmp_path)
    out = tmp_path / "card"
    argv = ["card", "--run-dir", str(run), "--out", str(out)]
    _kill_while_staging(argv, out)
    assert not out.exists()  # no card at all rather than part of one
    assert guard.lock_path(out).exists() and list(tmp_path.glob(".card.tmp-*"))  # what a kill leaves

    done = subprocess.run(
        [sys.executable, "-m", "slmsql_hub", *argv], env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "taking over the stale lock" in done.stderr and "left by a killed writer" in done.stderr
    assert _leftovers(tmp_path) == [] and not guard.lock_path(out).exists()
    whole = _hashes(out)
    assert len(whole) == json.loads(done.stdout)["files"] and "adapter_model.safetensors" in whole

    _kill_while_staging([*argv, "--overwrite"], out)
    assert _hashes(out) == whole  # the previous complete card, untouched


def test_a_failed_rename_keeps_the_old_adapter_and_dataset(tmp_path, monkeypatch):
    import datasets

    stage = _folder(tmp_path / "grpo", "adapter_model.safetensors")
    (stage / "run_summary.json").write_text("{}")
    band = guard.save_dataset(datasets.Dataset.from_dict({"q": ["old"]}), tmp_path / "band")
    before = {"stage": _hashes(stage), "band": _hashes(band)}
    _refusing_rename(monkeypatch)
    with pytest.raises(OSError), guard.staged_files(stage) as staging:
        (staging / "adapter_model.safetensors").write_bytes(b"new weights")
    with pytest.raises(OSError):
        guard.save_dataset(datasets.Dataset.from_dict({"q": ["new"]}), band)
    assert {"stage": _hashes(stage), "band": _hashes(band)} == before  # the stage still reads as finished
    assert _leftovers(tmp_path) == [] and not (stage / ".saving").exists()
    monkeypatch.undo()
    assert datasets.load_from_disk(str(band))["q"] == ["old"]
