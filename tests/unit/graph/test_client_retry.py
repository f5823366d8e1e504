"""The one retry policy, the one exception translation, and the breaker around them.

No network: a fake driver stands in for neo4j's and raises the driver's real exception
classes, so classification is tested against what the driver actually throws.
"""

from __future__ import annotations

import errno
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any

import neo4j.exceptions as ne
import pytest

from pipeline.config import Settings
from pipeline.errors import GraphQueryError, GraphUnavailable
from pipeline.graph import GraphClient, GraphNote
from pipeline.graph.arcadedb_http import ArcadeHttp, ArcadeHttpError
from pipeline.graph.client import BACKOFF_MAX, is_transient, retry_policy, translate

#: The fixtures of tests/unit/graph/conftest.py: the fake driver class, a client maker.
Drivers = Callable[..., Any]
Clients = Callable[..., GraphClient]


def neo4j_error(code: str, message: str = "boom") -> ne.Neo4jError:
    """A server error exactly as the driver hydrates it from a FAILURE message."""
    return ne.Neo4jError._hydrate_neo4j(code=code, message=message)


TRANSIENT = [
    ne.ServiceUnavailable("connection refused"),
    ne.SessionExpired("gone"),
    ne.IncompleteCommit("cut during commit"),  # our writes are idempotent MERGE/DELETE
    neo4j_error("Neo.TransientError.Transaction.DeadlockDetected"),
    neo4j_error("Neo.TransientError.General.DatabaseUnavailable"),
    ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
    ConnectionResetError(errno.ECONNRESET, "reset"),
    TimeoutError("timed out"),
    OSError(errno.EHOSTUNREACH, "no route"),
    urllib.error.URLError(ConnectionRefusedError(errno.ECONNREFUSED, "refused")),
    ArcadeHttpError(503, "queue full"),
]
PERMANENT = [
    neo4j_error("Neo.ClientError.Statement.SyntaxError", "Invalid input 'MATC'"),
    neo4j_error("Neo.ClientError.Security.Unauthorized", "bad credentials"),
    neo4j_error("Neo.ClientError.Schema.ConstraintValidationFailed"),
    neo4j_error("Neo.DatabaseError.General.UnknownError"),
    ne.ConfigurationError("bad url"),
    ArcadeHttpError(400, "CommandSQLParsingException"),
    ArcadeHttpError(403, "Security error"),
    urllib.error.HTTPError("http://x", 500, "err", {}, None),  # type: ignore[arg-type]
    OSError(errno.ENOENT, "no such file"),
    ValueError("bad value"),
    GraphUnavailable("circuit open for bolt://x"),  # our own verdict is never retried
]


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient_failures_are_retried(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize("exc", PERMANENT, ids=lambda e: type(e).__name__)
def test_permanent_failures_are_not_retried(exc: BaseException) -> None:
    assert not is_transient(exc)


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient_failures_translate_to_unavailable(exc: BaseException) -> None:
    assert isinstance(translate(exc, "bolt://g:1"), GraphUnavailable)


def test_query_and_auth_errors_translate_to_query_errors() -> None:
    syntax = translate(neo4j_error("Neo.ClientError.Statement.SyntaxError", "bad"), "bolt://g")
    assert isinstance(syntax, GraphQueryError) and "SyntaxError" in str(syntax)
    auth = translate(neo4j_error("Neo.ClientError.Security.Unauthorized"), "bolt://g", "root")
    assert isinstance(auth, GraphQueryError) and "credentials of user 'root'" in str(auth)
    assert isinstance(translate(RuntimeError("?"), "bolt://g"), GraphQueryError)


def test_policy_stops_at_the_attempt_bound() -> None:
    calls: list[int] = []
    sleeps: list[float] = []

    def always_down() -> None:
        calls.append(1)
        raise ne.ServiceUnavailable("down")

    with pytest.raises(ne.ServiceUnavailable):
        retry_policy(3, deadline=60.0, sleep=sleeps.append)(always_down)
    assert len(calls) == 3
    assert len(sleeps) == 2 and all(0.0 <= s <= BACKOFF_MAX for s in sleeps)


def test_policy_stops_at_the_deadline() -> None:
    calls: list[int] = []

    def always_down() -> None:
        calls.append(1)
        raise ne.ServiceUnavailable("down")

    with pytest.raises(ne.ServiceUnavailable):
        retry_policy(100, deadline=0.0, sleep=lambda _s: None)(always_down)
    assert len(calls) == 1


# --- the client around a fake driver (tests/unit/graph/conftest.py) -------------------
STATE_ROW = {"path": "a.md", "content_hash": "h", "model": "m", "dims": 3, "embedded_at": 1.5}


def test_a_new_client_does_no_network_io(tmp_path: Path) -> None:
    client = GraphClient(
        Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko", graph_url="bolt://127.0.0.1:1")
    )
    assert client.url == "bolt://127.0.0.1:1"
    assert client._driver is None
    client.close()


def test_transient_failures_are_retried_then_succeed(
    fake_driver: Drivers, client_with: Clients
) -> None:
    down = ne.ServiceUnavailable("refused")
    driver = fake_driver(down, down, [STATE_ROW])
    states = client_with(driver).note_states()
    assert list(states) == ["a.md"] and states["a.md"].dims == 3
    assert len(driver.runs) == 3


def test_exhausted_retries_open_the_breaker_and_later_calls_fail_fast(
    fake_driver, client_with
) -> None:
    driver = fake_driver(*[ne.ServiceUnavailable("refused")] * 10)
    client = client_with(driver)
    with pytest.raises(GraphUnavailable, match="refused"):
        client.note_states()
    assert len(driver.runs) == 4  # graph_retry_attempts
    with pytest.raises(GraphUnavailable, match="circuit open"):
        client.note_states()
    assert len(driver.runs) == 4  # nothing reached the driver
    # A new process (new client) sharing the state dir sees the open circuit too.
    other = client_with(fake_driver([STATE_ROW]))
    assert other.circuit_open_reason() is not None
    with pytest.raises(GraphUnavailable, match="circuit open"):
        other.note_states()


def test_half_open_probe_is_a_single_attempt(
    fake_driver: Drivers, client_with: Clients, clock: Any
) -> None:
    driver = fake_driver(*[ne.ServiceUnavailable("refused")] * 10)
    client = client_with(driver)
    with pytest.raises(GraphUnavailable):
        client.note_states()
    clock.now += 31.0
    with pytest.raises(GraphUnavailable, match="refused"):
        client.note_states()
    assert len(driver.runs) == 5  # 4, then one probe
    assert client.breaker.read().state == "open"
    clock.now += 31.0
    driver.outcomes = [[STATE_ROW]]
    assert list(client.note_states()) == ["a.md"]
    assert client.breaker.read().state == "closed"


def test_query_errors_are_not_retried_and_keep_the_circuit_closed(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver(neo4j_error("Neo.ClientError.Statement.SyntaxError", "Invalid input"))
    client = client_with(driver)
    with pytest.raises(GraphQueryError, match="Invalid input"):
        client.note_states()
    assert len(driver.runs) == 1
    assert client.breaker.read().state == "closed"


def test_writes_run_in_one_transaction_with_declared_params(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver([], [{"written": 1}])
    client = client_with(driver)
    written = client.set_links(["a.md"], [("a.md", "b.md"), ("a.md", "b.md")])
    assert written == 1 and driver.commits == 1
    (clear, clear_params), (link, link_params) = driver.runs
    assert "DELETE r" in clear and clear_params == {"paths": ["a.md"]}
    assert "MERGE (a)-[:LINKS_TO]->(b)" in link
    assert link_params == {"pairs": [{"src": "a.md", "dst": "b.md"}]}


def test_upsert_sends_properties_as_parameters_and_bumps_the_generation_in_its_transaction(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver([])
    client = client_with(driver)
    path = "x'}) DETACH DELETE n //.md"
    client.upsert_notes([GraphNote(path, "T", "adr", "h", "m", 2, 3.0, (0.5, 0.25))])
    [(text, params), (clear, clear_params), (bump, bump_params)] = driver.runs
    assert "VaultGeneration" in bump and "+ 1" in bump and bump_params == {}
    assert path not in text and path not in clear
    assert params["rows"][0]["path"] == path
    assert params["rows"][0]["props"]["embedding"] == [0.5, 0.25]
    assert "Passage" in clear and clear_params == {"paths": [path]}  # a short note has none
    with pytest.raises(GraphQueryError, match="dims"):
        client.upsert_notes([GraphNote("y.md", "T", "adr", "h", "m", 3, 3.0, (0.5,))])


def test_a_long_note_s_passages_replace_its_old_ones_in_the_same_transaction(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver([])
    client = client_with(driver)
    passages = ((0.0, 1.0), (1.0, 1.0))
    client.upsert_notes(
        [GraphNote("long.md", "T", "wiki", "h", "m", 2, 3.0, (0.5, 0.25), 2, passages)]
    )
    names = [text.split("\n")[0] for text, _ in driver.runs]
    assert [n.split()[0] for n in names] == ["UNWIND", "UNWIND", "UNWIND", "MERGE"]
    (_, upsert), (_, cleared), (_, created), _ = driver.runs
    assert "embedding" in upsert["rows"][0]["props"]
    assert cleared == {"paths": ["long.md"]}
    assert created["rows"] == [
        {"path": "long.md", "idx": 1, "dims": 2, "embedding": [0.0, 1.0]},
        {"path": "long.md", "idx": 2, "dims": 2, "embedding": [1.0, 1.0]},
    ]
    assert driver.commits == 1
    with pytest.raises(GraphQueryError, match="passage 1 has 1 values"):
        client.upsert_notes(
            [GraphNote("y.md", "T", "adr", "h", "m", 2, 3.0, (0.5, 0.1), 2, ((1.0,),))]
        )


SEARCH_ROWS = [
    {"path": "far.md", "title": "F", "source_type": "wiki", "embedding": [0.0, 1.0], "score": 0.9},
    {"path": "near.md", "title": "N", "source_type": "adr", "embedding": [1.0, 0.1], "score": 0.8},
]


def test_vector_search_overfetches_and_rescores(fake_driver: Drivers, client_with: Clients) -> None:
    driver = fake_driver(SEARCH_ROWS)
    client = client_with(driver)
    hits = client.vector_search([1.0, 0.0], 1)  # type: ignore[arg-type]
    assert [h.path for h in hits] == ["near.md"]
    [(_, params)] = driver.runs
    assert params["k"] == 800 and params["limit"] == 21 and params["vector"] == [1.0, 0.0]


def test_probe_never_raises(fake_driver: Drivers, client_with: Clients) -> None:
    client = client_with(fake_driver(ne.ServiceUnavailable("refused")))
    status = client.probe()
    assert (status.up, status.latency_ms) == (False, None)
    assert "refused" in (status.reason or "")
    ok = client_with(fake_driver([{"ok": 1}])).probe()
    assert ok.up and ok.dialect == "neo4j" and ok.agent == "Neo4j/5.26.0"
    assert ok.latency_ms is not None and ok.latency_ms >= 0


def test_a_probe_in_one_thread_leaves_another_thread_s_calls_their_retries_and_translation(
    fake_driver: Drivers, client_with: Clients
) -> None:
    """The service probes the graph for /metrics while questions run: a call meanwhile
    still fails as GraphUnavailable (answered degraded), never as the driver's error."""
    import threading

    inside, go = threading.Event(), threading.Event()
    down = ne.ServiceUnavailable("refused")

    class Slow(fake_driver):  # type: ignore[misc, valid-type]
        def answer(self, text: str, params: dict[str, Any]) -> list[dict[str, Any]]:
            if not inside.is_set():  # the probe's first statement (run in a bounded thread)
                inside.set()
                go.wait(10)
            return super().answer(text, params)  # type: ignore[no-any-return]

    client = client_with(Slow(*[down] * 10))
    prober = threading.Thread(target=client.probe, name="prober")
    prober.start()
    try:
        assert inside.wait(10)
        with pytest.raises(GraphUnavailable):
            client.note_states()
    finally:
        go.set()
        prober.join(10)


def test_local_graph_not_started_is_unavailable_with_a_hint(tmp_path: Path) -> None:
    client = GraphClient(Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko"))
    with pytest.raises(GraphUnavailable, match="vault-ko graph up"):
        client.note_states()
    status = client.probe()
    assert not status.up and "vault-ko graph up" in (status.reason or "")
    assert client.circuit_open_reason() is not None


@pytest.mark.parametrize("dims", [0, 65_537, True, 384.0])
def test_vector_dimensions_out_of_range_are_refused_before_any_call(
    tmp_path: Path, dims: object
) -> None:
    client = GraphClient(Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko"))
    with pytest.raises(GraphQueryError, match=r"integer in \[1, 65536\]"):
        client.ensure_vector_index(dims)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"integer in \[1, 65536\]"):
        ArcadeHttp("http://127.0.0.1:9", "root", "pw").create_vector_index("vault", "note", dims)  # type: ignore[arg-type]


SECRET_URL = "bolt://neo:s3cr@t:pw@127.0.0.1:7687"


def test_a_password_in_the_graph_url_is_masked_in_errors_status_and_breaker_state(
    tmp_path: Path, fake_driver: Drivers, client_with: Clients
) -> None:
    down = ne.ServiceUnavailable(f"Couldn't connect to {SECRET_URL}")  # a driver quoting it
    client = client_with(fake_driver(*[down] * 10), graph_url=SECRET_URL)
    with pytest.raises(GraphUnavailable) as unavailable:
        client.note_states()
    with pytest.raises(GraphUnavailable) as circuit_open:
        client.note_states()
    client._driver = fake_driver(down)  # type: ignore[assignment]
    status = client.probe()
    texts = [str(unavailable.value), str(circuit_open.value), status.url, status.reason or ""]
    texts += [p.read_text("utf-8") for p in (tmp_path / ".vault-ko").rglob("*.json")]
    assert texts and all("s3cr" not in t and ":pw@" not in t for t in texts)
    assert status.url == "bolt://neo:***@127.0.0.1:7687"
    assert client.url == SECRET_URL  # connecting still uses the URL as given


def test_every_write_touches_the_graph_change_stamp(
    fake_driver: Drivers, client_with: Clients
) -> None:
    # The service's warm copy of the note vectors is reloaded when this stamp moves.
    from pipeline.graph.client import changes_path

    driver = fake_driver([])
    client = client_with(driver)
    stamp = changes_path(client.settings.state_dir, client.url)
    assert not stamp.exists()
    client.note_states()  # a read leaves it alone
    assert not stamp.exists()
    client.upsert_notes([GraphNote("a.md", "T", "adr", "h", "m", 2, 3.0, (0.5, 0.25))])
    first = stamp.read_text()
    client.delete_notes(["a.md"])
    assert stamp.read_text() != first
