"""Publishing to the Hub (``slmsql push``) against a local Hub API server, with the real clients.

The server (:mod:`hub_server`) runs in this process; every client (``slmsql push``, ``snapshot_download``,
``datasets.load_dataset``, ``evaluate.load``) runs in a subprocess whose environment is set before
``huggingface_hub`` is imported: ``HF_ENDPOINT`` at the server, Xet off, a test token, a fresh ``HF_HOME``, and
none of the session's offline switches. Nothing is mocked.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest
from _helpers import REPO, TESTS, ex_on_toy_db, hub_client_env, python_json, slmsql
from hub_server import HubServer
from huggingface_hub import DatasetCard, ModelCard

import slmsql_hub
from slmsql_hub import hub
from slmsql_hub.errors import UsageError

TOKEN, OTHER_TOKEN = "hf_test_alice", "hf_test_bob"
CARD = """\
---
base_model: Qwen/Qwen2.5-Coder-1.5B
library_name: peft
pipeline_tag: text-generation
tags:
- text-to-sql
- grpo
base_model_relation: adapter
---

# tiny-grpo

A test card.
"""
LOCAL_BASE_CARD = CARD.replace("base_model: Qwen/Qwen2.5-Coder-1.5B\n", "").replace(
    "base_model_relation: adapter\n", ""
)
FIXTURE_RUN = TESTS / "fixtures" / "run"
REPORT = {
    "summary": "2 band / 1 all-fail / 1 all-pass / 0 unscorable of 4",
    "counts": {"band": 2, "all_fail": 1, "all_pass": 1, "unscorable": 0},
    "pool": 4,
    "num_samples": 4,
    "pass_rate_low": 0.2,
    "pass_rate_high": 0.8,
    "mean_pass_rate": 0.5,
    "dataset": {"benchmark": "world", "split": "train", "seed": 0},
    "by_difficulty": {"easy": {"band": 1, "all_fail": 1, "all_pass": 0, "unscorable": 0}},
    "generation": {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 96, "seed": 0},
    "judging": {"compare_mode": "bird", "timeout_s": 30.0},
    "policy": {"base": "outputs/quickstart/base", "adapter": "outputs/quickstart/sft/stage2"},
}


# ----------------------------------------------------------------------------------------------------------
# fixtures and helpers
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server():
    with HubServer({TOKEN: "alice", OTHER_TOKEN: "bob"}, orgs={"alice": ["slmsql-org"]}) as hub_server:
        yield hub_server


def client_env(endpoint: str, home: Path, token: str | None = TOKEN) -> dict[str, str]:
    """A Hub client's environment (:func:`_helpers.hub_client_env`), alice's token unless told otherwise."""
    return hub_client_env(endpoint, home, token)


def push(server, run_dir: Path, home: Path, *options: str) -> subprocess.CompletedProcess:
    """``slmsql push <run_dir> --repo-id alice/tiny-grpo <options>`` as alice, ``home`` as ``HF_HOME``."""
    args = ["push", str(run_dir), "--repo-id", "alice/tiny-grpo", *options]
    return slmsql(args, client_env(server.endpoint, home))


def _band_rows(db_path: str) -> dict[str, list]:
    return {
        "question_id": ["q1", "q2"],
        "question": ["How many rows?", "Largest x?"],
        "evidence": ["", ""],
        "db_id": ["nums", "nums"],
        "db_path": [db_path, db_path],
        "gold_sql": ["SELECT count(*) FROM t", "SELECT max(x) FROM t"],
        "difficulty": ["easy", "medium"],
        "benchmark": ["world", "world"],
        "pass_rate": [0.5, 0.25],
        "n_correct": [2, 1],
        "n_scorable": [4, 4],
        "samples": [["a", "b", "c", "d"], ["e", "f", "g", "h"]],
        "sample_correct": [[1, 1, 0, 0], [1, 0, 0, 0]],
        "sample_verdicts": [["correct"] * 2 + ["wrong"] * 2, ["correct"] + ["wrong"] * 3],
    }


def _weights(path: Path, floats: int) -> None:
    """Stand-in weights: a whole safetensors file (what `slmsql card` and `push` check before shipping)."""
    import numpy
    from safetensors.numpy import save_file

    save_file({"w": numpy.arange(floats, dtype=numpy.float32)}, str(path))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run folder: ``card/`` with the card's files (a stand-in adapter), ``filter/`` with a saved band, a
    database, and a demo Space folder. The model round trip swaps in a real adapter."""
    import datasets

    root = tmp_path_factory.mktemp("run")
    card = root / "card"
    card.mkdir()
    (card / "README.md").write_text(CARD, encoding="utf-8")
    (card / "adapter_config.json").write_text(
        '{"base_model_name_or_path": "Qwen/Qwen2.5-Coder-1.5B", "peft_type": "LORA", "r": 2}\n'
    )
    _weights(card / "adapter_model.safetensors", 512)
    (card / "plots").mkdir()
    (card / "plots" / "reward_std.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (card / ".eval_results").mkdir()
    (card / ".eval_results" / "world_dev.yaml").write_text(
        "- dataset: {id: alice/world-splits, task_id: dev}\n  value: 0.5\n"
    )
    (card / "telemetry.jsonl").write_text('{"step": 1, "frac_reward_zero_std": 0.5}\n')
    (card / "run_summary.json").write_text('{"kind": "grpo", "status": "completed"}\n')
    (card / "predictions").mkdir()
    (card / "predictions" / "world_dev.jsonl").write_text('{"question_id": "q1", "grpo_correct": 1}\n')
    sft = root / "sft" / "stage2"  # the SFT adapter, named by the path training saw
    sft.mkdir(parents=True)
    (sft / "adapter_config.json").write_text(
        '{"base_model_name_or_path": "outputs/quickstart/base", "peft_type": "LORA", "r": 2}\n'
    )
    _weights(sft / "adapter_model.safetensors", 128)
    (sft / "run_summary.json").write_text('{"kind": "sft", "status": "completed", "steps": 75}\n')
    db = root / "world" / "databases" / "nums" / "nums.sqlite"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:  # test fixture: builds the database
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (10,)])
    (root / "filter").mkdir()
    datasets.Dataset.from_dict(_band_rows(str(db))).save_to_disk(str(root / "filter" / "band"))
    (root / "filter" / "filter_report.json").write_text(json.dumps(REPORT), encoding="utf-8")
    demo = root / "demo"
    demo.mkdir()
    (demo / "README.md").write_text("---\ntitle: demo\nsdk: gradio\napp_file: app.py\n---\n# demo\n")
    (demo / "app.py").write_text("import gradio as gr\n")
    return root


@pytest.fixture(scope="module")
def local_base_run(run_dir, tmp_path_factory) -> Path:
    """``run_dir`` as a world run leaves it: the adapter names a local base, which the card folder ships in
    ``card/base/`` (stand-in weights), and the card has no ``base_model``."""
    run = tmp_path_factory.mktemp("local-base") / "run"
    shutil.copytree(run_dir, run)
    card = run / "card"
    (card / "README.md").write_text(LOCAL_BASE_CARD, encoding="utf-8")
    (card / "adapter_config.json").write_text(
        '{"base_model_name_or_path": "outputs/quickstart/base", "peft_type": "LORA", "r": 2, "revision": null}\n'
    )
    base = card / "base"
    base.mkdir()
    (base / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}\n')
    _weights(base / "model.safetensors", 256)
    (base / "tokenizer.json").write_text('{"version": "1.0"}\n')
    (base / "run_summary.json").write_text(
        json.dumps(
            {
                "kind": "base",
                "world_dir": "outputs/quickstart/world",
                "steps": 600,
                "final_loss": 1.2831,
                "model": {"architecture": "Qwen2ForCausalLM"},
                "parameters": {"total": 9872},
            }
        )
    )
    return run


def _card_with_fixture_run(root: Path) -> Path:
    """A copy of the fixture run (real tiny base, real adapter) with its card folder built by ``slmsql card``."""
    from slmsql_hub.card import build_card

    run = root / "run"
    shutil.copytree(FIXTURE_RUN, run)
    build_card(run)
    return run


def _files(folder: Path) -> dict[str, bytes]:
    return {path: local.read_bytes() for path, local in hub.folder_files(folder)}


# ----------------------------------------------------------------------------------------------------------
# planning (in process, no network)
# ----------------------------------------------------------------------------------------------------------
def test_what_accepts_comma_separated_targets_and_all_and_rejects_unknown_names():
    assert hub.parse_what("metric-space, model") == ("model", "metric-space")
    assert hub.parse_what(["dataset", "all"]) == hub.TARGETS
    with pytest.raises(UsageError, match="unknown: modle"):
        hub.parse_what("modle,dataset")


def test_dataset_and_space_ids_derive_from_the_repo_id_unless_given(run_dir):
    plan = hub.plan_push(run_dir, "alice/tiny-grpo", "all", demo_dir=run_dir / "demo")
    assert [(t.what, t.repo_type, t.repo_id) for t in plan] == [
        ("model", "model", "alice/tiny-grpo"),
        ("sft-model", "model", "alice/tiny-grpo-sft"),
        ("dataset", "dataset", "alice/tiny-grpo-band"),
        ("metric-space", "space", "alice/ex"),
        ("demo-space", "space", "alice/tiny-grpo-demo"),
    ]
    plan = hub.plan_push(
        run_dir, None, "dataset,metric-space", dataset_repo_id="org/band", metric_space_id="org/ex"
    )
    assert [t.repo_id for t in plan] == ["org/band", "org/ex"]


@pytest.mark.parametrize(
    ("repo_id", "what", "message"),
    [
        (None, "model", "no repository id: pass --repo-id"),
        (None, "dataset", "no repository id: pass --repo-id"),
        ("alice", "model", "is not a Hub repository id"),
        ("alice/a--b", "model", "is not a Hub repository id"),
    ],
)
def test_a_missing_or_malformed_repo_id_names_the_option(run_dir, repo_id, what, message):
    with pytest.raises(UsageError, match=message):
        hub.plan_push(run_dir, repo_id, what)


def test_missing_run_parts_name_the_command_that_makes_them(tmp_path, run_dir):
    (tmp_path / "run").mkdir()
    with pytest.raises(UsageError, match=r"run `slmsql card --run-dir"):
        hub.plan_push(tmp_path / "run", "alice/x", "model")
    with pytest.raises(UsageError, match=r"run `slmsql filter"):
        hub.plan_push(tmp_path / "run", "alice/x", "dataset")
    with pytest.raises(UsageError, match="no demo Space files"):
        hub.plan_push(tmp_path / "run", "alice/x", "demo-space", demo_dir=tmp_path / "empty")
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "app.py").write_text("x = 1\n")
    with pytest.raises(UsageError, match="has no README.md"):
        hub.plan_push(tmp_path / "run", "alice/x", "demo-space", demo_dir=tmp_path / "demo")
    (tmp_path / "demo" / "README.md").write_text("---\n- not a mapping\n---\n# demo\n")
    with pytest.raises(UsageError, match="the YAML metadata does not parse into a mapping"):
        hub.plan_push(tmp_path / "run", "alice/x", "demo-space", demo_dir=tmp_path / "demo")


def test_dataset_card_numbers_are_the_filter_reports():
    card = hub.dataset_card(REPORT, "alice/tiny-grpo-band", model_repo_id="alice/tiny-grpo")
    assert "| band (kept) | 2 |" in card and "| all-fail | 1 |" in card and "| pool | 4 |" in card
    assert "| easy | 1 | 1 | 0 | 0 |" in card
    assert REPORT["summary"] in card
    assert "0.2 < p < 0.8" in card and "K = 4" in card
    assert 'load_dataset("alice/tiny-grpo-band", split="train")' in card


def test_training_card_names_a_hub_base_lists_guard_statuses_and_leaves_a_local_base_out_of_the_metadata():
    summary = {
        "kind": "grpo",
        "status": "completed",
        "steps": 3,
        "max_steps": 3,
        "base_model": "outputs/quickstart/base",
        "guards": {
            "results": [{"name": "adapter_changed", "status": "ok"}, {"name": "clipping", "status": "warn"}]
        },
        "telemetry": {"mean": {"grad_norm": 0.25}},
    }
    local = ModelCard(hub.training_card(summary, "alice/tiny-grpo"))
    assert local.data.base_model is None and local.data.library_name == "peft"
    assert "Guards: adapter_changed: ok, clipping: warn." in local.text
    assert "| mean grad_norm | 0.250 |" in local.text and "3 steps of 3" in local.text
    on_hub = ModelCard(hub.training_card({**summary, "base_model": "Qwen/Qwen2.5-0.5B"}, "alice/tiny-grpo"))
    assert on_hub.data.base_model == "Qwen/Qwen2.5-0.5B"


def test_dataset_card_metadata_parses_with_the_hubs_card_class():
    card = DatasetCard(hub.dataset_card(REPORT, "alice/tiny-grpo-band"))
    assert card.data.pretty_name == "tiny-grpo-band: GRPO pass-rate band"
    assert card.data.configs[0]["data_files"][0]["split"] == "train" and card.data.size_categories == ["n<1K"]


def test_published_band_paths_do_not_name_this_machine():
    assert (
        hub.portable_db_path("/srv/me/run/world/databases/nums/nums.sqlite") == "databases/nums/nums.sqlite"
    )
    assert hub.portable_db_path("/elsewhere/nums.sqlite") == "elsewhere/nums.sqlite"
    assert hub.portable_db_path("databases/nums/nums.sqlite") == "databases/nums/nums.sqlite"


# ----------------------------------------------------------------------------------------------------------
# dry run
# ----------------------------------------------------------------------------------------------------------
def test_dry_run_writes_the_exact_folders_and_sends_nothing(server, run_dir, tmp_path):
    import datasets

    before = len(server.state.requests)
    out = tmp_path / "dry"
    done = slmsql(
        [
            "push",
            str(run_dir),
            "--repo-id",
            "alice/tiny-grpo",
            "--what",
            "all",
            "--demo-dir",
            str(run_dir / "demo"),
            "--dry-run",
            "--dry-run-dir",
            str(out),
        ],
        client_env(server.endpoint, tmp_path / "home", token=None),
    )
    assert done.returncode == 0, done.stderr
    assert len(server.state.requests) == before  # no token needed, no request made

    assert _files(out / "model") == _files(run_dir / "card")  # a hand-made card is uploaded as it is
    metric = REPO / "slmsql_hub" / "metric"
    pushed = _files(out / "metric-space")
    (wheel,) = [path for path in pushed if path.startswith("wheels/")]
    assert wheel.startswith(f"wheels/slmsql_hub-{slmsql_hub.__version__}-") and wheel.endswith(".whl")
    url = f"{server.endpoint}/spaces/alice/ex/resolve/main/{wheel}"
    requirements = (metric / "requirements.txt").read_text().replace("slmsql-hub\n", f"slmsql-hub @ {url}\n")
    assert pushed.pop("requirements.txt").decode() == requirements  # this very version, by URL; CPU torch kept
    pushed.pop(wheel)
    named = {name: pushed.pop(name).decode() for name in hub.NAMED_METRIC_FILES}  # rendered for alice/ex
    assert all('"alice/ex"' in text and "slmsql/ex" not in text for text in named.values())
    assert f'pip install "slmsql-hub @ {url}"' in named["README.md"]
    assert pushed == {
        name: (metric / name).read_bytes()
        for name in hub.METRIC_FILES
        if name not in ("requirements.txt", *hub.NAMED_METRIC_FILES)
    }
    demo = _files(out / "demo-space")
    assert set(demo) - set(_files(run_dir / "demo")) == {"space_config.json", "requirements.txt", wheel}
    config = json.loads(demo["space_config.json"])
    assert [config[k]["repo_id"] for k in ("base_model", "sft_adapter", "grpo_adapter")] == [
        "Qwen/Qwen2.5-Coder-1.5B",
        "alice/tiny-grpo-sft",
        "alice/tiny-grpo",
    ]
    assert _front(demo["README.md"])["models"] == [
        "Qwen/Qwen2.5-Coder-1.5B",
        "alice/tiny-grpo-sft",
        "alice/tiny-grpo",
    ]
    assert _front(demo["README.md"])["datasets"] == ["alice/tiny-grpo-band"]
    sft = _files(out / "sft-model")
    assert json.loads(sft["adapter_config.json"])["base_model_name_or_path"] == "Qwen/Qwen2.5-Coder-1.5B"
    assert _front(sft["README.md"])["base_model"] == "Qwen/Qwen2.5-Coder-1.5B"
    assert 'from_pretrained("alice/tiny-grpo-sft")' in sft["README.md"].decode()
    assert "[`alice/tiny-grpo`](" in sft["README.md"].decode()  # the GRPO repo holds its evaluation
    shard = datasets.Dataset.from_parquet(str(out / "dataset" / hub.BAND_SHARD))
    expected = _band_rows("databases/nums/nums.sqlite")
    assert shard.to_dict() == expected
    assert (out / "dataset" / "README.md").read_text() == hub.dataset_card(
        REPORT,
        "alice/tiny-grpo-band",
        model_repo_id="alice/tiny-grpo",
        endpoint=server.endpoint,
        n_databases=1,
    )
    db = (
        run_dir / "world" / "databases" / "nums" / "nums.sqlite"
    )  # the database the rows name, published there
    assert (out / "dataset" / expected["db_path"][0]).read_bytes() == db.read_bytes()

    plan = json.loads((out / "plan.json").read_text())
    assert [(t["what"], t["repo_id"], t["private"], t["revision"]) for t in plan["targets"]] == [
        ("model", "alice/tiny-grpo", True, "main"),
        ("sft-model", "alice/tiny-grpo-sft", True, "main"),
        ("dataset", "alice/tiny-grpo-band", True, "main"),
        ("metric-space", "alice/ex", False, "main"),  # Spaces are public unless --private
        ("demo-space", "alice/tiny-grpo-demo", False, "main"),
    ]
    for target in plan["targets"]:
        assert f"-> {target['repo_type']} {target['repo_id']}" in done.stdout
        for file in target["files"]:
            assert f"    {file['path']}  (" in done.stdout
            assert (out / target["what"] / file["path"]).stat().st_size == file["size"]
    assert "adapter_model.safetensors" in done.stdout and ".eval_results/world_dev.yaml" in done.stdout

    # A second dry run replaces the first; a folder that is not a dry run is refused.
    (out / "model" / "stale.txt").write_text("old")
    assert (
        slmsql(
            ["push", str(run_dir), "--repo-id", "alice/tiny-grpo", "--dry-run", "--dry-run-dir", str(out)],
            client_env(server.endpoint, tmp_path / "home", token=None),
        ).returncode
        == 0
    )
    assert not (out / "model" / "stale.txt").exists() and not (out / "dataset").exists()
    with pytest.raises(UsageError, match="holds no plan.json"):
        hub.write_dry_run([], run_dir)


# ----------------------------------------------------------------------------------------------------------
# the base model the pushed adapter names
# ----------------------------------------------------------------------------------------------------------
def _front(content: bytes) -> dict:
    from huggingface_hub import ModelCard

    return ModelCard(content.decode("utf-8")).data.to_dict()


def test_a_hub_base_is_named_in_what_is_uploaded_and_nothing_else_is_pushed(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "card" / "README.md").write_text(
        CARD.replace("base_model_relation: adapter\n", ""), encoding="utf-8"
    )
    (run / "card" / "adapter_config.json").write_text(  # trained on a local copy, at a pinned revision
        '{"base_model_name_or_path": "/data/qwen-copy", "peft_type": "LORA", "revision": "0123abc"}\n'
    )
    before = _files(run / "card")
    plan = hub.plan_push(run, "alice/tiny-grpo", "model")
    assert [(t.what, t.repo_id) for t in plan] == [("model", "alice/tiny-grpo")]
    files = dict(plan[0].files)
    config = json.loads(files["adapter_config.json"])
    assert config["base_model_name_or_path"] == "Qwen/Qwen2.5-Coder-1.5B" and config["revision"] == "0123abc"
    meta = _front(files["README.md"])
    assert meta["base_model"] == "Qwen/Qwen2.5-Coder-1.5B" and meta["base_model_relation"] == "adapter"
    assert files["README.md"].decode().endswith("# tiny-grpo\n\nA test card.\n")  # the body as it was
    assert _files(run / "card") == before  # rewritten in the upload only


def test_dry_run_shows_the_local_base_as_its_own_repo_and_leaves_the_card_folder_unchanged(
    server, local_base_run, tmp_path
):
    card = local_base_run / "card"
    before = _files(card)
    requests = len(server.state.requests)
    out = tmp_path / "dry"
    args = ["push", str(local_base_run), "--repo-id", "alice/world", "--dry-run", "--dry-run-dir", str(out)]
    done = slmsql(args, client_env(server.endpoint, tmp_path / "home", token=None))
    assert done.returncode == 0, done.stderr
    assert len(server.state.requests) == requests and _files(card) == before

    base_files = _files(out / "base-model")
    assert {k: v for k, v in base_files.items() if k != "README.md"} == _files(card / "base")
    base_meta = _front(base_files["README.md"])
    assert base_meta["library_name"] == "transformers" and base_meta["pipeline_tag"] == "text-generation"
    assert 'AutoPeftModelForCausalLM.from_pretrained("alice/world")' in base_files["README.md"].decode()
    assert "9,872 parameters" in base_files["README.md"].decode()

    model_files = _files(out / "model")
    assert json.loads(model_files["adapter_config.json"])["base_model_name_or_path"] == "alice/world-base"
    meta = _front(model_files["README.md"])
    assert meta["base_model"] == "alice/world-base" and meta["base_model_relation"] == "adapter"
    assert not [path for path in model_files if path.startswith("base/")]  # the base ships once, in its repo
    unchanged = {path for path in before if not path.startswith("base/")} - {
        "adapter_config.json",
        "README.md",
    }
    assert {k: model_files[k] for k in unchanged} == {k: before[k] for k in unchanged}

    plan = json.loads((out / "plan.json").read_text())
    assert [(t["what"], t["repo_type"], t["repo_id"]) for t in plan["targets"]] == [
        ("base-model", "model", "alice/world-base"),
        ("model", "model", "alice/world"),
    ]
    assert "base-model -> model alice/world-base" in done.stdout
    assert "name the base model alice/world-base" in done.stdout

    other = slmsql(
        [*args, "--base-repo-id", "slmsql-org/tiny-base"], client_env(server.endpoint, tmp_path / "home")
    )
    assert other.returncode == 0, other.stderr
    config = json.loads((out / "model" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "slmsql-org/tiny-base"
    assert json.loads((out / "plan.json").read_text())["targets"][0]["repo_id"] == "slmsql-org/tiny-base"

    # On a branch, the base goes to that branch too: the adapter config pins it, or the base would not resolve.
    branch = slmsql([*args, "--revision", "dev"], client_env(server.endpoint, tmp_path / "home"))
    assert branch.returncode == 0, branch.stderr
    assert json.loads((out / "model" / "adapter_config.json").read_text())["revision"] == "dev"
    assert "name the base model alice/world-base at revision dev" in branch.stdout
    pr = slmsql([*args, "--create-pr"], client_env(server.endpoint, tmp_path / "home"))
    assert pr.returncode == 0, pr.stderr
    assert "names the base's main branch, so merge this pull request first" in pr.stdout


def test_a_local_base_the_card_folder_does_not_ship_is_one_line_naming_the_fix(
    server, local_base_run, tmp_path
):
    run = tmp_path / "run"
    shutil.copytree(local_base_run, run)
    shutil.rmtree(run / "card" / "base")
    done = slmsql(
        ["push", str(run), "--repo-id", "alice/world", "--dry-run"], client_env(server.endpoint, tmp_path)
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "names the base model 'outputs/quickstart/base', a local folder" in done.stderr
    assert "rerun `slmsql card`" in done.stderr and "--base-model-id" in done.stderr


def _push_failing_midway(server, args, env, failing_repo: str) -> str:
    """Run ``slmsql push`` while the server answers 500 to commits on ``failing_repo``; its last stderr line."""
    server.state.failing_commits[failing_repo] = 500
    try:
        done = slmsql(args, env)
    finally:
        server.state.failing_commits.clear()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_a_failure_after_the_base_was_pushed_says_so_and_a_rerun_finishes(server, local_base_run, tmp_path):
    env = client_env(server.endpoint, tmp_path / "home")
    args = ["push", str(local_base_run), "--repo-id", "alice/midway"]
    last = _push_failing_midway(server, args, env, "alice/midway")
    assert f"the Hub at {server.endpoint} failed while pushing model to alice/midway (" in last
    assert "pushed before it: base-model (alice/midway-base)" in last and "rerun the same command" in last
    assert "model.safetensors" in server.files("model", "alice/midway-base")
    again = slmsql(args, env)
    assert again.returncode == 0, again.stderr
    stored = server.files("model", "alice/midway")
    assert json.loads(stored["adapter_config.json"])["base_model_name_or_path"] == "alice/midway-base"


# ----------------------------------------------------------------------------------------------------------
# one clear line for a missing token or repo id
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "token", "message"),
    [
        (["--repo-id", "alice/x", "--what", "metric-space"], None, "no Hugging Face token: set HF_TOKEN"),
        (["--repo-id", "alice/x", "--what", "metric-space"], "hf_not_a_token", "rejected the token"),
        (["--what", "model"], TOKEN, "no repository id: pass --repo-id NAMESPACE/NAME"),
        (["--repo-id", "alice/x", "--what", "everything"], TOKEN, "--what 'everything': choose among"),
    ],
    ids=["no-token", "bad-token", "no-repo-id", "bad-what"],
)
def test_a_missing_token_or_repo_id_is_one_line_with_exit_code_2(
    server, run_dir, tmp_path, args, token, message
):
    before = len(server.state.requests)
    done = slmsql(["push", str(run_dir), *args], client_env(server.endpoint, tmp_path / "home", token=token))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1  # the whole output: one line, no traceback
    assert done.stderr.startswith("slmsql push: error: ") and message in done.stderr
    assert not any(path.startswith("/api/repos") for _, path in server.state.requests[before:])


def test_a_namespace_the_token_cannot_write_is_one_error_line(server, run_dir, tmp_path):
    args = ["push", str(run_dir), "--repo-id", "bob/x", "--what", "metric-space"]
    done = slmsql(args, client_env(server.endpoint, tmp_path / "home"))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("slmsql push: error: ")]
    assert errors == [done.stderr.strip().splitlines()[-1]]
    assert "refused to write space bob/ex (HTTP 403)" in errors[0] and "'bob' namespace" in errors[0]
    assert ("space", "bob/ex") not in server.state.repos


def test_an_unreachable_hub_is_one_line_with_exit_code_1_and_nothing_pushed(run_dir, tmp_path):
    with socket.socket() as probe:  # a port nobody listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    args = ["push", str(run_dir), "--repo-id", "alice/tiny-grpo", "--what", "metric-space"]
    done = slmsql(args, client_env(endpoint, tmp_path / "home"))
    assert done.returncode == 1 and "Traceback" not in done.stderr  # the machine failed, not the input (2)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"slmsql push: error: cannot reach the Hub at {endpoint} (")
    assert "nothing was pushed" in last and "HF_ENDPOINT" in last


def test_a_server_error_midway_names_what_was_pushed_and_a_rerun_finishes(server, run_dir, tmp_path):
    env = client_env(server.endpoint, tmp_path / "home")
    args = ["push", str(run_dir), "--repo-id", "alice/outage", "--what", "metric-space,demo-space"]
    args += ["--demo-dir", str(run_dir / "demo")]
    last = _push_failing_midway(server, args, env, "alice/outage-demo")
    assert last.startswith(
        f"slmsql push: error: the Hub at {server.endpoint} failed while pushing demo-space to "
    )
    assert "pushed before it: metric-space (alice/ex)" in last and "rerun the same command" in last
    assert "ex.py" in server.files("space", "alice/ex")  # the target before the outage landed
    again = slmsql(args, env)
    assert again.returncode == 0, again.stderr
    stored = server.files("space", "alice/outage-demo")
    assert _without_readme(stored) == _without_readme(_files(run_dir / "demo")) | {
        k: v
        for k, v in stored.items()
        if k in ("space_config.json", "requirements.txt") or k.startswith("wheels/")
    }


def test_an_interrupted_push_of_all_resumes_with_the_targets_it_had_not_pushed(server, run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    env = client_env(server.endpoint, tmp_path / "home")
    args = ["push", str(run), "--repo-id", "alice/resume", "--what", "all", "--demo-dir", str(run / "demo")]
    last = _push_failing_midway(server, args, env, "alice/resume-band")  # model and sft-model land first
    assert "failed while pushing dataset to alice/resume-band" in last
    progress = json.loads((run / "push_progress.json").read_text())["pushed"]
    assert sorted(progress) == ["model model/alice/resume", "sft-model model/alice/resume-sft"]

    before = len(server.state.requests)
    again = slmsql(args, env)
    assert again.returncode == 0, again.stderr
    sent = [path for method, path in server.state.requests[before:] if method == "POST"]
    for done in ("alice/resume", "alice/resume-sft"):  # neither pushed again: no repo call, no upload, no commit
        assert not [p for p in sent if f"/models/{done}/" in p or p.endswith(f"/models/{done}")], sent
    assert "model -> " in again.stdout and again.stdout.count("not sent again") == 2
    for repo_type, repo_id in (("dataset", "alice/resume-band"), ("space", "alice/ex"), ("space", "alice/resume-demo")):
        assert server.files(repo_type, repo_id), repo_id
    assert "adapter_model.safetensors" in server.files("model", "alice/resume")
    assert not (run / "push_progress.json").exists()  # a finished push leaves no progress behind

    changed = json.loads((run / "card" / "run_summary.json").read_text()) | {"note": "retrained"}
    (run / "card" / "run_summary.json").write_text(json.dumps(changed))
    (run / "push_progress.json").write_text(json.dumps({"pushed": progress}))  # as if interrupted again
    assert slmsql([*args[:-4], "--what", "model"], env).returncode == 0
    assert json.loads(server.files("model", "alice/resume")["run_summary.json"])["note"] == "retrained"


def test_a_garbled_push_progress_file_is_one_line_before_any_network_call(server, run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "push_progress.json").write_text('{"pushed": {"model', encoding="utf-8")  # cut short by hand
    before = len(server.state.requests)
    done = push(server, run, tmp_path / "home", "--what", "model")
    errors = [line for line in done.stderr.splitlines() if line.startswith("slmsql push: error: ")]
    assert done.returncode == 2 and errors == [done.stderr.strip().splitlines()[-1]] and "Traceback" not in done.stderr
    assert "push_progress.json is not valid JSON" in errors[0] and "to push every target again" in errors[0]
    assert len(server.state.requests) == before


def _without_readme(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if k not in ("README.md", ".gitattributes")}


def test_demo_space_push_uploads_the_folder_with_its_sdk(server, run_dir, tmp_path):
    demo = str(run_dir / "demo")
    done = push(server, run_dir, tmp_path / "home", "--what", "demo-space", "--demo-dir", demo)
    assert done.returncode == 0, done.stderr
    assert f"demo-space -> {server.endpoint}/spaces/alice/tiny-grpo-demo" in done.stdout
    repo = server.state.repos[("space", "alice/tiny-grpo-demo")]
    assert repo.sdk == "gradio" and not repo.private  # public: pip reads its wheel URL without a token
    stored = server.files("space", "alice/tiny-grpo-demo")
    shipped = _files(run_dir / "demo")
    assert {k: v for k, v in stored.items() if k in shipped and k != "README.md"} == {
        k: v for k, v in shipped.items() if k != "README.md"
    }
    assert {"space_config.json", "requirements.txt"} < set(stored)


# ----------------------------------------------------------------------------------------------------------
# round trips with the real clients
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_model_round_trip_loads_with_the_ecosystems_one_liner_in_a_fresh_cache(server, tmp_path):
    run = _card_with_fixture_run(
        tmp_path
    )  # a world run: the adapter names the local base outputs/quickstart/base
    python_json(  # the repository as training with push_to_hub left it: TRL's draft card among the files
        """
        from huggingface_hub import HfApi
        HfApi().create_repo("alice/world-grpo", private=True)
        HfApi().upload_file(path_or_fileobj=b"TRL draft", path_in_repo="trl_model_card.md", repo_id="alice/world-grpo")
        print("{}")
        """,
        client_env(server.endpoint, tmp_path / "seed"),
        tmp_path,
    )
    env = client_env(server.endpoint, tmp_path / "home")
    args = ["push", str(run), "--repo-id", "alice/world-grpo"]
    assert slmsql([*args, "--dry-run"], env).returncode == 0
    done = slmsql(args, env)
    assert done.returncode == 0, done.stderr
    assert f"base-model -> {server.endpoint}/alice/world-grpo-base" in done.stdout
    assert f"model -> {server.endpoint}/alice/world-grpo" in done.stdout
    base_commit = server.state.repos[("model", "alice/world-grpo-base")].branches["main"]
    pinned = ("adapter_config.json", "README.md")  # the dry run names the base's branch; the push, its new commit
    for what, repo in (("model", "alice/world-grpo"), ("base-model", "alice/world-grpo-base")):
        stored = server.files("model", repo)  # what the dry run showed, and no TRL draft
        shown = _files(run / "push_dry_run" / what)
        assert {k: v for k, v in stored.items() if k not in (".gitattributes", *pinned)} == {
            k: v for k, v in shown.items() if k not in pinned
        }
        assert server.state.repos[("model", repo)].private
    stored = server.files("model", "alice/world-grpo")
    assert json.loads(stored["adapter_config.json"])["revision"] == base_commit
    assert f"base_model_revision: {base_commit}" in stored["README.md"].decode()
    assert "adapter_model.safetensors" in server.lfs_paths("model", "alice/world-grpo")
    assert "model.safetensors" in server.lfs_paths("model", "alice/world-grpo-base")

    result = python_json(  # a fresh cache, nothing local: only the Hub ids
        f"""
        import json, torch
        from huggingface_hub import ModelCard
        from peft import AutoPeftModelForCausalLM, PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoPeftModelForCausalLM.from_pretrained("alice/world-grpo").eval()
        tokenizer = AutoTokenizer.from_pretrained("alice/world-grpo")
        ids = tokenizer("SELECT count(*) FROM", return_tensors="pt").input_ids
        local_base = AutoModelForCausalLM.from_pretrained({str(run / "base")!r}).eval()
        with torch.no_grad():
            plain = local_base(ids).logits
            local = PeftModel.from_pretrained(local_base, {str(run / "card")!r}).eval()(ids).logits
            hub_logits = model(ids).logits
            out = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        card = ModelCard.load("alice/world-grpo")
        print(json.dumps({{
            "base": model.peft_config["default"].base_model_name_or_path,
            "same_as_local": bool(torch.equal(hub_logits, local)),
            "adapter_moves_logits": float((hub_logits - plain).abs().max()),
            "new_tokens": int(out.shape[1] - ids.shape[1]),
            "vocab": len(tokenizer),
            "card": [card.data.base_model, card.data.get("base_model_relation")],
        }}))
        """,
        client_env(server.endpoint, tmp_path / "client"),
        tmp_path,
    )
    assert result["base"] == "alice/world-grpo-base"
    assert result["same_as_local"] and result["adapter_moves_logits"] > 1e-6
    assert result["new_tokens"] == 6 and result["vocab"] == 320
    assert result["card"] == ["alice/world-grpo-base", "adapter"]
    assert json.loads((run / "card" / "adapter_config.json").read_text())["base_model_name_or_path"] == (
        "outputs/quickstart/base"  # the card folder on disk is as `slmsql card` wrote it
    )

    # Pushing the same run again changes nothing and makes no commit, in either repository.
    heads = {
        repo: server.state.repos[("model", repo)].branches["main"]
        for repo in ("alice/world-grpo", "alice/world-grpo-base")
    }
    again = slmsql(args, env)
    assert again.returncode == 0, again.stderr
    assert {repo: server.state.repos[("model", repo)].branches["main"] for repo in heads} == heads


@pytest.mark.slow
def test_dataset_round_trip_loads_the_band_from_the_endpoint(server, run_dir, tmp_path):
    done = push(server, run_dir, tmp_path / "home", "--what", "dataset", "--public")
    assert done.returncode == 0, done.stderr
    repo = ("dataset", "alice/tiny-grpo-band")
    assert hub.BAND_SHARD in server.lfs_paths(*repo)  # the parquet went through LFS
    db = run_dir / "world" / "databases" / "nums" / "nums.sqlite"
    assert server.files(*repo, "main")["databases/nums/nums.sqlite"] == db.read_bytes()  # the band carries it
    assert not server.state.repos[repo].private

    result = python_json(
        """
        import json
        from datasets import load_dataset
        from huggingface_hub import DatasetCard, hf_hub_download

        band = load_dataset("alice/tiny-grpo-band", split="train")
        card = DatasetCard.load(hf_hub_download("alice/tiny-grpo-band", "README.md", repo_type="dataset"))
        print(json.dumps({"rows": band.to_dict(), "text": card.text, "meta": card.data.to_dict()}))
        """,
        client_env(server.endpoint, tmp_path / "client"),
        tmp_path,
    )
    assert result["rows"] == _band_rows("databases/nums/nums.sqlite")  # the parquet only, not the .sqlite
    ours = hub.dataset_card(
        REPORT,
        "alice/tiny-grpo-band",
        model_repo_id="alice/tiny-grpo",
        endpoint=server.endpoint,
        n_databases=1,
    )
    assert result["text"].strip() == ours.split("---\n", 2)[2].strip()
    assert result["meta"]["dataset_info"]["splits"][0]["num_examples"] == 2  # datasets' own metadata kept
    assert result["meta"]["configs"][0]["data_files"][0]["path"] == "data/train-*"
    assert "pass-rate-filter" in result["meta"]["tags"] and result["meta"]["license"] == "apache-2.0"


@pytest.mark.slow
def test_metric_space_round_trip_loads_with_evaluate_in_a_clean_cache(server, run_dir, tmp_path):
    done = push(server, run_dir, tmp_path / "home", "--what", "metric-space")
    assert done.returncode == 0, done.stderr
    info = server.state.repos[("space", "alice/ex")]
    assert info.sdk == "gradio" and not info.private
    db = run_dir / "world" / "databases" / "nums" / "nums.sqlite"
    result = python_json(
        "import inspect, json, sys\n"
        + ex_on_toy_db(db)
        + 'print(json.dumps({"scores": scores, "script": inspect.getsource(sys.modules[type(ex).__module__])}))\n',
        client_env(server.endpoint, tmp_path / "client"),
        tmp_path,
    )
    assert result["scores"]["execution_accuracy"] == 0.5
    assert result["scores"]["num_correct"] == 1 and result["scores"]["num_scored"] == 2
    script = (REPO / "slmsql_hub" / "metric" / "ex.py").read_text()  # named for the Space it was pushed to
    script = script.replace("https://huggingface.co/spaces/slmsql/ex", f"{server.endpoint}/spaces/alice/ex")
    assert result["script"] == script.replace("slmsql/ex", "alice/ex")
    assert any(path == "/spaces/alice/ex/resolve/main/ex.py" for _, path in server.state.requests)


@pytest.mark.slow
def test_metric_space_app_builds_on_gradio_6_from_the_pushed_files(server, run_dir, tmp_path):
    options = ["--what", "metric-space", "--metric-space-id", "alice/ex-app"]
    done = push(server, run_dir, tmp_path / "home", *options)
    assert done.returncode == 0, done.stderr
    result = python_json(
        f"""
        import importlib.util, json
        import gradio as gr
        from huggingface_hub import SpaceCard, snapshot_download

        folder = snapshot_download("alice/ex-app", repo_type="space", local_dir={str(tmp_path / "space")!r})
        card = SpaceCard.load(folder + "/README.md")
        spec = importlib.util.spec_from_file_location("space_app", folder + "/" + card.data.app_file)
        app = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(app)
        demo = app.build_demo()  # loads the ex.py beside app.py, as on the Space
        print(json.dumps({{
            "gradio": gr.__version__, "blocks": isinstance(demo, gr.Blocks), "sdk": card.data.sdk,
            "requirements": open(folder + "/requirements.txt").read().split(),
        }}))
        """,
        client_env(server.endpoint, tmp_path / "client"),
        tmp_path,
    )
    assert result["gradio"].split(".")[0] == "6" and result["blocks"]
    assert result["sdk"] == "gradio" and "torch==2.13.0+cpu" in result["requirements"]
    at = result["requirements"].index("@")
    assert result["requirements"][at - 1] == "slmsql-hub"
    assert result["requirements"][at + 1].startswith(f"{server.endpoint}/spaces/alice/ex-app/resolve/main/wheels/")


def _seed(server, tmp_path, repo_type: str, repo_id: str, path: str) -> None:
    """``repo_id`` with a branch ``dev`` that has ``path`` (which ``main`` lacks)."""
    python_json(
        f"""
        from huggingface_hub import HfApi
        api = HfApi()
        api.create_repo({repo_id!r}, repo_type={repo_type!r}, space_sdk="gradio" if {repo_type!r} == "space" else None)
        api.create_branch({repo_id!r}, repo_type={repo_type!r}, branch="dev")
        api.upload_file(path_or_fileobj=b"x", path_in_repo={path!r}, repo_id={repo_id!r}, repo_type={repo_type!r},
                        revision="dev")
        print("{{}}")
        """,
        client_env(server.endpoint, tmp_path / "seed"),
        tmp_path,
    )


def test_create_pr_with_a_revision_opens_the_pull_request_against_that_branch(server, run_dir, tmp_path):
    _seed(server, tmp_path, "space", "alice/ex-pr-dev", "notes.txt")
    repo = server.state.repos[("space", "alice/ex-pr-dev")]
    dev_head = repo.branches["dev"]
    args = ["push", str(run_dir), "--repo-id", "alice/tiny-grpo", "--what", "metric-space"]
    args += ["--metric-space-id", "alice/ex-pr-dev", "--revision", "dev", "--create-pr"]
    done = slmsql(args, client_env(server.endpoint, tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    assert f"pull request {server.endpoint}/spaces/alice/ex-pr-dev/discussions/1" in done.stdout
    assert repo.branches["dev"] == dev_head  # the branch is left alone ...
    assert repo.commits[repo.pull_requests[1]].parent == dev_head  # ... and the pull request starts from it
    assert {"notes.txt", "ex.py", "app.py"} <= set(server.files("space", "alice/ex-pr-dev", "refs/pr/1"))


def test_a_model_pull_request_on_a_branch_deletes_trls_draft_card(server, run_dir, tmp_path):
    _seed(server, tmp_path, "model", "alice/tiny-draft", "trl_model_card.md")
    args = ["push", str(run_dir), "--repo-id", "alice/tiny-draft", "--what", "model", "--revision", "dev"]
    done = slmsql([*args, "--create-pr"], client_env(server.endpoint, tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    pr_files = server.files("model", "alice/tiny-draft", "refs/pr/1")
    assert "trl_model_card.md" not in pr_files and "README.md" in pr_files
    assert "trl_model_card.md" in server.files("model", "alice/tiny-draft", "dev")


@pytest.mark.slow
def test_revision_pushes_to_a_new_branch_and_create_pr_leaves_the_branch_alone(server, run_dir, tmp_path):
    env = client_env(server.endpoint, tmp_path / "home")
    base = ["push", str(run_dir), "--repo-id", "alice/tiny-grpo", "--what", "metric-space"]
    created = [*base, "--metric-space-id", "alice/ex-branches", "--revision", "dev", "--private"]
    assert slmsql(created, env).returncode == 0
    repo = server.state.repos[("space", "alice/ex-branches")]
    assert set(repo.branches) == {"main", "dev"}
    assert set(server.files("space", "alice/ex-branches", "main")) == {".gitattributes"}
    assert "ex.py" in server.files("space", "alice/ex-branches", "dev")

    done = slmsql([*base, "--metric-space-id", "alice/ex-branches", "--create-pr"], env)
    assert done.returncode == 0, done.stderr
    assert f"pull request {server.endpoint}/spaces/alice/ex-branches/discussions/1" in done.stdout
    assert set(server.files("space", "alice/ex-branches", "main")) == {".gitattributes"}
    assert "ex.py" in server.files("space", "alice/ex-branches", "refs/pr/1")

    public = slmsql([*base, "--metric-space-id", "alice/ex-branches", "--public"], env)
    assert public.returncode == 0, public.stderr
    assert "already exists and is private: its visibility is left as it is" in public.stderr
    assert server.state.repos[("space", "alice/ex-branches")].private

    on_branch = slmsql(
        ["push", str(run_dir), "--repo-id", "alice/tiny-dev", "--what", "dataset", "--revision", "dev"], env
    )
    assert on_branch.returncode == 0, on_branch.stderr
    dev_files = server.files("dataset", "alice/tiny-dev-band", "dev")
    assert hub.BAND_SHARD in dev_files and b"| band (kept) | 2 |" in dev_files["README.md"]
    assert "databases/nums/nums.sqlite" in dev_files  # the databases go to the same branch
    assert set(server.files("dataset", "alice/tiny-dev-band", "main")) == {".gitattributes"}

    dataset = slmsql(
        ["push", str(run_dir), "--repo-id", "alice/tiny-pr", "--what", "dataset", "--create-pr"], env
    )
    assert dataset.returncode == 0, dataset.stderr
    assert "pull request" in dataset.stdout
    pr_files = server.files("dataset", "alice/tiny-pr-band", "refs/pr/1")
    assert hub.BAND_SHARD in pr_files and b"| band (kept) | 2 |" in pr_files["README.md"]
    assert "databases/nums/nums.sqlite" in pr_files
    assert set(server.files("dataset", "alice/tiny-pr-band", "main")) == {".gitattributes"}


def test_card_after_training_replaces_trls_draft(server, tmp_path):
    output_dir = tmp_path / "grpo"
    output_dir.mkdir()
    (output_dir / "trl_model_card.md").write_text("---\nlibrary_name: transformers\n---\nTRL draft\n")
    (output_dir / "adapter_config.json").write_text("{}")
    summary = {
        "kind": "grpo",
        "status": "completed",
        "base_model": "Qwen/Qwen2.5-Coder-1.5B",
        "adapter_path": "outputs/sft/stage2",
        "steps": 7,
        "max_steps": 7,
        "adapter_checksum": {"changed": True},
        "adapter_update": {"relative_norm": 0.000321, "min_relative_update": 1e-6},
        "telemetry": {"mean": {"frac_reward_zero_std": 0.625, "grad_norm": 0.125}},
    }
    (output_dir / "run_summary.json").write_text(json.dumps(summary))
    (output_dir / "config.yaml").write_text("learning_rate: 1.0e-05\n")
    result = python_json(
        f"""
        import json
        from huggingface_hub import HfApi, ModelCard
        from slmsql_hub.hub import push_training_card

        api = HfApi()
        # What TRL's Trainer does with push_to_hub: true (init_hf_repo, then upload_folder at each save).
        api.create_repo("alice/trl-run", private=True, exist_ok=True)
        api.upload_folder(repo_id="alice/trl-run", folder_path={str(output_dir)!r},
                          ignore_patterns=["_*", "checkpoint-*", "run_summary.json", "config.yaml"])
        push_training_card({str(output_dir)!r}, "alice/trl-run")
        files = sorted(api.list_repo_files("alice/trl-run"))
        card = ModelCard.load("alice/trl-run")
        print(json.dumps({{"files": files, "base_model": card.data.base_model, "text": card.text}}))
        """,
        client_env(server.endpoint, tmp_path / "client"),
        tmp_path,
    )
    assert "trl_model_card.md" not in result["files"]
    assert {"README.md", "run_summary.json", "config.yaml", "adapter_config.json"} <= set(result["files"])
    assert result["base_model"] == "Qwen/Qwen2.5-Coder-1.5B"
    assert (
        "| steps | 7 steps of 7 |" in result["text"]
        and "| mean frac_reward_zero_std | 0.625 |" in result["text"]
        and "| adapter update ‖ΔW‖ / ‖W‖ | 3.21e-04 |" in result["text"]
    )
    assert "continuing the SFT adapter `outputs/sft/stage2`" in result["text"]


# ----------------------------------------------------------------------------------------------------------
# the server's contract with the client
# ----------------------------------------------------------------------------------------------------------
def test_server_speaks_the_clients_refs_tags_and_missing_entry_protocol(server, tmp_path):
    result = python_json(
        """
        import json
        from huggingface_hub import HfApi, hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

        api = HfApi()
        url = api.create_repo("slmsql-org/refs", private=True)
        again = api.create_repo("slmsql-org/refs", private=True, exist_ok=True)  # 409 that still carries the url
        api.upload_file(path_or_fileobj=b"v1", path_in_repo="notes/a.txt", repo_id="slmsql-org/refs")
        api.create_tag("slmsql-org/refs", tag="v1")
        api.upload_file(path_or_fileobj=b"v2", path_in_repo="notes/a.txt", repo_id="slmsql-org/refs")
        api.create_branch("slmsql-org/refs", branch="exp", revision="v1")
        refs = api.list_repo_refs("slmsql-org/refs")
        try:
            list(api.list_repo_tree("slmsql-org/refs", path_in_repo="missing"))
            missing = "listed"
        except EntryNotFoundError:
            missing = "EntryNotFound"
        try:
            HfApi(token="hf_test_bob").repo_info("slmsql-org/refs")
            hidden = "visible"
        except RepositoryNotFoundError:
            hidden = "RepoNotFound"
        print(json.dumps({
            "url": str(url), "again": str(again),
            "branches": sorted(b.name for b in refs.branches), "tags": [t.name for t in refs.tags],
            "at_tag": open(hf_hub_download("slmsql-org/refs", "notes/a.txt", revision="v1")).read(),
            "at_exp": open(hf_hub_download("slmsql-org/refs", "notes/a.txt", revision="exp")).read(),
            "at_main": open(hf_hub_download("slmsql-org/refs", "notes/a.txt")).read(),
            "tree": [f.path for f in api.list_repo_tree("slmsql-org/refs", recursive=True)],
            "missing": missing, "hidden": hidden,
            "commits": len(api.list_repo_commits("slmsql-org/refs")),
        }))
        """,
        client_env(server.endpoint, tmp_path / "client"),
        tmp_path,
    )
    assert result["url"] == result["again"] == f"{server.endpoint}/slmsql-org/refs"
    assert result["branches"] == ["exp", "main"] and result["tags"] == ["v1"]
    assert (result["at_tag"], result["at_exp"], result["at_main"]) == ("v1", "v1", "v2")
    assert result["tree"] == [".gitattributes", "notes", "notes/a.txt"]
    assert result["missing"] == "EntryNotFound"
    assert result["hidden"] == "RepoNotFound"  # private by default here too: bob cannot see alice's org repo
    assert result["commits"] == 3
