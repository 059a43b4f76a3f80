"""The benchmark registry (data/benchmarks.py): one entry per benchmark read by every consumer, user benchmarks
registered from their own module or named by dotted path, and BIRD mini-dev as one entry plus a reader, on a
fixture in the release's own layout."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap

import pytest

from slmsql_hub.data import benchmarks
from slmsql_hub.data.benchmarks import REGISTRY, get_benchmark, load_benchmark
from slmsql_hub.data.config import BenchmarkArguments
from slmsql_hub.errors import UsageError
from slmsql_hub.evaluation import BenchmarkSpec, EvalConfig, eval_benchmarks

MINI_DEV = [  # the release's fields (mini_dev_sqlite.json), ids as BIRD dev's
    {"question_id": 1471, "db_id": "shop", "question": "Names of cheap items?", "evidence": "cheap: price < 5",
     "SQL": "SELECT name FROM item WHERE price < 5", "difficulty": "simple"},
    {"question_id": 1472, "db_id": "shop", "question": "How many items?", "evidence": "",
     "SQL": "SELECT count(*) FROM item", "difficulty": "moderate"},
    {"question_id": 1480, "db_id": "club", "question": "Members by age?", "evidence": "",
     "SQL": "SELECT name FROM member ORDER BY age", "difficulty": "challenging"},
    {"question_id": 1481, "db_id": "club", "question": "Ages of members?", "evidence": "",
     "SQL": "SELECT age FROM member", "difficulty": "simple"},
]  # fmt: skip


@pytest.fixture
def mini_dev(tmp_path):
    """BIRD mini-dev as the release lays it out: mini_dev_sqlite.json beside dev_databases/<db>/<db>.sqlite."""
    root = tmp_path / "MINIDEV"
    tables = {
        "shop": ["CREATE TABLE item (name TEXT, price REAL)", "INSERT INTO item VALUES ('pen', 2), ('cup', 4), ('hat', 9)"],
        "club": ["CREATE TABLE member (name TEXT, age INT)", "INSERT INTO member VALUES ('ann', 30), ('bob', 30), ('cy', 21)"],
    }  # fmt: skip
    for db, statements in tables.items():
        (root / "dev_databases" / db).mkdir(parents=True)
        with sqlite3.connect(root / "dev_databases" / db / f"{db}.sqlite") as connection:
            for statement in statements:
                connection.execute(statement)
        connection.close()
    (root / "mini_dev_sqlite.json").write_text(json.dumps(MINI_DEV))
    return root


@pytest.fixture
def registry():
    """The registry as it was before the test (a test's registrations do not leak)."""
    saved = dict(REGISTRY)
    yield REGISTRY
    REGISTRY.clear()
    REGISTRY.update(saved)


def test_bird_mini_dev_loads_the_release_layout(mini_dev):
    data = load_benchmark("bird_mini_dev", mini_dev)
    assert data["question_id"] == ["bird_mini_dev-1471", "bird_mini_dev-1472", "bird_mini_dev-1480", "bird_mini_dev-1481"]
    assert data["evidence"][0] == "cheap: price < 5" and data["gold_sql"][2] == MINI_DEV[2]["SQL"]
    assert data["difficulty"] == ["simple", "moderate", "challenging", "simple"]
    assert set(data["benchmark"]) == {"bird_mini_dev"}
    assert data["db_path"][2] == str((mini_dev / "dev_databases/club/club.sqlite").resolve())
    assert load_benchmark("bird_mini_dev", mini_dev.parent).num_rows == 4  # the folder the zip unpacks into
    with pytest.raises(UsageError, match="bird_mini_dev has no split 'train'; use dev"):
        load_benchmark("bird_mini_dev", mini_dev, "train")


def test_bird_mini_dev_evaluates_with_birds_set_rule_and_a_difficulty_breakdown(mini_dev, tmp_path):
    """Through slmsql eval's own slice code: the judge in BIRD's mode, EX per BIRD difficulty label."""
    from slmsql_hub.evaluation.run import _judge, _slice_results, load_slice
    from slmsql_hub.evaluation.scoring import PolicyOutput
    from slmsql_hub.generation import Completion
    from slmsql_hub.sql import Sandbox

    config = EvalConfig(model_name_or_path="m", sft_adapter="a", grpo_adapter="b", output_dir=str(tmp_path / "out"),
                        benchmarks=["bird_mini_dev:dev"], benchmark_roots=[f"bird_mini_dev={mini_dev}"])  # fmt: skip
    (spec,) = config.benchmark_specs()
    assert (spec.key, spec.mode, spec.breakdown) == ("bird_mini_dev_dev", "bird", "difficulty")
    piece = load_slice(spec, config)
    assert piece.dataset_id == "birdsql/bird_mini_dev"
    answers = {
        # the gold's rows in another order, one twice: equal as sets (BIRD's rule), not as Spider's multiset
        "sft": ["SELECT name FROM item WHERE price < 5 UNION ALL SELECT 'pen' ORDER BY name DESC",
                "SELECT count(*) FROM item", "SELECT name FROM member", "SELECT age FROM member WHERE age > 25"],
        "grpo": ["SELECT name FROM item", "SELECT count(*) FROM item", "SELECT name FROM member ORDER BY age",
                 "SELECT age FROM member"],
    }  # fmt: skip
    with Sandbox(workers=1) as sandbox:
        judge = _judge(spec, config, sandbox)
        assert judge.mode.value == "bird"
        outputs = {
            name: [
                PolicyOutput(Completion(f"```sql\n{sql}\n```", 9, True), judge.judge(f"```sql\n{sql}\n```", row["gold_sql"], row["db_path"]))
                for sql, row in zip(sqls, piece.rows)
            ]
            for name, sqls in answers.items()
        }  # fmt: skip
    assert [o.judgement.correct for o in outputs["sft"]] == [1, 1, 1, 0]
    (tmp_path / "out" / "predictions").mkdir(parents=True)  # run_eval makes it before the slices
    result = _slice_results(piece, outputs, config, tmp_path / "out")
    assert (result["mode"], result["breakdown_by"], result["n"]) == ("bird", "difficulty", 4)
    by_difficulty = result["policies"]["sft"]["by_difficulty"]
    assert {level: (g["n"], g["correct"]) for level, g in by_difficulty.items()} == {
        "simple": (2, 1), "moderate": (1, 1), "challenging": (1, 1)
    }  # fmt: skip
    assert result["policies"]["grpo"]["by_difficulty"]["simple"]["correct"] == 1


def _write_module(folder, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


TINY_READER = """
    import json
    from slmsql_hub.data.benchmarks import Benchmark, register_benchmark
    from slmsql_hub.sql import CompareMode

    def read(root, split):
        items = json.loads((root / f"{split}.json").read_text())
        return [{"question_id": f"tiny-{i}", "question": q["q"], "db_id": q["db"], "gold_sql": q["sql"],
                 "difficulty": q["level"], "benchmark": "NAME"} for i, q in enumerate(items)], root / "dbs"
"""


@pytest.fixture
def tiny_release(tmp_path):
    (tmp_path / "release" / "dbs" / "one").mkdir(parents=True)
    sqlite3.connect(tmp_path / "release" / "dbs" / "one" / "one.sqlite").close()
    items = [{"q": "One?", "db": "one", "sql": "SELECT 1", "level": "easy"},
             {"q": "Two?", "db": "one", "sql": "SELECT 2", "level": "hard"}]  # fmt: skip
    (tmp_path / "release" / "dev.json").write_text(json.dumps(items))
    return tmp_path / "release"


def test_a_benchmark_named_by_dotted_path_is_imported_registered_and_evaluated(tmp_path, tiny_release, registry, monkeypatch):
    _write_module(tmp_path, "tinybench_dotted", TINY_READER.replace("NAME", "tiny") + """
    ENTRY = Benchmark("tiny", read, splits=("dev",), eval_splits=("dev",), compare_mode=CompareMode.SPIDER)
    """)  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tinybench_dotted", raising=False)
    args = BenchmarkArguments(["tinybench_dotted:ENTRY:dev:1"], benchmark_roots=[f"tiny={tiny_release}"])
    (entry,) = args.benchmark_entries()
    assert (entry.name, entry.split, entry.limit, str(entry)) == ("tiny", "dev", 1, "tinybench_dotted:ENTRY:dev:1")
    assert "tiny" in registry and args.root("tiny") == str(tiny_release)
    data = load_benchmark("tinybench_dotted:ENTRY", tiny_release)
    assert data["gold_sql"] == ["SELECT 1", "SELECT 2"] and data["difficulty"] == ["easy", "hard"]
    spec = BenchmarkSpec.parse("tinybench_dotted:ENTRY:dev")
    assert (spec.key, spec.mode) == ("tiny_dev", "spider")
    assert "tiny" in eval_benchmarks()
    with pytest.raises(UsageError, match="cannot import it"):
        get_benchmark("no_such_module_here:ENTRY")
    with pytest.raises(UsageError, match="not a slmsql_hub Benchmark"):
        get_benchmark("tinybench_dotted:read")


def test_a_benchmark_registered_from_its_own_module_is_one_entry_everywhere(tmp_path, tiny_release, registry, monkeypatch):
    _write_module(tmp_path, "tinybench_registered", TINY_READER.replace("NAME", "tiny2") + """
    register_benchmark(Benchmark("tiny2", read, splits=("dev", "train"), eval_splits=("dev",), license="mit",
                                 dataset_id="me/tiny2"))
    """)  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tinybench_registered", raising=False)
    __import__("tinybench_registered")
    assert load_benchmark("tiny2", tiny_release)["question_id"] == ["tiny-0", "tiny-1"]
    config = EvalConfig(model_name_or_path="m", sft_adapter="a", grpo_adapter="b", output_dir=str(tmp_path / "o"),
                        benchmarks=["tiny2:dev"], benchmark_roots=[f"tiny2={tiny_release}"])  # fmt: skip
    assert config.dataset_id_map()["tiny2"] == "me/tiny2"
    with pytest.raises(UsageError, match="evaluate tiny2 on dev, not 'train'"):
        BenchmarkSpec.parse("tiny2:train")
    from slmsql_hub.hub.band import dataset_card

    card = dataset_card({"counts": {"band": 1}, "dataset": {"benchmark": "tiny2"}}, "me/band")
    assert "license: mit" in card
    with pytest.raises(UsageError, match="already registered"):
        benchmarks.register_benchmark(benchmarks.Benchmark("tiny2", lambda root, split: ([], root)))


def test_the_world_entry_lists_every_held_out_split_the_world_builds():
    """data/ cannot import world/ (the layers contract), so the entry spells the probe splits: kept equal here."""
    from slmsql_hub.study.plant import PROBE_SPLITS

    assert get_benchmark("world").eval_splits == ("dev", "test", *PROBE_SPLITS)


def test_every_eval_benchmark_has_an_inspect_task():
    """Named tasks for the built-ins; the generic `benchmark` task for the rest (bird_mini_dev, yours)."""
    from slmsql_hub.evaluation import inspect_registry

    assert {"world", "spider", "bird", "benchmark"} <= set(vars(inspect_registry))
    with pytest.raises(UsageError, match="evaluate bird_mini_dev on dev, not 'train'"):
        inspect_registry.benchmark("bird_mini_dev", "/nowhere", "train")


def test_a_compare_mode_is_checked_in_one_place_with_one_message():
    from slmsql_hub.filtering.config import FilterConfig
    from slmsql_hub.sql import Judge

    message = "unknown compare mode 'exact': use one of 'bird', 'spider'"
    with pytest.raises(UsageError, match=message):
        FilterConfig(model_name_or_path="m", benchmarks=["world:rl_pool"], world_root="w", output_dir="o",
                     compare_mode="exact")  # fmt: skip
    with pytest.raises(UsageError, match=message):
        Judge(mode="exact", workers=1)
