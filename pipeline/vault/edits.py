"""Notes edited since the last sync: what a question answered without the service cannot see.

A cold `vault-ko query`, the hook or MCP's `ask` answers from KO-DB and the graph as the
last `sync` (or a watcher) left them. A note edited, added or deleted since is not in the
answer, and the answer says so instead of being silently out of date (``Answer.unsynced``).

The comparison is the first step of ingest's: the vault is scanned with ingest's rules, and
a file whose mtime and size equal its registry row is unchanged (sync gives a touched file
with the same bytes its new stamp, so a checkout is read once, by sync). A file that
differs is an edit only if sync would apply it: its bytes differ from the row's, and it
parses (the parser is imported only for such a file). One sync skips (bad input, or over
``vault_max_note_bytes``) is no edit, since sync keeps what the note said before and says
why; it is counted apart, as ``unreadable``: the answer cannot see what it says now, and a
question it alone answers would otherwise be told the vault knows nothing (the answer says
so only when it is weak or silent, ``render.unread_words``). Past ``VERIFY_LIMIT``
differing files they count unread: reading thousands of notes would cost more than the
answer (an oversized one still counts as unreadable, by its size).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.model import NoteStamp, UnsyncedEdits
from pipeline.vault.scan import ScannedFile, content_hash, read_note_bytes, scan_vault, under

#: Differing files read to tell an edit sync will apply; past it they count unread.
VERIFY_LIMIT = 50


def unsynced_edits(settings: Settings, registry: Mapping[str, NoteStamp]) -> UnsyncedEdits:
    """How the notes on disk differ from KO-DB's registry, ``registry`` (its
    ``note_stamps``; private notes included: only counts leave here, never a path)."""
    unlisted: list[tuple[str, str]] = []
    files = scan_vault(settings, unreadable=unlisted)
    on_disk = {f.path for f in files}
    folders = [folder for folder, _ in unlisted]  # unknown there, not removed (as sync keeps them)
    removed = sum(path not in on_disk and not under(path, folders) for path in registry)
    # Sync refuses a file over the limit by its size (a note grown past it keeps its row):
    # never an edit, and not one to count towards the limit either.
    notes = [f for f in files if f.bytes <= settings.vault_max_note_bytes]
    oversized = len(files) - len(notes)
    new = [f for f in notes if f.path not in registry]
    touched = [
        f for f in notes if (k := registry.get(f.path)) is not None and not f.untouched_since(k)
    ]
    if len(new) + len(touched) > VERIFY_LIMIT:
        return UnsyncedEdits(len(touched), len(new), removed, unreadable=oversized)
    added = Counter(_would_apply(settings, f, None) for f in new)
    changed = Counter(_would_apply(settings, f, registry[f.path].content_hash) for f in touched)
    return UnsyncedEdits(
        changed=changed[_APPLIES],
        added=added[_APPLIES],
        removed=removed,
        unreadable=oversized + added[_UNREADABLE] + changed[_UNREADABLE],
    )


def since_sync(
    settings: Settings, registry: Mapping[str, NoteStamp], paths: Iterable[str]
) -> dict[str, str]:
    """Of ``paths`` (an answer's notes), those whose file changed since the last sync:
    ``"deleted"`` when it is gone, ``"edited"`` when its bytes differ from its registry
    row's (read only when its mtime or size differ). An answer shows them so: its excerpt
    and facts are what the note said then."""
    out: dict[str, str] = {}
    for path in paths:
        known = registry.get(path)
        if known is None or path in out:
            continue
        try:
            st = (settings.vault / path).stat()
        except FileNotFoundError:
            out[path] = "deleted"
            continue
        except OSError:
            continue  # unreadable: sync keeps it and says why
        if (st.st_mtime, st.st_size) == (known.mtime, known.bytes):
            continue
        try:
            raw, _ = read_note_bytes(settings.vault, path, settings.vault_max_note_bytes)
        except InputError:
            continue
        if content_hash(raw) != known.content_hash:
            out[path] = "edited"
    return out


#: ``_would_apply``'s answers: sync writes the file, it holds what sync has, or sync skips
#: it as bad input.
_APPLIES: Final = "applies"
_SAME: Final = "same"
_UNREADABLE: Final = "unreadable"


def _would_apply(settings: Settings, scanned: ScannedFile, known_hash: str | None) -> str:
    """What sync would do with this file: ``_APPLIES`` when its bytes differ from
    ``known_hash`` (None: a new note) and parse as a note (the parser is imported only
    then), ``_UNREADABLE`` when sync would skip it as bad input, else ``_SAME``."""
    try:
        raw, _ = read_note_bytes(settings.vault, scanned.path, settings.vault_max_note_bytes)
    except InputError as exc:
        # Gone since the scan: the next answer counts it as deleted. Else sync skips it
        # too (locked, grown past the limit), saying why.
        return _SAME if isinstance(exc.__cause__, FileNotFoundError) else _UNREADABLE
    if known_hash is not None and content_hash(raw) == known_hash:
        return _SAME
    from pipeline.vault.parse import parse_note

    try:
        parse_note(raw, scanned.path, scanned.source_type, mtime=scanned.mtime)
    except InputError:
        return _UNREADABLE
    return _APPLIES
