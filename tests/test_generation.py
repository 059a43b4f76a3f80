"""Batched generation: left padding, determinism, seeding, K samples per prompt, stopping, adapters."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from _tiny_model import build_model, build_tokenizer, save_random_policy, train_to_answer

from slmsql_hub.errors import UsageError
from slmsql_hub.generation import (
    GenerationConfig,
    generate,
    generate_completions,
    hf,
    load_policy,
    render_prompts,
    stop_token_ids,
    use_adapter,
)

QUESTIONS = (
    "How many singers?",
    "List the names of all stadiums ordered by capacity and year of opening",
    "x",
    "Show the name and age of every singer older than 30",
)
CHATS = [[{"role": "user", "content": q}] for q in QUESTIONS]

# The memorised answers continue past <|im_end|>: a generator that did not stop would return the tail too.
ANSWERS = {
    "How many singers?": ("SELECT count(*) FROM singer", " WHERE age > 30"),
    "Names of stadiums?": ("SELECT name FROM stadium", " ORDER BY year"),
}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    """A random tiny Qwen2 whose greedy output depends on the whole prompt."""
    tokenizer = build_tokenizer()
    return build_model(tokenizer), tokenizer


@pytest.fixture(scope="module")
def trained():
    """A tiny Qwen2 that answers two questions and then keeps talking after <|im_end|>.

    Its tokenizer's eos is <|endoftext|> (like a Qwen base checkpoint), so stopping at the end of the turn
    must come from <|im_end|> itself.
    """
    tokenizer = build_tokenizer(eos_token="<|endoftext|>")
    model = build_model(tokenizer, seed=1)
    pairs = [
        ([{"role": "user", "content": q}], f"{sql}<|im_end|>{tail}") for q, (sql, tail) in ANSWERS.items()
    ]
    return train_to_answer(model, tokenizer, pairs), tokenizer


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    """The ``tiny`` model saved as a base, and two LoRA adapters with random (non-zero) B matrices."""
    modules = ("q_proj", "v_proj", "o_proj")
    return save_random_policy(tmp_path_factory.mktemp("policy"), {"sft": 1, "grpo": 2}, modules)


GREEDY = GenerationConfig(max_new_tokens=10, batch_size=4)


def sampling(seed=0, k=3, batch_size=2, temperature=1.0, max_new_tokens=10):
    return GenerationConfig(
        do_sample=True,
        num_samples=k,
        seed=seed,
        batch_size=batch_size,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
    )


# ---------------------------------------------------------------- padding, determinism, seeding


def test_left_pad_equals_the_tokenizers_left_padding_and_also_pads_without_a_pad_token(tiny):
    """_left_pad is kept: it gives tokenizer.pad(padding_side="left")'s tensors exactly, and also pads for a
    tokenizer with no pad token (with the stop token), where tokenizer.pad refuses."""
    _, tokenizer = tiny
    encoded = [[5, 6, 7], [8], [9, 10, 11, 12, 13], [14, 15]]
    input_ids, mask = hf._left_pad(encoded, tokenizer.pad_token_id, "cpu")
    library = tokenizer.pad({"input_ids": encoded}, padding=True, padding_side="left", return_tensors="pt")
    assert torch.equal(input_ids, library["input_ids"]) and torch.equal(mask, library["attention_mask"])
    no_pad = build_tokenizer()
    no_pad.pad_token = None
    with pytest.raises(ValueError):
        no_pad.pad({"input_ids": encoded}, padding=True, padding_side="left", return_tensors="pt")
    stops = hf.stop_token_ids(no_pad)
    padded, _ = hf._left_pad(encoded, hf._pad_token_id(no_pad, stops), "cpu")
    assert padded[1, :4].tolist() == [stops[-1]] * 4


def test_prompts_are_left_padded_so_every_row_ends_with_its_prompt(tiny):
    _, tokenizer = tiny
    texts = render_prompts(tokenizer, CHATS)
    encoded = hf._tokenize_prompts(tokenizer, texts)
    input_ids, mask = hf._left_pad(encoded, tokenizer.pad_token_id, "cpu")
    lengths = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert len(set(lengths)) > 1
    assert mask[:, -1].tolist() == [1] * len(texts)
    for row, length in enumerate(lengths):
        assert mask[row].tolist() == [0] * (input_ids.shape[1] - length) + [1] * length
        assert (
            input_ids[row, input_ids.shape[1] - length :].tolist()
            == tokenizer(texts[row], add_special_tokens=False)["input_ids"]
        )
        assert set(input_ids[row, : input_ids.shape[1] - length].tolist()) <= {tokenizer.pad_token_id}


def test_batched_greedy_matches_one_prompt_at_a_time(tiny):
    model, tokenizer = tiny
    batched = generate(model, tokenizer, CHATS, GREEDY, progress=False)
    alone = [generate(model, tokenizer, [chat], GREEDY, progress=False)[0] for chat in CHATS]
    assert batched == alone
    assert len({group[0] for group in batched}) > 1  # the outputs depend on the prompt


def test_greedy_decoding_is_deterministic(tiny):
    model, tokenizer = tiny
    first = generate(model, tokenizer, CHATS, GREEDY, progress=False)
    assert generate(model, tokenizer, CHATS, GREEDY, progress=False) == first


def test_same_seed_gives_same_samples_and_different_seeds_differ(tiny):
    model, tokenizer = tiny
    first = generate(model, tokenizer, CHATS, sampling(seed=7), progress=False)
    again = generate(model, tokenizer, CHATS, sampling(seed=7), progress=False)
    other = generate(model, tokenizer, CHATS, sampling(seed=8), progress=False)
    assert first == again
    assert first != other
    assert any(len(set(group)) > 1 for group in first)  # K samples of one prompt are not copies


def test_seeded_generation_leaves_the_callers_rng_untouched(tiny):
    model, tokenizer = tiny
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    generate(model, tokenizer, CHATS[:2], sampling(seed=5), progress=False)
    assert torch.equal(torch.rand(3), expected)


def test_plain_string_prompts_are_used_verbatim(tiny):
    model, tokenizer = tiny
    texts = render_prompts(tokenizer, CHATS[:2])
    assert texts[0].startswith("<|im_start|>user\nHow many singers?") and texts[0].endswith("assistant\n")
    assert generate(model, tokenizer, texts, GREEDY, progress=False) == generate(
        model, tokenizer, CHATS[:2], GREEDY, progress=False
    )


# ---------------------------------------------------------------- K samples, stopping, token counts


def test_k_completions_per_prompt_come_back_grouped_in_input_order(trained):
    model, tokenizer = trained
    questions = ["Names of stadiums?", "How many singers?", "Names of stadiums?"]
    chats = [[{"role": "user", "content": q}] for q in questions]
    config = sampling(k=4, batch_size=2, temperature=0.05, max_new_tokens=16)
    grouped = generate(model, tokenizer, chats, config, progress=False)
    assert [len(group) for group in grouped] == [4, 4, 4]
    for question, group in zip(questions, grouped):
        assert group == [ANSWERS[question][0]] * 4


def test_k_samples_without_shared_prefill_go_through_num_return_sequences(tiny, monkeypatch):
    model, tokenizer = tiny
    calls = []
    real_generate = model.generate

    def spy(*args, **kwargs):
        calls.append((kwargs["input_ids"].shape[0], kwargs["generation_config"].num_return_sequences))
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(model, "generate", spy)
    config = GenerationConfig(
        do_sample=True, num_samples=8, batch_size=2, max_new_tokens=6, share_prefill=False
    )
    grouped = generate(model, tokenizer, CHATS[:3], config, progress=False)
    assert calls == [(2, 8), (1, 8)]
    assert [len(group) for group in grouped] == [8, 8, 8]


def _prefill_rows(model, monkeypatch):
    """Record the batch size of every forward pass that reads more than one new token (a prefill)."""
    rows = []
    real_forward = model.forward

    def spy(*args, **kwargs):
        input_ids = kwargs.get("input_ids")
        if input_ids is not None and input_ids.shape[1] > 1:
            rows.append(input_ids.shape[0])
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    return rows


def test_shared_prefill_runs_each_prompt_through_the_model_once(tiny, monkeypatch):
    model, tokenizer = tiny
    rows = _prefill_rows(model, monkeypatch)
    grouped = generate(
        model, tokenizer, CHATS[:3], sampling(k=8, batch_size=2, max_new_tokens=6), progress=False
    )
    assert rows == [2, 1]  # prompts, not prompts x K
    assert [len(group) for group in grouped] == [8, 8, 8]
    rows.clear()
    unshared = GenerationConfig(
        do_sample=True, num_samples=8, batch_size=2, max_new_tokens=6, share_prefill=False
    )
    generate(model, tokenizer, CHATS[:3], unshared, progress=False)
    assert rows == [16, 8]


def test_shared_prefill_gives_exactly_the_samples_of_num_return_sequences(tiny):
    model, tokenizer = tiny
    shared = sampling(seed=3, k=4, batch_size=3)
    unshared = GenerationConfig(**{**shared.__dict__, "share_prefill": False})
    with_sharing = generate_completions(model, tokenizer, CHATS, shared, progress=False)
    without = generate_completions(model, tokenizer, CHATS, unshared, progress=False)
    assert with_sharing == without
    assert any(len({c.text for c in group}) > 1 for group in with_sharing)


def test_prompts_are_batched_longest_first_and_returned_in_input_order(trained, monkeypatch):
    model, tokenizer = trained
    widths = []
    real_forward = model.forward

    def spy(*args, **kwargs):
        if kwargs["input_ids"].shape[1] > 1:  # a batch's prefill (each decoding step feeds one token)
            widths.append(kwargs["input_ids"].shape[1])
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    questions = ["How many singers?", "Names of stadiums?", "How many singers?", "Names of stadiums?"]
    chats = [[{"role": "user", "content": q}] for q in questions]
    config = GenerationConfig(max_new_tokens=16, batch_size=2)
    grouped = generate(model, tokenizer, chats, config, progress=False)
    assert [group[0] for group in grouped] == [ANSWERS[q][0] for q in questions]
    lengths = sorted(
        len(tokenizer.apply_chat_template(c, add_generation_prompt=True)["input_ids"]) for c in chats
    )
    assert widths == [
        lengths[-1],
        lengths[1],
    ]  # each batch as wide as its longest prompt, longest batch first


def test_generation_stops_at_im_end_even_when_eos_is_endoftext(trained):
    model, tokenizer = trained
    assert tokenizer.eos_token == "<|endoftext|>"
    chats = [[{"role": "user", "content": q}] for q in ANSWERS]
    grouped = generate_completions(
        model, tokenizer, chats, GenerationConfig(max_new_tokens=24), progress=False
    )
    for (sql, tail), [completion] in zip(ANSWERS.values(), grouped):
        assert completion.text == sql
        assert tail.strip() not in completion.text
        assert completion.finished
        answer_tokens = len(tokenizer(sql, add_special_tokens=False)["input_ids"])
        assert completion.num_tokens == answer_tokens + 1  # the answer and its <|im_end|>


def test_completion_cut_by_max_new_tokens_is_marked_unfinished(tiny):
    model, tokenizer = tiny
    grouped = generate_completions(
        model, tokenizer, CHATS, GenerationConfig(max_new_tokens=5), progress=False
    )
    cut = [c for group in grouped for c in group if not c.finished]
    assert cut, "the random model should run into the token limit"
    assert all(c.num_tokens == 5 for c in cut)


def test_stop_tokens_include_im_end_and_both_eos_ids(trained):
    model, tokenizer = trained
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert stop_token_ids(tokenizer, model) == [im_end, tokenizer.eos_token_id]


def test_generation_restores_training_mode(tiny):
    model, tokenizer = tiny
    model.train()
    try:
        generate(model, tokenizer, CHATS[:1], GREEDY, progress=False)
        assert model.training
    finally:
        model.eval()


# ---------------------------------------------------------------- adapters


def test_adapter_changes_the_output_and_disabling_it_gives_the_base(policy_dir):
    base_model, base_tokenizer = load_policy(policy_dir / "base", device="cpu")
    model, tokenizer = load_policy(policy_dir / "base", policy_dir / "sft", device="cpu")
    expected_base = generate(base_model, base_tokenizer, CHATS, GREEDY, progress=False)
    with use_adapter(model, "default"):
        adapted = generate(model, tokenizer, CHATS, GREEDY, progress=False)
        shared = sampling(seed=1, k=3)
        unshared = GenerationConfig(**{**shared.__dict__, "share_prefill": False})
        assert generate(model, tokenizer, CHATS, shared, progress=False) == generate(
            model, tokenizer, CHATS, unshared, progress=False
        )
    with use_adapter(model, None):
        base_only = generate(model, tokenizer, CHATS, GREEDY, progress=False)
    assert base_only == expected_base
    assert adapted != base_only


def test_switching_between_named_adapters_over_one_base(policy_dir):
    model, tokenizer = load_policy(
        policy_dir / "base", adapters={"sft": policy_dir / "sft", "grpo": policy_dir / "grpo"}, device="cpu"
    )
    assert model.active_adapter == "sft"
    outputs = {}
    for name in ("sft", "grpo", None):
        with use_adapter(model, name):
            outputs[name] = generate(model, tokenizer, CHATS, GREEDY, progress=False)
    assert len({str(v) for v in outputs.values()}) == 3
    with use_adapter(model, "grpo"):
        pass
    assert model.active_adapter == "sft"
    assert generate(model, tokenizer, CHATS, GREEDY, progress=False) == outputs["sft"]
    assert not any(param.requires_grad for param in model.parameters())


def test_unknown_adapter_is_a_usage_error(policy_dir):
    model, _ = load_policy(policy_dir / "base", adapters={"sft": policy_dir / "sft"}, device="cpu")
    with pytest.raises(UsageError, match="unknown adapter 'grpo'"):
        with use_adapter(model, "grpo"):
            pass


def test_adapter_folder_without_adapter_config_is_a_usage_error(policy_dir):
    with pytest.raises(UsageError, match="adapter_config.json"):
        load_policy(policy_dir / "base", policy_dir / "base")


def test_missing_base_model_folder_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        load_policy(tmp_path / "no-such-model")


# ---------------------------------------------------------------- config and vLLM


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"batch_size": -1}, "batch_size"),
        ({"num_samples": 0}, "num_samples"),
        ({"do_sample": True, "temperature": 0.0}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"num_samples": 4}, "do_sample=True"),
        ({"backend": "tgi"}, "backend"),
    ],
)
def test_invalid_generation_config_is_one_usage_error(kwargs, message):
    with pytest.raises(UsageError, match=message):
        GenerationConfig(**kwargs)


def test_vllm_backend_without_vllm_names_the_extra_to_install(monkeypatch, policy_dir):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real_find_spec(name, *a)
    )
    with pytest.raises(UsageError, match=r"pip install 'slmsql-hub\[vllm\]'"):
        GenerationConfig(backend="vllm")
    with pytest.raises(UsageError, match=r"pip install 'slmsql-hub\[vllm\]'"):
        load_policy(policy_dir / "base", backend="vllm")


def test_hub_kernels_are_off_unless_asked_for(policy_dir):
    """transformers turns its Hub kernels on by default and fetches them on a GPU (an offline node then fails
    at the first forward): the policy loaders and the trainers' loader keep them off unless a recipe asks."""
    from transformers import AutoModelForCausalLM

    from slmsql_hub.training.configs import ModelArguments
    from slmsql_hub.training.models import load_model_and_tokenizer

    assert AutoModelForCausalLM.from_pretrained(policy_dir / "base").use_kernels  # the library's default
    model, _ = load_policy(policy_dir / "base", policy_dir / "sft", device="cpu")
    assert model.get_base_model().use_kernels is False
    assert load_policy(policy_dir / "base", device="cpu", use_kernels=True)[0].use_kernels is True
    trained, _, _ = load_model_and_tokenizer(
        ModelArguments(model_name_or_path=str(policy_dir / "base")), None
    )
    assert trained.use_kernels is False
    asked = ModelArguments(model_name_or_path=str(policy_dir / "base"), use_kernels=True)
    assert load_model_and_tokenizer(asked, None)[0].use_kernels is True


# ---------------------------------------------------------------- the KV cache (issue #39)


def test_growing_cache_holds_what_dynamic_cache_holds_through_growth_and_a_batch_repeat():
    from transformers.cache_utils import DynamicCache

    from slmsql_hub.generation.kv_cache import GrowingCache

    torch.manual_seed(0)
    steps = [torch.randn(2, 3, n, 4) for n in (5, 1, 1, 70, 1, 200, 1)]
    growing, dynamic = GrowingCache(), DynamicCache()
    buffers = set()
    for i, step in enumerate(steps):
        if i == 3:  # as the shared prefill does between the prompt and the first new token
            growing.batch_repeat_interleave(2)
            dynamic.batch_repeat_interleave(2)
        for layer in (0, 1):
            got = growing.update(step.repeat_interleave(1 + (i >= 3), 0), -step.repeat_interleave(1 + (i >= 3), 0), layer)
            want = dynamic.update(step.repeat_interleave(1 + (i >= 3), 0), -step.repeat_interleave(1 + (i >= 3), 0), layer)
            assert all(torch.equal(a, b) for a, b in zip(got, want))
        buffers.add(growing.layers[0]._key_buffer.data_ptr())
    assert growing.get_seq_length() == dynamic.get_seq_length() == 279
    assert len(buffers) < len(steps) - 1  # single tokens land in spare room; only growth copies


def _tokens(groups):
    return [[completion.token_ids for completion in group] for group in groups]


def test_generation_decodes_with_the_growing_cache_and_gives_the_dynamic_caches_tokens(tiny, monkeypatch):
    from slmsql_hub.filtering import generate_keyed_samples
    from slmsql_hub.generation.kv_cache import GrowingLayer

    model, tokenizer = tiny
    keyed = sampling(seed=5, k=4, max_new_tokens=12)
    greedy = GenerationConfig(max_new_tokens=12, batch_size=3)
    shared = sampling(seed=3, k=4, batch_size=3, max_new_tokens=12)
    keys = [f"q{i}" for i in range(len(CHATS))]

    def run():
        return (_tokens(generate_keyed_samples(model, tokenizer, CHATS, keys, keyed)),
                _tokens(generate_completions(model, tokenizer, CHATS, greedy, progress=False)),
                _tokens(generate_completions(model, tokenizer, CHATS, shared, progress=False)))  # fmt: skip

    updates = []
    real_update = GrowingLayer.update
    monkeypatch.setattr(GrowingLayer, "update", lambda self, *a, **kw: updates.append(1) or real_update(self, *a, **kw))
    new = run()
    assert updates  # every path decoded with it
    monkeypatch.setattr(hf, "_growing_cache", lambda model: {})  # the library's DynamicCache
    assert run() == new


def test_keyed_sampling_drops_finished_rows_and_draws_exactly_what_generate_draws(trained, monkeypatch):
    from slmsql_hub.filtering import KeyedSampler, sample_seed
    from slmsql_hub.generation import generate_with_processor

    model, tokenizer = trained
    chats = [[{"role": "user", "content": q}] for q in (*ANSWERS, *QUESTIONS)]
    seeds = [sample_seed(0, f"q{i}", j) for i in range(len(chats)) for j in range(6)]

    def draw(drop_finished, share_prefill=True):
        sampler = KeyedSampler(seeds, temperature=1.5)
        return _tokens(generate_with_processor(model, tokenizer, chats, sampler, num_samples=6, max_new_tokens=24,
                                               drop_finished=drop_finished, share_prefill=share_prefill))  # fmt: skip

    batch_rows = []
    real_forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **kw: batch_rows.append(kw["input_ids"].shape[0]) or real_forward(*a, **kw))
    dropping = draw(True)
    # One prefill per prompt, then its 6 samples decode side by side; rows left the batch as they ended.
    assert batch_rows[0] == len(chats) and batch_rows[1] == len(seeds) > batch_rows[-1]
    lengths = {len(ids) for group in dropping for ids in group}
    assert len(lengths) > 2 and max(lengths) <= 24  # rows end at different steps
    batch_rows.clear()
    assert dropping == draw(True, share_prefill=False)  # every row prefilled on its own
    assert batch_rows[0] == len(seeds)
    assert dropping == draw(False)  # generate(): every row prefilled and decoded to the batch's longest


def test_greedy_drops_finished_rows_and_answers_exactly_what_generate_answers(trained, monkeypatch):
    model, tokenizer = trained
    chats = [[{"role": "user", "content": q}] for q in (*ANSWERS, *QUESTIONS)]
    greedy = GenerationConfig(max_new_tokens=24, batch_size=len(chats))
    batch_rows = []
    real_forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **kw: batch_rows.append(kw["input_ids"].shape[0]) or real_forward(*a, **kw))
    dropping = generate_completions(model, tokenizer, chats, greedy, progress=False)
    assert batch_rows[0] == len(chats) > batch_rows[-1]  # rows left the batch as they ended
    lengths = {c.num_tokens for group in dropping for c in group}
    assert len(lengths) > 2 and max(lengths) <= 24
    padded = generate_completions(model, tokenizer, chats, GenerationConfig(**{**greedy.__dict__, "drop_finished": False}), progress=False)
    assert [[(c.token_ids, c.text, c.finished) for c in g] for g in dropping] == [
        [(c.token_ids, c.text, c.finished) for c in g] for g in padded
    ]
