"""load-context output: context packs, where they go, and the journal ``--resume`` reads.

``<out>/packs.jsonl`` (one object per prompt in input order: the answer JSON of
``render.to_dict`` of the answer plus ``id`` and ``prompt``) or one ``<out>/<safe id>.md`` per
session. What ``--resume`` needs lives in ``<out>/.load-context.state`` (a header line,
then one line per written pack), never in the packs themselves.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from pipeline import statefile
from pipeline.errors import ConfigError, InputError
from pipeline.model import Answer
from pipeline.render import to_dict, to_markdown

if TYPE_CHECKING:
    from pipeline.query import QueryOptions

PACKS_FILE: Final = "packs.jsonl"
STATE_FILE: Final = ".load-context.state"
STATE_VERSION: Final = 1
#: Packs quote the prompts, secrets and all: the owner's alone, like the hook's log.
PACK_MODE: Final = 0o600

Format = Literal["jsonl", "md"]


@dataclass(frozen=True)
class Pack:
    """The context pack of one session: its id, its prompt and the Pipeline's answer."""

    id: str
    prompt: str
    answer: Answer


@to_dict.register
def _pack(pack: Pack) -> dict[str, Any]:
    """One line of packs.jsonl: ``id``, ``prompt``, then the answer JSON's keys."""
    return {"id": pack.id, "prompt": pack.prompt, **to_dict(pack.answer)}


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
            statefile.write_text(self.path, json.dumps(self.header, sort_keys=True) + "\n")
        self._fh = self.path.open("a", encoding="utf-8")

    def _load(self) -> None:
        raw = self.path.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        # At "\n" only: a prompt may hold U+2028, which str.splitlines splits at.
        lines = complete.decode("utf-8", "replace").split("\n")[:-1]
        try:
            header = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            header = None
        if header != self.header:
            if isinstance(header, dict):
                # Named one by one: a default that changed between versions (retrieval
                # became hybrid) is then one option to pass, e.g. --retrieval dense.
                changed = ", ".join(
                    f"{k} {header.get(k)!r} (now {v!r})"
                    for k, v in self.header.items()
                    if header.get(k) != v
                )
                what = f"other settings: {changed or header}"
            else:
                what = f"other settings ({header})"
            raise ConfigError(
                f"{self.path} records packs made with {what}; "
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
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PACK_MODE)
        os.fchmod(fd, PACK_MODE)  # one a run before this made keeps no wider mode
        self._fh = os.fdopen(fd, "r+b")
        # Packs written after the last commit (a crash) are cut off; they are redone.
        self._fh.truncate(self._state.last_end if resume else 0)
        self._fh.seek(0, os.SEEK_END)
        self._pending: list[str] = []

    def done_ids(self) -> set[str]:
        return set(self._state.done)

    def write(self, pack: Pack) -> None:
        line = json.dumps(to_dict(pack), ensure_ascii=False, separators=(",", ":"))
        with writing_to(self.path.parent):
            self._fh.write(line.encode("utf-8") + b"\n")
        self._pending.append(pack.id)

    def commit(self) -> None:
        if not self._pending:
            return
        with writing_to(self.path.parent):
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
    """One ``<out>/<safe id>.md`` per session, each written atomically (``pipeline.statefile``).

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
        with writing_to(self.out_dir):
            statefile.write_text(path, pack_to_markdown(pack), mode=PACK_MODE)
        self._pending.append(pack.id)

    def commit(self) -> None:
        if self._pending:
            with writing_to(self.out_dir):
                self._state.record([(sid, None) for sid in self._pending])
            self._pending.clear()

    def close(self) -> None:
        self.commit()
        self._state.close()


def open_sink(out_dir: Path, fmt: Format, opts: QueryOptions, *, resume: bool) -> PackSink:
    """The sink for a format; ``resume`` keeps what a previous run with the same options
    committed (ConfigError when the options differ). Writing into ``out_dir`` fails as
    InputError naming it, at once or at any later pack (``writing_to``)."""
    header = {
        "top_k": opts.top_k,
        "hits": opts.hits,
        "facts_per_subject": opts.facts_per_subject,
        "facts_per_predicate_cap": opts.facts_per_predicate_cap,
        "semantic": opts.semantic,
        "retrieval": opts.retrieval,
    }
    sinks: dict[str, type[JsonlSink | MarkdownSink]] = {"jsonl": JsonlSink, "md": MarkdownSink}
    if fmt not in sinks:
        raise ConfigError(f"unknown pack format {fmt!r}; choose jsonl or md")
    with writing_to(out_dir):
        return sinks[fmt](out_dir, header, resume=resume)


@contextmanager
def writing_to(out_dir: Path) -> Iterator[None]:
    """OSError while writing packs (a file where the folder should be, no permission, a
    full disk) as one InputError naming the folder."""
    try:
        yield
    except OSError as exc:
        raise InputError(
            f"cannot write the packs here: {exc.strerror or exc}", file=str(out_dir)
        ) from exc
