"""``slmsql diagnose`` (slmsql_hub.diagnosis): bad input before loading, keys apart from the filter's, the analysis
on hand-made records, the outputs on a tiny policy, and (slow) the chain filter -> diagnose on a trained one."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import yaml
from _helpers import music_spider

from slmsql_hub.cli import main as cli_main
from slmsql_hub.diagnosis import DiagnoseConfig, run_diagnose, sample_key
from slmsql_hub.diagnosis.analysis import class_stats, consistency, prediction
from slmsql_hub.diagnosis.config import NAMESPACE
from slmsql_hub.filtering import sample_seed
from slmsql_hub.run.guard import lock_path

pytestmark = pytest.mark.usefixtures("one_torch_thread")

QUESTIONS = [
    ("How many singers?", "SELECT count(*) FROM singer", ["SELECT count(*) FROM singer"]),
    ("Names of singers?", "SELECT name FROM singer", ["SELECT name FROM singer", "SELECT age FROM singer"]),
    ("Oldest age?", "SELECT max(age) FROM singer", ["SELECT min(age) FROM singer"]),
    ("Broken gold?", "SELECT x FROM nowhere", None),
]


@pytest.fixture(scope="module")
def spider_root(tmp_path_factory):
    return music_spider(tmp_path_factory.mktemp("diagnose_pool"), [(q, gold) for q, gold, _ in QUESTIONS])


def _recipe(path: Path, spider_root: Path, out: Path, **extra) -> Path:
    fields = {
        "model_name_or_path": "no/such-model-is-ever-loaded",
        "benchmarks": ["spider:dev"],
        "spider_root": str(spider_root),
        "num_samples": 4,
        "max_new_tokens": 16,
        "batch_size": 4,
        "prompt_sample_rows": 0,
        "sandbox_workers": 1,
        "device": "cpu",
        "dtype": "float32",
        "num_threads": 1,
        "output_dir": str(out),
        **extra,
    }
    path.write_text(yaml.safe_dump(fields), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--num_samples", "1"], "num_samples (K) must be an integer >= 2"),
        (["--temperature", "0"], "temperature must be > 0"),
        (["--benchmarks", "world:rl_pool"], "training splits say nothing"),
        (["--benchmarks", "bird:dev"], "needs bird_root"),
        (["--bands", "not a band"], "neither a dataset folder nor a Hub dataset id"),
        (["--compare_mode", "exact"], "unknown compare mode 'exact'"),
        (["--min_consistency", "2"], "min_consistency must be a number in [0, 1]"),
        (["--num_sampels", "4"], "did you mean --num_samples"),
        (["--training_band", "{tmp}/no-band"], "fix training_band"),  # read when the data load, still before
        (["--bands", "{tmp}/no-band"], "fix bands"),
        (["--output_dir", "{spider}/diagnosis"], "is inside the input"),  # never into what it reads
        (["--output_dir", "{tmp}/held"], "is being written by pid"),  # one writer per output folder
    ],
)
def test_bad_input_is_one_line_exit_2_before_any_model_loads(
    overrides, message, spider_root, tmp_path, capsys, monkeypatch
):
    def never(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(DiagnoseConfig, "load_policy", never)
    recipe = _recipe(tmp_path / "diagnose.yaml", spider_root, tmp_path / "out")
    if "{tmp}/held" in overrides:  # a live writer (this process) holds the folder's lock
        lock_path(tmp_path / "held").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    argv = ["diagnose", "--config", str(recipe), *[o.format(tmp=tmp_path, spider=spider_root) for o in overrides]]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("slmsql diagnose: error:") and "\n" not in err and message in err, err
    assert not (tmp_path / "out").exists() and not (spider_root / "diagnosis").exists()


def test_the_diagnosis_keys_never_reuse_a_seed_the_filter_drew():
    ids = [f"world-rl_pool-{i}" for i in range(200)] + [f"spider-dev-{i}" for i in range(50)]
    for seed in (0, 1):
        filter_seeds = {sample_seed(seed, q, j) for q in ids for j in range(16)}
        ours = {sample_seed(seed, q, j, namespace=NAMESPACE) for q in ids for j in range(16)}
        assert len(ours) == len(filter_seeds) == len(ids) * 16
        assert not ours & filter_seeds


def _record(qid, greedy, c, shapes, n=4, family="filter"):
    """A question record as sample.py writes it: ``shapes`` are the wrong samples' (kind, trigger, output)."""
    samples = [{"anatomy": {"kind": k, "trigger": t, "output": o, "detail": None}} for k, t, o in shapes]
    samples += [{"anatomy": None}] * (n - len(samples))
    return {"question_id": qid, "scorable": True, "greedy": greedy, "greedy_anatomy": None, "n": n, "c": c,
            "family": family, "samples": samples}  # fmt: skip


def test_consistency_support_where_ceiling_and_the_ranked_prediction():
    op = ("wrong_operator", ">=", ">")
    evaluation = {"dev": [
        _record("d1", 0, 2, [op, op]),                             # in support, greedy wrong: counts in the ceiling
        _record("d2", 0, 0, [op] * 4),                             # out of support
        _record("d3", 1, 3, [("wrong_operator", "<=", "<")]),      # another rule
        _record("d4", 0, 0, [("wrong_literal", "absent", "other")] * 4),
    ]}  # fmt: skip
    training = [_record("t1", None, 2, [op, op]), _record("t2", None, 0, [("wrong_literal", "absent", "other")] * 4)]
    stats = {s["class"]: s for s in class_stats(evaluation, training, min_consistency=0.5)}
    operator = stats["wrong_operator"]
    assert operator["affected"] == 3 and operator["training"] == 1 and operator["where"] == "both"
    assert operator["consistency"] == 3 / 4  # d1, d2 and t1 share >= -> >; d3's trigger is met once: no rule
    assert operator["signature"] == {"trigger": ">=", "output": ">"}
    assert operator["support"] == 2 / 3 and operator["ceiling"] == 1 / 4 and operator["qualifies"]
    assert operator["ceiling_by_slice"] == {"dev": 1 / 4}
    literal = stats["wrong_literal"]  # t2 is all-fail: no reward variance, so GRPO never sees it
    assert (literal["training"], literal["where"], literal["support"], literal["qualifies"]) == (
        0, "evaluation", 0.0, False)  # fmt: skip
    assert any("out of support" in r for r in literal["reasons"])
    ranked = prediction(stats.values())
    assert [r["class"] for r in ranked["ranked"]] == ["wrong_operator"]
    assert "wrong_operator (EX ceiling +25.0 points)" in ranked["sentence"]

    untrained = prediction(class_stats(evaluation, None))
    assert untrained["ranked"] == []
    assert untrained["sentence"].startswith("GRPO on this data is unlikely to move EX here, because wrong_operator")
    assert "no training band was given" in untrained["sentence"]


def test_a_tiny_policy_gives_every_output_with_keys_recorded(spider_root, tmp_path, monkeypatch):
    from _tiny_model import build_model, build_tokenizer

    import slmsql_hub.filtering as filtering  # the diagnosis imports the sampler from here when it samples

    seen: list[str] = []
    original = filtering.generate_keyed_samples

    def spy(model, tokenizer, prompts, keys, config):
        seen.extend(keys)
        return original(model, tokenizer, prompts, keys, config)

    monkeypatch.setattr(filtering, "generate_keyed_samples", spy)
    tokenizer = build_tokenizer()
    config = DiagnoseConfig(**yaml.safe_load(_recipe(tmp_path / "d.yaml", spider_root, tmp_path / "out").read_text()))
    report = run_diagnose(config, policy=(build_model(tokenizer), tokenizer))
    ids = [f"spider-dev-{i}" for i in range(len(QUESTIONS))]
    assert seen == ids  # seeded from the question id, in the diagnosis's own namespace
    assert DiagnoseConfig.key_namespace == NAMESPACE != "filter"
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} == {"report.json", "report.md", "diagnosis.png", "questions"}
    rows = [json.loads(line) for line in (out / "questions" / "spider_dev.jsonl").read_text().splitlines()]
    assert [r["key"] for r in rows] == [sample_key(q) for q in ids]
    assert [r["scorable"] for r in rows] == [True, True, True, False]
    assert rows[3]["maj"] is None and len(rows[0]["samples"]) == 4
    summary = report["slices"]["spider_dev"]
    assert summary["n"] == 4 and summary["n_scorable"] == 3 and [p["k"] for p in summary["pass_at_k"]] == [1, 2, 4]
    assert report["sampler"]["namespace"] == "diagnose"
    assert json.loads((out / "report.json").read_text())["prediction"] == report["prediction"]
    assert report["prediction"]["sentence"] in (out / "report.md").read_text()


@pytest.mark.slow
def test_filter_then_diagnose_end_to_end_finds_the_trained_mistakes(spider_root, tmp_path, capsys):
    """A tiny Qwen2 trained to answer question 1 right or with the wrong column (a band question) and question 2
    with min for max (all-fail): the filter's band is the training band, and ``slmsql diagnose`` ranks the wrong
    column first (in support, in training with variance) and reports the aggregate out of support."""
    from _tiny_model import build_model, build_tokenizer, train_to_answer

    from slmsql_hub.data.prompts import PromptConfig
    from slmsql_hub.sql import Sandbox

    prompt = PromptConfig(sample_rows=0)
    with Sandbox(workers=1) as sandbox:
        schema = prompt.schema(spider_root / "database" / "music" / "music.sqlite", sandbox)
    tokenizer = build_tokenizer()
    pairs = [(prompt.messages(q, schema), f"```sql\n{sql}\n```<|im_end|>") for q, _, answers in QUESTIONS
             for sql in answers or []]  # fmt: skip
    model = train_to_answer(build_model(tokenizer), tokenizer, pairs, steps=80)
    base = tmp_path / "base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    common = {"model_name_or_path": str(base), "temperature": 1.0, "num_samples": 8, "max_new_tokens": 24}
    filter_recipe = _recipe(tmp_path / "filter.yaml", spider_root, tmp_path / "filter", **common)
    assert cli_main(["filter", "--config", str(filter_recipe)]) == 0
    band = tmp_path / "filter" / "band"
    recipe = _recipe(tmp_path / "diagnose.yaml", spider_root, tmp_path / "diagnosis", **common,
                     training_band=str(band), bands=[str(band)])  # fmt: skip
    assert cli_main(["diagnose", "--config", str(recipe)]) == 0
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "diagnosis" / "report.json").read_text())
    assert report["prediction"]["sentence"] in printed
    assert set(report["slices"]) == {"spider_dev", "band"}
    classes = {c["class"]: c for c in report["classes"]}
    column = classes["wrong_column"]
    assert column["signature"] == {"trigger": "name", "output": "age"} and column["where"] == "both"
    assert column["support"] == 1.0 and column["qualifies"]
    assert report["prediction"]["ranked"][0]["class"] == "wrong_column"
    aggregate = classes["aggregate"]
    assert aggregate["signature"] == {"trigger": "max", "output": "min"} and aggregate["support"] == 0.0
    assert not aggregate["qualifies"]
    dev = report["slices"]["spider_dev"]
    assert dev["greedy_failures"].get("aggregate") == 1 and dev["all_pass"] > 0 and dev["all_fail"] > 0
    filter_keys = {json.loads(line)["question_id"] for line in (tmp_path / "filter" / "results.jsonl").open()}
    ours = [json.loads(line)["key"] for line in (tmp_path / "diagnosis" / "questions" / "spider_dev.jsonl").open()]
    assert ours == [sample_key(q) for q in sorted(filter_keys)] and not set(ours) & filter_keys


def test_consistency_asks_each_trigger_for_one_output_not_the_class_for_one_pair():
    """A plant with two symmetric triggers (>= -> >, <= -> <) is two rules kept everywhere: consistency 1.0 (the
    rule before 2026-12-07 gave 0.5 and called it not rule-like); an output that names nothing is no rule."""
    ge, le = ("wrong_operator", ">=", ">"), ("wrong_operator", "<=", "<")
    evaluation = {"probe": [_record(f"q{i}", 0, 1, [ge if i % 2 else le]) for i in range(8)]}
    training = [_record("t1", None, 2, [ge, ge]), _record("t2", None, 2, [le, le])]
    stats = {s["class"]: s for s in class_stats(evaluation, training, min_consistency=0.5)}
    assert stats["wrong_operator"]["consistency"] == 1.0 and stats["wrong_operator"]["qualifies"]
    vague = {"probe": [_record(f"q{i}", 0, 1, [("other_structure", "where", None)]) for i in range(8)]}
    stats = {s["class"]: s for s in class_stats(vague, training, min_consistency=0.5)}
    assert stats["other_structure"]["consistency"] == 0.0
    assert any("not rule-like" in r for r in stats["other_structure"]["reasons"])


def test_reanalyse_scores_todays_rule_on_the_diagnosis_own_samples_and_never_writes_into_it(tmp_path, capsys):
    from _diagnosis_report import write_diagnosis

    from slmsql_hub.cli import main as slmsql

    source = tmp_path / "diagnosis"
    old = write_diagnosis(source)
    old["rule_commit"] = "0" * 40  # as if an earlier rule had written it
    (source / "report.json").write_text(json.dumps(old), encoding="utf-8")
    before = {p: p.read_bytes() for p in source.rglob("*") if p.is_file()}
    assert slmsql(["diagnose", "--reanalyse", str(source), "--reanalysis-dir", str(tmp_path / "v2")]) == 0
    new = json.loads((tmp_path / "v2" / "report.json").read_text(encoding="utf-8"))
    assert new["slices"] == old["slices"] and new["sampler"] == old["sampler"]  # nothing sampled again
    assert new["reanalysed_from"]["rule_commit"] == "0" * 40
    assert [c["consistency"] for c in new["classes"]] == [
        consistency(_modal_pairs(source, c["class"])) for c in new["classes"]]  # fmt: skip
    assert (tmp_path / "v2" / "report.md").is_file() and (tmp_path / "v2" / "questions").is_dir()
    assert {p: p.read_bytes() for p in source.rglob("*") if p.is_file()} == before
    capsys.readouterr()
    for argv, message in [
        (["--reanalyse", str(source), "--reanalysis-dir", str(source / "x")], "inside the input"),
        (["--reanalyse", str(source)], "--reanalyse needs --reanalysis-dir"),
        (["--reanalyse", str(tmp_path), "--reanalysis-dir", str(tmp_path / "v3")], "report.json not found"),
        (["--reanalysis-dir", str(tmp_path / "v4")], "--reanalysis-dir goes with --reanalyse"),
    ]:
        assert slmsql(["diagnose", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert "\n" not in err.strip() and message in err, err
    (source / "questions" / "world_dev.jsonl").unlink()
    assert slmsql(["diagnose", "--reanalyse", str(source), "--reanalysis-dir", str(tmp_path / "v5")]) == 2
    assert "no records of slice(s) world_dev" in capsys.readouterr().err


def _modal_pairs(folder, kind):
    """Each affected question's commonest (trigger, output) pair of ``kind``, from the written records."""
    from collections import Counter

    pairs = []
    for path in sorted((folder / "questions").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if path.stem == "training" and not (record["scorable"] and 0 < record["c"] < record["n"]):
                continue
            if path.stem != "training" and not (record["scorable"] and record["n"] > 0):
                continue
            shapes = [s["anatomy"] for s in record["samples"] if s.get("anatomy")]
            shapes += [record["greedy_anatomy"]] if record.get("greedy_anatomy") else []
            sig = [(a["trigger"], a["output"]) for a in shapes if a["kind"] == kind]
            if sig:
                pairs.append(Counter(sig).most_common(1)[0][0])
    return pairs
