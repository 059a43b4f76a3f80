"""TRL reward functions (slmsql_hub.rewards) on hand-made completions."""

from __future__ import annotations

import pickle
import sqlite3

import pytest
from _runaways import starved

from slmsql_hub.rewards import BatchJudge, ExecutionReward, FormatReward, ResultF1Reward, rows_f1
from slmsql_hub.sql import Limits


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("rewards") / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE item (id INTEGER, name TEXT, price REAL)")
    conn.executemany("INSERT INTO item VALUES (?, ?, ?)", [(i, f"item{i}", i * 2.5) for i in range(1, 21)])
    conn.commit()
    conn.close()
    return str(path)


def _msg(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


GOLD = "SELECT name FROM item WHERE price > 40"
CASES = {
    "correct": ("```sql\nSELECT name FROM item WHERE price >= 42.5\n```", 1.0, 0.2),
    "wrong": ("```sql\nSELECT name FROM item WHERE price > 10\n```", 0.1, 0.2),
    "error": ("```sql\nSELECT nme FROM item\n```", 0.0, 0.2),
    "no_block_plain_sql": ("SELECT name FROM item WHERE price > 40", 1.0, 0.0),
    "no_sql_at_all": ("I cannot answer that.", 0.0, 0.0),
    "timeout": (
        "```sql\nWITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r\n```",
        0.0,
        0.2,
    ),
    "write": ("```sql\nDELETE FROM item\n```", 0.0, 0.2),
}


@pytest.fixture(scope="module")
def execution(db):
    reward = ExecutionReward(limits=Limits(timeout_s=10.0, max_ops=5_000_000), workers=2)  # the op budget ends runaways
    yield reward
    reward.close()


def test_execution_and_format_rewards_on_hand_made_completions(db, execution):
    names = list(CASES)
    completions = [_msg(CASES[n][0]) for n in names]
    exec_rewards = execution(completions=completions, gold_sql=[GOLD] * len(names), db_path=[db] * len(names))
    format_rewards = FormatReward()(completions=completions)
    assert dict(zip(names, exec_rewards)) == {n: CASES[n][1] for n in names}
    assert dict(zip(names, format_rewards)) == {n: CASES[n][2] for n in names}


def test_unscorable_gold_gets_none_not_zero(db, execution):
    completions = [_msg("```sql\nSELECT 1\n```")] * 2
    rewards = execution(completions=completions, gold_sql=["SELECT broken FROM item"] * 2, db_path=[db] * 2)
    assert rewards == [None, None]
    f1 = ResultF1Reward(workers=1)
    assert f1(completions=completions, gold_sql=["SELECT broken FROM item"] * 2, db_path=[db] * 2) == [None, None]
    f1.close()


def test_reward_values_are_configurable(db):
    reward = ExecutionReward(correct=2.0, executes=0.5, fails=-1.0, workers=1)
    completions = [CASES["correct"][0], CASES["wrong"][0], CASES["error"][0]]
    assert reward(completions=completions, gold_sql=[GOLD] * 3, db_path=[db] * 3) == [2.0, 0.5, -1.0]
    reward.close()


def test_execution_reward_logs_sql_metrics_through_trl_hooks(db, execution):
    logged, extra = {}, {}
    # Two groups of 4: group A all wrong but differing in format (reward std > 0, correctness std == 0),
    # group B mixed.
    group_a = [CASES["wrong"][0], "SELECT name FROM item WHERE price > 10", CASES["wrong"][0], CASES["error"][0]]
    group_b = [CASES["correct"][0], CASES["wrong"][0], CASES["correct"][0], CASES["timeout"][0]]
    completions = [_msg(c) for c in group_a + group_b]
    prompts = [[{"role": "user", "content": "A"}]] * 4 + [[{"role": "user", "content": "B"}]] * 4
    execution(
        prompts=prompts,
        completions=completions,
        gold_sql=[GOLD] * 8,
        db_path=[db] * 8,
        log_metric=lambda name, value: logged.__setitem__(name, value),
        log_extra=lambda column, values: extra.__setitem__(column, values),
    )
    assert logged["sql/correct_rate"] == pytest.approx(2 / 8)
    assert logged["sql/exec_error_rate"] == pytest.approx(1 / 8)
    assert logged["sql/timeout_rate"] == pytest.approx(1 / 8)
    assert logged["sql/frac_correct_zero_std"] == pytest.approx(0.5)
    assert logged["sql/infra_failure_rate"] == 0.0  # the runaway hit the op budget: the model's fault, scored 0
    assert extra["sql_verdict"][:2] == ["wrong", "wrong"]


RUNAWAY = CASES["timeout"][0]


def _shared_rewards(judging: BatchJudge) -> list:
    return [ExecutionReward(judging=judging), FormatReward(judging=judging), ResultF1Reward(judging=judging)]


def test_every_reward_gives_none_for_an_unscorable_gold_so_trl_drops_the_row(db):
    judging = BatchJudge(workers=1)
    rewards = _shared_rewards(judging)
    batch = dict(
        completions=[_msg(CASES["correct"][0])] * 2,
        gold_sql=[GOLD, "SELECT broken FROM item"],
        db_path=[db] * 2,
    )
    assert [r(**batch) for r in rewards] == [[1.0, None], [0.2, None], [1.0, None]]
    judging.close()


def test_a_runaway_completion_gets_zero_not_none_whichever_limit_stops_it(db):
    """Issue #18: with only a short time budget (no op budget), a runaway is still the model's fault: 0.0."""
    judging = BatchJudge(limits=Limits(timeout_s=0.3, max_ops=None), workers=1)
    logged: dict[str, list] = {}
    batch = dict(
        prompts=[[{"role": "user", "content": "q"}]] * 2,
        completions=[_msg(CASES["correct"][0]), _msg(RUNAWAY)],
        gold_sql=[GOLD] * 2,
        db_path=[db] * 2,
        log_metric=lambda name, value: logged.setdefault(name, []).append(value),
    )
    assert [r(**batch) for r in _shared_rewards(judging)] == [[1.0, 0.0], [0.2, 0.2], [1.0, 0.0]]
    assert logged["sql/timeout_rate"] == [0.5] and logged["sql/infra_failure_rate"] == [0.0]
    assert judging.judge.sandbox.stats["infra_failures"] == 0
    judging.close()


def test_an_infrastructure_failure_gets_no_reward_from_any_function_and_is_counted(db):
    # The worker gets no CPU at all (stopped): the machine's failure, so no reward (None), not `fails`.
    judging = BatchJudge(limits=Limits(timeout_s=0.3), workers=1)
    logged: dict[str, list] = {}
    batch = dict(
        prompts=[[{"role": "user", "content": "q"}]] * 2,
        completions=[_msg(CASES["correct"][0]), _msg(CASES["wrong"][0])],
        gold_sql=[GOLD] * 2,
        db_path=[db] * 2,
        log_metric=lambda name, value: logged.setdefault(name, []).append(value),
    )
    judging.judge.judge(CASES["correct"][0], GOLD, db)  # gold and first completion cached, the second is not
    with starved(judging.judge.sandbox):
        rewards = [r(**batch) for r in _shared_rewards(judging)]
    assert rewards == [[1.0, None], [0.2, None], [1.0, None]]
    assert logged["sql/infra_failure_rate"] == [0.5]  # once per batch, not once per reward function
    assert logged["sql/timeout_rate"] == [0.0]
    assert judging.judge.sandbox.stats["infra_failures"] == 1  # judged once for the three rewards
    judging.close()


def test_rewards_sharing_a_judge_execute_each_batch_once(db):
    judging = BatchJudge(workers=1)
    rewards = _shared_rewards(judging)
    for completion in (CASES["correct"][0], CASES["wrong"][0]):
        batch = dict(completions=[_msg(completion)] * 2, gold_sql=[GOLD] * 2, db_path=[db] * 2)
        before = judging.judge.sandbox.stats["requests"]
        outputs = [r(**batch) for r in rewards]
        assert judging.judge.sandbox.stats["requests"] - before == 4  # 2 golds + 2 predictions, for all three
    assert outputs == [[0.1, 0.1], [0.2, 0.2], [pytest.approx(0.4)] * 2]  # F1 of 4 gold rows in 16
    judging.close()


def test_result_f1_gives_partial_credit(db):
    reward = ResultF1Reward(workers=1)
    completions = [
        "SELECT name FROM item WHERE price > 40",  # exact
        "SELECT name FROM item WHERE price > 45",  # subset: 2 of 4
        "SELECT nme FROM item",  # error
    ]
    rewards = reward(completions=completions, gold_sql=[GOLD] * 3, db_path=[db] * 3)
    assert rewards[0] == 1.0 and rewards[2] == 0.0
    assert rewards[1] == pytest.approx(2 * (1.0 * 0.5) / 1.5)
    reward.close()
    assert rows_f1([], []) == 1.0 and rows_f1([(1,)], []) == 0.0


def test_rewards_are_picklable_with_stable_names(db):
    for reward, name in ((ExecutionReward(workers=1), "execution"), (FormatReward(), "format"), (ResultF1Reward(), "result_f1")):
        if hasattr(reward, "judge"):
            reward(completions=["SELECT 1"], gold_sql=["SELECT 1"], db_path=[db])  # creates its judge
        clone = pickle.loads(pickle.dumps(reward))
        assert clone.__name__ == name == reward.__name__
        out = clone(completions=["```sql\nSELECT 1\n```"], gold_sql=["SELECT 1"], db_path=[db])
        assert out[0] in (1.0, 0.2)
        for r in (reward, clone):
            if hasattr(r, "close"):
                r.close()


def test_missing_dataset_columns_name_the_fix(execution):
    with pytest.raises(ValueError, match="'gold_sql' and 'db_path'"):
        execution(completions=["SELECT 1"])
