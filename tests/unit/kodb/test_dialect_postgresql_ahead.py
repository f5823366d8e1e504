"""PostgreSQL dialect, ahead(): the next chunk's JSON is written in a thread
while the server inserts this one."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from pipeline.kodb.dialects.postgresql import ahead


def test_ahead_yields_every_result_in_item_order() -> None:
    assert list(ahead(lambda x: x * 10, range(7))) == [0, 10, 20, 30, 40, 50, 60]


def test_ahead_computes_the_next_item_while_the_caller_holds_this_one() -> None:
    started: list[int] = []
    second_started = threading.Event()

    def work(x: int) -> int:
        started.append(x)
        if x == 1:
            second_started.set()
        return x

    results = ahead(work, [0, 1, 2])
    assert next(results) == 0
    assert second_started.wait(5), "item 1 was not started while item 0 was in use"
    assert list(results) == [1, 2]


@pytest.mark.parametrize("items", [[], [5]])
def test_ahead_of_none_or_one_item_runs_in_the_callers_thread(items: list[int]) -> None:
    threads: list[str] = []

    def work(x: int) -> int:
        threads.append(threading.current_thread().name)
        return x

    assert list(ahead(work, items)) == items
    assert threads == [threading.current_thread().name] * len(items)


def test_ahead_raises_a_failing_item_at_its_place_after_the_earlier_results() -> None:
    def work(x: int) -> int:
        if x == 2:
            raise ValueError("Out of range float values are not JSON compliant")
        return x

    results = ahead(work, range(5))
    assert [next(results), next(results)] == [0, 1]
    with pytest.raises(ValueError, match="JSON compliant"):
        next(results)


def test_ahead_left_early_stops_taking_items() -> None:
    taken: list[int] = []

    def items() -> Iterator[int]:
        for x in range(100):
            taken.append(x)
            yield x

    results = ahead(lambda x: x, items())
    assert next(results) == 0
    results.close()
    assert len(taken) <= 3  # the one in use, the one in flight, at most one peeked
