"""The order of a test session (tests/conftest.py): the chapter runs' first tests balanced over the workers."""

from chapter_runs import balanced_start


def test_the_first_tests_of_each_worker_are_dealt_out_to_balance():
    # two workers start with two tests each: 5 and 4 must not share one
    assert balanced_start(list("abcdef"), [5, 4, 3, 2, 1, 1], 2) == list("adbcef")
    assert balanced_start(list("ab"), [2, 1], 2) == list("ab")
