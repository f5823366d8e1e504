"""The one error hierarchy of vault-ko, grouped by what a caller can do about it.

    VaultKoError                    base; every error a user may see; carries an exit code
    ├── ConfigError                 bad settings, flags, environment or vault-ko.toml
    ├── InputError                  bad user input; names file and line (or field)
    │   └── FactRowsError           many bad rows of a facts file, each with its line
    ├── KodbError                   the facts database failed (translated from SQLAlchemy)
    ├── GraphError                  the graph failed (translated from the neo4j driver)
    │   ├── GraphUnavailable        unreachable / transient / circuit open: fall back
    │   │   └── EvalDegraded        an evaluation's semantic answers were degraded
    │   └── GraphQueryError         the query or credentials are wrong: do not retry
    ├── LocalGraphError             the embedded ArcadeDB could not be started or stopped
    ├── EmbedderError               the embedding model could not be loaded or run
    │   └── ModelUnavailable        no prepared model where torch may not load: answer by words
    ├── VaultBusy                   another run writes to this vault (``--no-wait``)
    └── ServiceError                the resident service failed a request, or cannot start

Foreign exceptions are translated in one place each: neo4j's in ``graph/client.py``,
SQLAlchemy's in ``kodb/store.py``, HTTP and socket errors of the service's clients in
``service/client.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Exit codes shared by every command (documented in the README).
EXIT_OK = 0
EXIT_FAILURE = 1  # the command ran but found a problem (stale vault, strict fallback)
EXIT_UNAVAILABLE = 2  # a store could not be reached, or an error stopped the command
EXIT_USAGE = 2  # click's own code for bad usage
EXIT_INPUT = 3  # bad input: a file, a row, a setting


class VaultKoError(Exception):
    """Base of every vault-ko error; the message is one sentence for the user, and
    ``hint``, when a command sets it, what can be done meanwhile (the CLI prints it after)."""

    exit_code: int = EXIT_UNAVAILABLE
    hint: str | None = None


class ConfigError(VaultKoError):
    exit_code = EXIT_INPUT


class InputError(VaultKoError):
    """Bad user input, located by file and (when known) line or field."""

    exit_code = EXIT_INPUT

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.field = field
        super().__init__(self.location_prefix() + reason)

    def location_prefix(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(self.file)
        if self.line is not None:
            parts.append(str(self.line))
        prefix = ":".join(parts)
        if self.field is not None:
            prefix = f"{prefix} [{self.field}]" if prefix else f"[{self.field}]"
        return f"{prefix}: " if prefix else ""


@dataclass(frozen=True)
class RowProblem:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


class FactRowsError(InputError):
    """A facts file has bad rows; nothing was written."""

    def __init__(self, problems: Sequence[RowProblem]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0]
        super().__init__(
            f"{len(self.problems)} invalid row(s); nothing was imported",
            file=first.file,
        )


class KodbError(VaultKoError):
    exit_code = EXIT_UNAVAILABLE


class GraphError(VaultKoError):
    """``url``: the graph's URL (credentials masked), when the error is about one."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class GraphUnavailable(GraphError):
    """The graph cannot answer now (down, timed out, transient, or breaker open);
    ``retry_in``: seconds before the breaker lets a call try it again, when it is open."""

    def __init__(
        self, message: str, *, url: str | None = None, retry_in: float | None = None
    ) -> None:
        super().__init__(message, url=url)
        self.retry_in = retry_in


class GraphQueryError(GraphError):
    """The graph answered with an error that retrying will not fix (Cypher, auth)."""


class LocalGraphError(VaultKoError):
    exit_code = EXIT_UNAVAILABLE


class EmbedderError(VaultKoError):
    exit_code = EXIT_UNAVAILABLE


class ModelUnavailable(EmbedderError):
    """A process that must not load torch (the hook) has no prepared model to embed with:
    questions are answered by words, saying why."""


class EvalDegraded(GraphUnavailable):
    """An evaluation's semantic answers were degraded: its figures would lie, so none is
    reported."""


class VaultBusy(VaultKoError):
    """Another vault-ko run holds this vault's writer lock (and the caller would not wait)."""

    exit_code = EXIT_UNAVAILABLE


class ServiceError(VaultKoError):
    """The resident service answered with an error, or could not be reached or started;
    ``status`` is the HTTP status when it answered, ``detail`` its own message."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, message: str, *, status: int | None = None, detail: str | None = None):
        super().__init__(message)
        self.status = status
        self.detail = detail
