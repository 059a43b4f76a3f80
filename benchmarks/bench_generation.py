"""Benchmark of K-sample generation, three ways side by side in one run on the same model and prompts:

1. one ``generate`` call per sample (the naive loop: a separate prefill and decode for every sample),
2. one call per prompt batch with ``num_return_sequences=K`` (``share_prefill=False``: K rows per prompt,
   but the prompt is prefilled K times),
3. :func:`slmsql_hub.generation.generate` as shipped (K rows per prompt, the prompt prefilled ONCE and its
   KV cache repeated K times).

The pass-rate filter and GRPO draw K completions for every prompt; the target is (1)/(3) >= 4x at K=8.

The model is the world's trained base when ``--model DIR`` points at one (``slmsql train base`` output:
model + tokenizer), else a randomly initialised tiny ``Qwen2ForCausalLM`` of the world's default shape
(about 0.9M parameters) with a byte-level BPE tokenizer learnt on the spot. A random model seldom ends its
turn, so nearly every completion runs to ``--max-new-tokens`` in every arm; a trained one stops early, which
favours the per-sample loop (a batch decodes until its longest row ends). Each arm reports its tokens/s.

Usage::

    python benchmarks/bench_generation.py                         # random tiny model, 8 prompts, K=8
    python benchmarks/bench_generation.py --model outputs/world/base --prompts 16 --k 8 --max-new-tokens 48
    python benchmarks/bench_generation.py --model outputs/world/base --adapter outputs/world/sft/stage2 \\
        --world outputs/world --max-new-tokens 96                  # the pass-rate filter's real load
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from pathlib import Path

import torch

from slmsql_hub.errors import UsageError
from slmsql_hub.generation import GenerationConfig, generate_completions, load_policy

TARGET_RATIO = 4.0

_QUESTIONS = (
    "How many singers do we have?",
    "What is the average, minimum, and maximum age of all singers from France?",
    "Show the name and the release year of the song by the youngest singer.",
    "List all song names by singers above the average age.",
    "Show location and name for all stadiums with a capacity between 5000 and 10000.",
    "What is the maximum capacity and the average of all stadiums?",
    "Show the stadium name and the number of concerts in each stadium.",
    "Find the number of concerts happened in the stadium with the highest capacity.",
    "Which year has most number of concerts?",
    "Show countries where a singer above age 40 and a singer below 30 are from.",
    "Find the name and capacity of the stadium where a concert took place in 2014 or after.",
    "What are the names of the singers who performed in a concert in 2014?",
)
_SCHEMA = (
    "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, song_name TEXT, "
    "song_release_year TEXT, age INTEGER, is_male INTEGER);\n"
    "CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, location TEXT, name TEXT, capacity INTEGER, "
    "highest INTEGER, lowest INTEGER, average INTEGER);\n"
    "CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, theme TEXT, "
    "stadium_id INTEGER REFERENCES stadium(stadium_id), year TEXT);"
)


def build_prompts(count: int) -> list[list[dict[str, str]]]:
    """``count`` chat prompts shaped like the study's: a system turn, then the schema and a question."""
    return [
        [
            {"role": "system", "content": "You write one SQLite query that answers the question."},
            {"role": "user", "content": f"{_SCHEMA}\n\nQuestion: {_QUESTIONS[i % len(_QUESTIONS)]}"},
        ]
        for i in range(count)
    ]


def world_prompts(world: Path, adapter: Path | None, count: int) -> list[list[dict[str, str]]]:
    """The first ``count`` dev questions of a built world, prompted as ``slmsql eval`` prompts them."""
    from measure_world_ex import load_split

    from slmsql_hub.evaluation import build_prompts, resolve_prompt_config
    from slmsql_hub.sql import Sandbox

    rows, _ = load_split(world, "dev", None, 0)
    with Sandbox() as sandbox:
        return build_prompts(rows[:count], resolve_prompt_config(adapter), sandbox)


def random_tiny_policy(seed: int = 0):
    """A random tiny Qwen2 (the world's default shape) and a byte-level BPE tokenizer learnt here."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from slmsql_hub.world.tokenizer import train_tokenizer

    texts = [_SCHEMA, *_QUESTIONS] * 20
    tokenizer = train_tokenizer(texts, vocab_size=1024)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.eval()
    return model, tokenizer


def _time(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--model", type=Path, help="a trained base (model + tokenizer folder); default: random")
    add("--adapter", type=Path, help="optional LoRA adapter on top of --model")
    add("--world", type=Path, help="take the prompts from this world's dev split (default: built-in questions)")
    add("--prompts", type=int, default=8, help="number of prompts (default 8)")
    add("--k", type=int, default=8, help="samples per prompt (default 8)")
    add("--max-new-tokens", type=int, default=32, help="tokens per completion (default 32)")
    add("--batch-size", type=int, default=8, help="prompts per call in the K-batched arm")
    add("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    add("--seed", type=int, default=0)
    add("--json", type=Path, help="also write the numbers to this JSON file")
    return parser


def _setup(args: argparse.Namespace) -> tuple:
    """``(model, tokenizer, model name, prompts)`` for the arguments; UsageError on bad ones."""
    if args.prompts < 1 or args.k < 2 or args.max_new_tokens < 1:
        raise UsageError("--prompts and --max-new-tokens must be >= 1 and --k >= 2")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model is not None:
        model, tokenizer = load_policy(args.model, args.adapter, device="cpu", dtype="float32")
        model_name = str(args.model) + (f" + {args.adapter}" if args.adapter else "")
    else:
        model, tokenizer = random_tiny_policy(args.seed)
        model_name = "random tiny Qwen2 (world default shape)"
    prompts = world_prompts(args.world, args.adapter, args.prompts) if args.world else build_prompts(args.prompts)
    return model, tokenizer, model_name, prompts


def _time_arms(model, tokenizer, prompts: list, args: argparse.Namespace) -> dict[str, dict]:
    """Time the three arms on the same prompts, printing each; returns seconds, tokens and calls per arm."""
    shared = GenerationConfig(
        do_sample=True, num_samples=args.k, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
        seed=args.seed,
    )  # fmt: skip
    unshared = GenerationConfig(**{**shared.__dict__, "share_prefill": False})
    single = GenerationConfig(
        do_sample=True, num_samples=1, batch_size=1, max_new_tokens=args.max_new_tokens, seed=args.seed
    )
    # Warm-up (first-call allocations, lazy imports) outside the timings.
    generate_completions(model, tokenizer, prompts[:1], single, progress=False)

    def one_call_per_sample():
        out = []
        for prompt in prompts:
            samples = []
            for k in range(args.k):
                config = GenerationConfig(**{**single.__dict__, "seed": args.seed + k})
                samples.append(generate_completions(model, tokenizer, [prompt], config, progress=False)[0][0])
            out.append(samples)
        return out

    calls = len(range(0, args.prompts, args.batch_size))
    arms = {
        "one call per sample": (one_call_per_sample, args.prompts * args.k),
        "num_return_sequences=K": (
            lambda: generate_completions(model, tokenizer, prompts, unshared, progress=False),
            calls,
        ),
        "generate() (shared prefill)": (
            lambda: generate_completions(model, tokenizer, prompts, shared, progress=False),
            calls,
        ),
    }
    results: dict[str, dict] = {}
    for name, (run, n_calls) in arms.items():
        seconds, grouped = _time(run)
        tokens = sum(c.num_tokens for group in grouped for c in group)
        results[name] = {"seconds": seconds, "tokens": tokens, "calls": n_calls}
        print(
            f"{name:28s}: {seconds:8.2f} s  ({tokens} tokens, {tokens / seconds:7.0f} tok/s, {n_calls} calls)"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        model, tokenizer, model_name, prompts = _setup(args)
    except UsageError as err:
        print(f"bench_generation: error: {err}", file=sys.stderr)
        return 2

    params = sum(p.numel() for p in model.parameters())
    print(f"model: {model_name} ({params / 1e6:.2f}M parameters), torch threads: {torch.get_num_threads()}")
    print(f"load: {args.prompts} prompts x K={args.k} samples, {args.max_new_tokens} new tokens max")
    results = _time_arms(model, tokenizer, prompts, args)

    baseline = results["one call per sample"]["seconds"]
    ratio = baseline / results["generate() (shared prefill)"]["seconds"]
    ratio_nrs = baseline / results["num_return_sequences=K"]["seconds"]
    verdict = "meets" if ratio >= TARGET_RATIO else "MISSES"
    print(
        f"speed-up over one call per sample: num_return_sequences {ratio_nrs:.1f}x, generate() {ratio:.1f}x"
    )
    print(f"generate() {verdict} the >= {TARGET_RATIO:.0f}x target")
    if args.json:
        numbers = {
            "model": model_name,
            "parameters": params,
            **{k: getattr(args, k) for k in ("prompts", "k", "max_new_tokens", "batch_size")},
            "torch_threads": torch.get_num_threads(),
            "arms": results,
            "ratio": ratio,
            "ratio_num_return_sequences": ratio_nrs,
            "target_ratio": TARGET_RATIO,
            "platform": platform.platform(),
            "torch": torch.__version__,
        }
        args.json.write_text(json.dumps(numbers, indent=2))
    return 0

if __name__ == "__main__":
    sys.exit(main())
