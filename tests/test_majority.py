"""Execution-majority EX (slmsql_hub.evaluation.majority) on real judgements of a toy database: ties, unscorable
golds, non-executing samples, and the compare mode's grouping."""

from __future__ import annotations

import sqlite3

import pytest

from slmsql_hub.evaluation.majority import majority_vote
from slmsql_hub.sql import Judge, Limits, Sandbox

GOLD = "SELECT name FROM person WHERE age >= 41"  # bob, cid


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    """``judge(mode, samples, gold)``: the samples' judgements against ``gold`` on a four-person database."""
    path = str(tmp_path_factory.mktemp("majority") / "people.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE person (name TEXT, age INTEGER)")
    conn.executemany("INSERT INTO person VALUES (?, ?)", [("ann", 30), ("bob", 41), ("cid", 41), ("dee", 25)])
    conn.commit()
    conn.close()
    with Sandbox(Limits(timeout_s=2.0), workers=1) as sandbox:
        judges = {mode: Judge(sandbox, mode=mode) for mode in ("bird", "spider")}

        def run(mode: str, samples: list[str | None], gold: str = GOLD):
            return judges[mode].judge_many(samples, [gold] * len(samples), [path] * len(samples))

        yield run


RIGHT = "SELECT name FROM person WHERE age > 40"
RIGHT_TOO = "SELECT name FROM person WHERE age = 41"  # another text, the same result: one group
WRONG = "SELECT name FROM person WHERE age > 26"
BROKEN = "SELECT nme FROM person"


def test_the_largest_group_wins_even_when_wrong_and_texts_with_one_result_vote_together(judge):
    vote = majority_vote(judge("bird", [WRONG, RIGHT, RIGHT_TOO, WRONG, WRONG]), GOLD, "bird")
    assert (vote.correct, vote.winner, vote.votes, vote.voters) == (0, 0, 3, 5)
    vote = majority_vote(judge("bird", [WRONG, RIGHT, RIGHT_TOO]), GOLD, "bird")
    assert (vote.correct, vote.winner, vote.votes) == (1, 1, 2)


def test_a_tie_goes_to_the_group_whose_first_sample_comes_first(judge):
    assert majority_vote(judge("bird", [RIGHT, WRONG, WRONG, RIGHT]), GOLD, "bird").correct == 1
    assert majority_vote(judge("bird", [WRONG, RIGHT, RIGHT, WRONG]), GOLD, "bird").correct == 0


def test_samples_that_do_not_execute_never_vote(judge):
    samples = [BROKEN, BROKEN, BROKEN, None, "no sql here", RIGHT]
    vote = majority_vote(judge("bird", samples), GOLD, "bird")
    assert (vote.correct, vote.winner, vote.voters) == (1, 5, 1)


def test_a_question_with_no_executing_sample_is_wrong(judge):
    vote = majority_vote(judge("bird", [BROKEN, None, "SELECT"]), GOLD, "bird")
    assert (vote.correct, vote.winner, vote.voters) == (0, None, 0)


def test_an_unscorable_gold_is_left_out(judge):
    vote = majority_vote(judge("bird", [RIGHT, RIGHT], "SELECT missing FROM person"), "SELECT missing FROM person", "bird")
    assert vote.correct is None


def test_groups_follow_the_compare_mode(judge):
    # bird: duplicates do not matter, so the DISTINCT-less answer with a repeated row votes with the right one;
    # spider: the multiset of rows differs, so the two form two groups and the first (wrong) one wins the tie.
    gold = "SELECT age FROM person WHERE age > 40"  # 41, 41
    dup, single = "SELECT age FROM person WHERE age > 40", "SELECT age FROM person WHERE name = 'bob'"
    bird = majority_vote(judge("bird", [single, dup], gold), gold, "bird")
    assert (bird.votes, bird.correct) == (2, 1)
    spider = majority_vote(judge("spider", [single, dup], gold), gold, "spider")
    assert (spider.votes, spider.winner, spider.correct) == (1, 0, 0)
    # spider: the same rows with the columns swapped are one result
    gold2 = "SELECT name, age FROM person WHERE age > 40"
    swapped = "SELECT age, name FROM person WHERE age > 40"
    vote = majority_vote(judge("spider", [WRONG, swapped, gold2], gold2), gold2, "spider")
    assert (vote.votes, vote.winner, vote.correct) == (2, 1, 1)
