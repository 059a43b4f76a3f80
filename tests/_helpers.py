"""Set-ups several test modules share: a clean subprocess environment, a fresh interpreter that answers in
JSON, a one-database Spider-layout slice, a one-table shop database, a tiny embedded world, and the check of an
``eval.yaml`` against the Hub's eval-results specification."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def clean_env(**settings: str) -> dict[str, str]:
    """This process's environment without any ``HF_*``/``HUGGINGFACE*`` setting of the test session, plus
    ``settings``: what a subprocess with its own Hugging Face home and endpoint starts from."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE"))}
    env.update(settings)
    return env


def hub_client_env(endpoint: str, home: Path, token: str | None) -> dict[str, str]:
    """A Hub client's environment: the local server's endpoint, Xet off, a fresh ``HF_HOME``, ``token`` (none
    when ``None``) and ``tests/`` and the repository on ``PYTHONPATH``."""
    env = clean_env(
        HF_ENDPOINT=endpoint,
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(home),
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join([str(TESTS), str(REPO)]),
    )
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def slmsql(
    args: list[str], env: dict[str, str], cwd: Path = REPO, timeout: int = 600
) -> subprocess.CompletedProcess:
    """``python -m slmsql_hub.cli ARGS`` in a fresh process with ``env`` (the Hub tests' clients), output captured."""
    return subprocess.run(
        [sys.executable, "-m", "slmsql_hub.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ex_on_toy_db(db: str | Path, namespace: str = "alice") -> str:
    """Code that loads the pushed metric ``NS/ex`` with evaluate and scores two answers on ``db`` (a table ``t``
    of 1, 2, 10: one right, one wrong), leaving ``ex`` and ``scores`` defined."""
    return textwrap.dedent(
        f"""
        import evaluate

        ex = evaluate.load("{namespace}/ex")
        scores = ex.compute(
            predictions=["```sql\\nSELECT count(*) FROM t\\n```", "SELECT min(x) FROM t"],
            references=["SELECT count(*) FROM t", "SELECT max(x) FROM t"],
            db_path=[{str(db)!r}] * 2,
        )
        """
    )


def python_json(code: str, env: dict[str, str], cwd: Path, *argv: str) -> dict:
    """Run ``code`` (dedented) with ``argv`` in a fresh interpreter, assert it exits 0 (its stderr tail as the
    message) and return the JSON object it prints as its last stdout line."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def music_spider(root: Path, questions: list[tuple[str, str]]) -> Path:
    """A Spider-layout slice under ``root``: database ``music`` (table ``singer``: Ann 30, Bob 41, Cy 25) and a
    ``dev.json`` of the ``(question, gold SQL)`` pairs in order. Returns ``root``."""
    db = root / "database" / "music" / "music.sqlite"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, age INTEGER)")
        conn.executemany(
            "INSERT INTO singer VALUES (?, ?, ?)", [(1, "Ann", 30), (2, "Bob", 41), (3, "Cy", 25)]
        )
    conn.close()
    dev = [{"db_id": "music", "question": q, "query": gold} for q, gold in questions]
    (root / "dev.json").write_text(json.dumps(dev))
    return root


def shop_db(path: Path) -> Path:
    """A SQLite database at ``path`` (folders made) with one table ``item(id, name, price, shelf)``: apple 0.5 a,
    bread 2.0 b, cheese 7.5 b, dates 3.0 a. Returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, price REAL, shelf TEXT)")
        conn.executemany(
            "INSERT INTO item VALUES (?, ?, ?, ?)",
            [(1, "apple", 0.5, "a"), (2, "bread", 2.0, "b"), (3, "cheese", 7.5, "b"), (4, "dates", 3.0, "a")],
        )
    conn.close()
    return path


def write_prompt_summary(adapter: Path, sample_rows: int) -> None:
    """What ``slmsql train sft/grpo`` writes beside an adapter that matters to its readers: the prompt settings
    it was trained with (``sample_rows``, 40 characters a value) in ``run_summary.json``."""
    summary = {"kind": "test", "prompt": {"sample_rows": sample_rows, "max_value_chars": 40}}
    (adapter / "run_summary.json").write_text(json.dumps(summary))


def tiny_world(root: Path, dev: int = 10) -> Path:
    """The embedded world built at ``root`` (seed 0, small splits, ``dev`` dev questions). Returns ``root``."""
    from slmsql_hub.world import WorldSizes, build_world

    build_world(root, seed=0, sizes=WorldSizes(foundation=60, grounding=30, rl_pool=10, dev=dev, test=10))
    return root


def trackio_logs(trackio_dir: Path, project: str) -> dict[str, list[dict]]:
    """Every run of ``project`` in the local Trackio folder ``trackio_dir`` -> its logged rows (one dict of metric
    -> value per logged step), read back in a fresh interpreter through Trackio's own storage."""
    code = """
        import json, sys
        from trackio.sqlite_storage import SQLiteStorage
        project = sys.argv[1]
        runs = SQLiteStorage.get_runs(project)
        logs = {run: SQLiteStorage.get_logs(project, run, scalar_only=True) for run in runs}
        print(json.dumps(logs, default=str))
    """
    env = clean_env(TRACKIO_DIR=str(trackio_dir), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return python_json(code, env, trackio_dir, project)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for ``accelerate launch --main_process_port``)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def add_maj_at_k(run: Path, k: int = 8) -> dict:
    """Add maj@K to the run's eval_results.json as ``slmsql eval`` writes it: each policy's vote is its greedy
    answer with every third question flipped (SFT) or every fourth (GRPO), so maj@K differs from greedy EX."""
    from slmsql_hub.evaluation.majority import MajorityVote
    from slmsql_hub.evaluation.self_consistency import self_consistency_entry

    path = run / "eval" / "eval_results.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    for entry in results["benchmarks"].values():
        lines = (run / "eval" / entry["predictions_file"]).read_text(encoding="utf-8").splitlines()
        greedy = {name: [json.loads(line)[f"{name}_correct"] for line in lines] for name in ("sft", "grpo")}
        voted = {
            name: [
                (MajorityVote(None if c is None else (1 - c if i % step == 0 else c), 0, 5, k), [], [])
                for i, c in enumerate(greedy[name])
            ]
            for name, step in (("sft", 3), ("grpo", 4))
        }
        entry["self_consistency"] = self_consistency_entry(greedy, voted, k=k, resamples=10_000, seed=0)
    results["self_consistency"] = {"k": k, "temperature": 0.7, "top_p": 1.0, "top_k": 0, "seed": 0,
                                   "key_namespace": "eval-sc"}  # fmt: skip
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return results


# https://huggingface.co/docs/hub/eval-results, "Eval.yaml specification", and huggingface.js's
# packages/tasks/src/eval.ts (EVALUATION_FRAMEWORKS, the enum the Hub validates against; an excerpt)
EVAL_YAML_REQUIRED = ("name", "description", "evaluation_framework", "tasks")
EVAL_FRAMEWORKS = ("inspect-ai", "math-arena", "mteb", "olmocr-bench", "harbor", "swe-bench", "nemo-evaluator")
INSPECT_TASK_REQUIRED = ("field_spec", "solvers", "scorers")


def check_eval_yaml(text: str, splits: tuple[str, ...], columns: set[str]) -> dict:
    """Assert that ``text`` is an ``eval.yaml`` the Hub's specification accepts (the fields it requires, a known
    framework, Inspect's per-task fields, no YAML anchors) with one task per split of ``splits`` (task id = split)
    reading ``columns``; returns the parsed mapping. Acceptance by the real Hub is not tested (offline)."""
    import yaml

    assert "&" not in text.replace("&&", "")  # no YAML anchors or aliases: plain mappings any reader takes
    spec = yaml.safe_load(text)
    assert all(spec.get(key) for key in EVAL_YAML_REQUIRED)
    assert spec["evaluation_framework"] in EVAL_FRAMEWORKS
    assert [task["id"] for task in spec["tasks"]] == list(splits)  # the card's .eval_results task_id
    for task in spec["tasks"]:
        assert all(task.get(key) for key in INSPECT_TASK_REQUIRED)
        assert task["split"] in splits and {*task["field_spec"].values()} <= columns
    return spec


def commit_moved_weights(env: dict[str, str], cwd: Path, weights: Path, repo_id: str) -> None:
    """A new commit to the model repo ``repo_id`` (a fresh interpreter, ``env``'s Hub): ``weights`` (a
    ``model.safetensors``) with every tensor moved by 1, so a load of the new commit differs from one of the old."""
    code = """
        import sys, tempfile, pathlib
        from huggingface_hub import HfApi
        from safetensors.torch import load_file, save_file
        moved = {k: v + 1.0 for k, v in load_file(sys.argv[1]).items()}
        path = pathlib.Path(tempfile.mkdtemp()) / "model.safetensors"
        save_file(moved, str(path), metadata={"format": "pt"})
        HfApi().upload_file(path_or_fileobj=str(path), path_in_repo="model.safetensors", repo_id=sys.argv[2])
        print("{}")
    """
    python_json(code, env, cwd, str(weights), repo_id)


def load_adapter_base(env: dict[str, str], cwd: Path, weights: Path, adapter_id: str) -> dict:
    """Load the adapter repo ``adapter_id`` with ``AutoPeftModelForCausalLM`` by its id alone (a fresh interpreter,
    ``env``'s Hub and cache) and compare its base's weights with ``weights``: ``{"same", "compared" (tensors
    compared), "revision" (the base revision the adapter names)}``."""
    code = """
        import json, sys, torch
        from peft import AutoPeftModelForCausalLM
        from safetensors.torch import load_file
        model = AutoPeftModelForCausalLM.from_pretrained(sys.argv[2])
        pinned = load_file(sys.argv[1])
        loaded = model.get_base_model().state_dict()
        same = all(torch.equal(loaded[k].float(), v.float()) for k, v in pinned.items() if k in loaded)
        print(json.dumps({"same": same, "compared": sum(k in loaded for k in pinned),
                          "revision": model.peft_config["default"].revision}))
    """
    return python_json(code, env, cwd, str(weights), adapter_id)


def upload_folder(env: dict[str, str], folder: Path, repo_id: str) -> str:
    """Push ``folder`` to ``env``'s Hub as the model repo ``repo_id`` (made when missing; a fresh interpreter, the
    real client); the commit's sha."""
    code = """
        import json, sys
        from huggingface_hub import HfApi
        api = HfApi()
        api.create_repo(sys.argv[2], exist_ok=True)
        print(json.dumps({"sha": api.upload_folder(folder_path=sys.argv[1], repo_id=sys.argv[2]).oid}))
    """
    return python_json(code, env, folder, str(folder), repo_id)["sha"]


def timed_stage(run, values, recipe) -> dict:
    """A quickstart stage call that trains nothing: 1.5 s, then its marker (``output_dir``'s run_summary.json)
    holding its pid and start and end times. Module level, so a stage run beside another can unpickle it."""
    import time

    start = time.time()
    time.sleep(1.5)
    out = Path(values["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_summary.json").write_text(json.dumps({"pid": os.getpid(), "start": start, "end": time.time()}))
    return {}


def failing_stage(run, values, recipe) -> dict:
    """A quickstart stage call that fails as bad input does: a UsageError, nothing written."""
    from slmsql_hub.errors import UsageError

    raise UsageError(f"no data at {values['dataset_paths']}")
