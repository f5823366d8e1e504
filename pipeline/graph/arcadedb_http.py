"""ArcadeDB's HTTP API, for the schema commands its Cypher cannot run.

ArcadeDB 26.10 refuses Cypher ``CREATE VECTOR INDEX`` and has no Cypher for types or unique
indexes, so the database, the types, the unique path index and the LSM_VECTOR index are
made here with ArcadeDB SQL over ``POST /api/v1/command/<db>``. This module holds every SQL
string of the graph layer; identifiers come from constants and are validated, the only
variable (the dimension) is a checked integer. Everything else goes over Bolt.

Errors: an HTTP error answer raises ``ArcadeHttpError`` (``transient`` for 503, which
ArcadeDB uses for a full request queue); a refused or timed-out connection raises the
underlying ``OSError``. The graph client classifies and translates both.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from pipeline.graph.records import check_dims

NOTE_TYPE = "Note"
#: The passages of long notes (backends/base.py, PASSAGE_INDEX).
PASSAGE_TYPE = "Passage"
LINK_TYPE = "LINKS_TO"
#: The one vertex holding the note vectors' generation (cypher/*/bump_generation.cypher).
GENERATION_TYPE = "VaultGeneration"
PATH_PROPERTY = "path"
EMBEDDING_PROPERTY = "embedding"
#: ArcadeDB names a type index ``<Type>[<property>]``; vector_search.cypher and
#: passage_search.cypher use these names. Keyed by the backends' index names.
VECTOR_INDEX = f"{NOTE_TYPE}[{EMBEDDING_PROPERTY}]"
VECTOR_INDEXES = {
    "note": (NOTE_TYPE, VECTOR_INDEX),
    "passage": (PASSAGE_TYPE, f"{PASSAGE_TYPE}[{EMBEDDING_PROPERTY}]"),
}
#: The request timeout of one HTTP call (schema commands on an empty vault take ms; building
#: a vector index over existing notes takes longer).
DEFAULT_TIMEOUT = 60.0

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: A record id as ArcadeDB prints it (bucket:position), the only form put into a command.
_RID = re.compile(r"#\d+:\d+")


class ArcadeHttpError(Exception):
    """ArcadeDB answered an HTTP request with an error status."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"ArcadeDB HTTP {status}: {message}")

    @property
    def transient(self) -> bool:
        return self.status in (502, 503, 504)


def ident(name: str) -> str:
    """``name`` if it is a plain identifier (database, type, property); ValueError otherwise."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"invalid ArcadeDB identifier {name!r}")
    return name


@dataclass(frozen=True)
class ArcadeHttp:
    """A minimal client of ArcadeDB's HTTP API (standard library only)."""

    base_url: str
    user: str
    password: str
    timeout: float = DEFAULT_TIMEOUT

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base_url.rstrip("/") + path, data=data, method=method)
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
        request.add_header("Authorization", f"Basic {token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8") or "null")
        except urllib.error.HTTPError as exc:
            # HTTPError is an OSError too; answer it as a server verdict, not a network fault.
            raw = exc.read().decode("utf-8", "replace")
            try:
                payload = json.loads(raw)
                message = payload.get("detail") or payload.get("error") or raw
                if payload.get("exception"):
                    message = f"{message} ({payload['exception']})"
            except (ValueError, AttributeError):
                message = raw or exc.reason
            raise ArcadeHttpError(exc.code, str(message)) from None

    # -- server ---------------------------------------------------------------------
    def database_exists(self, database: str) -> bool:
        """Whether ``database`` exists on the server."""
        answer = self._request("GET", f"/api/v1/exists/{ident(database)}")
        return bool(answer and answer.get("result"))

    def ensure_database(self, database: str) -> bool:
        """Create ``database`` unless it exists; True when it was created."""
        if self.database_exists(database):
            return False
        try:
            command = f"create database {ident(database)}"
            self._request("POST", "/api/v1/server", {"command": command})
        except ArcadeHttpError as exc:
            if exc.status == 409:  # created by a concurrent caller meanwhile
                return False
            raise
        return True

    def sql(self, database: str, command: str) -> list[dict[str, Any]]:
        """Run one SQL command of this module on ``database``; its result rows."""
        answer = self._request(
            "POST",
            f"/api/v1/command/{ident(database)}",
            {"language": "sql", "command": command},
        )
        result = (answer or {}).get("result")
        return result if isinstance(result, list) else []

    # -- the note schema ---------------------------------------------------------------
    def ensure_schema(self, database: str) -> None:
        """Types, properties, the unique path index and one generation vertex per name (the
        cypher files' ensure_schema says why); each statement is idempotent."""
        note, link = ident(NOTE_TYPE), ident(LINK_TYPE)
        passage, generation = ident(PASSAGE_TYPE), ident(GENERATION_TYPE)
        path, emb = ident(PATH_PROPERTY), ident(EMBEDDING_PROPERTY)
        self.sql(database, f"CREATE VERTEX TYPE {generation} IF NOT EXISTS")
        self._merge_generations(database)
        for command in (
            f"CREATE PROPERTY {generation}.name IF NOT EXISTS STRING",
            f"CREATE INDEX IF NOT EXISTS ON {generation} (name) UNIQUE",
            f"CREATE VERTEX TYPE {note} IF NOT EXISTS",
            f"CREATE EDGE TYPE {link} IF NOT EXISTS",
            f"CREATE PROPERTY {note}.{path} IF NOT EXISTS STRING",
            f"CREATE PROPERTY {note}.{emb} IF NOT EXISTS ARRAY_OF_FLOATS",
            f"CREATE INDEX IF NOT EXISTS ON {note} ({path}) UNIQUE",
            f"CREATE VERTEX TYPE {passage} IF NOT EXISTS",
            f"CREATE PROPERTY {passage}.{path} IF NOT EXISTS STRING",
            f"CREATE PROPERTY {passage}.{emb} IF NOT EXISTS ARRAY_OF_FLOATS",
            f"CREATE INDEX IF NOT EXISTS ON {passage} ({path}) NOTUNIQUE",
        ):
            self.sql(database, command)

    def _merge_generations(self, database: str) -> None:
        """Keep the highest of the generation vertices that share a name (two first writes
        at once, before the unique index existed, could each make one)."""
        rows = self.sql(database, f"SELECT @rid AS rid, name, value FROM {ident(GENERATION_TYPE)}")
        kept: dict[Any, dict[str, Any]] = {}
        extra: list[str] = []
        for row in sorted(rows, key=lambda r: -(r.get("value") or 0)):
            if row.get("name") in kept:
                extra.append(str(row.get("rid")))
            else:
                kept[row.get("name")] = row
        for rid in extra:
            if not _RID.fullmatch(rid):
                raise ArcadeHttpError(0, f"ArcadeDB returned a record id {rid!r} it cannot name")
            self.sql(database, f"DELETE FROM {ident(GENERATION_TYPE)} WHERE @rid = {rid}")

    def vector_indexes(self, database: str) -> dict[str, int]:
        """The dimensions of the vector indexes that exist, by the backends' index names
        (``note`` for ``Note[embedding]``, ``passage`` for ``Passage[embedding]``)."""
        names = {index: which for which, (_, index) in VECTOR_INDEXES.items()}
        types = " OR ".join(f"name = '{ident(t)}'" for t, _ in VECTOR_INDEXES.values())
        found: dict[str, int] = {}
        for row in self.sql(database, f"SELECT indexes FROM schema:types WHERE {types}"):
            for index in row.get("indexes") or ():
                which = names.get(index.get("name"))
                if which is not None and index.get("dimensions") is not None:
                    found[which] = int(index["dimensions"])
        return found

    def drop_vector_index(self, database: str, which: str) -> None:
        """Drop one vector index (callers check it exists: ArcadeDB has no IF EXISTS)."""
        self.sql(database, f"DROP INDEX `{VECTOR_INDEXES[which][1]}`")

    def create_vector_index(self, database: str, which: str, dims: int) -> None:
        """Create a cosine LSM_VECTOR index (``note``: ``Note[embedding]``, ``passage``:
        ``Passage[embedding]``) for ``dims`` dimensions."""
        metadata = json.dumps({"dimensions": check_dims(dims), "similarity": "COSINE"})
        type_name = ident(VECTOR_INDEXES[which][0])
        self.sql(
            database,
            f"CREATE INDEX IF NOT EXISTS ON {type_name} ({ident(EMBEDDING_PROPERTY)}) "
            f"LSM_VECTOR METADATA {metadata}",
        )
