"""A fake Bolt driver for the graph client's unit tests (no network).

It stands in for neo4j's driver at the boundary the client uses (``session().run``,
transactions, ``get_server_info``) and plays a small server: it answers the version and
vector-index statements of the dialect it pretends to be, keeps the index dimensions, and
hands out the queued ``outcomes`` (rows, or an exception to raise) to every other statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.config import Settings
from pipeline.graph import GraphClient

NEO4J_AGENT = "Neo4j/5.26.0"


class FakeResult:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __iter__(self) -> Iterator[dict[str, Any]]:  # records: each has .items()
        return iter(self.rows)

    def consume(self) -> None:
        return None


class FakeSession:
    def __init__(self, driver: FakeDriver) -> None:
        self.driver = driver

    def __enter__(self) -> FakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, text: str, params: dict[str, Any] | None = None) -> FakeResult:
        return FakeResult(self.driver.answer(text, params or {}))

    def begin_transaction(self) -> FakeTx:
        return FakeTx(self)


class FakeTx:
    def __init__(self, session: FakeSession) -> None:
        self.session = session

    def __enter__(self) -> FakeTx:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, text: str, params: dict[str, Any] | None = None) -> FakeResult:
        return self.session.run(text, params)

    def commit(self) -> None:
        self.session.driver.commits += 1


class FakeDriver:
    """``runs``: the data statements, in order; ``statements``: every statement."""

    def __init__(
        self,
        *outcomes: BaseException | list[dict[str, Any]],
        agent: str = NEO4J_AGENT,
        version: str = "5.26.0",
        index_dims: int | None = 2,
        create_fails: bool = False,
        passage_dims: int | None = None,
    ) -> None:
        self.outcomes = list(outcomes)
        self.agent = agent
        self.version = version
        self.index_dims = index_dims
        self.passage_dims = passage_dims  # the passage index's; None: none (an older graph)
        self.create_fails = create_fails  # like Memgraph: a refused create only notifies
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.statements: list[str] = []
        self.commits = 0

    def answer(self, text: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        self.statements.append(text)
        if "dbms.components" in text or text.startswith("SHOW VERSION"):
            return [{"version": self.version}]
        indexes = {"note_embedding": self.index_dims, "passage_embedding": self.passage_dims}
        if text.startswith("SHOW VECTOR INDEXES"):
            return [{"name": n, "dims": d} for n, d in indexes.items() if d is not None]
        if text.startswith("SHOW VECTOR INDEX INFO"):
            other = {"index_name": "other_index", "dimension": 7}
            return [other] + [
                {"index_name": n, "dimension": d} for n, d in indexes.items() if d is not None
            ]
        if text.startswith("CREATE VECTOR INDEX"):
            if not self.create_fails:
                found = re.search(r"dimensions?`?\"?:\s*(\d+)", text)
                assert found, text
                if "passage_embedding" in text:
                    self.passage_dims = int(found.group(1))
                else:
                    self.index_dims = int(found.group(1))
            return []
        if text.startswith("DROP"):
            if "passage_embedding" in text:
                self.passage_dims = None
            else:
                self.index_dims = None
            return []
        if "db.awaitIndex" in text:
            return []
        self.runs.append((text, params))
        outcome = self.outcomes.pop(0) if self.outcomes else []
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def session(self, database: str | None = None) -> FakeSession:
        return FakeSession(self)

    def get_server_info(self) -> SimpleNamespace:
        return SimpleNamespace(agent=self.agent)

    def close(self) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def fake_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "graph_url": "bolt://127.0.0.1:7687",
        "graph_password": "secret",
        "graph_retry_attempts": 4,
        "graph_retry_deadline": 60.0,
    }
    values.update(overrides)
    return Settings(vault=tmp_path, state_dir=tmp_path / ".vault-ko", **values)


@pytest.fixture
def fake_driver() -> type[FakeDriver]:
    return FakeDriver


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client_with(tmp_path: Path, clock: Clock) -> Callable[..., GraphClient]:
    """``client_with(driver, **settings)``: a GraphClient whose driver is ``driver``."""

    def make(driver: FakeDriver, **overrides: Any) -> GraphClient:
        client = GraphClient(fake_settings(tmp_path, **overrides), clock=clock, sleep=lambda _s: 0)
        client._driver = driver  # type: ignore[assignment]
        return client

    return make
