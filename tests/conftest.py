"""Shared fixtures: hermetic settings, the real PostgreSQL, the real local graph, the model.

On CI (CI=true) the PostgreSQL and graph runs are mandatory: a missing server fails the
run instead of skipping the tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis without its example database, its caches in a temp dir: tests never write into
# the tree. Derandomized, so CI runs the same examples every time; a failure prints the
# example that replays it. No per-example deadline: the machine is shared and loaded.
set_hypothesis_home_dir(tempfile.mkdtemp(prefix="vault-ko-hypothesis-"))
hypothesis_settings.register_profile("vault-ko", database=None, derandomize=True, deadline=None)
hypothesis_settings.load_profile("vault-ko")

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_VAULT = REPO / "examples" / "vault"
TEST_DATA = Path(__file__).resolve().parent / "data"
ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_ADMIN_URL = os.environ.get(
    "VAULT_KO_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def require_or_skip(reason: str) -> None:
    """Skip locally when a real server is missing; on CI that is a failure."""
    if ON_CI:
        pytest.fail(f"required on CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def require_server() -> Callable[[str], None]:
    """``require_or_skip`` for fixtures in other conftest and test modules."""
    return require_or_skip


@pytest.fixture(scope="session")
def promtool() -> Callable[[str], None]:
    """Checks Prometheus exposition text with Prometheus' own ``promtool check metrics``
    (fetched into the venv by ``make test``, scripts/promtool.sh): the judge of every
    metrics output we print or serve. Missing, it skips locally and fails on CI."""
    import subprocess
    import sys

    tool = Path(sys.executable).parent.parent / "tools" / "promtool"
    found = str(tool) if tool.exists() else shutil.which("promtool")
    if found is None:
        require_or_skip("promtool is not installed (`make test` fetches it: scripts/promtool.sh)")

    def check(text: str) -> None:
        assert text.strip(), "no metrics to check"
        done = subprocess.run(
            [str(found), "check", "metrics"], input=text, capture_output=True, text=True
        )
        assert done.returncode == 0, f"promtool: {done.stdout}{done.stderr}"

    return check


@pytest.fixture(scope="session")
def mcp_inspector() -> str:
    """The MCP Inspector's command (``make test`` installs it with npm,
    scripts/mcp_inspector.sh): a third-party client for `vault-ko mcp`. Missing, it skips
    locally and fails on CI."""
    import sys

    tool = Path(sys.executable).parent.parent / "tools" / "inspector" / "node_modules" / ".bin"
    found = tool / "mcp-inspector"
    if not found.exists():
        require_or_skip("the MCP Inspector is not installed (`make test` installs it with npm)")
    return str(found)


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No VAULT_KO_* setting of the developer's shell leaks into a test (the tests' own
    VAULT_KO_TEST_* server addresses stay)."""
    for name in list(os.environ):
        if name.startswith("VAULT_KO_") and not name.startswith("VAULT_KO_TEST_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def vault_copy(tmp_path: Path) -> Path:
    """A private copy of the sample vault (without any state dir)."""
    dest = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, dest, ignore=shutil.ignore_patterns(".vault-ko"))
    return dest


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    from pipeline.errors import KodbError
    from pipeline.kodb import scratch_database

    scratch = scratch_database(PG_ADMIN_URL, prefix="vaultko_test")
    try:
        url = scratch.__enter__()
    except KodbError as exc:  # the server is down or refuses us
        require_or_skip(f"PostgreSQL at {PG_ADMIN_URL} unavailable: {exc}")
    try:
        yield url
    finally:
        scratch.__exit__(None, None, None)


@pytest.fixture(scope="session")
def reset_pg(pg_server_url: str) -> Callable[[], str]:
    """Empties the session's PostgreSQL database (every table, index and extension)."""
    import sqlalchemy

    def reset() -> str:
        engine = sqlalchemy.create_engine(pg_server_url)
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
        engine.dispose()
        return pg_server_url

    return reset


@pytest.fixture
def pg_url(reset_pg: Callable[[], str]) -> str:
    """A PostgreSQL URL whose tables are empty at the start of the test."""
    return reset_pg()


@pytest.fixture(params=["sqlite", "postgresql"])
def kodb_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each KO-DB test runs on a real SQLite file and on the real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ko.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def deadline() -> Callable[[float], AbstractContextManager[None]]:
    """``with deadline(s): …`` fails the test with TimeoutError after ``s`` seconds of
    Python code (SIGALRM), so a hang or a super-linear blow-up fails instead of blocking."""

    @contextmanager
    def within(seconds: float) -> Iterator[None]:
        def expire(_signum: int, _frame: object) -> None:
            raise TimeoutError(f"did not finish within {seconds} s")

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    return within


#: Columns a run rewrites even when it changes no knowledge (timestamps, surrogate keys).
_VOLATILE_COLUMNS = frozenset({"id", "created_at", "ingested_at", "applied_at", "measured_at"})


def _dump_kodb(url: str) -> dict[str, list[tuple[object, ...]]]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine)
        out: dict[str, list[tuple[object, ...]]] = {}
        with engine.connect() as conn:
            for name, table in sorted(meta.tables.items()):
                if "_fts_" in name:
                    continue  # SQLite FTS5 shadow tables: the index's internal layout
                cols = [c for c in table.columns if c.name not in _VOLATILE_COLUMNS]
                rows = [tuple(r) for r in conn.execute(sa.select(*cols)).all()]
                if name == "subject_stats":  # its samples name facts by surrogate id
                    rows = _stats_by_fact_key(conn, meta, cols, rows)
                out[name] = sorted(rows, key=repr)
        return out
    finally:
        engine.dispose()


def _stats_by_fact_key(
    conn: Any, meta: Any, cols: list[Any], rows: list[tuple[object, ...]]
) -> list[tuple[object, ...]]:
    """subject_stats rows with each sampled fact id replaced by its fact_key."""
    import json

    import sqlalchemy as sa

    facts = meta.tables["facts"]
    key_of = dict(conn.execute(sa.select(facts.c.id, facts.c.fact_key)).all())
    at = [c.name for c in cols].index("sample")
    out = []
    for row in rows:
        parts = [[n, [key_of.get(i, i) for i in ids]] for n, ids in json.loads(str(row[at]))]
        out.append((*row[:at], json.dumps(parts), *row[at + 1 :]))
    return out


@pytest.fixture(scope="session")
def dump_kodb() -> Callable[[str], dict[str, list[tuple[object, ...]]]]:
    """``dump_kodb(url)``: every row of every KO-DB table (timestamps and surrogate ids left
    out), sorted — two stores with equal dumps hold the same knowledge."""
    return _dump_kodb
