"""Batch session loading (`vault-ko load-context`): one context pack per session prompt.

    input lines ─▶ chunks of 256 prompts ─▶ graph check ─▶ embed (batches of equal length)
        ─▶ search: exact (one matrix product over ``graph.all_vectors()``) or the index
        ─▶ KO-DB lookups for the whole chunk (memoised) ─▶ ``Pipeline.answer_from_vector``
        └─ graph unavailable ─▶ ``Pipeline.fallback_answer`` (mode "fallback", with the reason)

The query stages stay in ``pipeline/query.py``: this module only batches what is expensive
per call (model forward passes, graph round trips, KO-DB statements) and then lets the
Pipeline answer each prompt, so a pack equals the answer ``Pipeline.ask`` gives for the
same prompt (timings aside).

Input, one session per line (blank lines and bad lines are reported with their line number
and skipped):

* plain text: the prompt; its id is the line number;
* a plain-text line that is the vault-relative path of an existing ``.md`` note: the note's
  text (title and body, as the graph embeds it) is the prompt; id = line number;
* a JSON object (the line starts with ``{``): ``{"id": "s1", "prompt": "…"}`` or
  ``{"id": "s1", "note": "sessions/2026-02-03-x.md"}``; ``id`` (string or integer) defaults
  to the line number; ids must be unique.

Output: ``<out>/packs.jsonl`` (one object per prompt in input order: the answer JSON of
``render.answer_to_dict`` plus ``id`` and ``prompt``) or one ``<out>/<safe id>.md`` per
session. What ``--resume`` needs lives in ``<out>/.load-context.state`` (a header line, then
one line per written pack), never in the packs themselves.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import numpy as np

from pipeline import bridge
from pipeline.calibrate import assess
from pipeline.embed import batch_invariant
from pipeline.errors import (
    ConfigError,
    GraphQueryError,
    GraphUnavailable,
    InputError,
    VaultKoError,
)
from pipeline.graph.records import Candidate
from pipeline.graph.scoring import exact_rescore
from pipeline.model import Answer, Fact, Hit, Note
from pipeline.query import Pipeline, QueryOptions, Timer
from pipeline.render import answer_to_dict, to_markdown

if TYPE_CHECKING:
    from pipeline.config import Settings

log = logging.getLogger(__name__)


#: Prompts handled together: embedded, searched and looked up in KO-DB as one batch.
DEFAULT_CHUNK: Final = 256
#: auto search: below this many prompts, index queries beat reading every vector.
AUTO_EXACT_MIN_PROMPTS: Final = 32
#: auto search: reading this many notes' vectors costs about one index query (local
#: ArcadeDB, sample vault: all_vectors 59 ms for 68 notes, one vector_search with its
#: 200-candidate over-fetch 40 ms), so exact search needs prompts ≥ notes / this.
AUTO_NOTES_PER_PROMPT: Final = 50
#: KO-DB cache entries kept across chunks before the cache is emptied (memory stays flat).
CACHE_MAX_ENTRIES: Final = 200_000
PACKS_FILE: Final = "packs.jsonl"
STATE_FILE: Final = ".load-context.state"
STATE_VERSION: Final = 1

SearchChoice = Literal["auto", "exact", "index"]
Format = Literal["jsonl", "md"]


# --- input ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionPrompt:
    """One valid input line: the session id, its prompt, and the note it came from."""

    line: int
    id: str
    prompt: str
    note: str | None = None


@dataclass(frozen=True)
class BadLine:
    """An input line that was skipped, and why."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def read_sessions(
    lines: Iterable[str | bytes], settings: Settings
) -> Iterator[SessionPrompt | BadLine]:
    """Parse input lines (see the module docstring) lazily, in order, numbered from 1.

    Lines may be bytes (read from a binary stream): a line that is not UTF-8 is a bad line.
    """
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield BadLine(number, f"not UTF-8 text (byte {exc.start + 1})")
                continue
        text = raw.rstrip("\r\n")
        if number == 1:
            text = text.removeprefix("\ufeff")
        try:
            item = _parse_line(text, number, settings)
        except InputError as exc:
            yield BadLine(number, exc.reason)
            continue
        first = seen.get(item.id)
        if first is not None:
            yield BadLine(number, f"duplicate id {item.id!r} (first on line {first})")
            continue
        seen[item.id] = number
        yield item


def _parse_line(text: str, number: int, settings: Settings) -> SessionPrompt:
    stripped = text.strip()
    if not stripped:
        raise InputError("empty line")
    if stripped.startswith("{"):
        return _parse_json(stripped, number, settings)
    if stripped.lower().endswith(".md") and _note_file(stripped, settings) is not None:
        return SessionPrompt(number, str(number), _note_prompt(stripped, settings), stripped)
    return SessionPrompt(number, str(number), stripped)


def _parse_json(text: str, number: int, settings: Settings) -> SessionPrompt:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"bad JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise InputError("a JSON line must be an object with id and prompt (or note)")
    raw_id = obj.get("id", number)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise InputError("id must be a string or an integer")
    sid = str(raw_id).strip()
    if not sid:
        raise InputError("id is empty")
    prompt, note = obj.get("prompt"), obj.get("note")
    if prompt is not None and note is not None:
        raise InputError("give either prompt or note, not both")
    if note is not None:
        if not isinstance(note, str) or not note.strip():
            raise InputError("note must be a vault-relative path")
        return SessionPrompt(number, sid, _note_prompt(note.strip(), settings), note.strip())
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError("missing prompt (a non-empty string) or note")
    return SessionPrompt(number, sid, prompt.strip())


def _note_file(rel: str, settings: Settings) -> Path | None:
    """The note file for a vault-relative path, or None when it is not one inside the vault."""
    posix = PurePosixPath(rel.replace("\\", "/"))
    if posix.is_absolute() or ".." in posix.parts or posix.suffix.lower() != ".md":
        return None
    root = settings.vault.resolve()
    path = (root / posix).resolve()
    try:
        path.relative_to(root)
    except ValueError:
        return None
    return path if path.is_file() else None


def _note_prompt(rel: str, settings: Settings) -> str:
    from pipeline.vault.parse import read_note
    from pipeline.vault.scan import source_type_for

    if _note_file(rel, settings) is None:
        raise InputError(f"note {rel!r} is not a .md file inside the vault")
    posix = PurePosixPath(rel.replace("\\", "/")).as_posix()
    parsed = read_note(
        settings.vault, posix, source_type_for(posix, settings), settings.vault_max_note_bytes
    )
    text = parsed.embed_text.strip()
    if not text:
        raise InputError(f"note {rel!r} is empty")
    return text


# --- packs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pack:
    """The context pack of one session: its id, its prompt and the Pipeline's answer."""

    id: str
    prompt: str
    answer: Answer


def pack_to_dict(pack: Pack) -> dict[str, Any]:
    """One line of packs.jsonl: ``id``, ``prompt``, then the answer JSON's keys."""
    return {"id": pack.id, "prompt": pack.prompt, **answer_to_dict(pack.answer)}


def pack_to_markdown(pack: Pack, *, max_prompt_chars: int = 200) -> str:
    """A compact markdown pack for an agent's context (long prompts shortened in the head)."""
    one_line = " ".join(pack.prompt.split())
    if len(one_line) > max_prompt_chars:
        one_line = one_line[: max_prompt_chars - 1] + "…"
    answer = replace(pack.answer, query=one_line)
    if answer.relevance.label == "no_match":
        answer = replace(answer, hits=())  # below the floor: the pack says only that
    return to_markdown(answer, heading=f"Context for {pack.id}")


_SAFE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")
_UNSAFE_CHARS = re.compile(r"[^a-z0-9._-]+")
#: The suffixes of hashed names (8 hex digits; 40 for MarkdownSink's fallback). An id that
#: ends like one is hashed too, so a plain name never equals a hashed one: "X" is hashed to
#: "x-c032adc1.md", which the id "x-c032adc1" used to be given as well.
_HASHED_SUFFIX = re.compile(r"-(?:[0-9a-f]{8}|[0-9a-f]{40})\Z")


def safe_file_name(session_id: str) -> str:
    """A portable file name for a session id: the id itself when it is short, lower-case,
    plain and does not end like a hashed name; else a slug plus 8 hex digits of the id's
    SHA-1. Plain names are the ids themselves and hashed names never look plain, so two
    ids share a name only if their digests do (MarkdownSink then uses all 40 digits)."""
    plain = _SAFE_NAME.fullmatch(session_id) and not session_id.endswith(".")
    if plain and not _HASHED_SUFFIX.search(session_id):
        return f"{session_id}.md"
    return _hashed_file_name(session_id, 8)


def _hashed_file_name(session_id: str, digits: int) -> str:
    slug = _UNSAFE_CHARS.sub("-", session_id.lower()).strip("-.")[:60] or "session"
    digest = hashlib.sha1(session_id.encode("utf-8", "surrogatepass"), usedforsecurity=False)
    return f"{slug}-{digest.hexdigest()[:digits]}.md"


class PackSink(Protocol):
    """Where packs go; ``commit`` makes the packs written so far durable for --resume."""

    def done_ids(self) -> set[str]:
        """Ids whose packs a previous run committed (empty unless resuming)."""
        ...

    def write(self, pack: Pack) -> None:
        """Write one pack (durable only after the next ``commit``)."""
        ...

    def commit(self) -> None:
        """Make the packs written so far durable and record them for --resume."""
        ...

    def close(self) -> None:
        """Commit what is pending and release the files."""
        ...


class _StateLog:
    """``<out>/.load-context.state``: a JSON header line (format and options), then one JSON
    line per committed pack ``{"id": …, "end": …}``; ``end`` is the byte size of packs.jsonl
    after that pack (jsonl format), so a resumed run can cut off packs written after the last
    commit. A torn last line (a crash while appending) is ignored."""

    def __init__(self, out_dir: Path, header: dict[str, Any], resume: bool) -> None:
        self.path = out_dir / STATE_FILE
        self.header = {"version": STATE_VERSION, **header}
        self.done: dict[str, int | None] = {}
        self.last_end = 0
        if resume and self.path.exists():
            self._load()
        else:
            self.path.write_text(json.dumps(self.header, sort_keys=True) + "\n", "utf-8")
        self._fh = self.path.open("a", encoding="utf-8")

    def _load(self) -> None:
        raw = self.path.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        lines = complete.decode("utf-8", "replace").splitlines()
        try:
            header = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            header = None
        if header != self.header:
            raise ConfigError(
                f"{self.path} records packs made with other settings ({header}); "
                "rerun without --resume, or with the same --format and options"
            )
        for line in lines[1:]:
            entry = json.loads(line)
            self.done[str(entry["id"])] = entry.get("end")
            if entry.get("end") is not None:
                self.last_end = int(entry["end"])
        if len(complete) != len(raw):  # drop a torn last line before appending again
            with self.path.open("r+b") as fh:
                fh.truncate(len(complete))

    def record(self, entries: Sequence[tuple[str, int | None]]) -> None:
        for sid, end in entries:
            self._fh.write(json.dumps({"id": sid, "end": end}, ensure_ascii=False) + "\n")
            self.done[sid] = end
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


class JsonlSink:
    """``<out>/packs.jsonl``, one object per pack, appended as each pack is ready."""

    def __init__(self, out_dir: Path, header: dict[str, Any], *, resume: bool) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / PACKS_FILE
        self._state = _StateLog(out_dir, {"format": "jsonl", **header}, resume)
        exists = self.path.exists()
        if resume and self._state.last_end > (self.path.stat().st_size if exists else 0):
            self._state.close()
            raise ConfigError(
                f"{self.path} is shorter than {self._state.path} records; rerun without --resume"
            )
        self._fh = self.path.open("r+b" if resume and exists else "w+b")
        # Packs written after the last commit (a crash) are cut off; they are redone.
        self._fh.truncate(self._state.last_end if resume else 0)
        self._fh.seek(0, os.SEEK_END)
        self._pending: list[str] = []

    def done_ids(self) -> set[str]:
        return set(self._state.done)

    def write(self, pack: Pack) -> None:
        line = json.dumps(pack_to_dict(pack), ensure_ascii=False, separators=(",", ":"))
        self._fh.write(line.encode("utf-8") + b"\n")
        self._pending.append(pack.id)

    def commit(self) -> None:
        if not self._pending:
            return
        self._fh.flush()
        os.fsync(self._fh.fileno())
        end = self._fh.tell()
        # Only the last entry of a commit needs the offset; earlier ones are before it.
        entries: list[tuple[str, int | None]] = [(sid, None) for sid in self._pending[:-1]]
        entries.append((self._pending[-1], end))
        self._state.record(entries)
        self._pending.clear()

    def close(self) -> None:
        self.commit()
        self._fh.close()
        self._state.close()


class MarkdownSink:
    """One ``<out>/<safe id>.md`` per session, each written atomically (temp file + rename).

    A pack never replaces another session's pack nor a file that is not a pack of its
    session (the user's own notes in the out dir): a name claimed by another id of this
    run (or of the run being resumed), or an existing file whose heading names another
    session, sends the pack to its 40-digit name instead. Claims are made in write order
    and replayed in the same order from the resume log, so --resume finds every pack.
    """

    def __init__(self, out_dir: Path, header: dict[str, Any], *, resume: bool) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.out_dir = out_dir
        self._state = _StateLog(out_dir, {"format": "md", **header}, resume)
        self._pending: list[str] = []
        self._owner: dict[str, str] = {}  # file name -> the session id it belongs to
        self._name: dict[str, str] = {}  # session id -> its file name
        for session_id in self._state.done:
            self._claim(session_id)

    def _claim(self, session_id: str) -> Path:
        """The file of a session's pack: its safe name unless another session holds it."""
        if session_id in self._name:
            return self.out_dir / self._name[session_id]
        for name in (safe_file_name(session_id), _hashed_file_name(session_id, 40)):
            if self._owner.get(name, session_id) != session_id:
                continue  # another session of this run has it
            path = self.out_dir / name
            if path.exists() and not self._is_pack_of(path, session_id):
                continue  # a file that is not this session's pack
            self._owner[name] = session_id
            self._name[session_id] = name
            return path
        raise ConfigError(
            f"{self.out_dir}: no free file name for the pack of session {session_id!r}; "
            "use an empty --out folder"
        )

    @staticmethod
    def _is_pack_of(path: Path, session_id: str) -> bool:
        """Whether the file at ``path`` is a pack written for ``session_id``."""
        head = f"## Context for {session_id}: ".encode()
        try:
            with path.open("rb") as fh:
                return fh.read(len(head)) == head
        except OSError:
            return False

    def done_ids(self) -> set[str]:
        # A pack file deleted since is written again.
        return {s for s in self._state.done if self._claim(s).is_file()}

    def write(self, pack: Pack) -> None:
        path = self._claim(pack.id)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(pack_to_markdown(pack), encoding="utf-8")
        tmp.replace(path)
        self._pending.append(pack.id)

    def commit(self) -> None:
        if self._pending:
            self._state.record([(sid, None) for sid in self._pending])
            self._pending.clear()

    def close(self) -> None:
        self.commit()
        self._state.close()


def open_sink(out_dir: Path, fmt: Format, opts: QueryOptions, *, resume: bool) -> PackSink:
    """The sink for a format; ``resume`` keeps what a previous run with the same options
    committed (ConfigError when the options differ)."""
    header = {
        "top_k": opts.top_k,
        "hits": opts.hits,
        "facts_per_subject": opts.facts_per_subject,
        "facts_per_predicate_cap": opts.facts_per_predicate_cap,
        "semantic": opts.semantic,
    }
    if fmt == "jsonl":
        return JsonlSink(out_dir, header, resume=resume)
    if fmt == "md":
        return MarkdownSink(out_dir, header, resume=resume)
    raise ConfigError(f"unknown pack format {fmt!r}; choose jsonl or md")


# --- KO-DB lookups, memoised for the batch ---------------------------------------------------
class CachedKodb:
    """A memoising view of a KoDB for one batch: the bridge and the rank stage of every
    prompt ask for the same files, titles and subjects again and again.

    Results are identical to the store's (same sets, same lists, facts in the same order);
    missing keys of a call are fetched in one statement. Everything else is delegated.
    """

    def __init__(self, kodb: Any, *, max_entries: int = CACHE_MAX_ENTRIES) -> None:
        self._kodb = kodb
        self._max_entries = max_entries
        self._by_file: dict[str, frozenset[str]] = {}
        self._by_term: dict[str, tuple[str, ...]] = {}
        self._facts: dict[str, tuple[Fact, ...]] = {}
        self._notes: Mapping[str, Note] | None = None
        self.statements = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kodb, name)

    def notes(self) -> Mapping[str, Note]:
        """The note registry, read once: choosing the search path and loading the exact
        search both need it, and load-context never writes to it."""
        if self._notes is None:
            self.statements += 1
            self._notes = self._kodb.notes()
        return self._notes

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        """Per file, the subject_norms of its facts; new files are fetched in one call."""
        wanted = sorted(set(paths))
        missing = [p for p in wanted if p not in self._by_file]
        if missing:
            self.statements += 1
            for path, subjects in self._kodb.subjects_by_source_file(missing).items():
                self._by_file[path] = frozenset(subjects)
        return {p: set(self._by_file.get(p, ())) for p in wanted}

    def search_subjects_many(
        self, terms: Sequence[str], limit: int | None = None
    ) -> dict[str, list[str]]:
        """Word-boundary subject search; new terms are searched in one call."""
        if limit is not None:
            return self._kodb.search_subjects_many(terms, limit=limit)
        missing = sorted({t for t in terms if t not in self._by_term})
        if missing:
            self.statements += 1
            fetched = self._kodb.search_subjects_many(missing)
            for term in missing:
                self._by_term[term] = tuple(fetched.get(term, ()))
        return {t: list(self._by_term[t]) for t in terms}

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        """All facts of these subjects, sorted as the store sorts them; new subjects are
        fetched in one call."""
        wanted = set(subject_norms)
        missing = wanted.difference(self._facts)
        if missing:
            self.statements += 1
            grouped: dict[str, list[Fact]] = {s: [] for s in missing}
            for fact in self._kodb.facts_for_subjects(missing):
                grouped.setdefault(fact.subject_norm, []).append(fact)
            for subject, facts in grouped.items():
                self._facts[subject] = tuple(facts)
        # The store sorts by subject_norm first, and each cached list keeps its order.
        return [f for s in sorted(wanted) for f in self._facts.get(s, ())]

    def entries(self) -> int:
        """Cached rows: files, terms and facts (what ``trim`` bounds)."""
        return len(self._by_file) + len(self._by_term) + sum(map(len, self._facts.values()))

    def trim(self) -> None:
        """Forget everything once the cache outgrows its bound (between chunks)."""
        if self.entries() > self._max_entries:
            self._by_file.clear()
            self._by_term.clear()
            self._facts.clear()

    def close(self) -> None:
        """The owner of the real KoDB closes it."""


# --- embedding -----------------------------------------------------------------------------
def _token_lengths(embedder: Any, texts: Sequence[str]) -> list[int] | None:
    """Token counts as the model's own tokenizer sees them (after truncation), or None
    when the embedder does not expose a sentence-transformers encoder."""
    encoder = getattr(embedder, "_encoder", None)
    # sentence-transformers 6 renamed tokenize to preprocess.
    tokenize = getattr(encoder, "preprocess", None) or getattr(encoder, "tokenize", None)
    if not callable(tokenize):
        return None
    try:
        features = tokenize(list(texts))
        return [int(n) for n in np.asarray(features["attention_mask"]).sum(axis=1)]
    except Exception as exc:  # an unusual encoder: batching still works, just not bitwise
        log.debug("cannot count tokens for batching: %s", exc)
        return None


def embed_prompts(embedder: Any, texts: Sequence[str]) -> tuple[np.ndarray, int]:
    """Embed prompts in batches of equal token length; returns (vectors, forward batches).

    Padding changes a prompt's vector in the last bits, so only prompts of the same length
    share a batch: with MKL's strict mode (``pipeline.embed.batch_invariant``) each row then
    equals ``embedder.embed([text])[0]`` exactly, as ``Pipeline.ask`` computes it.
    """
    if not texts:
        return np.zeros((0, int(getattr(embedder, "dims", 0))), dtype=np.float32), 0
    lengths = _token_lengths(embedder, texts)
    if lengths is None:
        return np.asarray(embedder.embed(list(texts)), dtype=np.float32), 1
    groups: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(lengths):
        groups[n].append(i)
    out: np.ndarray | None = None
    for idx in groups.values():
        vectors = np.asarray(embedder.embed([texts[i] for i in idx]), dtype=np.float32)
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[idx] = vectors
    assert out is not None
    return out, len(groups)


# --- exact search over all vectors -----------------------------------------------------------
#: The shortlist keeps every note whose float32 cosine is within this of the k-th best: far
#: above float32 rounding (≈1e-6 for 384 dims), so the true top k is always in it.
SHORTLIST_SLACK: Final = 1e-4


class ExactSearch:
    """Every note vector of the graph, searched exactly: one matrix product per chunk picks a
    shortlist per prompt (the k best plus near-ties), and ``scoring.exact_rescore`` — the
    graph client's own re-scoring — gives the cosines, the order and the tie-break by path.

    So hits equal ``GraphClient.vector_search`` whenever the index's over-fetch holds the
    true top k (with ~70 notes and 200 candidates, always). Titles and source types come
    from the KO-DB registry for notes whose content hash matches the graph's; a prompt
    whose hits include another note is searched on the index instead.
    """

    def __init__(
        self,
        paths: Sequence[str],
        titles: Sequence[str | None],
        source_types: Sequence[str | None],
        matrix: np.ndarray,
        dialect: str = "neo4j",
    ) -> None:
        self.paths = list(paths)
        self.titles = list(titles)
        self.source_types = list(source_types)
        self.dialect = dialect
        self.matrix = np.asarray(matrix, dtype=np.float32)
        norms = np.linalg.norm(self.matrix, axis=1) if len(self.paths) else np.zeros(0)
        self._inv_norms = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
        self._rows: dict[int, tuple[float, ...]] = {}

    @classmethod
    def load(cls, graph: Any, kodb: Any) -> ExactSearch:
        """Read all vectors (one round trip) and the registry (one statement)."""
        states, matrix = graph.all_vectors()
        notes = kodb.notes()
        titles: list[str | None] = []
        types: list[str | None] = []
        for state in states:
            note = notes.get(state.path)
            same = note is not None and note.content_hash == state.content_hash
            titles.append(note.title if same and note else None)
            types.append(note.source_type if same and note else None)
        dialect = str(getattr(graph, "dialect", "neo4j"))
        return cls([s.path for s in states], titles, types, matrix, dialect)

    @property
    def dims(self) -> int:
        return int(self.matrix.shape[1]) if self.matrix.ndim == 2 and len(self.paths) else 0

    def shortlist_scores(self, queries: np.ndarray) -> np.ndarray:
        """(n prompts × N notes) float32 cosines: only for choosing shortlists."""
        q = np.asarray(queries, dtype=np.float32)
        q_norms = np.linalg.norm(q, axis=1)
        q_inv = np.where(q_norms > 0, 1.0 / np.where(q_norms > 0, q_norms, 1.0), 0.0)
        return (q @ self.matrix.T) * q_inv[:, None].astype(np.float32) * self._inv_norms[None, :]

    def _row(self, i: int) -> tuple[float, ...]:
        row = self._rows.get(i)
        if row is None:
            row = tuple(self.matrix[i].astype(np.float64).tolist())
            self._rows[i] = row
        return row

    def top_k(self, query: np.ndarray, scores: np.ndarray, k: int) -> list[Hit] | None:
        """The k best notes for one prompt (``scores``: its shortlist row); None when one of
        them has no registry title."""
        if k <= 0 or not self.paths:
            return []
        if k < scores.size:
            kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
            idx = np.flatnonzero(scores >= kth - SHORTLIST_SLACK)
        else:
            idx = np.arange(scores.size)
        candidates = [
            Candidate(
                self.paths[i],
                self.titles[i] or "",
                self.source_types[i] or "",
                self._row(i),
                float("nan"),
            )
            for i in sorted(idx.tolist(), key=self.paths.__getitem__)
        ]
        ranked = exact_rescore(np.asarray(query, dtype=np.float64), candidates, k, self.dialect)
        position = {self.paths[i]: i for i in idx.tolist()}
        hits: list[Hit] = []
        for h in ranked:
            i = position[h.path]
            if self.titles[i] is None or self.source_types[i] is None:
                return None
            hits.append(Hit(h.path, h.title, h.source_type, h.cosine))  # type: ignore[arg-type]
        return hits


# --- the batch -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionReport:
    """What a load-context run did (the summary line and the --json document)."""

    sessions: int  # valid prompts read
    written: int
    skipped_done: int  # already written by a previous run (--resume)
    bad_lines: tuple[BadLine, ...]
    labels: dict[str, int]
    modes: dict[str, int]
    search_path: str  # exact | index | none (no semantic search ran)
    searches: dict[str, int]  # prompts searched per path
    embed_batches: int
    batch_invariant: bool
    kodb_statements: int
    chunks: int
    seconds: float
    out: str
    format: str
    degraded_reasons: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The `vault-ko load-context --json` document."""
        return {
            "sessions": self.sessions,
            "written": self.written,
            "skipped_done": self.skipped_done,
            "bad_lines": [{"line": b.line, "reason": b.reason} for b in self.bad_lines],
            "labels": dict(self.labels),
            "modes": dict(self.modes),
            "search_path": self.search_path,
            "searches": dict(self.searches),
            "embed_batches": self.embed_batches,
            "batch_invariant": self.batch_invariant,
            "kodb_statements": self.kodb_statements,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "prompts_per_second": round(self.written / self.seconds, 1) if self.seconds else None,
            "out": self.out,
            "format": self.format,
            "degraded_reasons": list(self.degraded_reasons),
        }


ProgressFn = Callable[[int, int | None], None]
BadLineFn = Callable[[BadLine], None]


@dataclass
class _Stats:
    written: int = 0
    skipped_done: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    searches: Counter[str] = field(default_factory=Counter)
    embed_batches: int = 0
    chunks: int = 0
    reasons: dict[str, None] = field(default_factory=dict)


class SessionLoader:
    """Answers many prompts as one batch over an owner Pipeline's resources.

    The loader answers through a second Pipeline that shares the owner's settings, graph
    client and (lazily) model, and sees KO-DB through a ``CachedKodb``. The owner stays in
    charge of closing them.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        options: QueryOptions | None = None,
        *,
        search: SearchChoice = "auto",
        chunk_size: int = DEFAULT_CHUNK,
    ) -> None:
        if search not in ("auto", "exact", "index"):
            raise ConfigError(f"unknown search path {search!r}; choose auto, exact or index")
        if chunk_size < 1:
            raise ConfigError("--chunk-size must be at least 1")
        self.owner = pipeline
        self.options = options or QueryOptions.from_settings(pipeline.settings)
        self.search = search
        self.chunk_size = chunk_size
        self.kodb = CachedKodb(pipeline.kodb)
        self.batch = Pipeline(
            pipeline.settings,
            kodb=self.kodb,  # type: ignore[arg-type]
            graph=pipeline.graph,
            embedder=pipeline.embedder,  # lazy: an all-fallback batch never loads it
        )
        self._exact: ExactSearch | None = None
        self._path: str | None = None  # the search path once chosen: exact | index

    # -- one chunk ------------------------------------------------------------------------
    def answer_chunk(self, prompts: Sequence[str], stats: _Stats | None = None) -> list[Answer]:
        """Answers for these prompts, in order; equal to ``Pipeline.ask`` for each, timings
        aside. Each answer's timings hold its own stages plus its share of batch stages."""
        stats = stats if stats is not None else _Stats()
        texts = [p.strip() for p in prompts]
        if any(not t for t in texts):
            raise ConfigError("a prompt is empty")
        if not texts:
            return []
        opts = self.options
        timers = [Timer() for _ in texts]
        t0 = time.perf_counter()
        reason: str | None = None
        shared: dict[str, float] = {}
        if not opts.semantic:
            reason = "semantic search disabled (--no-semantic)"
        else:
            try:
                t = time.perf_counter()
                self.batch.graph.ping()
                shared["graph_check_ms"] = (time.perf_counter() - t) * 1e3
            except GraphUnavailable as exc:
                reason = f"graph unavailable: {exc}"
        answers: list[Answer] = []
        if reason is None:
            try:
                for answer in self._semantic_answers(texts, timers, shared, stats):
                    answers.append(answer)
            except GraphUnavailable as exc:  # before or while answering: the rest falls back
                reason = f"graph unavailable: {exc}"
        if reason is not None:
            rest = texts[len(answers) :]
            self._prefetch_fallback(rest)
            for text, timer in zip(rest, timers[len(answers) :], strict=True):
                answers.append(self.batch.fallback_answer(text, opts, timer, reason))
            stats.reasons.setdefault(reason, None)
        per_prompt = (time.perf_counter() - t0) * 1e3
        out = []
        for answer, timer in zip(answers, timers, strict=True):
            ms = dict(timer.ms)
            for key, value in shared.items():
                ms[key] = round(ms.get(key, 0.0) + value / len(texts), 3)
            ms["total_ms"] = round(per_prompt / len(texts), 3)
            out.append(replace(answer, timings_ms=ms))
        self.kodb.trim()
        return out

    def _semantic_answers(
        self, texts: list[str], timers: list[Timer], shared: dict[str, float], stats: _Stats
    ) -> Iterator[Answer]:
        """Embed and search the chunk, then yield each prompt's answer in order; raises
        GraphUnavailable when the graph goes away (the caller answers the rest in fallback)."""
        opts = self.options
        t = time.perf_counter()
        vectors, batches = embed_prompts(self.batch.embedder, texts)
        shared["embed_ms"] = (time.perf_counter() - t) * 1e3
        stats.embed_batches += batches
        t = time.perf_counter()
        path = self._choose_path(len(texts))
        searchers: list[Callable[[Any, int], list[Hit]]]
        if path == "exact":
            searchers = self._exact_searchers(vectors)
        else:
            searchers = [self.batch.index_search] * len(texts)
        shared["graph_ms"] = (time.perf_counter() - t) * 1e3
        if path == "exact" and not opts.session_notes_only and not opts.per_token:
            self._prefetch_semantic(vectors, searchers, timers)
        for text, vector, searcher, timer in zip(texts, vectors, searchers, timers, strict=True):
            yield self.batch.answer_from_vector(text, vector, opts, timer, search=searcher)
            stats.searches[path] += 1

    def _choose_path(self, prompts: int) -> str:
        """exact or index, chosen once per run (auto: by batch size against vault size)."""
        if self._path is not None:
            return self._path
        choice = self.search
        if choice == "auto":
            if prompts < AUTO_EXACT_MIN_PROMPTS:
                choice = "index"
            else:
                notes = len(self.kodb.notes())
                choice = "exact" if prompts * AUTO_NOTES_PER_PROMPT >= notes else "index"
        if choice == "exact":
            try:
                exact = ExactSearch.load(self.batch.graph, self.kodb)
            except GraphQueryError as exc:  # e.g. embeddings of several sizes
                log.warning("exact search unavailable, using the index: %s", exc)
                exact = None
            dims = getattr(self.batch.embedder, "dims", None)
            if exact is not None and exact.paths and dims is not None and exact.dims != dims:
                log.warning("graph vectors have %d dims, the model %s: index", exact.dims, dims)
                exact = None
            if exact is None:
                choice = "index"
            self._exact = exact
        self._path = choice
        return choice

    def _exact_searchers(self, vectors: np.ndarray) -> list[Callable[[Any, int], list[Hit]]]:
        exact = self._exact
        assert exact is not None
        scores = exact.shortlist_scores(vectors)
        return [self._row_searcher(exact, scores[i]) for i in range(len(vectors))]

    def _row_searcher(
        self, exact: ExactSearch, scores: np.ndarray
    ) -> Callable[[Any, int], list[Hit]]:
        memo: dict[int, list[Hit]] = {}

        def search(vector: Any, k: int) -> list[Hit]:
            if k not in memo:
                usable = np.isfinite(scores).all() and np.any(vector)
                hits = exact.top_k(vector, scores, k) if usable else None
                # A hit the registry cannot name (stale registry): ask the graph itself.
                memo[k] = hits if hits is not None else self.batch.index_search(vector, k)
            return list(memo[k])

        return search

    # -- KO-DB prefetch: a few set-based statements per chunk ---------------------------------
    def _prefetch_semantic(
        self,
        vectors: np.ndarray,
        searchers: Sequence[Callable[[Any, int], list[Hit]]],
        timers: Sequence[Timer],
    ) -> None:
        """Warm the cache for the chunk: the subjects of the files of hits above the floor,
        their titles in one search, then the facts of every nominated subject; one statement
        each.

        Only a warm-up: answers do not depend on it (a miss is fetched when asked).
        """
        opts = self.options
        basis = self.batch.basis()
        live: list[tuple[list[Hit], float | None]] = []
        for vector, searcher, timer in zip(vectors, searchers, timers, strict=True):
            with timer.stage("graph_ms"):
                hits = searcher(vector, opts.hits)[: opts.hits]
            rel = assess(hits[0].cosine if hits else None, basis)
            if rel.label != "no_match" and opts.subjects and opts.top_k:
                live.append((hits, rel.floor_cosine))
        above = [h for hits, floor in live for h in hits if floor is None or h.cosine > floor]
        if above:
            self.kodb.subjects_by_source_file({h.path for h in above})
        titles = {h.title for h in above if h.title.strip()}
        if titles:
            self.kodb.search_subjects_many(sorted(titles))
        candidates: set[str] = set()
        for hits, floor in live:
            candidates.update(bridge.semantic_candidates(hits, floor, self.kodb))
        if candidates:
            self.kodb.facts_for_subjects(candidates)

    def _prefetch_fallback(self, texts: Sequence[str]) -> None:
        if not (self.options.subjects and self.options.top_k):
            return
        terms = sorted({t for text in texts for t in bridge.query_terms(text)})
        if not terms:
            return
        self.kodb.search_subjects_many(terms)
        candidates: set[str] = set()
        for text in texts:
            candidates.update(bridge.term_candidates(text, self.kodb))
        if candidates:
            self.kodb.facts_for_subjects(candidates)

    # -- the whole run ----------------------------------------------------------------------
    def run(
        self,
        items: Iterable[SessionPrompt | BadLine],
        sink: PackSink,
        *,
        total_lines: int | None = None,
        progress: ProgressFn | None = None,
        on_bad_line: BadLineFn | None = None,
        out_label: str = "",
        fmt: str = "jsonl",
    ) -> SessionReport:
        """Answer every prompt, writing each pack as it is ready; skips ids the sink already
        holds (--resume). Bad lines are passed to ``on_bad_line`` and listed in the report."""
        started = time.perf_counter()
        stats = _Stats()
        done = sink.done_ids()
        bad: list[BadLine] = []
        sessions = 0
        lines = 0
        chunk: list[SessionPrompt] = []

        def flush() -> None:
            if not chunk:
                return
            answers = self.answer_chunk([s.prompt for s in chunk], stats)
            for item, answer in zip(chunk, answers, strict=True):
                sink.write(Pack(item.id, item.prompt, answer))
                stats.written += 1
                stats.labels[answer.relevance.label] += 1
                stats.modes[answer.mode] += 1
            sink.commit()
            stats.chunks += 1
            chunk.clear()
            if progress is not None:
                progress(lines, total_lines)

        for item in items:
            lines = item.line
            if isinstance(item, BadLine):
                bad.append(item)
                if on_bad_line is not None:
                    on_bad_line(item)
                continue
            sessions += 1
            if item.id in done:
                stats.skipped_done += 1
                continue
            chunk.append(item)
            if len(chunk) >= self.chunk_size:
                flush()
        flush()
        sink.close()
        if progress is not None:
            progress(lines, total_lines)
        return SessionReport(
            sessions=sessions,
            written=stats.written,
            skipped_done=stats.skipped_done,
            bad_lines=tuple(bad),
            labels=dict(sorted(stats.labels.items())),
            modes=dict(sorted(stats.modes.items())),
            search_path=self._path if stats.searches else "none",
            searches=dict(sorted(stats.searches.items())),
            embed_batches=stats.embed_batches,
            batch_invariant=batch_invariant(),
            kodb_statements=self.kodb.statements,
            chunks=stats.chunks,
            seconds=time.perf_counter() - started,
            out=out_label,
            format=fmt,
            degraded_reasons=tuple(stats.reasons),
        )


def load_context(
    pipeline: Pipeline,
    lines: Iterable[str | bytes],
    out_dir: Path,
    *,
    fmt: Format = "jsonl",
    options: QueryOptions | None = None,
    resume: bool = False,
    search: SearchChoice = "auto",
    chunk_size: int = DEFAULT_CHUNK,
    total_lines: int | None = None,
    progress: ProgressFn | None = None,
    on_bad_line: BadLineFn | None = None,
) -> SessionReport:
    """Read session lines, answer them as a batch over ``pipeline``, write packs to
    ``out_dir`` (``packs.jsonl`` or one markdown file per session); the in-process API of
    `vault-ko load-context`."""
    loader = SessionLoader(pipeline, options, search=search, chunk_size=chunk_size)
    sink = open_sink(out_dir, fmt, loader.options, resume=resume)
    try:
        items = read_sessions(lines, pipeline.settings)
        label = str(out_dir / PACKS_FILE) if fmt == "jsonl" else str(out_dir)
        return loader.run(
            items,
            sink,
            total_lines=total_lines,
            progress=progress,
            on_bad_line=on_bad_line,
            out_label=label,
            fmt=fmt,
        )
    except VaultKoError:
        sink.close()  # keep what was committed, for --resume
        raise
