"""load-context input: one session a line, parsed lazily, bad lines reported by number.

One session per line (blank lines are passed over; bad lines are reported with their line
number and skipped):

* plain text: the prompt; its id is the line number;
* a plain-text line that is the vault-relative path of an existing ``.md`` note: the note's
  text (title and body, as the graph embeds it) is the prompt; id = line number;
* a JSON object (the line starts with ``{``): ``{"id": "s1", "prompt": "…"}`` or
  ``{"id": "s1", "note": "sessions/2026-02-03-x.md"}``; ``id`` (string or integer) defaults
  to the line number; ids must be unique.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pipeline.errors import InputError

if TYPE_CHECKING:
    from pipeline.config import Settings
    from pipeline.privacy import PrivateNotes


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
    lines: Iterable[str | bytes], settings: Settings, private: PrivateNotes | None = None
) -> Iterator[SessionPrompt | BadLine]:
    """Parse input lines (see the module docstring) lazily, in order, numbered from 1.

    Lines may be bytes (read from a binary stream): a line that is not UTF-8 is a bad line.
    A line naming a note that ``private`` covers is a bad line too: its text would become
    the pack's prompt (the caller passes no ``private`` when private notes are included).
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
        if not text.strip():  # a blank line (an editor's last one) holds no session
            continue
        try:
            item = _parse_line(text, number, settings, private)
        except InputError as exc:
            yield BadLine(number, exc.reason)
            continue
        first = seen.get(item.id)
        if first is not None:
            yield BadLine(number, f"duplicate id {item.id!r} (first on line {first})")
            continue
        seen[item.id] = number
        yield item


def _parse_line(
    text: str, number: int, settings: Settings, private: PrivateNotes | None
) -> SessionPrompt:
    stripped = text.strip()
    if stripped.startswith("{"):
        return _parse_json(stripped, number, settings, private)
    if stripped.lower().endswith(".md") and _note_file(stripped, settings) is not None:
        prompt = _note_prompt(stripped, settings, private)
        return SessionPrompt(number, str(number), prompt, _note_path(stripped))
    return SessionPrompt(number, str(number), _typed(stripped))


def _parse_json(
    text: str, number: int, settings: Settings, private: PrivateNotes | None
) -> SessionPrompt:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"bad JSON at column {exc.colno}: {exc.msg}") from None
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
        prompt = _note_prompt(note.strip(), settings, private)
        return SessionPrompt(number, sid, prompt, _note_path(note.strip()))
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError("missing prompt (a non-empty string) or note")
    return SessionPrompt(number, sid, _typed(prompt.strip()))


def _typed(prompt: str) -> str:
    """A prompt as written in the input, if it is no longer than the service takes (a 12 MB
    line had taken minutes to answer, where the service and MCP refuse it at once)."""
    from pipeline.service.client import MAX_QUESTION_CHARS

    if len(prompt) > MAX_QUESTION_CHARS:
        raise InputError(
            f"the prompt has {len(prompt):,} characters; at most {MAX_QUESTION_CHARS:,} "
            "(as the service and MCP take)"
        )
    return prompt


def _note_path(rel: str) -> str:
    """A note line's path as the vault's notes are named ("./a\\b.md" is "a/b.md")."""
    return PurePosixPath(rel.replace("\\", "/")).as_posix()


def _shaped(rel: str) -> PurePosixPath | None:
    """``rel`` as a note's path may be written: relative, no "..", a ``.md`` file; else None."""
    posix = PurePosixPath(_note_path(rel))
    if posix.is_absolute() or ".." in posix.parts or posix.suffix.lower() != ".md":
        return None
    return posix


def _note_file(rel: str, settings: Settings) -> Path | None:
    """The note file for a vault-relative path, or None when it is not one inside the vault."""
    posix = _shaped(rel)
    if posix is None:
        return None
    root = settings.vault.resolve()
    path = (root / posix).resolve()
    try:
        path.relative_to(root)
    except ValueError:
        return None
    return path if path.is_file() else None


def _note_prompt(rel: str, settings: Settings, private: PrivateNotes | None) -> str:
    from pipeline.vault.parse import read_note
    from pipeline.vault.scan import source_type_for

    shape = _shaped(rel)
    if shape is None or _note_file(rel, settings) is None:
        if shape is not None and not (settings.vault / shape).exists():
            raise InputError(f"no note {rel!r} in the vault")
        raise InputError(f"note {rel!r} is not a .md file inside the vault")
    posix = shape.as_posix()
    if private is not None and private.is_private(posix):
        raise InputError(
            f"note {posix} is private (vault_private_globs): pass --include-private to use it"
        )
    parsed = read_note(
        settings.vault, posix, source_type_for(posix, settings), settings.vault_max_note_bytes
    )
    text = parsed.embed_text.strip()
    if not text:
        raise InputError(f"note {rel!r} is empty")
    return text
