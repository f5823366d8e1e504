"""Vault ingestion: scan the notes, extract facts from new and changed ones, record the run.

Incremental: a note whose (mtime, size) matches its registry row is not read at all; one
whose bytes hash to the registered ``content_hash`` keeps its facts. Only new and changed
notes are parsed and extracted. Notes gone from disk (or now excluded) are removed with
their facts. A note that has become bad input (invalid YAML, not UTF-8, binary, too big) is
reported in ``skipped`` and keeps its previous registry row and facts: nothing is lost and
the run never aborts for one note. Everything is written in one KO-DB transaction.

Links resolve the way Obsidian resolves them, by file: ``[[0007-use-redis]]`` names the note
whose file stem is ``0007-use-redis`` and ``[[adr/0007-use-redis]]`` the one at that path
(case-insensitive); a link naming a note's title resolves too. A resolved link's facts use
the linked note's own subject (frontmatter ``subject:``, else its title), so one note's
evidence is not split between its file name and its title. A stem several notes share
(and a title that names notes with different subjects) resolves to nothing: the link keeps
its raw target, as Obsidian then needs a path. The resolver (``LinkResolver``) is built each
run over the whole vault, from the registry for unchanged notes and from the parse for
changed ones. When it differs from the previous run's (a note was added, removed, renamed
or retitled), unchanged notes whose ``links_to`` facts name an affected key, or the subject
that key used to resolve to, are re-read and re-extracted in the same transaction
(``relinked`` in the report), so an incremental run ends where a full one would.

Private notes (``vault_private_globs``): a public note's link to a private note resolves to
nothing, so its facts keep the target as the public note wrote it (its last path segment)
and never carry what the private note says (its subject or title); the answers hide private
notes' own facts, and this keeps their words out of public notes' facts. A private note's
links resolve as any note's (its facts never reach an answer). Public notes extracted before
the globs covered the note they link to are found by the private subjects their facts still
name, and re-extracted (``relinked``).

Registry rows written before notes had a ``subject`` column (``subject`` NULL) were
extracted without link resolution, and rows of another ``extract.EXTRACTOR_VERSION`` (NULL:
before versions were recorded) under other rules: their notes are re-extracted once, so an
upgraded vault-ko gives an existing KO-DB the facts of its current rules.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pipeline.config import Settings
from pipeline.errors import ConfigError, InputError, VaultKoError
from pipeline.languages import NO_STEMMING, language_of
from pipeline.model import SOURCE_TYPES, Fact, Note, NoteText, normalize_text
from pipeline.privacy import PrivateNotes
from pipeline.vault.extract import (
    EXTRACTOR,
    EXTRACTOR_VERSION,
    Resolver,
    extract_facts,
    link_key,
)
from pipeline.vault.parse import ParsedNote, parse_note, read_note_bytes
from pipeline.vault.scan import ScannedFile, content_hash, glob_match, scan_vault, under

if TYPE_CHECKING:
    from pipeline.kodb import KoDB

log = logging.getLogger(__name__)

#: A paragraph that opens this many public notes or more (among each note's
#: ``parse.OPENINGS_KEPT`` first paragraphs) is a template line: an attendee, "Last week's
#: notes are linked here: <url>", a template's instructions. It is never a note's summary
#: (docs/ingestion.md). Private notes do not count: nothing of theirs reaches an answer.
TEMPLATE_NOTES = 3

#: progress(done, total): called after each scanned note is handled.
Progress = Callable[[int, int], None]


class SkippedNote(NamedTuple):
    """A note that could not be ingested this run, and why (its old facts were kept).

    A named pair, so ``for path, reason in report.skipped`` works too.
    """

    path: str
    reason: str


@dataclass(frozen=True)
class IngestReport:
    """The outcome of one ingest run; counts of notes and facts are read back from KO-DB."""

    notes_total: int
    notes_by_type: dict[str, int]
    facts_total: int
    facts_by_predicate: dict[str, int]
    skipped: tuple[SkippedNote, ...]
    added: int
    updated: int
    removed: int
    unchanged: int
    seconds: float
    scanned: int = 0
    facts_written: int = 0  # facts extracted from the notes added, updated, relinked, resummarised
    relinked: int = 0  # unchanged notes re-extracted because their links resolve differently
    # unchanged notes re-read because a paragraph they open with became a template line, or
    # stopped being one (TEMPLATE_NOTES), and re-extracted as their summary (or, edited since
    # the scan, their bytes) changed
    resummarised: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``vault-ko ingest --json``."""
        return {
            "notes": {"total": self.notes_total, "by_type": dict(self.notes_by_type)},
            "facts": {"total": self.facts_total, "by_predicate": dict(self.facts_by_predicate)},
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "changes": {
                "scanned": self.scanned,
                "added": self.added,
                "updated": self.updated,
                "removed": self.removed,
                "unchanged": self.unchanged,
                "skipped": len(self.skipped),
                "relinked": self.relinked,
                "resummarised": self.resummarised,
                "facts_written": self.facts_written,
            },
            "seconds": round(self.seconds, 3),
        }


def skip_reason(exc: InputError) -> str:
    """The reason of a skipped note without its path (the report names the path)."""
    if exc.line is not None:
        return f"line {exc.line}: {exc.reason}"
    return exc.reason


@dataclass(frozen=True)
class LinkResolver:
    """Link target -> the subject of the note it names, over the whole vault.

    ``keys`` maps normalised keys (``extract.link_key``) to a subject, or to None when the
    key is ambiguous. Keys by precedence: a note's vault path without ``.md``, its file stem,
    its title; a key of a stronger kind hides the same key of a weaker kind. Within a kind, a
    key naming notes with different subjects is ambiguous.

    ``private`` holds the keys that name a private note (one of the notes the winning kind
    names is private). Called, the resolver resolves every key (a private note's links);
    ``public`` resolves none of those (a public note's links): such a link keeps the target
    as the public note wrote it, never the private note's subject or title.
    """

    keys: Mapping[str, str | None]
    private: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls, notes: Iterable[Note], is_private: Callable[[str], bool] | None = None
    ) -> LinkResolver:
        """The resolver over these registry notes (``subject`` None: the title);
        ``is_private`` names the private notes' paths (None: no note is private)."""
        kinds: tuple[dict[str, set[str]], ...] = ({}, {}, {})  # path, stem, title
        hidden: tuple[set[str], ...] = (set(), set(), set())  # their keys naming a private note
        for note in notes:
            subject = note.subject or note.title
            path = link_key(note.path)
            private = is_private is not None and is_private(note.path)
            stem = path.rsplit("/", 1)[-1]  # the key is already a POSIX path without .md
            for kind, secret, key in zip(
                kinds, hidden, (path, stem, link_key(note.title)), strict=True
            ):
                if key:
                    kind.setdefault(key, set()).add(subject)
                    if private:
                        secret.add(key)
        keys: dict[str, str | None] = {}
        private_keys: set[str] = set()
        for kind, secret in zip(kinds, hidden, strict=True):
            for key, subjects in kind.items():
                if key not in keys:
                    keys[key] = next(iter(subjects)) if len(subjects) == 1 else None
                    if key in secret:
                        private_keys.add(key)
        return cls(keys, frozenset(private_keys))

    @classmethod
    def from_parsed(
        cls, notes: Iterable[ParsedNote], is_private: Callable[[str], bool] | None = None
    ) -> LinkResolver:
        """The resolver over these parsed notes (what a from-scratch ingest builds)."""
        return cls.build((n.note for n in notes), is_private)

    def __call__(self, target: str) -> str | None:
        """The subject ``target`` (as written in a link) resolves to, or None."""
        return self.keys.get(link_key(target))

    def public(self, target: str) -> str | None:
        """What ``target`` resolves to in a public note: None when it names a private note."""
        key = link_key(target)
        return None if key in self.private else self.keys.get(key)

    def for_note(self, path: str, private: PrivateNotes) -> Resolver:
        """The resolver of the links of the note at ``path``."""
        return self if private.is_private(path) else self.public

    def private_subjects(self) -> set[str]:
        """The normalised subjects the private keys resolve to (what a public note's facts
        must not name through a link)."""
        return {normalize_text(v) for k in self.private if (v := self.keys.get(k))}

    def affected_terms(self, new: LinkResolver) -> set[str]:
        """Normalised ``links_to`` objects that may resolve differently under ``new``.

        The keys whose value changed (added, removed, different, turned ambiguous, turned
        private or public), their last path segments (what an unresolved ``[[folder/x]]``
        link stored) and the subjects they resolved to here (what a resolved link stored).
        """
        changed = {
            k
            for k in self.keys.keys() | new.keys.keys()
            if (self.keys.get(k), k in self.private) != (new.keys.get(k), k in new.private)
        }
        terms = changed | {PurePosixPath(k).name for k in changed}
        terms |= {link_key(v) for k in changed if (v := self.keys.get(k))}
        return terms


def ingest_vault(
    settings: Settings,
    kodb: KoDB,
    progress: Progress | None = None,
    *,
    force: bool = False,
) -> IngestReport:
    """Bring KO-DB's registry and ``ingest`` facts in line with the vault on disk.

    ``force`` re-reads and re-extracts every note (after an upgrade of the extraction rules).
    """
    started = time.perf_counter()
    if settings.vault_parse_workers < 0:
        raise ConfigError(
            "vault.parse_workers must be 0 (one per CPU) or more, "
            f"not {settings.vault_parse_workers}"
        )
    registry = kodb.notes()
    unnamed: list[tuple[str, str]] = []
    unlisted: list[tuple[str, str]] = []
    files = scan_vault(settings, unnamed, unlisted)
    on_disk = {f.path: f for f in files}
    # A folder that cannot be listed holds notes we cannot see, not notes that are gone.
    unknown = {p for p in registry if under(p, (folder for folder, _ in unlisted))}

    skipped: list[SkippedNote] = [SkippedNote(path, reason) for path, reason in unnamed]
    skipped += [_unlisted(folder, why, unknown) for folder, why in unlisted]
    private = _private_notes(settings, files)
    parsed, read_skipped, counts, restamped = _read_changed(
        settings, files, registry, force, progress, private
    )
    skipped += read_skipped
    removed = sorted(set(registry) - set(on_disk) - unknown)
    # The registry as this run leaves it: kept rows (unchanged and skipped notes, and those
    # of folders that could not be listed) and the parsed notes' new rows.
    after = {p: n for p, n in registry.items() if p in on_disk or p in unknown} | {
        p: n.note for p, n in parsed.items()
    }
    _say_problems(parsed, after)
    resolver = LinkResolver.build(after.values(), private.is_private)
    # The keys links resolve by (path, title, subject) are as they were unless a note came,
    # went or was renamed within: then no link can resolve differently.
    same_keys = not removed and all(
        (old := registry.get(path)) is not None
        and (old.title, old.subject) == (new.note.title, new.note.subject)
        for path, new in parsed.items()
    )
    terms = (
        set()
        if same_keys
        else LinkResolver.build(registry.values(), private.is_private).affected_terms(resolver)
    )
    relinked, turned_bad = _relink(settings, kodb, on_disk, terms, parsed, skipped)
    settled = parsed.keys() | relinked.keys() | {s.path for s in [*skipped, *turned_bad]}
    unleaked, unleak_bad = _unleak(settings, kodb, on_disk, after, resolver, private, settled)
    relinked |= unleaked
    turned_bad += unleak_bad
    settled |= unleaked.keys() | {s.path for s in unleak_bad}
    written, resummarised, summary_bad = _shared_openings(
        settings, kodb, on_disk, {**parsed, **relinked}, removed, registry, settled, private
    )
    turned_bad += summary_bad
    skipped += turned_bad  # they turned bad since the scan: old facts kept
    counts["unchanged"] -= len(turned_bad)

    facts_written = _write(
        kodb, list(written.values()), removed, resolver, private, settings.vault_language
    )
    rewritten = relinked.keys() | resummarised | {s.path for s in turned_bad}
    kodb.restamp([s for s in restamped if s[0] not in rewritten])
    changes = _Changes(
        scanned=len(files),
        skipped=tuple(skipped),
        counts=counts,
        removed=len(removed),
        facts_written=facts_written,
        relinked=len(relinked),
        resummarised=len(resummarised),
    )
    return _report(kodb, changes, started)


#: The (vault, private glob) pairs this process has warned of matching no note.
_SAID: set[tuple[str, str]] = set()


def _private_notes(settings: Settings, files: Sequence[ScannedFile]) -> PrivateNotes:
    """The vault's private notes, with a warning for each private glob that takes in no
    note: a glob spelt other than the folder it means ("private/**" for "Private/") keeps
    nothing out of answers, and says nothing else."""
    private = PrivateNotes.from_settings(settings)
    for glob in settings.vault_private_globs:
        said = (str(settings.vault), glob)
        if said in _SAID or not glob.strip() or any(glob_match(f.path, (glob,)) for f in files):
            continue
        _SAID.add(said)  # once a process: a watcher ingests again and again
        log.warning(
            "vault_private_globs %r matches no note of the vault, so it keeps none "
            "private (globs are vault-relative and case-sensitive: docs/configuration.md)",
            glob,
        )
    return private


def _say_problems(parsed: Mapping[str, ParsedNote], after: Mapping[str, Note]) -> None:
    """Warnings on the notes read this run: a day stated in a form that cannot be read (the
    note is ingested all the same, undated, and time questions pass it by), and a title
    other notes have too, with no ``subject:`` to tell them apart (their facts become one
    subject, which then reads as corroborated by all of them)."""
    for path, note in parsed.items():
        if note.date_problem:
            log.warning("%s: %s", path, note.date_problem)
    sharing: dict[str, list[str]] = {}
    for path, note in after.items():
        title = normalize_text(note.title)
        if note.subject is None or normalize_text(note.subject) == title:  # none stated
            sharing.setdefault(title, []).append(path)
    for paths in sharing.values():
        if len(paths) > 1 and any(p in parsed for p in paths):
            paths.sort()
            log.warning(
                "%d notes are titled %r (%s%s): their facts are one subject; a `subject:` "
                "in a note's frontmatter tells it apart",
                len(paths),
                after[paths[0]].title,
                ", ".join(paths[:3]),
                ", …" if len(paths) > 3 else "",
            )


def _unlisted(folder: str, why: str, unknown: set[str]) -> SkippedNote:
    """The skip of a folder that could not be listed: its synced notes keep their facts."""
    kept = sum(under(p, (folder,)) for p in unknown)
    return SkippedNote(
        "." if folder == "." else f"{folder}/",
        f"cannot list this folder ({why}); the {kept} notes synced from it keep their "
        "facts until it can be read",
    )


def _read_changed(
    settings: Settings,
    files: Sequence[ScannedFile],
    registry: Mapping[str, Note],
    force: bool,
    progress: Progress | None,
    private: PrivateNotes,
) -> tuple[dict[str, ParsedNote], list[SkippedNote], Counter[str], list[tuple[str, float, int]]]:
    """Read and parse the new and changed notes: (parsed notes, skipped notes, counts of
    added, updated and unchanged notes, and the (path, mtime, bytes) of touched notes whose
    bytes did not change, for their rows), in vault order, calling ``progress`` per note.

    Which notes must be read is decided first (a cheap stat decides most of an incremental
    run), then those are read and parsed, in worker processes when there are many.
    """
    parsed: dict[str, ParsedNote] = {}
    skipped: list[SkippedNote] = []
    counts: Counter[str] = Counter()
    restamped: list[tuple[str, float, int]] = []
    jobs: list[_ReadJob] = []
    done = 0
    for scanned in files:
        known = registry.get(scanned.path)
        unchanged_hash = _reusable_hash(
            scanned, known, force, settings.vault_language, private.is_private(scanned.path)
        )
        if unchanged_hash is _UNTOUCHED:
            counts["unchanged"] += 1
            done += 1
            if progress is not None:
                progress(done, len(files))
        else:
            jobs.append(
                _ReadJob(settings.vault, settings.vault_max_note_bytes, scanned, unchanged_hash)
            )
    for job, outcome in zip(jobs, _read_many(jobs, settings.vault_parse_workers), strict=True):
        if isinstance(outcome, SkippedNote):
            skipped.append(outcome)
        elif isinstance(outcome, _Same):
            counts["unchanged"] += 1
            # Only the stamp of the bytes hashed: a file that changed between the scan and
            # the read (and back, its mtime kept by a sync tool) keeps its old stamp, and the
            # next run hashes it again.
            scanned = job.scanned
            if (outcome.mtime, outcome.bytes) == (scanned.mtime, scanned.bytes):
                restamped.append((scanned.path, scanned.mtime, scanned.bytes))
        else:
            parsed[job.scanned.path] = outcome
            counts["added" if job.scanned.path not in registry else "updated"] += 1
        done += 1
        if progress is not None:
            progress(done, len(files))
    return parsed, skipped, counts, restamped


def _relink(
    settings: Settings,
    kodb: KoDB,
    on_disk: Mapping[str, ScannedFile],
    terms: set[str],
    parsed: Mapping[str, ParsedNote],
    skipped: Sequence[SkippedNote],
) -> tuple[dict[str, ParsedNote], list[SkippedNote]]:
    """Re-read the unchanged notes whose ``links_to`` facts name one of ``terms`` (links
    that may resolve differently now): (the notes parsed, those that could not be read)."""
    if not terms:
        return {}, []
    settled = parsed.keys() | {s.path for s in skipped}
    linking = sorted(
        {
            path
            for path, obj in kodb.fact_objects(["links_to"], extractor=EXTRACTOR)
            if path in on_disk and path not in settled and link_key(obj) in terms
        }
    )
    return _reread(settings, on_disk, linking)


def _unleak(
    settings: Settings,
    kodb: KoDB,
    on_disk: Mapping[str, ScannedFile],
    notes: Mapping[str, Note],
    resolver: LinkResolver,
    private: PrivateNotes,
    settled: Iterable[str],
) -> tuple[dict[str, ParsedNote], list[SkippedNote]]:
    """Re-read the unchanged public notes whose facts name a private note's subject that
    their links, resolved now, no longer name (they were extracted before the private globs
    covered the note they link to): (the notes parsed, those that could not be read).

    A subject a public note of ``notes`` (the registry as this run leaves it) has too is no
    secret; a public note whose own words name a secret one keeps its facts, unwritten.
    """
    secret = resolver.private_subjects() - {
        normalize_text(n.subject or n.title) for p, n in notes.items() if not private.is_private(p)
    }
    if not secret:
        return {}, []
    done = set(settled)
    candidates = sorted(
        path
        for path in kodb.subject_source_files(secret)
        if path in on_disk and path not in done and not private.is_private(path)
    )
    if not candidates:
        return {}, []
    stored: dict[str, set[tuple[str, str, str]]] = {path: set() for path in candidates}
    for fact in kodb.facts_for_subjects(secret):
        if fact.extractor == EXTRACTOR and fact.source_file in stored:
            stored[fact.source_file].add((fact.subject, fact.predicate, fact.object))
    read, turned_bad = _reread(settings, on_disk, candidates)
    unleaked: dict[str, ParsedNote] = {}
    for path, note in read.items():
        now = {
            (f.subject, f.predicate, f.object)
            for f in extract_facts(note, resolver.public)
            if f.subject_norm in secret
        }
        if now != stored[path]:
            unleaked[path] = note
    return unleaked, turned_bad


def _shared_openings(
    settings: Settings,
    kodb: KoDB,
    on_disk: Mapping[str, ScannedFile],
    written: Mapping[str, ParsedNote],
    removed: Sequence[str],
    registry: Mapping[str, Note],
    settled: Iterable[str],
    private: PrivateNotes,
) -> tuple[dict[str, ParsedNote], set[str], list[SkippedNote]]:
    """The notes to write with their template openings set (``ParsedNote.with_templates``),
    as the vault's notes will open once this run is written: (those notes, the unchanged
    ones among them re-read for a new summary, the unchanged ones that could not be read).

    A paragraph opening ``TEMPLATE_NOTES`` public notes or more is a template line. When
    this run makes one a template or no longer one, the unchanged notes opening with it are
    re-read too, and written when their summary (or, edited since the scan, their bytes)
    changed, so an incremental run ends where a full one would (as ``_relink`` does for
    links).
    """
    notes = dict(written)
    done = set(settled) | set(removed) | set(notes)
    extra: set[str] = set()
    turned_bad: list[SkippedNote] = []
    while True:
        # A note new to the registry has no stored openings (they go with its row).
        old = kodb.openings_of([*(p for p in notes if p in registry), *removed])
        new = {p: set(_public_openings(n, private)) for p, n in notes.items()}
        before = kodb.opening_counts(set().union(*old.values(), *new.values()))
        after = Counter(before)
        for keys in old.values():
            after.subtract(keys)
        for keys in new.values():
            after.update(keys)
        flipped = {k for k in after if (before.get(k, 0) >= TEMPLATE_NOTES) != _template(after, k)}
        more = sorted(p for p in kodb.notes_opening_with(flipped) if p in on_disk and p not in done)
        if not more:
            break
        done.update(more)
        read, bad = _reread(settings, on_disk, more)
        notes |= read
        extra |= read.keys()
        turned_bad += bad
    templates = frozenset(k for k in after if _template(after, k))
    # A private note's summary never reaches an answer; it stays its first opening, as the
    # counts of its own lines are not kept.
    notes = {
        p: n if private.is_private(p) else n.with_templates(templates) for p, n in notes.items()
    }
    # A re-read note is written when its summary, its bytes (edited since the scan) or the
    # keys KO-DB keeps of it changed: the counts above assumed its new keys.
    resummarised = {
        p
        for p in extra
        if (known := registry.get(p)) is None
        or (known.summary, known.content_hash) != (notes[p].summary, notes[p].content_hash)
        or old.get(p, set()) != new[p]
    }
    for path in extra - resummarised:
        del notes[path]
    return notes, resummarised, turned_bad


def _reread(
    settings: Settings, on_disk: Mapping[str, ScannedFile], paths: Iterable[str]
) -> tuple[dict[str, ParsedNote], list[SkippedNote]]:
    """Read and parse these unchanged notes again, in order: (the notes parsed, those that
    could not be read, turned bad since the scan)."""
    parsed: dict[str, ParsedNote] = {}
    turned_bad: list[SkippedNote] = []
    for path in paths:
        outcome = _read(settings, on_disk[path])
        if isinstance(outcome, SkippedNote):
            turned_bad.append(outcome)
        else:
            parsed[path] = outcome
    return parsed, turned_bad


def _public_openings(note: ParsedNote, private: PrivateNotes) -> list[int]:
    """The opening keys KO-DB keeps of this note: none of a private note's."""
    return [] if private.is_private(note.path) else [k for k, _ in note.openings]


def _template(counts: Mapping[int, int], key: int) -> bool:
    """Whether this opening key opens enough notes to be a template line."""
    return counts.get(key, 0) >= TEMPLATE_NOTES


def _write(
    kodb: KoDB,
    notes: Sequence[ParsedNote],
    removed: Sequence[str],
    resolver: LinkResolver,
    private: PrivateNotes,
    language: str,
) -> int:
    """Extract the notes' facts and write them and the removals in one KO-DB transaction;
    returns the number of facts written. A public note's links never resolve to a private
    note's subject (``LinkResolver.public``). ``language``: the vault's stemmer setting."""
    upserts: list[tuple[Note, Sequence[Fact]]] = [
        (
            replace(
                note.note,
                extractor_version=EXTRACTOR_VERSION,
                text_language=language,
                private=private.is_private(note.path),
            ),
            extract_facts(note, resolver.for_note(note.path, private)),
        )
        for note in notes
    ]
    texts = [note_text(note, language) for note in notes]
    openings = {note.path: _public_openings(note, private) for note in notes}
    if upserts or removed:
        kodb.apply_ingest(upserts, removed, extractor=EXTRACTOR, texts=texts, openings=openings)
    else:  # nothing changed; a KO-DB just upgraded still gets its subjects' summaries
        kodb.refresh_subject_stats()
    return sum(len(fs) for _, fs in upserts)


@dataclass(frozen=True)
class _Changes:
    """What one run did, for its report."""

    scanned: int
    skipped: tuple[SkippedNote, ...]
    counts: Counter[str]  # notes added, updated and unchanged
    removed: int
    facts_written: int
    relinked: int
    resummarised: int


def _report(kodb: KoDB, changes: _Changes, started: float) -> IngestReport:
    """The run's report: its changes, and the totals read back from KO-DB."""
    by_type = kodb.notes_by_type()
    return IngestReport(
        notes_total=sum(by_type.values()),
        notes_by_type={t: by_type.get(t, 0) for t in SOURCE_TYPES},
        facts_total=kodb.count_facts(),
        facts_by_predicate=dict(
            sorted(kodb.facts_by_predicate().items(), key=lambda kv: (-kv[1], kv[0]))
        ),
        skipped=changes.skipped,
        added=changes.counts["added"],
        updated=changes.counts["updated"],
        removed=changes.removed,
        unchanged=changes.counts["unchanged"],
        seconds=time.perf_counter() - started,
        scanned=changes.scanned,
        facts_written=changes.facts_written,
        relinked=changes.relinked,
        resummarised=changes.resummarised,
    )


def note_text(note: ParsedNote, language: str = NO_STEMMING) -> NoteText:
    """What the full-text index holds of a note: its title and aliases, and its body, in
    its own ``lang:`` when it names a known one, else in ``language``."""
    for key, used in (("title", "its first heading or file name"), ("subject", "its title")):
        if isinstance(note.frontmatter.get(key), dict | list):
            log.warning("%s: %s is a list or a mapping, not text; %s is used", note.path, key, used)
    stated = note.frontmatter.get("lang")
    own = language_of(stated)
    if stated is not None and own is None:
        log.warning(
            "%s: lang %r names no stemmer vault-ko knows; its words are indexed as %s",
            note.path,
            stated,
            language,
        )
    return NoteText(note.path, " ".join([note.title, *note.aliases]), note.body, own or language)


#: ``_reusable_hash``'s answer for a note not touched since its registry row.
_UNTOUCHED: Final = "\x00untouched"
#: Notes to read before parsing moves to worker processes (for fewer, starting the
#: workers costs more than they save).
PARALLEL_MIN_NOTES: Final = 1000
#: Notes a worker parses per task (fewer round trips; results still come back in order).
PARALLEL_CHUNK: Final = 64


class _ReadJob(NamedTuple):
    vault: Path
    max_bytes: int
    scanned: ScannedFile
    unchanged_hash: str | None  # the registered hash: the same bytes keep their facts


def _reusable_hash(
    scanned: ScannedFile, known: Note | None, force: bool, language: str, private: bool
) -> str | None:
    """``_UNTOUCHED`` when the note need not be read; else the registered content hash
    whose bytes would keep their facts (None: read and parse it whatever its bytes)."""
    # A note whose source type changed (the globs were edited) must be re-extracted: every
    # fact carries its source type. A row without a subject predates link resolution, one of
    # another extractor version was extracted under other rules, one of another language
    # setting (or none recorded: before stemming) has its words indexed under other rules,
    # and one written as private and now public, or the other way round, has its openings
    # counted (or not) as the globs said then.
    reuse = (
        known
        if not force
        and known
        and known.source_type == scanned.source_type
        and known.subject is not None
        and known.extractor_version == EXTRACTOR_VERSION
        and known.text_language == language
        and known.private == private
        else None
    )
    if reuse is None:
        return None
    if scanned.untouched_since(reuse):
        return _UNTOUCHED  # cheap path: the file was not touched since the last run
    # Touched but perhaps not changed (a checkout, a sync tool): the same bytes keep their
    # facts, and the row gets the file's new mtime and size (restamp), so neither the next
    # run nor a cold answer's comparison with the disk reads it again.
    return reuse.content_hash


def _read_many(
    jobs: Sequence[_ReadJob], workers: int
) -> Iterator[ParsedNote | SkippedNote | _Same]:
    """Each job's outcome, in order: parsed by ``workers`` processes (0: one per CPU) when
    there are at least ``PARALLEL_MIN_NOTES`` jobs, else here."""
    count = workers or os.cpu_count() or 1
    if count <= 1 or len(jobs) < PARALLEL_MIN_NOTES:
        yield from map(_read_job, jobs)
        return
    # spawn: the ingesting process may hold threads (the service, a driver) that fork
    # would copy mid-flight.
    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
            yield from pool.map(_read_job, jobs, chunksize=PARALLEL_CHUNK)
    except BrokenProcessPool as exc:  # a worker was killed (out of memory, a signal)
        raise VaultKoError(
            f"a note-parsing worker process died ({exc}); nothing was written. "
            "Run again, or set vault.parse_workers = 1 to parse in one process"
        ) from exc


class _Same(NamedTuple):
    """A note whose bytes still hash to its row's: the file's mtime and size as read."""

    mtime: float
    bytes: int


def _read_job(job: _ReadJob) -> ParsedNote | SkippedNote | _Same:
    """Read and parse one note, or why it was skipped; ``_Same`` when its bytes still hash
    to ``job.unchanged_hash``. A module-level function: worker processes run it."""
    scanned = job.scanned
    try:
        raw, mtime = read_note_bytes(job.vault, scanned.path, job.max_bytes)
        if job.unchanged_hash is not None and job.unchanged_hash == content_hash(raw):
            return _Same(mtime, len(raw))
        return parse_note(raw, scanned.path, scanned.source_type, mtime=mtime)
    except InputError as exc:
        return SkippedNote(scanned.path, skip_reason(exc))


def _read(settings: Settings, scanned: ScannedFile) -> ParsedNote | SkippedNote:
    """Read and parse one note here (a relinked one), or why it was skipped."""
    outcome = _read_job(_ReadJob(settings.vault, settings.vault_max_note_bytes, scanned, None))
    assert not isinstance(outcome, _Same)  # no hash to keep: always parsed
    return outcome
