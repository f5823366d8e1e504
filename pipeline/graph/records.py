"""What the graph layer hands out (frozen dataclasses) and how driver rows become them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The widest embedding the graph layer accepts (real models use 64..4096): the bound of the
#: vector index, of `vault-ko graph up --dims`, and of the integers Cypher files inline.
MAX_DIMS = 65_536


#: Every stored vector of one note: its own embedding (what the model reads of its whole
#: text), then a long note's passages (``pipeline/vault/passages.py``).
VectorSet = tuple[tuple[float, ...], ...]


def check_dims(dims: int) -> int:
    """``dims`` when it is an integer in [1, MAX_DIMS]; ValueError otherwise."""
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= MAX_DIMS:
        raise ValueError(f"vector dimensions must be an integer in [1, {MAX_DIMS}], got {dims!r}")
    return dims


@dataclass(frozen=True)
class GraphTarget:
    """Where a client connects, resolved from settings or the local record (no network)."""

    url: str
    user: str
    database: str | None
    http_url: str | None  # ArcadeDB's HTTP API, when known (settings or the local record)
    not_started: str | None  # why there is no graph to talk to (none started, or not ours)

    @property
    def shown_url(self) -> str:
        """The URL for messages: any password masked (``url`` is for connecting only)."""
        from pipeline.config import mask_url

        return mask_url(self.url)


@dataclass(frozen=True)
class GraphStatus:
    """One probe of the graph: reachable or not, and why."""

    up: bool
    url: str
    dialect: str | None
    agent: str | None
    latency_ms: float | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        """Exactly the keys of `vault-ko graph status --json`."""
        return {
            "up": self.up,
            "url": self.url,
            "dialect": self.dialect,
            "agent": self.agent,
            "latency_ms": self.latency_ms,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class NoteState:
    """What the graph holds for one note, without its embedding (the embed sync's diff)."""

    path: str
    content_hash: str
    model: str
    dims: int
    embedded_at: float
    text_version: int = 0  # of the rules that made the embedded text; 0: unknown (older)


@dataclass(frozen=True)
class GraphNote:
    """One note to write: its registry fields and its (normalised) embedding."""

    path: str
    title: str
    source_type: str
    content_hash: str
    model: str
    dims: int
    embedded_at: float
    embedding: tuple[float, ...]
    text_version: int = 0
    #: A long note's passages, each cut to fit the model (``embedding`` stays what the model
    #: reads of the whole text); empty for a note the model reads whole.
    passages: tuple[tuple[float, ...], ...] = ()

    def passage_rows(self) -> list[dict[str, Any]]:
        """The ``rows`` of create_passages: one per passage, numbered from 1."""
        out = []
        for idx, vector in enumerate(self.passages, start=1):
            if len(vector) != self.dims:
                raise ValueError(
                    f"note {self.path!r}: passage {idx} has {len(vector)} values, dims={self.dims}"
                )
            out.append(
                {
                    "path": self.path,
                    "idx": idx,
                    "dims": int(self.dims),
                    "embedding": [float(x) for x in vector],
                }
            )
        return out

    def as_row(self) -> dict[str, Any]:
        """The ``rows`` element of upsert_notes: the key and the properties to set."""
        if len(self.embedding) != self.dims:
            raise ValueError(
                f"note {self.path!r}: embedding has {len(self.embedding)} values, dims={self.dims}"
            )
        return {
            "path": self.path,
            "props": {
                "title": self.title,
                "source_type": self.source_type,
                "content_hash": self.content_hash,
                "model": self.model,
                "dims": int(self.dims),
                "embedded_at": float(self.embedded_at),
                "text_version": int(self.text_version),
                "embedding": [float(x) for x in self.embedding],
            },
        }


@dataclass(frozen=True)
class GraphHit:
    """A note found by vector search, with its exact cosine to the query."""

    path: str
    title: str
    source_type: str
    cosine: float


@dataclass(frozen=True)
class Candidate:
    """A raw vector-index row before exact re-scoring."""

    path: str
    title: str
    source_type: str
    embedding: Sequence[float] | None  # or a float64 array (the service's warm search)
    score: float
    passage: bool = False  # a long note's passage, not the note's own vector


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int:
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float:
    try:
        number = float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _vector(value: Any) -> tuple[float, ...] | None:
    if value is None or isinstance(value, str | bytes):
        return None
    try:
        return tuple(float(x) for x in value)
    except (TypeError, ValueError):
        return None


def note_state(row: Mapping[str, Any]) -> NoteState:
    """A note_states / all_vectors row → NoteState (missing fields become empty values,
    so a note written by another tool reads as stale rather than breaking the sync)."""
    return NoteState(
        path=_text(row["path"]),
        content_hash=_text(row.get("content_hash")),
        model=_text(row.get("model")),
        dims=_int(row.get("dims")),
        embedded_at=_float(row.get("embedded_at")),
        text_version=_int(row.get("text_version")),
    )


def candidate(row: Mapping[str, Any], *, passage: bool = False) -> Candidate:
    """A vector_search (or passage_search, ``passage``) row → Candidate."""
    score = row.get("score")
    return Candidate(
        path=_text(row["path"]),
        title=_text(row.get("title")),
        source_type=_text(row.get("source_type")),
        embedding=_vector(row.get("embedding")),
        score=float(score) if score is not None else float("nan"),
        passage=passage,
    )


def embedding_of(row: Mapping[str, Any]) -> tuple[float, ...] | None:
    """The embedding column of an all_vectors row, or None when absent or not a list."""
    return _vector(row.get("embedding"))


def link_pairs(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """(src, dst) pairs → the de-duplicated, sorted ``pairs`` parameter of link_notes."""
    unique = sorted({(str(src), str(dst)) for src, dst in pairs})
    return [{"src": src, "dst": dst} for src, dst in unique]
