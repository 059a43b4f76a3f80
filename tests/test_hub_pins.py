"""What a push names is what was run (issue #35): the adapter, the card and the demo Space name the base (and the
adapters) by commit, so a later commit to the base repository changes nothing for a Hub user; and every pushed file
names the repositories it is pushed to or pins, and installs what is really installable. Against the local Hub
server (:mod:`hub_server`), with the real clients in fresh interpreters; nothing is mocked."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from _helpers import (
    REPO,
    TESTS,
    clean_env,
    commit_moved_weights,
    hub_client_env,
    load_adapter_base,
    python_json,
    slmsql,
    upload_folder,
)
from hub_server import HubServer
from huggingface_hub import ModelCard

from slmsql_hub import hub

TOKEN = "hf_test_alice"
BASE_ID, GRPO_ID = "alice/tiny-base", "alice/pinned-grpo"
FIXTURE_RUN = TESTS / "fixtures" / "run"

_ID = r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*"
REPO_ID_PATTERNS = (
    re.compile(rf"huggingface\.co/(?:spaces/|datasets/)?({_ID})"),  # a Hub page or file
    re.compile(rf"(?:load|from_pretrained|snapshot_download|load_dataset|hf_hub_download)\(\s*[\"']({_ID})[\"']"),
    re.compile(rf"^(?:base_model|title):\s*({_ID})\s*$", re.M),  # card metadata
    re.compile(rf"^-\s+({_ID})\s*$", re.M),  # a metadata list (models:, datasets:)
)
"""Where a pushed file names a Hub repository: its pages and files, the clients' loaders, card metadata."""


def named_repo_ids(text: str, endpoint: str = "https://huggingface.co") -> set[str]:
    """The Hub repository ids ``text`` names (:data:`REPO_ID_PATTERNS`, ``endpoint``'s pages as huggingface.co's)."""
    text = text.replace(endpoint.rstrip("/"), "https://huggingface.co")
    return {match.group(1) for pattern in REPO_ID_PATTERNS for match in pattern.finditer(text)}


def _hub_base_run(root: Path, commit: str) -> Path:
    """The fixture run as a study leaves it when its base came from the Hub: ``base/hub.json`` instead of weights,
    the GRPO adapter naming ``BASE_ID`` with ``revision: null`` (as PEFT saves it), the summary the commit it loaded;
    then carded by ``slmsql card``."""
    from slmsql_hub.card import build_card

    run = root / "run"
    shutil.copytree(FIXTURE_RUN, run)
    shutil.rmtree(run / "base")
    (run / "base").mkdir()
    (run / "base" / "hub.json").write_text(json.dumps({"repo_id": BASE_ID, "revision": "main"}))
    config = json.loads((run / "grpo" / "adapter_config.json").read_text())
    (run / "grpo" / "adapter_config.json").write_text(
        json.dumps({**config, "base_model_name_or_path": BASE_ID, "revision": None})
    )
    summary = json.loads((run / "grpo" / "run_summary.json").read_text())
    summary.update(base_model=BASE_ID, revisions={"model_revision": None, "model_commit": commit})
    (run / "grpo" / "run_summary.json").write_text(json.dumps(summary))
    sft = run / "sft" / "stage2"  # a stand-in SFT adapter (the GRPO one's files), naming the same base
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copyfile(run / "grpo" / name, sft / name)
    build_card(run, options=None)
    return run


def _pushed_texts(targets: list, folder: Path) -> tuple[dict, dict[str, str]]:
    """The dry run of ``targets`` in ``folder`` (exactly the files a push uploads) and the text of each of its text
    files, by ``WHAT/PATH`` (weights, databases and the wheel are not text)."""
    plan = hub.write_dry_run(targets, folder)
    texts = {}
    for target in plan["targets"]:
        for entry in target["files"]:
            try:
                texts[f"{target['what']}/{entry['path']}"] = (Path(target["folder"]) / entry["path"]).read_text(
                    encoding="utf-8"
                )
            except UnicodeDecodeError:
                continue
    return plan, texts


def test_the_pushed_demo_space_says_how_it_runs_on_the_hub_and_from_any_run_folder(tmp_path):
    """Issue #35 item 4: the pushed README told a Hub user to run it with ``--run-dir outputs/quickstart``."""
    run = _hub_base_run(tmp_path, "c" * 40)
    _, texts = _pushed_texts(hub.plan_push(run, "bob/my-sql", "model,sft-model,metric-space,demo-space"), tmp_path / "dry")
    # The model repos' configs and summaries name the folder the fixture run was made in (outputs/quickstart):
    # records of that run. The Spaces are instructions and name it nowhere.
    spaces = {where: text for where, text in texts.items() if where.startswith(("demo-space/", "metric-space/"))}
    assert "demo-space/app.py" in spaces and "demo-space/space_settings.py" in spaces
    assert [where for where, text in spaces.items() if "outputs/quickstart" in text] == []
    readme = texts["demo-space/README.md"]
    hub_part, local_part = readme.split("**On the Hub**", 1)[1].split("**Locally", 1)
    assert "space_config.json" in hub_part and "--run-dir" not in hub_part
    assert "app.py --run-dir RUN" in local_part


def test_the_planned_adapter_and_card_name_the_commit_the_run_loaded(tmp_path):
    commit = "a" * 40
    run = _hub_base_run(tmp_path, commit)
    card = ModelCard.load(run / "card" / "README.md")
    assert (card.data.base_model, card.data.get("base_model_revision")) == (BASE_ID, commit)
    assert f'from_pretrained("{BASE_ID}", revision="{commit}")' in card.text  # "How to use", for the folder

    [target] = hub.plan_push(run, GRPO_ID, "model")
    files = dict(target.files)
    config = json.loads(files["adapter_config.json"])  # today: "revision": null, the base's main branch
    assert (config["base_model_name_or_path"], config["revision"]) == (BASE_ID, commit)
    pushed_card = ModelCard(files["README.md"].decode("utf-8"))
    assert pushed_card.data.get("base_model_revision") == commit
    assert f"{BASE_ID} at commit {commit}" in pushed_card.text  # "How to use", for the Hub id


def test_no_pushed_file_names_a_repo_other_than_those_pushed_or_pinned(tmp_path):
    run = _hub_base_run(tmp_path, "b" * 40)
    targets = hub.plan_push(run, "bob/my-sql", "model,sft-model,metric-space,demo-space")
    plan, texts = _pushed_texts(targets, tmp_path / "dry")
    allowed = {target.repo_id for target in targets} | {BASE_ID}
    named = {}
    for where, text in texts.items():
        for repo_id in named_repo_ids(text) - allowed:
            named.setdefault(repo_id, []).append(where)
    assert named == {}  # today: slmsql/ex in the metric Space's README, ex.py and app.py
    assert "bob/ex" in named_repo_ids(texts["metric-space/README.md"])  # the Space names itself
    readme = texts["metric-space/README.md"] + texts["model/README.md"]
    assert "pip install slmsql-hub" not in readme  # on no index
    wheel = next(e["path"] for t in plan["targets"] if t["what"] == "metric-space" for e in t["files"]
                 if e["path"].endswith(".whl"))  # fmt: skip
    install = f'pip install "slmsql-hub @ https://huggingface.co/spaces/bob/ex/resolve/main/{wheel}"'
    assert install in texts["metric-space/README.md"] and install in texts["model/README.md"]


@pytest.mark.parametrize("folder", ["slmsql_hub/metric", "spaces/demo"])
def test_a_cpu_spaces_requirements_install_the_cpu_torch_the_suite_runs_with(folder):
    """What pip will be asked, read from the text; :func:`test_a_bare_venv_resolves_a_pushed_spaces_requirements_to_cpu_torch`
    runs the resolver on it."""
    import torch
    from packaging.requirements import Requirement

    from slmsql_hub.hub.wheel import pinned_requirements

    text = (REPO / folder / "requirements.txt").read_text(encoding="utf-8")
    pushed = pinned_requirements(text, "alice/x", "slmsql_hub-0.1.0-py3-none-any.whl")
    lines = [line.strip() for line in pushed.splitlines() if line.strip() and not line.startswith("#")]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines  # today: PyPI's CUDA torch
    requirements = [Requirement(line) for line in lines if not line.startswith("-")]
    torch_pins = [str(r.specifier) for r in requirements if r.name == "torch"]
    assert torch_pins == [f"=={torch.__version__}"] and torch.__version__.endswith("+cpu")  # what the suite ran
    assert [r.url for r in requirements if r.name == "slmsql-hub"][0].endswith(".whl")


def _index_answers(url: str = "https://pypi.org/simple/pip/") -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.slow
@pytest.mark.parametrize("what", ["metric-space", "demo-space"])
def test_a_bare_venv_resolves_a_pushed_spaces_requirements_to_cpu_torch(tmp_path, what):
    """``pip install --dry-run --report`` of the pushed ``requirements.txt`` in a bare venv (no site packages, the
    machine's pip configuration), its slmsql-hub line pointing at the wheel the push uploads (built here by
    :func:`~slmsql_hub.hub.wheel.package_wheel`) instead of the Space's URL: no ``nvidia-*``, CUDA or triton
    package, and torch's ``+cpu`` build (issue #35: PyPI's torch pulled 15 nvidia packages into a CPU Space).

    Where this ran, PyTorch's own index (the file's ``--extra-index-url``) was out of reach (pip warns and goes
    on), so torch's ``+cpu`` build came from the machine's local wheel (its pip ``find-links``), the rest from
    PyPI; a real Space build on the Hub was not tried."""
    import subprocess
    import sys

    from packaging.requirements import InvalidRequirement, Requirement

    if not _index_answers():
        pytest.skip("no package index answers (pypi.org): the resolver dry run needs one")
    run = _hub_base_run(tmp_path, "d" * 40) if what == "demo-space" else tmp_path
    [target] = [t for t in hub.plan_push(run, "bob/my-sql", what) if t.what == what]
    files = dict(target.files)
    [wheel] = [local for path, local in files.items() if path.endswith(".whl")]
    lines = []
    for line in files["requirements.txt"].decode("utf-8").splitlines():
        try:
            local = Requirement(line).name == "slmsql-hub"
        except InvalidRequirement:  # comments and the index option
            local = False
        lines.append(f"slmsql-hub @ {Path(wheel).resolve().as_uri()}" if local else line)
    assert any("download.pytorch.org/whl/cpu" in line for line in lines)  # the pushed index line stays
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("\n".join(lines) + "\n", encoding="utf-8")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--retries", "0", "--timeout", "30", "--report", str(report), "-r", str(requirements)],
        env=clean_env(), capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    installs = {entry["metadata"]["name"].lower(): entry["metadata"]["version"]
                for entry in json.loads(report.read_text())["install"]}  # fmt: skip
    gpu = sorted(name for name in installs if name.startswith(("nvidia-", "triton")) or "cuda" in name)
    assert gpu == [], gpu
    assert installs["torch"].endswith("+cpu") and installs["slmsql-hub"]


def test_a_wrong_hub_pin_of_any_stage_is_one_line_before_the_first_stage_runs(tmp_path):
    """The Qwen study's base from the Hub at a revision it does not have: exit 2 naming the stage, and no stage ran
    (today: `base` and `sft2` report done without asking the Hub; the filter fails minutes in)."""
    import yaml

    recipes = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes" / "qwen2.5-coder-1.5b", recipes)
    study = yaml.safe_load((recipes / "study.yaml").read_text(encoding="utf-8"))
    for stage in study["stages"]:
        if stage["name"] == "base":
            stage["hub"] = {"repo_id": BASE_ID, "revision": "f" * 40}
    (recipes / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False), encoding="utf-8")
    with HubServer({TOKEN: "alice"}) as server:
        env = hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
        python_json(
            """
            import sys
            from huggingface_hub import HfApi
            HfApi().create_repo(sys.argv[1])
            HfApi().upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id=sys.argv[1])
            print("{}")
            """,
            env, tmp_path, BASE_ID,
        )  # fmt: skip
        run = tmp_path / "run"
        done = slmsql(["quickstart", "--recipes", str(recipes), "--out", str(run)], env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "stage 'base'" in done.stderr and f"no revision '{'f' * 40}'" in done.stderr
    assert "Traceback" not in done.stderr and "[1/" not in done.stdout  # no stage started
    assert not (run / "base").exists()


@pytest.mark.slow
def test_after_a_new_commit_to_the_base_a_fresh_cache_still_loads_the_pinned_weights(tmp_path):
    with HubServer({TOKEN: "alice"}) as server:
        env = hub_client_env(server.endpoint, tmp_path / "home", TOKEN)
        pinned = upload_folder(env, FIXTURE_RUN / "base", BASE_ID)
        run = _hub_base_run(tmp_path, pinned)
        done = slmsql(["push", str(run), "--repo-id", GRPO_ID, "--what", "model,demo-space"], env)
        assert done.returncode == 0, done.stderr[-3000:]
        grpo_commit = server.state.repos[("model", GRPO_ID)].branches["main"]

        commit_moved_weights(env, tmp_path, FIXTURE_RUN / "base" / "model.safetensors", BASE_ID)
        assert server.state.repos[("model", BASE_ID)].branches["main"] != pinned

        fresh = hub_client_env(server.endpoint, tmp_path / "fresh", TOKEN)  # a fresh cache: only the Hub id
        result = load_adapter_base(fresh, tmp_path, FIXTURE_RUN / "base" / "model.safetensors", GRPO_ID)
        result["space"] = python_json(
            """
            import json, sys
            from huggingface_hub import hf_hub_download
            print(json.dumps(json.load(open(hf_hub_download(sys.argv[1], "space_config.json", repo_type="space")))))
            """,
            fresh, tmp_path, f"{GRPO_ID}-demo",
        )  # fmt: skip
    assert result["compared"] > 0 and result["same"], result
    assert result["revision"] == pinned
    space = result["space"]
    assert space["base_model"] == {"repo_id": BASE_ID, "revision": pinned}
    assert space["grpo_adapter"] == {"repo_id": GRPO_ID, "revision": grpo_commit}
