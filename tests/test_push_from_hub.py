"""What ``slmsql push`` publishes works from the Hub alone (issue: the real study is Hub-native too):

- the card names the repository it is pushed to, and nothing of another push of the same run;
- the demo Space, downloaded into an empty folder and started in a fresh process with no run folder, answers
  ``/compare`` with the pushed SFT and GRPO adapters;
- the metric Space's ``requirements.txt`` installs this very version into a fresh virtualenv, where
  ``evaluate.load("NS/ex")`` computes EX with the source tree not importable.

Everything runs against the local Hub-API server (``tests/hub_server.py``) with the real clients.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path

import pytest
from _helpers import REPO, TESTS, ex_on_toy_db, hub_client_env, python_json
from _space_run import DB_ID, GRPO_SQL, QUESTION, SFT_SQL, launched_app, space_run_once
from hub_server import HubServer

from slmsql_hub import hub

TOKEN = "hf_test_alice"
FIXTURE_RUN = TESTS / "fixtures" / "run"
CARD_ID = "slmsql/world-grpo-quickstart"  # the id `slmsql card` was given, as the quickstart does
IDS = ("alice/mymodel", "other-org/their-model")


@pytest.fixture(scope="module")
def server():
    with HubServer({TOKEN: "alice"}, orgs={"alice": ["other-org"]}) as hub_server:
        yield hub_server


@pytest.fixture(scope="module")
def carded_run(tmp_path_factory) -> Path:
    """The fixture run (a real tiny base, a real adapter; a local base) carded by ``slmsql card --repo-id``."""
    from slmsql_hub.card import CardOptions, build_card

    run = tmp_path_factory.mktemp("carded") / "run"
    shutil.copytree(FIXTURE_RUN, run)
    results = (
        run / "eval" / "eval_results.json"
    )  # as if the world's splits were published: model-index entries
    results.write_text(results.read_text().replace('"dataset_id": null', '"dataset_id": "pub/world"'))
    build_card(run, options=CardOptions(repo_id=CARD_ID))
    return run


def _texts(folder: Path) -> dict[str, str]:
    """Every text file of a pushed folder (the card, .eval_results, adapter config, plan)."""
    return {
        path: local.read_text(encoding="utf-8")
        for path, local in hub.folder_files(folder)
        if local.suffix in (".md", ".yaml", ".json") and not path.startswith(("eval/", "configs/"))
    }


def test_the_same_run_under_two_namespaces_gives_two_cards_each_naming_only_its_own(carded_run, tmp_path):
    cards = {}
    for repo_id in IDS:
        out = tmp_path / repo_id.replace("/", "__")
        hub.write_dry_run(hub.plan_push(carded_run, repo_id, "model"), out, endpoint="https://hf.co")
        cards[repo_id] = {what: _texts(out / what) for what in ("model", "base-model")}
    for repo_id, other in (IDS, IDS[::-1]):
        texts = cards[repo_id]
        everything = "\n".join(text for folder in texts.values() for text in folder.values())
        assert other.split("/")[0] not in everything and "world-grpo-quickstart" not in everything
        readme = texts["model"]["README.md"]
        name = repo_id.split("/")[1]
        assert f"\n# {name}\n" in readme and f"- name: {name}\n" in readme  # the title, the model-index name
        assert (
            f"base_model: {repo_id}-base" in readme and f"url: https://huggingface.co/{repo_id}\n" in readme
        )
        assert f'AutoPeftModelForCausalLM.from_pretrained("{repo_id}")' in readme  # How to use: the one-liner
        assert (
            "snapshot_download" not in readme
            and f"slmsql card --run-dir outputs/quickstart --repo-id {repo_id}" in readme
        )
        sources = [text for path, text in texts["model"].items() if path.startswith(".eval_results/")]
        assert len(sources) == 2 and all(
            f"https://huggingface.co/{repo_id}/blob/main/eval/" in s for s in sources
        )
        assert (
            json.loads(texts["model"]["adapter_config.json"])["base_model_name_or_path"] == f"{repo_id}-base"
        )
        assert f'from_pretrained("{repo_id}")' in texts["base-model"]["README.md"]
    assert (carded_run / "card" / "README.md").read_text().count(
        CARD_ID
    ) > 1  # the folder on disk is unchanged


@pytest.mark.slow
def test_pushing_one_run_to_two_namespaces_lands_two_cards_and_the_base_once(server, carded_run, tmp_path):
    from huggingface_hub import ModelCard

    env = hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
    for repo_id in IDS:
        done = subprocess.run(
            [sys.executable, "-m", "slmsql_hub.cli", "push", str(carded_run), "--repo-id", repo_id],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    for repo_id, other in (IDS, IDS[::-1]):
        stored = server.files("model", repo_id)
        assert not [path for path in stored if path.startswith("base/")]  # the base ships in its own repo
        assert "model.safetensors" in server.files("model", f"{repo_id}-base")
        card = ModelCard(stored["README.md"].decode())
        assert card.data.base_model == f"{repo_id}-base" and card.data.model_name == repo_id.split("/")[1]
        texts = b"".join(v for k, v in stored.items() if k.endswith((".md", ".yaml"))).decode()
        assert other.split("/")[0] not in texts and repo_id in texts


def _space_card_folder(space_run: Path, run: Path) -> Path:
    """``space_run`` copied to ``run`` with a card folder as ``slmsql card`` lays it out for a local base: the GRPO
    adapter at the top, the base in ``base/``."""
    shutil.copytree(space_run, run, ignore=shutil.ignore_patterns(".complete"))
    card = run / "card"
    for path in (run / "grpo").iterdir():
        if path.is_file():
            shutil.copy2(path, card / path.name)
    shutil.copytree(run / "base", card / "base")
    return run


@pytest.mark.slow
def test_the_demo_space_downloaded_from_the_hub_answers_compare_with_both_adapters(
    server, tmp_path_factory, tmp_path
):
    from gradio_client import Client

    run = _space_card_folder(space_run_once(tmp_path_factory), tmp_path / "run")
    env = hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "slmsql_hub.cli", "push", str(run), "--repo-id", "alice/tiny",
         "--what", "model,sft-model,demo-space"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    space = tmp_path / "space"  # empty: only what the Space repository holds
    client_env = hub_client_env(
        server.endpoint, tmp_path / "fresh-cache", TOKEN
    )  # the token a Space secret gives
    python_json(
        f"""
        from huggingface_hub import snapshot_download
        snapshot_download("alice/tiny-demo", repo_type="space", local_dir={str(space)!r})
        print("{{}}")
        """,
        client_env,
        tmp_path,
    )
    config = json.loads((space / "space_config.json").read_text())
    grpo_commit = server.state.repos[("model", "alice/tiny")].branches["main"]
    assert config["grpo_adapter"] == {"repo_id": "alice/tiny", "revision": grpo_commit}  # pinned at push
    assert (
        config["sft_adapter"]["repo_id"] == "alice/tiny-sft"
        and config["base_model"]["repo_id"] == "alice/tiny-base"
    )
    readme = (space / "README.md").read_text()
    assert "- alice/tiny-base\n- alice/tiny-sft\n- alice/tiny\n" in readme
    cwd = tmp_path / "elsewhere"  # no outputs/ here, nor a run folder anywhere the Space looks
    cwd.mkdir()
    with launched_app([], tmp_path / "app.log", env=client_env, app=space / "app.py", cwd=cwd) as url:
        with urllib.request.urlopen(url + "config", timeout=10) as response:
            page = response.read().decode()
        result = Client(url, verbose=False).predict(f"world/{DB_ID}", QUESTION, api_name="/compare")
    log = (tmp_path / "app.log").read_text()
    assert "No run folder" not in page and "Not everything could be loaded" not in page
    assert "alice/tiny-sft" in page and "alice/tiny-base" in page  # the About tab's sources: the Hub ids
    assert "building the embedded world" not in log  # the run's world, shipped in the Space
    assert (result[0], result[3]) == (SFT_SQL, GRPO_SQL)
    assert (result[-1]["sft"]["status"], result[-1]["grpo"]["status"]) == ("matches_gold", "wrong")


@pytest.mark.slow
def test_the_demo_space_of_a_spider_run_answers_compare_on_a_spider_database_it_was_shipped_with(
    server, tmp_path_factory, tmp_path
):
    """Issue #35's "done when": pushed, downloaded into an empty folder and started alone, the Space compares on a
    database of the run's own Spider evaluation, read from the dataset repository its config pins."""
    import sqlite3

    from gradio_client import Client

    run = _space_card_folder(space_run_once(tmp_path_factory), tmp_path / "run")
    spider = tmp_path / "spider"
    db = spider / "database" / "school" / "school.sqlite"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:  # test fixture: a Spider-layout database the policies' answers fit
        conn.execute("CREATE TABLE student (name TEXT)")
        conn.executemany("INSERT INTO student VALUES (?)", [("Ann",), ("Bob",), ("Cy",)])
    (spider / "dev.json").write_text(json.dumps([{"db_id": "school", "question": QUESTION, "query": SFT_SQL}]))
    results = json.loads((run / "eval" / "eval_results.json").read_text())
    results["config"]["spider_root"] = str(spider)
    first = next(iter(results["benchmarks"].values()))
    results["benchmarks"]["spider_dev"] = {**first, "benchmark": "spider", "split": "dev",
                                           "predictions_file": "predictions/spider_dev.jsonl"}  # fmt: skip
    (run / "eval" / "eval_results.json").write_text(json.dumps(results))
    row = {"question_id": "spider-dev-0", "db_id": "school", "question": QUESTION, "gold_sql": SFT_SQL,
           "sft_correct": 1, "grpo_correct": 0}  # fmt: skip
    (run / "eval" / "predictions" / "spider_dev.jsonl").write_text(json.dumps(row) + "\n")
    env = hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "slmsql_hub.cli", "push", str(run), "--repo-id", "alice/spider",
         "--what", "model,sft-model,demo-space"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HF_TOKEN secret" in done.stdout  # the models and the databases are private
    space = tmp_path / "space"
    client_env = hub_client_env(server.endpoint, tmp_path / "fresh-cache", TOKEN)
    python_json(
        f"""
        from huggingface_hub import snapshot_download
        snapshot_download("alice/spider-demo", repo_type="space", local_dir={str(space)!r})
        print("{{}}")
        """,
        client_env,
        tmp_path,
    )
    config = json.loads((space / "space_config.json").read_text())
    data_commit = server.state.repos[("dataset", "alice/spider-demo-data")].branches["main"]
    assert config["benchmark_data"] == {"repo_id": "alice/spider-demo-data", "revision": data_commit,
                                        "repo_type": "dataset"}  # fmt: skip
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    with launched_app([], tmp_path / "app.log", env=client_env, app=space / "app.py", cwd=cwd) as url:
        result = Client(url, verbose=False).predict("spider/school", QUESTION, api_name="/compare")
    assert (result[0], result[3]) == (SFT_SQL, GRPO_SQL)
    assert (result[-1]["sft"]["status"], result[-1]["grpo"]["status"]) == ("matches_gold", "wrong")


def _venv_without_this_package(root: Path) -> Path:
    """A fresh virtualenv that sees this interpreter's installed packages (one symlink each, through a ``.pth``
    file) but not slmsql-hub itself: no editable install, no metadata; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=300)
    python = root / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    shared = root / "shared-site"
    shared.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        name = entry.name.lower()
        if (
            "slmsql" in name
            or name.endswith(".pth")
            or name.startswith(("__editable__", "pip", "_distutils"))
        ):
            continue
        (shared / entry.name).symlink_to(entry)
    (site / "project-deps.pth").write_text(f"{shared}\n")
    return python


@pytest.mark.slow
def test_the_metric_spaces_requirements_install_this_version_and_evaluate_load_computes_ex(server, tmp_path):
    env = hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "slmsql_hub.cli", "push", str(tmp_path), "--repo-id", "alice/x", "--what",
         "metric-space"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not server.state.repos[("space", "alice/ex")].private
    requirements = server.files("space", "alice/ex")["requirements.txt"].decode()
    python = _venv_without_this_package(tmp_path / "venv")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    (cwd / "requirements.txt").write_text(requirements)
    fresh = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "HF_TOKEN")}  # anonymous, no source tree
    fresh["NO_PROXY"] = fresh["no_proxy"] = "127.0.0.1,localhost"
    probe = [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('slmsql_hub'))"]
    assert subprocess.run(probe, env=fresh, cwd=cwd, capture_output=True, text=True).stdout.strip() == "None"
    install = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "install", "--no-deps", "--no-index", "-r",
         "requirements.txt"],
        env=fresh, cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    db = tmp_path / "toy.sqlite"
    with sqlite3.connect(db) as conn:  # test fixture: the toy database
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (10,)])
    code = (
        "import json\nimport slmsql_hub\n"
        + ex_on_toy_db(db)
        + 'print(json.dumps({"scores": scores, "package": slmsql_hub.__file__, "version": slmsql_hub.__version__}))\n'
    )
    ran = subprocess.run(
        [str(python), "-c", code], env=fresh, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["scores"]["execution_accuracy"] == 0.5 and result["scores"]["num_scored"] == 2
    assert Path(result["package"]).is_relative_to(tmp_path / "venv")  # the wheel's copy, not this clone
    assert not Path(result["package"]).is_relative_to(REPO)
    assert os.path.basename(os.path.dirname(result["package"])) == "slmsql_hub"


def test_a_run_whose_sft_adapter_came_from_the_hub_pushes_no_sft_repo_and_its_space_loads_the_hub_one(
    carded_run, tmp_path
):
    run = tmp_path / "run"
    shutil.copytree(carded_run, run)
    stage2 = run / "sft" / "stage2"
    shutil.rmtree(stage2)
    stage2.mkdir()
    (stage2 / "hub.json").write_text(json.dumps({"repo_id": "study/sft-adapter", "revision": "abc123"}))
    targets = hub.plan_push(run, "alice/mymodel", "sft-model,demo-space")
    assert [t.what for t in targets] == ["demo-space"]  # nothing to push for an adapter already on the Hub
    files = dict(targets[0].files)
    config = json.loads(files["space_config.json"])
    assert config["sft_adapter"] == {"repo_id": "study/sft-adapter", "revision": "abc123"}
    assert (
        "study/sft-adapter" in files["README.md"].decode()
        and "alice/mymodel-sft" not in files["README.md"].decode()
    )


def test_the_band_pushed_with_the_model_is_the_cards_training_data_and_nothing_else_is(carded_run):
    from slmsql_hub.card import render_for_repo

    with_band = render_for_repo(
        carded_run, carded_run / "card", "alice/mymodel", datasets=("alice/mymodel-band",)
    )
    assert "datasets:\n- alice/mymodel-band\n" in with_band["README.md"].decode()
    alone = render_for_repo(carded_run, carded_run / "card", "alice/mymodel")
    assert "datasets:" not in alone["README.md"].decode().split("---")[1]
