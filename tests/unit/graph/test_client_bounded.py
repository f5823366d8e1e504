"""Every graph call is bounded: a server that accepts the connection and never answers (a
stopped or hung process) makes the call fail as unavailable after its bound, not hang."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from pipeline.errors import GraphUnavailable
from pipeline.graph import GraphClient


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
