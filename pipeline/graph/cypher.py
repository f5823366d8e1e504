"""The one loader of Cypher: ``cypher/<dialect>/<name>.cypher``, one query per file.

The top-level ``cypher/`` folder is installed as the package ``pipeline.cypher_files``
(pyproject.toml maps it), and read with importlib.resources: an editable install reads the
checkout's files, ``pip install .`` and a wheel read the installed copies.

Each file opens with comment lines declaring its interface::

    // params: rows, k          the $parameters a caller must pass, exactly
    // inline: dims             integers the loader writes into DDL that cannot take parameters
    // returns: path, score     the columns of each row

A body holds one statement or several, each ending with ``;`` at a line end; they run in
order in one transaction. Which files a dialect has is declared by its backend
(``backends/<dialect>.py``, ``queries``): a query another server does not need (ArcadeDB's
schema goes over HTTP) simply has no file there. Loading fails loudly on a missing file, an
empty body or an interface that does not match its body; binding fails loudly when a caller
passes other parameters than the declared ones. Values always travel as parameters; only
validated integers are ever inlined.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pipeline.errors import GraphQueryError
from pipeline.graph.records import check_dims

#: The package the repository's ``cypher/`` folder is installed as (pyproject.toml).
CYPHER_PACKAGE = "pipeline.cypher_files"

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_INLINE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_HEADER = re.compile(r"^//\s*(params|inline|returns)\s*:(.*)$")


class CypherLoadError(GraphQueryError):
    """A query file is missing or malformed, or a caller bound the wrong parameters."""


@dataclass(frozen=True)
class CypherQuery:
    """One named query of one dialect, with its declared interface."""

    dialect: str
    name: str
    path: Traversable
    params: frozenset[str]
    inline: frozenset[str]
    returns: tuple[str, ...]
    statements: tuple[str, ...]

    def bind(
        self, params: Mapping[str, Any], inline: Mapping[str, int] | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The statements to run, each with the parameters it uses.

        Raises CypherLoadError unless ``params`` has exactly the declared names and
        ``inline`` exactly the declared inline names, each a valid integer.
        """
        inline = dict(inline or {})
        _check_names(self, "parameter", self.params, set(params))
        _check_names(self, "inline value", self.inline, set(inline))
        for key, value in inline.items():
            try:
                check_dims(value)  # the only inlined integers are vector dimensions
            except ValueError as exc:
                raise CypherLoadError(f"{self.path}: inline value {key}: {exc}") from None
        bound = []
        for text in self.statements:
            text = _INLINE.sub(lambda m: str(inline[m.group(1)]), text)
            used = set(_PARAM.findall(text))
            bound.append((text, {k: v for k, v in params.items() if k in used}))
        return bound


def _check_names(query: CypherQuery, kind: str, declared: frozenset[str], given: set[str]) -> None:
    missing = sorted(declared - given)
    extra = sorted(given - declared)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {kind}(s) {', '.join(missing)}")
        if extra:
            parts.append(f"undeclared {kind}(s) {', '.join(extra)}")
        raise CypherLoadError(f"query {query.dialect}/{query.name}: {'; '.join(parts)}")


def _names(value: str) -> tuple[str, ...]:
    """``rows  (list of …)`` → ("rows",); ``(none)`` → ()."""
    value = value.split("(", 1)[0]
    return tuple(n.strip() for n in value.split(",") if n.strip())


def parse_query(dialect: str, name: str, text: str, path: Traversable) -> CypherQuery:
    """Parse one query file's text; raise CypherLoadError on a malformed interface."""
    header: dict[str, tuple[str, ...]] = {}
    body: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            match = _HEADER.match(stripped)
            if match:
                if match.group(1) in header:
                    raise CypherLoadError(f"{path}: '{match.group(1)}:' declared twice")
                header[match.group(1)] = _names(match.group(2))
            continue
        body.append(line.rstrip())
    if "params" not in header or "returns" not in header:
        raise CypherLoadError(f"{path}: the header must declare 'params:' and 'returns:'")
    statements = tuple(
        s.strip() for s in re.split(r";[ \t]*$", "\n".join(body), flags=re.MULTILINE) if s.strip()
    )
    params = frozenset(header["params"])
    inline = frozenset(header.get("inline", ()))
    for group in (params, inline, header["returns"]):
        bad = [n for n in group if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
        if bad:
            raise CypherLoadError(f"{path}: invalid name(s) in header: {', '.join(bad)}")
    if not statements:
        raise CypherLoadError(f"{path}: the file holds no statement")
    used = {p for s in statements for p in _PARAM.findall(s)}
    used_inline = {p for s in statements for p in _INLINE.findall(s)}
    if used != params:
        raise CypherLoadError(
            f"{path}: declared params {sorted(params)} but the body uses {sorted(used)}"
        )
    if used_inline != inline:
        raise CypherLoadError(
            f"{path}: declared inline {sorted(inline)} but the body uses {sorted(used_inline)}"
        )
    return CypherQuery(
        dialect=dialect,
        name=name,
        path=path,
        params=params,
        inline=inline,
        returns=header["returns"],
        statements=statements,
    )


def cypher_root() -> Traversable:
    """The installed ``cypher/`` folder; CypherLoadError when the package is missing."""
    try:
        return resources.files(CYPHER_PACKAGE)
    except ModuleNotFoundError as exc:
        raise CypherLoadError(
            f"the Cypher files are not installed (no package {CYPHER_PACKAGE}: {exc}); "
            "reinstall vault-ko"
        ) from None


@lru_cache(maxsize=256)
def load_query(dialect: str, name: str, root: Path | None = None) -> CypherQuery:
    """Load ``<dialect>/<name>.cypher`` from ``root`` (default: the installed Cypher files);
    raise CypherLoadError when it is missing or malformed."""
    if not _NAME.match(dialect) or not _NAME.match(name):
        raise CypherLoadError(f"invalid query reference {dialect!r}/{name!r}")
    base = cypher_root() if root is None else root
    path = base / dialect / f"{name}.cypher"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CypherLoadError(f"missing Cypher file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CypherLoadError(f"cannot read Cypher file {path}: {exc}") from exc
    return parse_query(dialect, name, text, path)


def query_names(dialect: str, root: Path | None = None) -> frozenset[str]:
    """The query names present in one dialect folder."""
    folder = (cypher_root() if root is None else root) / dialect
    if not folder.is_dir():
        raise CypherLoadError(f"missing Cypher dialect folder {folder}")
    return frozenset(
        p.name.removesuffix(".cypher") for p in folder.iterdir() if p.name.endswith(".cypher")
    )
