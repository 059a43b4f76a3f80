"""The reward table describes each reward once (fields, help, summary record, card text), and a dotted-path
reward resolves, is recorded with its module and version, and is carded; a bad path is one line, exit 2."""

from __future__ import annotations

import dataclasses
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from slmsql_hub import cli
from slmsql_hub.card.context import reward_context
from slmsql_hub.errors import UsageError
from slmsql_hub.rewards import REWARDS, describe_reward, resolve_reward, reward_fields, reward_record
from slmsql_hub.training.configs import GRPOTrainingConfig
from slmsql_hub.training.grpo_rewards import build_reward_funcs, close_rewards
from slmsql_hub.training.grpo_summary import rewards_record

FIXTURE_RUN = Path(__file__).resolve().parent / "fixtures" / "run"

USER_REWARDS = '''
def short_sql(prompts, completions, **kwargs):
    return [1.0 / (1 + len(str(c))) for c in completions]

def no_kwargs(prompts, completions):
    return [0.0 for _ in completions]

NOT_A_FUNCTION = 3
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A reward module on sys.path, as a user's own package would be (its name unique to this test file)."""
    (tmp_path / "r33_user_rewards.py").write_text(textwrap.dedent(USER_REWARDS), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "r33_user_rewards"


def _config(**kwargs) -> GRPOTrainingConfig:
    return GRPOTrainingConfig(output_dir="o", report_to="none", use_cpu=True, sandbox_workers=1, **kwargs)


def test_every_reward_parameter_is_a_recipe_field_with_the_constructors_default_and_help():
    fields = {f.name: f for f in dataclasses.fields(GRPOTrainingConfig)}
    for cls in REWARDS.values():
        for param, (name, default) in zip(cls.params, cls.defaults().items()):
            assert param.arg == name
            if param.field is None:
                continue
            assert param.field in fields, (cls.name, param.field)
            if param.owned:
                assert fields[param.field].default == default
                assert fields[param.field].metadata["help"] == param.help
    assert [name for name, _, _ in reward_fields()] == [
        "reward_correct", "reward_executes", "reward_fails", "format_reward_value"
    ]  # fmt: skip


@pytest.mark.parametrize("name", list(REWARDS))
def test_every_reward_has_card_text_stating_its_numbers(name):
    cls = REWARDS[name]
    text = describe_reward(name, None, "bird: sets")
    assert text.endswith(".") and "{" not in text
    for value in cls.defaults().values():
        assert str(value) in text, (name, value, text)
    assert name in _config().__dataclass_fields__["reward_funcs"].metadata["help"]


def test_the_summary_records_what_each_reward_was_built_with():
    args = _config(reward_funcs=["execution", "format", "result_f1", "random"], reward_fails=-0.5,
                   format_reward_value=0.3, seed=7)  # fmt: skip
    record = rewards_record(args)
    rewards = build_reward_funcs(args)
    try:
        built = {r.__name__: r.func for r in rewards}
        assert record["execution"] == {"correct": 1.0, "executes": 0.1, "fails": -0.5} == {
            "correct": built["execution"].correct, "executes": built["execution"].executes,
            "fails": built["execution"].fails,
        }  # fmt: skip
        assert record["format"] == 0.3 == built["format"].value
        assert record["random"] == {"p": 0.5, "seed": 7} and built["random"].p == 0.5
        assert record["result_f1"] == {}
    finally:
        close_rewards(rewards)


def test_a_dotted_path_reward_builds_and_is_recorded_with_its_module(user_module):
    spec = f"{user_module}:short_sql"
    args = _config(reward_funcs=["execution", spec], reward_weights=[1.0, 0.5])
    rewards = build_reward_funcs(args)
    try:
        assert [r.__name__ for r in rewards] == ["execution", "short_sql"]
        assert rewards[1](prompts=["p"], completions=["SELECT 1"], gold_sql=["x"], db_path=["d"]) == [1 / 9]
    finally:
        close_rewards(rewards)
    record = rewards_record(args)
    assert record["funcs"] == ["execution", spec] and record["weights"] == [1.0, 0.5]
    assert record[spec] == {"path": spec, "module": user_module, "function": "short_sql", "distribution": None,
                            "version": None}  # fmt: skip
    assert resolve_reward(f"{user_module}.short_sql") is resolve_reward(spec)  # TRL's spelling too


def test_an_installed_distribution_is_recorded_with_its_version():
    import importlib.metadata

    record = reward_record("yaml:safe_load", None)
    assert record["distribution"] == "PyYAML" and record["version"] == importlib.metadata.version("PyYAML")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("r33_missing_module:f", "cannot import 'r33_missing_module'"),
        ("{module}:nowhere", "has no function 'nowhere'"),
        ("{module}:NOT_A_FUNCTION", "has no function 'NOT_A_FUNCTION'"),
        ("{module}:no_kwargs", "must take TRL's reward signature"),
        ("{module}:", "is not a dotted path"),
        ("bleu", "unknown reward function bleu; choose from execution, format, result_f1, random"),
    ],
)
def test_a_bad_reward_is_one_line_exit_2_before_any_model_loads(spec, message, user_module, tmp_path, capsys):
    import yaml

    recipe = tmp_path / "grpo.yaml"
    recipe.write_text(yaml.safe_dump({
        "model_name_or_path": str(tmp_path / "no_model_here"),  # a check after loading would report this
        "dataset_paths": [str(tmp_path / "no_data_here")], "output_dir": str(tmp_path / "out"),
        "report_to": "none", "use_cpu": True, "reward_funcs": ["execution", spec.format(module=user_module)],
    }))  # fmt: skip
    assert cli.main(["train", "grpo", "--config", str(recipe)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    with pytest.raises(UsageError, match="reward"):
        _config(reward_funcs=[spec.format(module=user_module)])


def test_the_card_describes_every_reward_the_run_used(user_module, tmp_path):
    from slmsql_hub.card.build import CardOptions, build_card

    spec = f"{user_module}:short_sql"
    args = _config(reward_funcs=["result_f1", "random", spec, "format"], reward_weights=[1.0, 0.5, 0.25, 1.0],
                   reward_compare_mode="spider", format_reward_value=0.3, seed=3)  # fmt: skip
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    summary_path = run / "grpo" / "run_summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    summary["rewards"] = rewards_record(args)
    summary_path.write_text(json.dumps(summary), encoding="utf-8")
    text = " ".join(build_card(run, options=CardOptions(repo_id="alice/r33")).readme.read_text().split())
    assert "**Reward** (result_f1 × 1.0, random × 0.5, " + spec + " × 0.25, format × 1.0):" in text
    assert "- `result_f1`: partial credit, the F1 of the predicted and the gold result rows" in text
    assert "(spider: Spider test-suite semantics" in text
    assert "- `random`: a control, 1.0 with probability 0.5 and else 0.0" in text and "run's seed, 3)" in text
    assert f"- `short_sql`: a user reward, `short_sql` from `{user_module}` (not from an installed distribution)" in text
    assert "- `format`: 0.3 for an answer" in text
    assert "- `execution`" not in text
    assert text.count("Queries run in a read-only SQLite sandbox") == 1  # said once, on the first judged reward


def test_an_old_summary_without_a_rewards_record_is_carded_from_its_config():
    context = reward_context({"funcs": ["execution", "random"]}, {"reward_correct": 2.0, "seed": 5})
    execution, random = (item["text"] for item in context["items"])
    assert execution.startswith("2.0 when the query's result matches") and "0.1 when it runs" in execution
    assert "run's seed, 5)" in random
