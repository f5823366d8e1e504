"""Every graph call is bounded: a server that accepts the connection and never answers (a
stopped or hung process) makes the call fail as unavailable after its bound, not hang."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from pipeline.errors import GraphUnavailable
from pipeline.graph import GraphClient
from pipeline.graph.breaker import SLOW_CALLS_TO_OPEN


class SilentDriver:
    """A driver whose every statement blocks until the test ends (a hung server)."""

    def __init__(self, release: threading.Event, fake_driver: type) -> None:
        self.inner = fake_driver()
        self.release = release
        self.closed = threading.Event()

    def session(self, database: str | None = None) -> Any:
        session = self.inner.session(database)
        release = self.release

        def run(text: str, params: dict[str, Any] | None = None) -> Any:
            release.wait()
            raise ConnectionResetError("released at the end of the test")

        session.run = run
        return session

    def get_server_info(self) -> Any:
        return self.inner.get_server_info()

    def close(self) -> None:
        self.closed.set()


@pytest.fixture
def release() -> Any:
    event = threading.Event()
    yield event
    event.set()  # lets the abandoned worker threads finish


def test_a_call_to_a_graph_that_never_answers_fails_as_unavailable_after_its_bound(
    client_with: Callable[..., GraphClient],
    fake_driver: type,
    release: threading.Event,
    deadline: Callable[[float], AbstractContextManager[None]],
) -> None:
    driver = SilentDriver(release, fake_driver)
    client = client_with(
        driver, graph_call_timeout=0.2, graph_retry_deadline=0.1, graph_connect_timeout=0.05
    )
    with deadline(10.0), pytest.raises(GraphUnavailable, match=r"did not answer within 0\.2 s"):
        client.ping()
    # The driver that hung is dropped (closed in the background) and the breaker is open,
    # so the next question goes straight to the fallback.
    assert driver.closed.wait(5.0)
    assert client._driver is None
    assert client.circuit_open_reason() is not None


def test_a_probe_of_a_graph_that_never_answers_reports_it_down_after_the_bound(
    client_with: Callable[..., GraphClient],
    fake_driver: type,
    release: threading.Event,
    deadline: Callable[[float], AbstractContextManager[None]],
) -> None:
    client = client_with(
        SilentDriver(release, fake_driver),
        graph_call_timeout=0.2,
        graph_retry_deadline=0.1,
        graph_connect_timeout=0.05,
    )
    with deadline(10.0):
        status = client.probe()
    assert not status.up
    assert "did not answer within 0.2 s" in (status.reason or "")


def test_the_read_bound_never_cuts_a_longer_configured_retry_deadline(
    client_with: Callable[..., GraphClient], fake_driver: type
) -> None:
    client = client_with(fake_driver(), graph_call_timeout=2.0, graph_retry_deadline=30.0)
    assert client._call_bound() == pytest.approx(30.0 + client.settings.graph_connect_timeout)


def test_bulk_writes_get_the_longer_write_bound(
    client_with: Callable[..., GraphClient], fake_driver: type
) -> None:
    client = client_with(
        fake_driver(),
        graph_call_timeout=0.2,
        graph_retry_deadline=0.1,
        graph_connect_timeout=0.05,
        graph_write_timeout=7.0,
    )
    seen: list[float] = []
    original = client._attempt

    def spy(fn: Callable[[], Any], until: float, bound: float) -> Any:
        seen.append(bound)
        return original(fn, until, bound)

    client._attempt = spy  # type: ignore[method-assign]
    client.note_states()
    client.ping()
    assert seen[-1] == 0.2
    assert 7.0 in seen[:-1]


# -- a slow call is not a dead graph (issue 35, item 15) ------------------------------------
class SlowQueries:
    """A driver whose neighbour queries take longer than the call bound while every other
    statement (the ping) answers at once: a busy graph, not a dead one. ``slow`` counts the
    neighbour queries still to be slow; ``hang_pings`` makes the pings never answer too."""

    def __init__(self, release: threading.Event, fake_driver: type, slow: int) -> None:
        self.inner = fake_driver()
        self.release = release
        self.slow = slow
        self.hang_pings = False
        self.pings = 0

    def session(self, database: str | None = None) -> Any:
        session = self.inner.session(database)
        inner_run = session.run

        def run(text: str, params: dict[str, Any] | None = None) -> Any:
            if "LINKS_TO" in text and self.slow > 0:
                self.slow -= 1
                self.release.wait(2.0)  # longer than the bound; the worker is abandoned
            elif "RETURN 1" in text:
                self.pings += 1
                if self.hang_pings:
                    self.release.wait()
            return inner_run(text, params)

        session.run = run
        return session

    def get_server_info(self) -> Any:
        return self.inner.get_server_info()

    def close(self) -> None:
        return None


def slow_client(
    client_with: Callable[..., GraphClient], driver: SlowQueries, **overrides: Any
) -> GraphClient:
    client = client_with(
        driver,
        graph_call_timeout=0.2,
        graph_retry_deadline=0.1,
        graph_connect_timeout=0.1,
        **overrides,
    )
    # The driver of a timed-out call is dropped; the next connection reaches the same server.
    client._get_driver = lambda: driver  # type: ignore[method-assign]
    return client


def test_a_call_past_its_bound_leaves_the_circuit_closed_when_the_graph_answers_a_ping(
    client_with: Callable[..., GraphClient],
    fake_driver: type,
    release: threading.Event,
    deadline: Callable[[float], AbstractContextManager[None]],
) -> None:
    client = slow_client(client_with, SlowQueries(release, fake_driver, slow=1))
    with deadline(10.0):
        with pytest.raises(GraphUnavailable, match=r"within 0\.2 s .*slow, not down"):
            client.neighbors(["a.md"])
        assert client.circuit_open_reason() is None
        assert client.neighbors(["a.md"]) == []  # the next call goes to the graph again
    assert client.breaker.read().slow == 0


def test_a_call_past_its_bound_opens_the_circuit_when_the_ping_fails_too(
    client_with: Callable[..., GraphClient],
    fake_driver: type,
    release: threading.Event,
    deadline: Callable[[float], AbstractContextManager[None]],
) -> None:
    driver = SlowQueries(release, fake_driver, slow=1)
    client = slow_client(client_with, driver)
    client.ping()  # the backend is known; then the server stops answering
    driver.hang_pings = True
    started = time.monotonic()
    with deadline(10.0), pytest.raises(GraphUnavailable, match=r"within 0\.2 s"):
        client.neighbors(["a.md"])
    # The call's bound plus the ping's (graph_connect_timeout), not more.
    assert time.monotonic() - started < 0.2 + 0.1 + 1.0
    assert "circuit open" in (client.circuit_open_reason() or "")


def test_slow_calls_in_a_row_open_the_circuit_even_while_pings_answer(
    client_with: Callable[..., GraphClient],
    fake_driver: type,
    release: threading.Event,
    deadline: Callable[[float], AbstractContextManager[None]],
) -> None:
    client = slow_client(client_with, SlowQueries(release, fake_driver, slow=SLOW_CALLS_TO_OPEN))
    with deadline(20.0):
        for _ in range(SLOW_CALLS_TO_OPEN - 1):
            client.ping()  # each question's graph check answers …
            with pytest.raises(GraphUnavailable, match="slow, not down"):
                client.neighbors(["a.md"])  # … and its search does not
            assert client.circuit_open_reason() is None
        client.ping()
        with pytest.raises(GraphUnavailable, match=r"within 0\.2 s"):
            client.neighbors(["a.md"])
    assert "in a row" in (client.circuit_open_reason() or "")


def test_the_graph_check_past_its_bound_opens_the_circuit_at_once(
    client_with: Callable[..., GraphClient],
    fake_driver: type,
    release: threading.Event,
    deadline: Callable[[float], AbstractContextManager[None]],
) -> None:
    driver = SlowQueries(release, fake_driver, slow=0)
    client = slow_client(client_with, driver)
    client.ping()
    driver.hang_pings = True
    pings = driver.pings
    with deadline(10.0), pytest.raises(GraphUnavailable, match=r"within 0\.2 s"):
        client.ping()
    # No second ping to confirm the first: a hung graph costs a question's check one bound.
    assert driver.pings == pings + 1
    assert client.circuit_open_reason() is not None
