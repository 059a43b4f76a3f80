"""The training stages' data preparation, old path vs new, side by side in one run (issue #39).

``drop_too_long`` (SFT stages 1-2, GRPO) measures each example's chat length in tokens. The old path called
``apply_chat_template`` once per row (a Jinja render and a one-text ``encode_batch`` each); the new one,
:func:`slmsql_hub.training.common.chat_lengths`, makes one batched call. Both are timed here in CPU seconds of
this process (``time.process_time``: the machine's cores are shared, wall time would measure the neighbours),
on the world's SFT examples and GRPO prompts, and their lengths are checked equal (exit 1 otherwise).

    .venv/bin/python benchmarks/bench_training_prep.py                                   # outputs/quickstart
    .venv/bin/python benchmarks/bench_training_prep.py --run-dir RUN --repeats 3 --json prep.json

Needs a run folder with ``world/`` and ``base/`` (``slmsql quickstart --until base``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def old_chat_lengths(dataset, tokenizer) -> list[int]:
    """The path before issue #39: one ``apply_chat_template`` call per row (the reference)."""
    examples = "completion" in dataset.column_names
    chats = [p + c for p, c in zip(dataset["prompt"], dataset["completion"])] if examples else dataset["prompt"]
    return [
        len(tokenizer.apply_chat_template(chat, add_generation_prompt=not examples, return_dict=True)["input_ids"])
        for chat in chats
    ]


def _cpu_seconds(fn, data, tokenizer, repeats: int) -> tuple[float, object]:
    """The best of ``repeats`` CPU times of ``fn(data, tokenizer)``, and what it returned."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        out = fn(data, tokenizer)
        best = min(best, time.process_time() - start)
    return best, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=str(REPO / "outputs" / "quickstart"))
    parser.add_argument("--repeats", type=int, default=2, help="timed repeats of each path (the best is kept)")
    parser.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    from slmsql_hub.data.prompts import PromptConfig
    from slmsql_hub.training.common import chat_lengths, load_datasets, to_prompt_completion

    run = Path(args.run_dir)
    tokenizer = AutoTokenizer.from_pretrained(run / "base")
    prompt = PromptConfig(sample_rows=0, max_value_chars=40)  # the world recipes' prompt
    sft = to_prompt_completion(load_datasets([run / "world" / "datasets" / "foundation"]), prompt)
    cases = {"sft_stage1 examples": sft, "grpo prompts": sft.remove_columns(["completion"])}
    rows, same = {}, True
    for name, data in cases.items():
        old_s, old = _cpu_seconds(old_chat_lengths, data, tokenizer, args.repeats)
        new_s, new = _cpu_seconds(chat_lengths, data, tokenizer, args.repeats)
        same &= old == new
        rows[name] = {"rows": len(data), "old_cpu_s": old_s, "new_cpu_s": new_s, "speedup": old_s / new_s,
                      "identical": old == new}  # fmt: skip
        print(f"{name:22s} {len(data):5d} rows  old {old_s:7.3f} s  new {new_s:7.3f} s  "  # noqa: T201
              f"x{old_s / new_s:5.1f}  lengths identical: {old == new}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
