"""A tiny but complete run folder for the comparison Space's tests (``tests/test_space*.py``).

It has the layout of ``outputs/quickstart/`` (see the run-folder contract): a small embedded world built by the
project's own builder, a tiny Qwen2 base with its tokenizer, the SFT adapter (``sft/stage2``) and the GRPO
adapter (``grpo``), GRPO telemetry for two attempts, a real ``eval/`` written by :func:`run_eval` with these
very adapters, and a model card with a TL;DR line.

The policies give known answers whatever the question, so the Space's verdicts are known in advance: the
base (and so the SFT adapter, an identity LoRA) answers :data:`SFT_SQL`; the GRPO adapter, a LoRA on the MLPs
trained on top, answers :data:`GRPO_SQL`. On the world question :data:`QUESTION` (database :data:`DB_ID`) SFT
matches the gold and GRPO runs but returns other rows; on the other databases both fail (no such table).

How it is made fast: the base's attention output projections are zero and frozen, so the model is a bigram
model (each next token depends on the current token only) and it learns the answer from one short sequence in
a second, then gives it after any prompt, however long. The tokenizer is trained with the two answers in its
corpus, so each answer is a chain of distinct tokens (a bigram model could not spell ``student`` letter by
letter). Building the whole folder takes about fifteen seconds on two CPU cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from _helpers import write_prompt_summary
from _tiny_model import build_model, build_tokenizer, one_torch_thread, save_trained_adapter, train_to_answer

DB_ID = "music_school"
QUESTION = "Count the number of students."
SFT_SQL = "SELECT count(*) FROM student"
GRPO_SQL = "SELECT name FROM student"
CARD_TLDR = "GRPO did not move execution accuracy on the tiny test world"
LORA_MODULES = ["gate_proj", "up_proj", "down_proj"]  # not attention: the policies stay bigram models
TELEMETRY_STEPS = 6


def _answer(sql: str) -> str:
    return f"{sql}<|im_end|>"


def _tokenizer():
    """A byte-level BPE whose merges spell both answers."""
    return build_tokenizer(
        400, corpus=[SFT_SQL, GRPO_SQL] * 20 + ["Answer with one SQLite query. CREATE TABLE"]
    )


def _bigram_base(tokenizer):
    """The tiny Qwen2 with attention switched off (output projections zero and frozen)."""
    model = build_model(tokenizer)
    model.config.max_position_embeddings = (
        4096  # rotary positions have no hard limit; prompts are ~600 tokens
    )
    for layer in model.model.layers:
        torch.nn.init.zeros_(layer.self_attn.o_proj.weight)
        layer.self_attn.o_proj.weight.requires_grad_(False)
    return model


def _telemetry_line(step: int, zero_std: float) -> dict:
    return {
        "step": step,
        "kind": "train",
        "epoch": round(step / TELEMETRY_STEPS, 4),
        "loss": 0.01 * step,
        "reward": 0.4 + 0.01 * step,
        "reward_std": 0.3 - 0.01 * step,
        "frac_reward_zero_std": zero_std,
        "grad_norm": 0.5 + 0.05 * step,
        "completions/mean_length": 30.0 + step,
        "sql/correct_rate": 0.4,
        "step_time": 2.0,
    }


def _write_telemetry(folder: Path, zero_std: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [_telemetry_line(step, zero_std) for step in range(1, TELEMETRY_STEPS + 1)]
    (folder / "telemetry.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def _record_training_databases(root: Path, world: Path) -> None:
    """What `slmsql train sft` and `slmsql train grpo` record of their data, for the world's training splits:
    the SFT question record of both stages (with the real writer) and GRPO's ``data.database_names``. The
    world's held-out database is in none of them."""
    from slmsql_hub.data.benchmarks import load_world
    from slmsql_hub.data.sft_record import row_databases, row_keys, write_sft_record

    continued = None
    for stage, split in ((1, "foundation"), (2, "grounding")):
        rows = load_world(world, split)
        folder = root / "sft" / f"stage{stage}"
        record = write_sft_record(
            folder, row_keys(rows), stage=stage, continued=continued, databases=row_databases(rows)
        )
        summary_file = folder / "run_summary.json"
        summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {"kind": "test"}
        summary["sft_questions"] = {**record.summary(), "file": record.path.name}
        summary_file.write_text(json.dumps(summary))
        continued = str(folder)
    summary_file = root / "grpo" / "run_summary.json"
    summary = json.loads(summary_file.read_text())
    summary["data"] = {"database_names": sorted(set(row_databases(load_world(world, "rl_pool"))))}
    summary_file.write_text(json.dumps(summary))


def build_space_run(root: Path) -> Path:
    """Build the run folder under ``root`` and return ``root``."""

    from slmsql_hub.data.benchmarks import load_world
    from slmsql_hub.evaluation import EvalConfig, run_eval
    from slmsql_hub.world import WorldSizes, build_world

    root = Path(root)
    world = root / "world"
    build_world(world, seed=0, sizes=WorldSizes(foundation=20, grounding=10, rl_pool=5, dev=20, test=5))
    rows = list(load_world(world, "dev"))
    if not any(row["db_id"] == DB_ID and row["question"] == QUESTION for row in rows):
        raise RuntimeError(
            f"the tiny world's dev split no longer has {QUESTION!r}; update tests/_space_run.py"
        )

    chat = [{"role": "user", "content": "q"}]  # any prompt will do: the model only sees the last token
    with one_torch_thread():
        tokenizer = _tokenizer()
        base = train_to_answer(
            _bigram_base(tokenizer), tokenizer, [(chat, _answer(SFT_SQL))], steps=60, lr=3e-2
        )
        base.save_pretrained(root / "base")
        tokenizer.save_pretrained(root / "base")
        for folder, sql, steps in ((root / "sft" / "stage2", SFT_SQL, 0), (root / "grpo", GRPO_SQL, 80)):
            pairs = [(chat, _answer(sql))]
            save_trained_adapter(base, tokenizer, folder, LORA_MODULES, pairs, steps=steps, lr=2e-2)
            write_prompt_summary(folder, sample_rows=0)

    _write_telemetry(root / "grpo_attempt1", zero_std=0.9)
    _write_telemetry(root / "grpo", zero_std=0.2)
    _record_training_databases(root, world)

    config = EvalConfig(
        model_name_or_path=str(root / "base"),
        sft_adapter=str(root / "sft" / "stage2"),
        grpo_adapter=str(root / "grpo"),
        dtype="float32",
        device="cpu",
        benchmarks=["world:dev"],
        world_root=str(world),
        max_new_tokens=16,
        batch_size=8,
        timeout_s=10.0,
        sandbox_workers=1,
        output_dir=str(root / "eval"),
    )
    run_eval(config, progress=False)

    card = root / "card"
    card.mkdir(parents=True, exist_ok=True)
    (card / "README.md").write_text(
        "---\nlicense: apache-2.0\n---\n\n# tiny-grpo\n\nA LoRA adapter for Text-to-SQL.\n\n"
        f"> **TL;DR — {CARD_TLDR}.** Both policies were scored on the same questions.\n\n"
        "## Results\n\n| Benchmark | SFT EX | GRPO EX |\n|---|---:|---:|\n| world_dev | 5.0 | 0.0 |\n\n"
        "## What GRPO did\n\nNothing much.\n"
    )
    return root


# ----------------------------------------------------------------------------------------------------------
# Shared by tests/test_space.py and tests/test_space_browser.py
# ----------------------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
DEMO_DIR = REPO / "spaces" / "demo"
ARTIFACTS = REPO / "test-artifacts"


def space_run_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder under the session's temporary root, built by the first caller, reused by the next."""
    root = tmp_path_factory.getbasetemp() / "space_run"
    if not (root / ".complete").is_file():
        shutil.rmtree(root, ignore_errors=True)
        build_space_run(root)
        (root / ".complete").write_text("ok\n")
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def launched_app(
    args: list[str],
    log: Path,
    env: dict[str, str] | None = None,
    timeout_s: float = 180.0,
    app: Path = DEMO_DIR / "app.py",
    cwd: Path | None = None,
):
    """Run ``python spaces/demo/app.py ARGS`` (or another copy, ``app``, in ``cwd``) on a free port (given through
    GRADIO_SERVER_PORT); yield its URL.

    ``env`` replaces the environment (default: this process's). The app's output goes to ``log``; it is stopped (SIGTERM, then SIGKILL) when the block ends.
    """
    port = free_port()
    base = os.environ if env is None else env
    full_env = {**base, "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False"}
    url = f"http://127.0.0.1:{port}/"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(app), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
        )
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"the app exited with {process.returncode}:\n{log.read_text()[-4000:]}"
                    )
                try:
                    with urllib.request.urlopen(url + "config", timeout=2) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the app did not come up in {timeout_s} s:\n{log.read_text()[-4000:]}"
                    )
                time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)
