"""Notes edited since the last sync: what a question answered without the service cannot see.

A cold `vault-ko query`, the hook or MCP's `ask` answers from KO-DB and the graph as the
last `sync` (or a watcher) left them. A note edited, added or deleted since is not in the
answer, and the answer says so instead of being silently out of date (``Answer.unsynced``).

The comparison is the first step of ingest's: the vault is scanned with ingest's rules, and
a file whose mtime and size equal its registry row is unchanged (sync gives a touched file
with the same bytes its new stamp, so a checkout is read once, by sync). A file that
differs is an edit only if sync would apply it: its bytes differ from the row's, and it
parses (the parser is imported only for such a file). One sync skips (bad input, or over
``vault_max_note_bytes``) is not counted, since sync keeps what the note said before and
says why, and counting it would nag every answer until the file is mended. Past
``VERIFY_LIMIT`` differing files they count unread: reading thousands of notes would cost
more than the answer.
"""

from __future__ import annotations

from collections.abc import Mapping

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
    new = [f for f in notes if f.path not in registry]
    touched = [
        f for f in notes if (k := registry.get(f.path)) is not None and not f.untouched_since(k)
    ]
    if len(new) + len(touched) > VERIFY_LIMIT:
        return UnsyncedEdits(changed=len(touched), added=len(new), removed=removed)
    added = sum(_would_apply(settings, f, None) for f in new)
    changed = sum(_would_apply(settings, f, registry[f.path].content_hash) for f in touched)
    return UnsyncedEdits(changed=changed, added=added, removed=removed)


def _would_apply(settings: Settings, scanned: ScannedFile, known_hash: str | None) -> bool:
    """Whether sync would write this file: its bytes differ from ``known_hash`` (None: a new
    note) and they parse as a note (the parser is imported only then)."""
    try:
        raw, _ = read_note_bytes(settings.vault, scanned.path, settings.vault_max_note_bytes)
    except InputError:
        return False  # gone, unreadable or grown since the scan: sync will say which
    if known_hash is not None and content_hash(raw) == known_hash:
        return False
    from pipeline.vault.parse import parse_note

    try:
        parse_note(raw, scanned.path, scanned.source_type, mtime=scanned.mtime)
    except InputError:
        return False
    return True
