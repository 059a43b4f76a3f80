"""Hub revisions: a pinned ``model_revision`` / ``adapter_revision`` reaches ``from_pretrained`` on every path that
loads a model (SFT, GRPO, the filter's and the evaluation's ``load_policy``) and is recorded in the run's files.

A tiny base model and a LoRA adapter are pushed twice each to the local Hub-API server (:mod:`hub_server`) with
different weights; loading with the first commit's sha must give the first weights, loading unpinned the second.
The loads run in a fresh interpreter whose ``huggingface_hub`` points at the server (``HF_ENDPOINT``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _helpers import hub_client_env, python_json
from _tiny_model import build_model, build_tokenizer, save_random_adapter
from hub_server import HubServer

from slmsql_hub.errors import UsageError

TOKEN = "hf_test_alice"

LOADS = r"""
import json, sys
import torch
from slmsql_hub.generation import load_policy
from slmsql_hub.training.models import load_model_and_tokenizer
from slmsql_hub.training.configs import GRPOTrainingConfig, ModelArguments, SFTTrainingConfig
from slmsql_hub.runtime import loaded_revisions
from huggingface_hub import HfApi

folders = json.loads(sys.argv[1])
api = HfApi()
shas = {}
for repo, versions in (("alice/tiny-base", folders["base"]), ("alice/tiny-adapter", folders["adapter"])):
    api.create_repo(repo, exist_ok=True)
    shas[repo] = [api.upload_folder(folder_path=v, repo_id=repo).oid for v in versions]
base_v1, adapter_v1 = shas["alice/tiny-base"][0], shas["alice/tiny-adapter"][0]

def weights(model):
    state = model.state_dict()
    base = next(v for k, v in state.items() if k.endswith("embed_tokens.weight"))
    lora = sum(float(v.double().sum()) for k, v in state.items() if "lora_B" in k)
    return [round(float(base.double().sum()), 6), round(lora, 6)]

out = {"shas": shas}
model, _ = load_policy("alice/tiny-base", "alice/tiny-adapter", revision=base_v1,
                       adapter_revisions={"default": adapter_v1}, device="cpu")
out["load_policy_pinned"] = weights(model)
model, _ = load_policy("alice/tiny-base", "alice/tiny-adapter", device="cpu")
out["load_policy_main"] = weights(model)
args = ModelArguments(model_name_or_path="alice/tiny-base", model_revision=base_v1, adapter_revision=adapter_v1)
training = GRPOTrainingConfig(output_dir="o", adapter_path="alice/tiny-adapter", report_to="none", use_cpu=True,
                              num_generations=2, per_device_train_batch_size=2)
model, _, tokenizer = load_model_and_tokenizer(args, training.adapter_path)
out["grpo_pinned"] = weights(model)
out["grpo_tokenizer_size"] = len(tokenizer)
out["grpo_recorded"] = loaded_revisions("alice/tiny-base", base_v1, "alice/tiny-adapter", adapter_v1)
out["unpinned_recorded"] = loaded_revisions("alice/tiny-base", None, "alice/tiny-adapter", None)
training = SFTTrainingConfig(output_dir="o", stage=2, adapter_path="alice/tiny-adapter", report_to="none",
                             use_cpu=True)
model, _, _ = load_model_and_tokenizer(args, training.adapter_path)
out["sft_pinned"] = weights(model)
print(json.dumps(out))
"""


def _save_version(root: Path, seed: int) -> dict[str, str]:
    """One version of the base (model + tokenizer) and of a non-zero LoRA adapter, from ``seed``."""
    tokenizer = build_tokenizer()
    base, adapter = root / f"base_v{seed}", root / f"adapter_v{seed}"
    model = build_model(tokenizer, seed=seed)
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    save_random_adapter(adapter, tokenizer, seed, lora_alpha=8)
    return {"base": str(base), "adapter": str(adapter)}


def _expected(folder: str, lora: bool) -> float:
    from safetensors.torch import load_file

    name = "adapter_model.safetensors" if lora else "model.safetensors"
    state = load_file(str(Path(folder) / name))
    if lora:
        return round(sum(float(v.double().sum()) for k, v in state.items() if "lora_B" in k), 6)
    return round(float(next(v for k, v in state.items() if k.endswith("embed_tokens.weight")).double().sum()), 6)


@pytest.fixture(scope="module")
def loads(tmp_path_factory):
    root = tmp_path_factory.mktemp("revisions")
    v1, v2 = _save_version(root, 1), _save_version(root, 2)
    folders = {"base": [v1["base"], v2["base"]], "adapter": [v1["adapter"], v2["adapter"]]}
    with HubServer({TOKEN: "alice"}) as server:
        env = hub_client_env(server.endpoint, root / "home", TOKEN)
        out = python_json(LOADS, env, root, json.dumps(folders))
    out["v1"] = [_expected(v1["base"], False), _expected(v1["adapter"], True)]
    out["v2"] = [_expected(v2["base"], False), _expected(v2["adapter"], True)]
    return out


def test_pinned_revisions_load_the_first_commits_weights_on_every_path(loads):
    assert loads["v1"] != loads["v2"]  # the two commits differ in both the base and the adapter
    for path in ("load_policy_pinned", "grpo_pinned", "sft_pinned"):
        assert loads[path] == loads["v1"], path
    assert loads["load_policy_main"] == loads["v2"]  # unpinned: whatever main is today
    assert loads["grpo_tokenizer_size"] == len(build_tokenizer())  # from the pinned base


def test_the_run_records_the_revisions_asked_for_and_the_commit_it_got(loads):
    base_v1 = loads["shas"]["alice/tiny-base"][0]
    adapter_v1 = loads["shas"]["alice/tiny-adapter"][0]
    assert loads["grpo_recorded"] == {
        "model_revision": base_v1,
        "model_commit": base_v1,
        "adapter_revision": adapter_v1,
        "adapter_commit": adapter_v1,
    }
    # Unpinned, the record names the commit main pointed to when the run loaded it.
    assert loads["unpinned_recorded"]["model_commit"] == loads["shas"]["alice/tiny-base"][1]
    assert loads["unpinned_recorded"]["adapter_commit"] == loads["shas"]["alice/tiny-adapter"][1]
    assert loads["unpinned_recorded"]["model_revision"] is None


def test_a_revision_for_an_adapter_that_is_not_loaded_is_refused(tmp_path):
    from slmsql_hub.generation import load_policy

    folders = _save_version(tmp_path, 1)
    with pytest.raises(UsageError, match="adapter_revisions names adapter"):
        load_policy(folders["base"], adapters={"sft": folders["adapter"]}, adapter_revisions={"grpo": "v1"})
