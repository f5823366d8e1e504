"""Walk a vault: which files are notes, and which source type each one is.

A note is a regular ``.md`` file inside the vault that is not in a skipped folder
(``.obsidian/``, ``.trash/``, ``.git/``, the state dir) and matches none of
``settings.vault_exclude_globs``. Symlinks are followed only while they stay inside the
vault (a link out of the vault, or a loop, is skipped), so the scan never reads files the
user did not put in the vault.

Globs are matched against the vault-relative POSIX path:

- ``**`` matches any run of characters including ``/`` (``sessions/**`` is every file
  below ``sessions/``; ``**/draft-*.md`` any draft at any depth, also at the top),
- ``*`` and ``?`` stay inside one path segment, ``[abc]`` is a character class,
- a pattern without ``/`` is matched against the file name at any depth (as in
  ``.gitignore``), so ``*.excalidraw.md`` excludes such files everywhere, and against
  folder names too (``Private`` is every note below a folder ``Private``),
- a pattern ending in ``/`` is a folder and everything below it (``Private/``), and a
  leading ``./`` or ``/`` ties the pattern to the vault's top (``./Private``).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.model import Note, NoteStamp, SourceType


def hidden(name: str) -> bool:
    """A file or folder never scanned, whatever the settings say: its name starts with a
    dot, as the editor's config, its trash, version control and vault-ko's own state do,
    and Obsidian shows none of them (a sync tool's old versions in ``.stversions``, a
    repository's ``.github`` templates)."""
    return name.startswith(".")


NOTE_SUFFIX = ".md"


@dataclass(frozen=True)
class ScannedFile:
    """One note found on disk, before it is read."""

    path: str  # vault-relative, POSIX separators
    source_type: SourceType
    mtime: float
    bytes: int

    def untouched_since(self, note: Note | NoteStamp) -> bool:
        """Same mtime and size as the registry row: trusted unchanged without reading it."""
        return (self.mtime, self.bytes) == (note.mtime, note.bytes)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """Translate one vault glob (see the module docstring) into an anchored regex."""
    pattern = pattern.strip()
    # A leading "./" or "/" ties the pattern to the vault's top, as in .gitignore.
    anchored = pattern.startswith(("./", "/"))
    while pattern.startswith("./"):
        pattern = pattern[2:]
    # A trailing "/" makes a folder, as .gitignore writes it ("Private/"): all below it.
    folder = pattern.endswith("/")
    pattern = pattern.strip("/")
    if "/" not in pattern:
        # A bare name matches at any depth (at the top only when anchored), as in
        # .gitignore: a file of that name, or every note below a folder of that name
        # ("Private", "Private/").
        below = "/.*" if folder else "(?:/.*)?"
        return re.compile(f"{'' if anchored else '(?:.*/)?'}{_translate(pattern)}{below}\\Z")
    return re.compile(_translate(pattern) + ("/.*" if folder else "") + r"\Z")


def _translate(pattern: str) -> str:
    """A glob as an unanchored regex: ``**`` any run, ``*`` and ``?`` within a segment."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    # "**/" also matches no folder at all.
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def content_hash(raw: bytes) -> str:
    """The registry's content hash of a note: sha256 of its raw bytes, hex."""
    return hashlib.sha256(raw).hexdigest()


def read_note_bytes(vault: Path, rel_path: str, max_bytes: int) -> tuple[bytes, float]:
    """(raw bytes, mtime) of a note; refuses a file over ``max_bytes`` before reading it."""
    full = vault / rel_path
    try:
        st = full.stat()
    except OSError as exc:
        raise InputError(f"cannot read note: {exc.strerror or exc}", file=rel_path) from exc
    # Size first, from the file system: a huge file is refused without reading it.
    if st.st_size > max_bytes:
        raise InputError(
            f"note is {st.st_size} bytes, more than the limit of {max_bytes} "
            "(setting vault_max_note_bytes)",
            file=rel_path,
        )
    try:
        raw = full.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read note: {exc.strerror or exc}", file=rel_path) from exc
    if len(raw) > max_bytes:  # it grew between stat and read
        raise InputError(f"note is larger than the limit of {max_bytes} bytes", file=rel_path)
    return raw, st.st_mtime


def glob_match(rel_path: str, patterns: Iterable[str]) -> bool:
    """True when the vault-relative POSIX path matches any of the globs."""
    return bool(_any_glob(tuple(patterns)).match(rel_path))


@lru_cache(maxsize=64)
def _any_glob(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching what any of ``patterns`` matches (none: nothing): a scan tests
    every note against each setting's globs, and one match call beats one per glob."""
    parts = [compile_glob(p).pattern for p in patterns if p.strip()]
    return re.compile("|".join(f"(?:{p})" for p in parts) if parts else r"(?!)")


def source_type_for(rel_path: str, settings: Settings) -> SourceType:
    """Source type of a note from the configured folder globs (session, then adr, else wiki)."""
    if glob_match(rel_path, settings.vault_session_globs):
        return "session"
    if glob_match(rel_path, settings.vault_adr_globs):
        return "adr"
    return "wiki"


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _real(path: Path) -> Path | None:
    """Where ``path`` leads, or None for a symlink loop (``a.md`` → ``b.md`` → ``a.md``) or a
    path that cannot be resolved: such an entry is skipped, never followed round."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError for a loop
        return None


def _dir_excluded(rel_dir: str, patterns: tuple[str, ...]) -> bool:
    # ".obsidian/**" must prune the folder itself, so test the folder with a trailing slash.
    return glob_match(rel_dir + "/", patterns)


def scans_folder(settings: Settings, folder: Path) -> bool:
    """Whether notes written into ``folder`` (which need not exist yet) would be read by
    the scan: it lies in the vault, and no folder on the way is hidden, the state dir or
    excluded (a folder reached only through a symlink is not followed here)."""
    root = settings.vault.resolve()
    target = folder.resolve()
    if not _inside(target, root):
        return False
    state_dir = settings.state_dir.resolve() if settings.state_dir else None
    excludes = tuple(settings.vault_exclude_globs)
    current = root
    for part in target.relative_to(root).parts:
        current = current / part
        if hidden(part) or current == state_dir:
            return False
        if _dir_excluded(current.relative_to(root).as_posix(), excludes):
            return False
    return True


def shown_name(text: str) -> str:
    """A file name fit to print and store: bytes that are not UTF-8 (kept by the file
    system as lone surrogates) shown as ``\\xff`` escapes."""
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def scan_vault(
    settings: Settings,
    rejected: list[tuple[str, str]] | None = None,
    unreadable: list[tuple[str, str]] | None = None,
) -> list[ScannedFile]:
    """All notes of the vault, sorted by their vault-relative path.

    A note whose path is not valid UTF-8 cannot be stored (KO-DB and the graph keep text):
    it is left out, and ``(shown path, reason)`` appended to ``rejected`` when given. A
    folder that cannot be listed (its permissions, an I/O error) appends ``(its
    vault-relative path, "." for the vault itself, reason)`` to ``unreadable``: the notes
    in it are unknown, not gone (``under``)."""
    root = settings.vault.resolve()
    state_dir = settings.state_dir.resolve() if settings.state_dir else None
    excludes = tuple(settings.vault_exclude_globs)
    found: dict[str, ScannedFile] = {}
    seen_dirs: set[Path] = {root}
    links: dict[str, str] = {}  # a linked note's path -> its target's (vault-relative)

    def skip(rel: str, why: str) -> None:
        if rejected is not None:
            rejected.append((shown_name(rel), why))

    def cannot_read(rel: str, exc: OSError) -> None:
        if unreadable is not None and shown_name(rel) not in {f for f, _ in unreadable}:
            unreadable.append((shown_name(rel), exc.strerror or str(exc)))

    def cannot_list(exc: OSError) -> None:
        where = Path(exc.filename or root)
        cannot_read(where.relative_to(root).as_posix() if _inside(where, root) else ".", exc)

    for dirpath, dirnames, filenames in os.walk(root, onerror=cannot_list, followlinks=True):
        current = Path(dirpath)
        dirnames[:] = [
            name
            for name in sorted(dirnames)
            if _walked(current / name, root, state_dir, excludes, seen_dirs)
        ]

        # Strings and one lstat per note, not Path objects: every run of a watcher scans
        # the whole vault.
        rel_dir = current.relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        for name in filenames:
            if not name.endswith(NOTE_SUFFIX) or hidden(name):
                continue
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue  # removed while we walk
            except OSError as exc:  # a folder that can be listed but not entered (r--)
                cannot_read(rel_dir, exc)
                continue
            rel = prefix + name
            if glob_match(rel, excludes):
                continue
            if stat.S_ISLNK(st.st_mode):
                followed = _follow(full, root)
                if isinstance(followed, str):
                    skip(rel, followed)
                    continue
                st, links[rel] = followed
            if not rel.isascii() and rel != shown_name(rel):
                skip(rel, "the file name is not valid UTF-8")
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            found[rel] = ScannedFile(
                path=rel,
                source_type=source_type_for(rel, settings),
                mtime=st.st_mtime,
                bytes=st.st_size,
            )
    for rel, target in _read_elsewhere(found, links, root).items():
        del found[rel]
        skip(rel, f"a symlink to {shown_name(target)}, read once there")
    return [found[k] for k in sorted(found)]


def _walked(
    sub: Path, root: Path, state_dir: Path | None, excludes: tuple[str, ...], seen: set[Path]
) -> bool:
    """Whether the scan goes into folder ``sub`` (added to ``seen`` when it does): not hidden,
    not the state dir, not excluded; a linked folder only once and only inside the vault
    (no loops, no reading outside what the user put in the vault)."""
    if hidden(sub.name):
        return False
    real = _real(sub)
    if real is None or not _inside(real, root) or real in seen:
        return False
    if state_dir is not None and real == state_dir:
        return False
    if _dir_excluded(sub.relative_to(root).as_posix(), excludes):
        return False
    seen.add(real)
    return True


def _follow(full: str, root: Path) -> tuple[os.stat_result, str] | str:
    """A linked note's stat and its target's vault-relative path, or why it is skipped."""
    real = _real(Path(full))
    if real is None:
        return "a symlink loop"
    if not _inside(real, root):
        return "a symlink that leads out of the vault (not followed)"
    target = real.relative_to(root).as_posix()
    if any(hidden(part) for part in target.split("/")):
        return "a symlink into a hidden folder (not read)"
    try:
        return os.stat(full), target
    except OSError:
        return "a symlink to nothing (its target is gone)"


def _read_elsewhere(
    found: Mapping[str, ScannedFile], links: Mapping[str, str], root: Path
) -> dict[str, str]:
    """The linked notes read as another path (link -> that path): a note linked to another
    note of the vault is that note; read twice, one file would count as two sources of every
    fact it states. A target reached only through links is read at its first link. The
    notes found are known by where they really are (a linked folder is walked under its
    link's name), resolved only when there are linked notes."""
    if not links:
        return {}
    where = {os.path.realpath(root / rel): rel for rel in found if rel not in links}
    read_at: dict[str, str] = {}  # a target (real path) -> where it is read
    elsewhere: dict[str, str] = {}
    for rel in sorted(links):
        if rel not in found:
            continue
        target = os.path.realpath(root / links[rel])
        if target in where:
            elsewhere[rel] = where[target]
        elif target in read_at:
            elsewhere[rel] = read_at[target]
        else:
            read_at[target] = rel
    return elsewhere


def under(path: str, folders: Iterable[str]) -> bool:
    """Whether the vault-relative ``path`` lies in one of ``folders`` ("." is the vault)."""
    return any(f == "." or path.startswith(f + "/") for f in folders)
