"""benchmarks/gpu_check.py (issue #39): its refusals, the wheels it carries, the generation counter it reads, and
its CPU smoke run end to end (slow), so the GPU check cannot rot between GPUs."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest
import torch
from _scripts import BENCHMARKS, load_benchmark_script
from _tiny_model import build_model, build_tokenizer, one_torch_thread

from slmsql_hub.study.timing import GenerateTimer

REPO = BENCHMARKS.parent


@pytest.fixture(scope="module")
def gpu_check():
    return load_benchmark_script("gpu_check")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_check.py"), *args], cwd=REPO, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without CUDA")
def test_without_cuda_it_refuses_in_one_line_and_exit_2_unless_smoke(tmp_path):
    out = tmp_path / "gc"
    done = _run("--out", str(out))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu_check: no CUDA device here: the GPU check needs one (on CPU run it with --smoke)"
    ]
    assert not out.exists()


def test_a_missing_module_is_one_line_naming_it_and_how_to_carry_it(gpu_check, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpu_check, "CARRIED", (*gpu_check.CARRIED, "no_such_module_for_gpu_check"))
    assert gpu_check.main(["--smoke", "--out", str(tmp_path / "gc")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "missing module(s) no_such_module_for_gpu_check" in line
    assert "benchmarks/gpu_wheels.sh" in line and "make gpu-check" in line
    assert not (tmp_path / "gc").exists()


def test_a_previous_run_is_kept_unless_force(gpu_check, tmp_path, capsys):
    (tmp_path / "gc").mkdir()
    (tmp_path / "gc" / "gpu_check.json").write_text("{}")
    assert gpu_check.main(["--smoke", "--out", str(tmp_path / "gc")]) == 2
    assert "holds a previous run; remove it or pass --force" in capsys.readouterr().err
    assert (tmp_path / "gc" / "gpu_check.json").read_text() == "{}"


def _pins() -> dict[str, str]:
    lines = (BENCHMARKS / "gpu_wheels.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_the_wheels_carry_every_module_the_check_needs_at_the_versions_the_suite_runs(gpu_check):
    pins = _pins()
    assert set(gpu_check.CARRIED) <= set(pins)
    # pyarrow alone is pinned lower (its newest wheel puts the set over 64 MiB); datasets must accept it.
    drift = {n: (v, importlib.metadata.version(n)) for n, v in pins.items() if n != "pyarrow"}
    assert {n: pair for n, pair in drift.items() if pair[0] != pair[1]} == {}
    needs = [r for r in importlib.metadata.requires("datasets") if r.startswith("pyarrow")]
    assert needs == [f"pyarrow>={pins['pyarrow']}"]


def test_generate_timer_counts_new_token_positions_and_throughput():
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    prompt = tokenizer(["SELECT name", "SELECT count(*) FROM"], padding=True, return_tensors="pt")
    with one_torch_thread(), GenerateTimer().timing() as timer:
        out = model.generate(**prompt, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape[1] - prompt["input_ids"].shape[1] == 5
    assert (timer.calls, timer.new_tokens) == (1, 2 * 5)
    assert timer.tokens_per_s() == pytest.approx(10 / timer.seconds)


def test_generate_timer_counts_the_keyed_samplers_own_decoding_loop():
    from slmsql_hub.filtering import KeyedSampler
    from slmsql_hub.generation import generate_with_processor

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    with one_torch_thread(), GenerateTimer().timing() as timer:
        groups = generate_with_processor(model, tokenizer, ["SELECT name", "SELECT"], KeyedSampler(range(6)),
                                         num_samples=3, max_new_tokens=4)  # fmt: skip
    longest = max(c.num_tokens for group in groups for c in group)
    assert (timer.calls, timer.new_tokens) == (1, 6 * longest) and timer.seconds > 0


@pytest.mark.slow
def test_the_smoke_run_measures_every_stage_on_cpu(tmp_path):
    out = tmp_path / "gc"
    done = _run("--smoke", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["device"] == {"device": "cpu", "name": "cpu", "dtype": "float32", "bf16": False, "smoke": True}
    assert report["failed_stage"] is None
    stages = report["stages"]
    assert list(stages) == ["world", "base", "sft1", "sft2", "filter", "grpo", "eval"]
    assert sum(s["wall_s"] for s in stages.values()) <= report["wall_s"] <= report["process_s"]
    for name, stage in stages.items():
        assert stage["wall_s"] > 0 and stage["peak_gpu_mib"] is None, name
        generated = stage["generate"]
        assert (generated["calls"] > 0) == (name in ("filter", "grpo", "eval")), name
        if generated["calls"]:
            assert generated["new_tokens"] > 0 and generated["tokens_per_s"] > 0, name
    sizes = report["sizes"]
    for name, steps in {"base": sizes["base_steps"], "sft1": sizes["sft_steps"], "grpo": sizes["grpo_steps"]}.items():
        assert stages[name]["steps"] == steps and 0 < stages[name]["mean_step_s"] <= stages[name]["train_s"]
    grpo = stages["grpo"]
    assert len(grpo["step_s"]) == sizes["grpo_steps"]
    assert 0 < grpo["reward"]["share"] < 1 and set(grpo["reward"]["by_reward_seconds"]) == {"execution", "format"}
    assert grpo["split"]["generation_s"] == grpo["generate"]["seconds"]
    assert "stage     wall s" in done.stdout and "GRPO: reward" in done.stdout
    assert f"written: {out / 'gpu_check.json'}" in done.stdout
