"""Circuit breaker transitions with a fake clock, shared through the state dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import GraphUnavailable
from pipeline.graph.breaker import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    SLOW_CALLS_TO_OPEN,
    STOPPED_REASON,
    Breaker,
    BreakerState,
    breaker_path,
)

URL = "bolt://127.0.0.1:7687"


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(tmp_path: Path, clock: Clock, url: str = URL) -> Breaker:
    return Breaker(tmp_path, url, cooldown=30.0, clock=clock, probe_lease=5.0)


def test_closed_breaker_admits_calls_without_writing(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    assert breaker.before_call() is False
    breaker.record_success()
    assert not breaker.path.exists()
    assert breaker.open_reason() is None


def test_failure_opens_the_circuit_and_calls_fail_fast(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.record_failure("connection refused")
    assert breaker.read().state == OPEN
    clock.now += 29.0
    with pytest.raises(GraphUnavailable, match=r"circuit open .*connection refused"):
        breaker.before_call()
    assert "connection refused" in (breaker.open_reason() or "")


def test_after_cooldown_one_probe_is_let_through(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.record_failure("down")
    clock.now += 30.0
    assert breaker.open_reason() is None  # asking has no side effect
    assert breaker.read().state == OPEN
    assert breaker.before_call() is True  # this caller is the probe
    assert breaker.read().state == HALF_OPEN
    # Another process sharing the state dir fails fast while the probe's lease runs …
    other = make(tmp_path, clock)
    with pytest.raises(GraphUnavailable, match="half-open"):
        other.before_call()
    # … and may take the probe over when the lease has expired (a probe that died).
    clock.now += 5.0
    assert other.before_call() is True


def test_successful_probe_closes_the_circuit(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.record_failure("down")
    clock.now += 31.0
    assert breaker.before_call() is True
    breaker.record_success()
    assert breaker.read().state == CLOSED
    assert make(tmp_path, clock).before_call() is False


def test_failed_probe_reopens_for_a_full_cooldown(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.record_failure("down")
    clock.now += 31.0
    assert breaker.before_call() is True
    breaker.record_failure("still down")
    state = breaker.read()
    assert (state.state, state.opened_at, state.reason, state.failures) == (
        OPEN,
        clock.now,
        "still down",
        2,
    )
    clock.now += 29.9
    with pytest.raises(GraphUnavailable, match="still down"):
        breaker.before_call()


def test_graph_down_reason_is_reported_and_up_resets(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.open(STOPPED_REASON)
    with pytest.raises(GraphUnavailable, match="stopped by `vault-ko graph down`"):
        make(tmp_path, clock).before_call()
    breaker.reset()
    assert make(tmp_path, clock).before_call() is False


def test_state_is_keyed_by_url(tmp_path: Path, clock: Clock) -> None:
    make(tmp_path, clock).record_failure("down")
    other = make(tmp_path, clock, url="bolt://127.0.0.1:7688")
    assert other.before_call() is False
    assert breaker_path(tmp_path, URL) != breaker_path(tmp_path, "bolt://127.0.0.1:7688")
    assert breaker_path(tmp_path, URL).parent == tmp_path / "breaker"


def test_writes_are_atomic_and_readable_json(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.record_failure("down")
    assert [p.name for p in breaker.path.parent.iterdir()] == [breaker.path.name]
    data = json.loads(breaker.path.read_text())
    assert data["url"] == URL and data["state"] == OPEN and data["opened_at"] == clock.now


def test_unreadable_state_counts_as_closed(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.path.parent.mkdir(parents=True)
    breaker.path.write_text("{not json")
    assert breaker.before_call() is False
    breaker.path.write_text(json.dumps({"url": URL, "state": "weird"}))
    assert breaker.read().state == CLOSED


# -- slow is not dead (issue 35, item 15) ---------------------------------------------------
def test_slow_calls_leave_the_circuit_closed_until_enough_in_a_row(
    tmp_path: Path, clock: Clock
) -> None:
    breaker = make(tmp_path, clock)
    assert breaker.record_slow("did not answer within 2.0 s") is False
    assert breaker.record_slow("did not answer within 2.0 s") is False
    assert (breaker.read().state, breaker.read().slow) == (CLOSED, 2)
    assert breaker.open_reason() is None and breaker.before_call() is False
    # Shared through the state dir: another process's slow call is the third in a row.
    assert make(tmp_path, clock).record_slow("did not answer within 2.0 s") is True
    state = breaker.read()
    assert (state.state, state.slow) == (OPEN, 0)
    with pytest.raises(GraphUnavailable, match=r"3 calls in a row .* answered a ping"):
        breaker.before_call()


def test_the_default_count_is_slow_calls_to_open(tmp_path: Path, clock: Clock) -> None:
    breaker = Breaker(tmp_path, URL, cooldown=30.0, clock=clock)
    opened = [breaker.record_slow("slow") for _ in range(SLOW_CALLS_TO_OPEN)]
    assert opened == [False] * (SLOW_CALLS_TO_OPEN - 1) + [True]


def test_an_answer_forgets_the_slow_calls_and_a_ping_does_not(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.record_slow("slow")
    breaker.record_success(keep_slow=True)  # a ping: alive, says nothing of the queries
    assert breaker.read().slow == 1
    breaker.record_success()  # a query answered in time
    assert breaker.read() == BreakerState(url=URL)
    # Counting from zero again: two more slow calls do not open the circuit.
    breaker.record_slow("slow")
    assert breaker.record_slow("slow") is False
    assert breaker.read().state == CLOSED


def test_a_failure_opens_at_once_whatever_the_slow_count(tmp_path: Path, clock: Clock) -> None:
    breaker = make(tmp_path, clock)
    breaker.record_failure("connection refused")
    assert breaker.read().state == OPEN
    with pytest.raises(GraphUnavailable, match="connection refused"):
        breaker.before_call()


def test_a_refusal_says_where_and_when_the_graph_is_tried_again(
    tmp_path: Path, clock: Clock
) -> None:
    from pipeline.graph.reason import in_words, retry_words
    from pipeline.query import degraded_reason

    breaker = make(tmp_path, clock, "bolt://u:secret@127.0.0.1:43251")
    breaker.record_failure(
        "graph at bolt://127.0.0.1:43251 unavailable: Couldn't connect to 127.0.0.1:43251 "
        "(resolved to ('127.0.0.1:43251',)): Failed to establish connection to "
        "ResolvedIPv4Address(('127.0.0.1', 43251)) (reason [Errno 111] Connection refused)"
    )
    clock.now += 10
    with pytest.raises(GraphUnavailable) as info:
        breaker.before_call()
    assert "circuit open" in str(info.value)  # the log keeps the whole story
    assert (
        in_words(info.value) == "the graph is not reachable at 127.0.0.1:43251 (connection refused)"
    )
    assert retry_words(info.value) == "it will be retried in 20 s"
    reason = degraded_reason(info.value)
    assert reason.startswith("the graph is not reachable at 127.0.0.1:43251 (connection refused); ")
    assert "answering from the notes' words" in reason
    assert "Errno" not in reason and "ResolvedIPv4Address" not in reason and "secret" not in reason


def test_an_unknown_driver_text_is_not_shown_in_words() -> None:
    from pipeline.errors import GraphQueryError
    from pipeline.graph.reason import in_words

    odd = GraphUnavailable("graph at bolt://h:7 unavailable: SessionExpired xyz", url="bolt://h:7")
    assert in_words(odd) == "the graph at h:7 did not answer"
    refused = GraphQueryError("graph at bolt://h:7 rejected a query: Neo.X: boom", url="bolt://h:7")
    assert in_words(refused) == "the graph at h:7 refused a query"
    ours = GraphQueryError("the Cypher files are not installed")
    assert in_words(ours) == "the Cypher files are not installed"
