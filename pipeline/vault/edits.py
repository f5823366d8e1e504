"""Notes edited since the last sync: what a question answered in a fresh process cannot see.

A cold `vault-ko query` or hook answers from KO-DB and the graph as the last `sync` (or a
watcher) left them. A note edited, added or deleted since is not in the answer, and the
answer says so instead of being silently out of date (``Answer.unsynced``).

The comparison is the first step of ingest's, without the parser: the vault is scanned with
ingest's rules, and a file whose mtime and size equal its registry row is unchanged. A
touched file (a checkout, a sync tool) is read and hashed, so the same bytes are no edit.
A new file is counted unread, even one that sync would skip as bad input: the answer does
not hold it either, and sync says why. A file over ``vault_max_note_bytes`` is never a note
(sync refuses it by its size), so it is not counted. Past ``VERIFY_LIMIT`` touched files
they count unread: reading thousands of notes would cost more than the answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.config import Settings
from pipeline.model import NoteStamp, UnsyncedEdits
from pipeline.vault.scan import content_hash, scan_vault

#: Touched files read to tell an edit from a touch; past it they count as edits unread.
VERIFY_LIMIT = 50


def unsynced_edits(settings: Settings, registry: Mapping[str, NoteStamp]) -> UnsyncedEdits:
    """How the notes on disk differ from KO-DB's registry, ``registry`` (its
    ``note_stamps``; private notes included: only counts leave here, never a path)."""
    files = [f for f in scan_vault(settings) if f.bytes <= settings.vault_max_note_bytes]
    on_disk = {f.path for f in files}
    added = sum(f.path not in registry for f in files)
    removed = sum(path not in on_disk for path in registry)
    touched = [
        f for f in files if (k := registry.get(f.path)) is not None and not f.untouched_since(k)
    ]
    if len(touched) > VERIFY_LIMIT:
        return UnsyncedEdits(changed=len(touched), added=added, removed=removed)
    changed = 0
    for f in touched:
        try:
            raw = (settings.vault / f.path).read_bytes()
        except OSError:
            continue  # gone or unreadable since the scan: sync will say which
        changed += content_hash(raw) != registry[f.path].content_hash
    return UnsyncedEdits(changed=changed, added=added, removed=removed)
