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
    STOPPED_REASON,
    Breaker,
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
