"""Read one markdown note: frontmatter, title, aliases, tags, wikilinks, inline fields, blocks.

The body is tokenised by markdown-it-py (CommonMark), so anything inside fenced or indented
code blocks, inline code spans, HTML blocks, escapes (``\\[\\[``) and entities is never read as
a link, tag or field. Inside ordinary text the Obsidian syntax is recognised:

- wikilinks ``[[Target]]``, ``[[Target|alias]]``, ``[[Target#Heading]]``,
  ``[[Target#^block]]`` and embeds ``![[Target]]``; links to attachments (``.png``,
  ``.pdf`` …) are not note links,
- tags ``#tag`` and ``#a/b/c`` after a space or an opening bracket (never ``#123``,
  never a URL fragment such as ``page#part``, never the ``#`` of a heading),
- Dataview inline fields: ``key:: value`` on a line of its own (also as a list item),
  ``[key:: value]`` and ``(key:: value)`` inside a line,
- Obsidian callouts ``> [!note] Title`` are blockquotes; their text counts like any other.

Every block keeps a plain-text rendering (markdown stripped, links shown by their alias or
name) that the extractor quotes as context and as ADR decisions.

Bad input raises ``InputError`` naming the file (and line when known): invalid YAML, a
frontmatter that is not a mapping, holds a key twice, is opened by ``---`` and never closed,
or whose values or nesting exceed the bounds below (an alias bomb, a list of a million
items, a list nested a thousand levels deep), bytes that are not UTF-8, binary content
(NUL bytes), or a file bigger than the configured limit (checked from the file size before
reading). A frontmatter date that is not on the calendar (``2026-02-30``) stays text.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import hashlib
import posixpath
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property, lru_cache
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pipeline.errors import InputError
from pipeline.model import Note, SourceType
from pipeline.vault.plain import (
    ROW_SEPARATOR,
    WHITESPACE,
    Collapsed,
    clip_text,
    embed_plain,
    split_link,
)
from pipeline.vault.scan import content_hash, read_note_bytes

#: Link targets with these extensions are attachments, not notes (Obsidian's file types).
ATTACHMENT_EXTENSIONS = frozenset(
    {
        "png", "jpg", "jpeg", "gif", "bmp", "svg", "webp", "avif", "ico", "tif", "tiff",
        "mp3", "wav", "m4a", "ogg", "flac", "3gp", "webm", "mp4", "ogv", "mov", "mkv",
        "pdf", "canvas", "base", "zip", "csv", "json", "txt", "docx", "xlsx", "pptx",
    }
)  # fmt: skip

# Opaque stand-in for text that must not be scanned for syntax (code spans, escapes,
# entities, image alt text); the plain rendering and link targets put the original text
# back. The character itself (U+FFFC, "object replacement") carries no text, so where a
# note holds it literally it is dropped before scanning: a stray one would shift every
# stand-in after it.
_OPAQUE = "\ufffc"

_WIKILINK = re.compile(r"(?P<embed>!?)\[\[(?P<inner>[^\[\]\n]+?)\]\]")
_WHOLE_WIKILINK = re.compile(r"\s*!?\[\[(?P<inner>[^\[\]\n]+?)\]\]\s*\Z")
# Obsidian: a tag starts after whitespace or an opening bracket; letters (any script),
# digits, "_", "-" and "/" for nesting.
_TAG = re.compile(r"(?:(?<=^)|(?<=[\s(\[{,;]))#(?P<tag>[\w\-/]+)")
_TAG_HAS_NON_DIGIT = re.compile(r"[^\d/\-]")
_FIELD_KEY = r"[^\W\d][\w\- ]{0,60}?"
# The patterns below never backtrack over a run of text: a lazy value followed by "\s*"
# rescans every whitespace run once per character (quadratic on a long run), so values are
# matched greedily and trailing whitespace is trimmed by the caller or by "(?:.*\S)?".
_LINE_FIELD = re.compile(rf"\s*(?P<key>{_FIELD_KEY})\s*+::\s*+(?P<value>(?:.*\S)?)\s*\Z")
_VALUE_ATOM = r"(?:\[\[[^\[\]\n]*\]\]|[^\[\]\(\)\n])"
# The value (group "value" or "pvalue") keeps its trailing whitespace: see _field_value.
_BRACKET_FIELD = re.compile(
    rf"\[(?P<key>{_FIELD_KEY})\s*+::\s*+(?P<value>(?>{_VALUE_ATOM}*))\]"
    rf"|\((?P<pkey>{_FIELD_KEY})\s*+::\s*+(?P<pvalue>(?>{_VALUE_ATOM}*))\)"
)
_CALLOUT_MARK = re.compile(r"\s*\[![\w\-]+\][+\-]?\s*")
# Only at the start of a run of end marks, and possessive: a match starting inside a run
# exists only if one starts at the run's start, and retrying every position of a long run
# of dots would be quadratic.
_SENTENCE_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’)\]]*+\s++(?=\S)")
_FM_CLOSE = ("---", "...")
# libyaml's safe loader when PyYAML was built with it (several times faster); same semantics.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _YamlLoader(_SAFE_LOADER):  # type: ignore[valid-type,misc]
    """The safe loader, except that a date not on the calendar stays text (see below)."""


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    """A YAML timestamp, or its text when it names no real day or time (``2026-02-30``,
    ``0000-00-00``): PyYAML raises ValueError there, which is no YAML error, so one such
    value in a note would end the whole ingest instead of being what the author typed."""
    try:
        return loader.construct_yaml_timestamp(node)
    except (ValueError, OverflowError):
        return loader.construct_scalar(node)


_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)
_YAML_MERGE_TAG = "tag:yaml.org,2002:merge"
# A line that reads as a property ("key: value", "key:"): it starts with a word character
# or a quote and holds a colon followed by a blank or the line's end (a URL's "://" is
# none). Matched from the line's start; "[^:\n]*" cannot cross the colon, so it is linear.
_FM_KEY_LINE = re.compile(r"""[\w"'][^:\n]*:(?:[ \t]|\Z)""")

#: Bounds on a frontmatter's YAML, checked on the composed node graph before any Python
#: value is built. Aliases share nodes, so nine short lines can stand for 9**9 values (an
#: "alias bomb") that walking the properties would never finish; deep nesting makes every
#: recursive walk of the values raise RecursionError. Real notes' properties hold tens of
#: values a few levels deep, so these bounds refuse only hostile or broken frontmatter.
MAX_YAML_VALUES = 100_000  # scalars, lists and mappings once aliases are expanded
MAX_YAML_DEPTH = 64  # the frontmatter mapping is level 1

#: Frontmatter keys that describe the note itself: their values are never links to notes.
#: Keys that describe the note rather than its subject (``lang``: the language its words are
#: indexed in, kodb/text.py), so they are never facts.
NOTE_META_KEYS = frozenset(
    {"title", "aliases", "alias", "tags", "tag", "cssclasses", "cssclass", "lang"}
)

#: Longest context sentence and ADR decision kept (characters), per the extraction rules.
CONTEXT_MAX_CHARS = 240
#: A note's summary: its first paragraph that is no template line, clipped; one this short
#: ("Accepted.") is skipped.
SUMMARY_MAX_CHARS = 300
SUMMARY_MIN_WORDS = 5
#: The paragraphs that may be a note's summary, at most this many from its top: a template
#: line (an attendee, "Last week's notes are linked here: <url>") is told by how many notes
#: open with it (``ParsedNote.openings``), and an attendee list can run to a score of lines.
OPENINGS_KEPT = 32
#: What an opening's key leaves out: web links, then digits and punctuation, so "Last week's
#: notes are linked here: <url>" and "Weekly sync of the platform team, 2026-03-04" recur
#: as one line whatever the week.
_OPENING_LINK = re.compile(r"<?https?://[^\s>]*>?")
_OPENING_WORD = re.compile(r"[^\W\d_]+")
_FIELD_LINE_START = re.compile(r"\s*[^\W\d][\w\- ]{0,60}?\s*::")
#: Section headings that hold an ADR's status (Nygard, MADR and common variants): the
#: status line is the note's ``adr_status`` and succession facts, never its summary.
STATUS_SECTIONS = frozenset({"status", "state"})
#: Sections that list rather than say: links, and a meeting's roll call. What is under them
#: is never a note's summary ("Minutes: <url>", "Ada Example @ada (core team)").
LIST_SECTIONS = frozenset(
    {
        "links", "useful links", "external links", "references", "see also", "related",
        "related notes", "further reading", "present", "not present", "attendees",
        "attendance", "in attendance", "participants", "members", "observers", "invited",
        "guests", "absent", "apologies", "regrets", "linkek", "hivatkozások", "lásd még",
        "kapcsolódó", "jelen vannak", "jelenlévők", "jelen voltak", "résztvevők",
        "meghívottak", "hiányzók",
    }
)  # fmt: skip
#: How an ADR names its successor: "Superseded by", and the other ways ("by") besides the
#: ways it names the decision it replaces ("of"), in English and Hungarian; ``extract``
#: reads succession facts from them.
SUPERSEDED_BY = r"superseded\s+by"
SUCCESSION_PHRASES: tuple[tuple[str, str], ...] = (
    (r"(?:superceded|replaced)\s+by", "by"),
    (r"felváltotta", "by"),
    (r"supersedes|supercedes|replaces", "of"),
    (r"helyettesíti|felváltja", "of"),
)
#: A paragraph or callout above an ADR's first section that opens with one of them ("> [!note]
#: Superseded by [[0014-…]] in April 2026"): a status banner, not what the decision is about.
_SUCCESSION_BANNER = re.compile(
    r"[\s>*_\[\]!]*(?:"
    + "|".join([SUPERSEDED_BY, *(phrase for phrase, _ in SUCCESSION_PHRASES)])
    + r")\b",
    re.IGNORECASE,
)
_STATUS_LINE = re.compile(r"\s*status\s*:", re.IGNORECASE)
_HEADING_NOISE = re.compile(r"^[\W\d_]+")
_DATE_PREAMBLE = re.compile(r"\s*date\s*:", re.IGNORECASE)
#: A pipe table's delimiter row's cell ("---", ":--", "--:", ":-:").
_DELIMITER_CELL = re.compile(r"\s*:?-+:?\s*\Z")
#: A Nygard ADR's "Date: 2017-01-01" line, with its value.
DATE_LINE = re.compile(r"\s*date\s*:\s*(?P<value>\S.{0,40}?)\s*\Z", re.IGNORECASE)
_ISO_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})(?!\d)")
#: Years a note's date may name: four-digit years, leaving out the 0000 and 9999 that
#: stand for "no date" in templates and sorting tricks.
NAME_DATE_YEARS = range(1000, 3000)
#: Frontmatter keys that date a note, in order of preference.
DATE_KEYS = ("date", "created")


@lru_cache(maxsize=1024)
def _lists(section: str | None) -> bool:
    """Whether a paragraph under the heading ``section`` is in a list that sums nothing up,
    however long (``LIST_SECTIONS``). Only the nearest heading counts: minutes nest their
    agenda under "Participants" as often as a roll call under "Present" ("### Members")."""
    return section is not None and section_key(section) in LIST_SECTIONS


def section_key(heading: str) -> str:
    """A heading as a section name: case-folded, numbering and trailing colons dropped."""
    return _HEADING_NOISE.sub("", heading.casefold()).strip(" :.")


def _states_status(block: Block, *, opening: bool) -> bool:
    """Whether an ADR's ``block`` states its status: under a Status heading, a
    ``Status: …`` line (MADR's list), or, while the note has not ``opening`` yet (no
    paragraph of its own above), a succession banner naming its link above the first
    section."""
    if block.section and section_key(block.section) in STATUS_SECTIONS:
        return True
    if _STATUS_LINE.match(block.text):
        return True
    return (
        opening
        and block.section_level <= 1
        and bool(block.spans)
        and _SUCCESSION_BANNER.match(block.text) is not None
    )


def _words_at_least(text: str, count: int = SUMMARY_MIN_WORDS) -> bool:
    # Words counted up to the bound only: a long paragraph is not split whole.
    return len(text.split(None, count - 1)) >= count


#: A day written as a link to its daily note, as Obsidian's properties keep it:
#: "[[2024-03-10]]", "[[2024-03-10|Sunday]]".
_DAY_LINK = re.compile(r"\[\[([^\]|]*)(?:\|[^\]]*)?\]\]")
#: Years that stand for "no date" in templates and sorting tricks.
NO_DATE_YEARS = ("0000", "9999")
#: How much of a stated date a warning quotes.
SHOWN_DATE_CHARS = 40


def _day_value(value: Any) -> Any:
    """A stated day as a value: the first of a list (YAML reads ``[[2024-03-10]]`` as a
    list in a list), the target of a day link, else itself."""
    while isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, str) and (m := _DAY_LINK.fullmatch(value.strip())):
        return m.group(1).strip()
    return value


def iso_day(value: Any) -> str | None:
    """The ISO day of a YAML date or datetime, or of a string starting with one (or of a
    link to one's daily note), when it is a real calendar day of a year in
    NAME_DATE_YEARS; else None."""
    value = _day_value(value)
    if isinstance(value, _dt.datetime):
        value = value.date()
    if isinstance(value, _dt.date):
        day: _dt.date | None = value
    else:
        m = _ISO_DAY.match(str(value).strip())
        day = _calendar_day(m.group(1)) if m else None
    return day.isoformat() if day is not None and day.year in NAME_DATE_YEARS else None


def _calendar_day(iso: str) -> _dt.date | None:
    """The calendar day ``YYYY-MM-DD`` names; None when there is none (2023-13-10)."""
    try:
        return _dt.date.fromisoformat(iso)
    except ValueError:
        return None


def _day_problem(value: Any) -> str | None:
    """Why ``iso_day`` reads no day from a stated one, in words; None when nothing is
    stated, a template's placeholder is, or a year that stands for "no date"."""
    value = _day_value(value)
    if value is None or iso_day(value) is not None:
        return None
    text = value.isoformat() if isinstance(value, _dt.date) else str(value).strip()
    if not text or "{{" in text or "<%" in text:
        return None
    m = _ISO_DAY.match(text)
    if m is not None and m.group(1)[:4] in NO_DATE_YEARS:
        return None
    if m is None or _calendar_day(m.group(1)) is None:
        return "is not a day as YYYY-MM-DD"
    return f"names a year outside {NAME_DATE_YEARS.start}–{NAME_DATE_YEARS.stop - 1}"


def _shown(value: Any) -> str:
    """A stated date as a warning quotes it: its first characters, in quotes."""
    value = _day_value(value)
    if isinstance(value, _dt.date):
        value = value.isoformat()
    text = " ".join(str(value).split())
    cut = SHOWN_DATE_CHARS
    return repr(text if len(text) <= cut else text[: cut - 1] + "…")


def name_date(stem: str) -> str | None:
    """The ISO date a file name starts with, when it is a real calendar day of a year in
    NAME_DATE_YEARS; else None (an impossible date is simply not a date)."""
    return iso_day(stem) if _ISO_DAY.match(stem) else None


#: Version of ``embed_text``'s rules, stored with each embedding: a note embedded under other
#: rules is stale and the next embed redoes it. 1: title + raw markdown; 2: title + the body
#: with link syntax, emphasis and code ticks removed (chosen by note nDCG@10 on the judged
#: sets' tune halves; figures in docs/benchmarks-history.md).
EMBED_TEXT_VERSION = 2


@dataclass(frozen=True)
class Link:
    """One distinct wikilink/embed target of a note (first occurrence)."""

    target: str  # as written, without alias, #heading, ^block and ".md"; may hold a folder
    subject: str  # the name facts use: the last path segment of target
    embed: bool
    context: str | None  # plain sentence or list item of the first mention (None: frontmatter)
    line: int | None  # 1-based line in the file of the first mention


@dataclass(frozen=True)
class Span:
    """Where a link's display text sits inside a block's plain text."""

    subject: str
    start: int
    end: int


@dataclass(frozen=True)
class Block:
    """A paragraph, list item paragraph, quote paragraph or heading, as plain text."""

    kind: str  # "heading" | "paragraph" | "item" | "quote" | "table" (a line each row)
    level: int  # heading level (1-6); 0 for other blocks
    text: str  # plain text, lines joined by single spaces
    line: int  # 1-based first line in the file
    section: str | None  # text of the nearest heading above (None before any heading)
    section_level: int  # level of that heading; 0 when there is none
    spans: tuple[Span, ...] = ()
    #: The rest of the previous block's paragraph, split off at a table ("We adopt:" and
    #: the table right under it, no blank line between).
    continued: bool = False


@dataclass(frozen=True)
class InlineField:
    key: str
    value: str
    line: int


@dataclass(frozen=True)
class ParsedNote:
    """Everything ingestion needs from one note. Read-only (the mapping is a proxy)."""

    path: str
    source_type: SourceType
    title: str
    subject: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    links: tuple[Link, ...]
    inline_fields: tuple[InlineField, ...]
    blocks: tuple[Block, ...]
    frontmatter: Mapping[str, Any]
    body: str
    content_hash: str
    mtime: float
    bytes: int
    frontmatter_lines: int = 0  # lines taken by the frontmatter, fences included
    urls: tuple[str, ...] = ()  # distinct web links (markdown links to http(s)), in order

    #: Keys of this note's openings that open enough of the vault's notes to be a template
    #: (ingest sets them from KO-DB's counts, ``ingest._shared_openings``); a summary skips
    #: them.
    templates: frozenset[int] = frozenset()

    def __reduce__(self) -> tuple[Any, ...]:
        # Parsed in worker processes (ingest): the read-only mapping proxy does not pickle.
        # The openings and the lead go along, so the worker finds them, not the ingesting
        # process (the openings' texts are the blocks' own, pickled once).
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["frontmatter"] = dict(self.frontmatter)
        return (_parsed_note, (values, self.openings, self.lead))

    @property
    def embed_text(self) -> str:
        """What the graph embeds: the title, a blank line, the body as plain text."""
        return f"{self.title}\n\n{embed_plain(self.body)}"

    @property
    def link_targets(self) -> tuple[str, ...]:
        """Distinct link targets in order of first mention (for graph LINKS_TO edges)."""
        return tuple(link.target for link in self.links)

    @cached_property
    def openings(self) -> tuple[tuple[int, str], ...]:
        """The paragraphs that may be its summary, in order, each as its key
        (``opening_key``) and its text: those of at least ``SUMMARY_MIN_WORDS`` words that
        are not a field, a ``Date:`` line, right under a ``LIST_SECTIONS`` heading (links, a
        roll call) or an ADR's status (``_states_status``), at most
        ``OPENINGS_KEPT``; else, alone, an ADR's status of five words or more, else its
        first such paragraph of any length, else its status."""
        kept: list[tuple[int, str]] = []
        first: str | None = None
        status: str | None = None
        adr = self.source_type == "adr"
        for block in self.blocks:
            if block.kind not in ("paragraph", "item", "quote") or not block.text.strip():
                continue
            if _FIELD_LINE_START.match(block.text) or _DATE_PREAMBLE.match(block.text):
                continue
            if adr and _states_status(block, opening=first is None):
                status = status or block.text
                continue
            if first is None:
                first = block.text
            if _words_at_least(block.text) and not (
                block.section_level > 1 and _lists(block.section)  # level 1: its title
            ):
                kept.append((opening_key(block.text), block.text))
                if len(kept) >= OPENINGS_KEPT:
                    break
        if not kept and status is not None and (first is None or _words_at_least(status)):
            first = status  # a status of five words says more than a shorter paragraph
        if not kept and first is not None:
            kept.append((opening_key(first), first))
        return tuple(kept)

    def with_templates(self, keys: frozenset[int]) -> ParsedNote:
        """This note with ``templates`` set to those of ``keys`` it opens with (its
        openings go along, found once)."""
        mine = frozenset(k for k, _ in self.openings if k in keys)
        if mine == self.templates:
            return self
        note = replace(self, templates=mine)
        note.__dict__["openings"] = self.openings  # cached_properties' own slots
        note.__dict__["lead"] = self.lead
        return note

    @cached_property
    def lead(self) -> str | None:
        """Its first opening, clipped to ``SUMMARY_MAX_CHARS``: the summary, unless the
        vault calls it a template (clipped once, by whichever process parses the note)."""
        return clip_text(self.openings[0][1], SUMMARY_MAX_CHARS) if self.openings else None

    @cached_property
    def summary(self) -> str | None:
        """Its first opening that is no template (``templates``), clipped to
        ``SUMMARY_MAX_CHARS``; when every one is, the first (a note among copies of itself
        keeps its own words)."""
        for index, (key, text) in enumerate(self.openings):
            if key not in self.templates:
                return self.lead if index == 0 else clip_text(text, SUMMARY_MAX_CHARS)
        return self.lead

    @cached_property
    def date(self) -> str | None:
        """The note's day: frontmatter ``date`` or ``created``, else the ISO date its file
        name starts with, else an ADR's ``Date:`` line; never the file's mtime (a copy or a
        checkout changes that)."""
        for source, value in self._stated_days():
            day = name_date(value) if source is None else iso_day(value)
            if day or (source is None and self.source_type != "adr"):
                return day
        return None

    @cached_property
    def date_problem(self) -> str | None:
        """Why the day the note states was not read, when that leaves it undated (a swapped
        "2023-13-10", "March 2024", a year typed 3024): time questions then pass it by, so
        sync says so. None when it is dated, states no day, says "no date" (0000, 9999) or
        holds a template's placeholder ("{{date}}"); an impossible date in a file name is
        simply no date."""
        if self.date is not None:
            return None
        for source, value in self._stated_days():
            why = None if source is None else _day_problem(value)
            if why:
                return f"its {source} {_shown(value)} {why}: the note is undated"
        return None

    def _stated_days(self) -> Iterator[tuple[str | None, Any]]:
        """Where the note states its day, in order of preference: (where, what) for the
        frontmatter's ``date`` and ``created``, then (None, its file name's stem), then an
        ADR's ``Date:`` line above its first section (Nygard's form)."""
        keys = {str(k).strip().casefold(): v for k, v in self.frontmatter.items()}
        for key in DATE_KEYS:
            if keys.get(key) is not None:
                yield key, keys[key]
        yield None, PurePosixPath(self.path).stem
        if self.source_type != "adr":
            return
        for block in self.blocks:
            if block.section_level > 1:
                return
            m = DATE_LINE.match(block.text) if block.kind == "paragraph" else None
            if m:
                yield "Date: line", m["value"]
                return

    @property
    def note(self) -> Note:
        """The registry row of this note, with its own subject and summary."""
        return Note(
            path=self.path,
            title=self.title,
            source_type=self.source_type,
            content_hash=self.content_hash,
            mtime=self.mtime,
            bytes=self.bytes,
            subject=self.subject,
            summary=self.summary,
            date=self.date,
        )


def _parsed_note(
    values: dict[str, Any], openings: tuple[tuple[int, str], ...], lead: str | None
) -> ParsedNote:
    """A ParsedNote from its pickled fields, openings and lead (``ParsedNote.__reduce__``)."""
    note = ParsedNote(**{**values, "frontmatter": MappingProxyType(values["frontmatter"])})
    note.__dict__["openings"] = openings  # cached_properties' own slots
    note.__dict__["lead"] = lead
    return note


class _LettersOnly(dict[int, str]):
    """A ``str.translate`` table that keeps letters and marks and makes every other
    character (digits, punctuation, symbols, spaces) a space, filled as it meets them."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        self[code] = char if unicodedata.category(char)[0] in "LM" else " "
        return self[code]


_LETTERS_ONLY = _LettersOnly()


def opening_key(text: str) -> int:
    """A paragraph's key as a signed 64-bit integer (KO-DB stores it): its words (letters
    with their combining marks) case-folded and in NFC, without web links, digits or
    punctuation, so the same template line in other notes has the same key whatever its
    dates, numbers and links. A paragraph of links, digits and punctuation alone keeps
    them: no two such lines are alike."""
    if text.isascii():
        base = text.casefold()
        bare = _OPENING_LINK.sub(" ", base) if "://" in base else base
        words = _OPENING_WORD.findall(bare)
    else:  # letters and their combining marks stay together (Devanagari's vowel signs)
        base = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())
        bare = _OPENING_LINK.sub(" ", base) if "://" in base else base
        words = bare.translate(_LETTERS_ONLY).split()
    words = words or base.split()
    digest = hashlib.blake2b(" ".join(words).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# --------------------------------------------------------------------------- reading


def read_note(vault: Path, rel_path: str, source_type: SourceType, max_bytes: int) -> ParsedNote:
    """Read and parse ``vault/rel_path``; bad input raises InputError naming the file."""
    raw, mtime = read_note_bytes(vault, rel_path, max_bytes)
    return parse_note(raw, rel_path, source_type, mtime=mtime)


def decode_note(raw: bytes, rel_path: str) -> str:
    """UTF-8 text of a note (BOM dropped, newlines normalised) or InputError with location."""
    nul = raw.find(b"\x00")
    if nul != -1:
        raise InputError(
            f"binary content (NUL byte at byte offset {nul}); not a markdown note",
            file=rel_path,
            line=raw.count(b"\n", 0, nul) + 1,
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte offset {exc.start})",
            file=rel_path,
            line=raw.count(b"\n", 0, exc.start) + 1,
        ) from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_note(
    raw: bytes, rel_path: str, source_type: SourceType, *, mtime: float = 0.0
) -> ParsedNote:
    """Parse the raw bytes of a note (see the module docstring for the syntax handled)."""
    text = decode_note(raw, rel_path)
    frontmatter, body, fm_lines = split_frontmatter(text, rel_path)

    walker = _BodyWalker(fm_lines, rel_path)
    walker.walk(_markdown().parse(body))

    fm_title = _scalar_text(frontmatter.get("title"))
    title = fm_title or walker.first_h1 or _title_from_stem(rel_path)
    subject = unwrap_value(_scalar_text(frontmatter.get("subject")) or "") or title

    aliases = _dedupe(
        unwrap_value(a) for a in _string_items(frontmatter.get("aliases", frontmatter.get("alias")))
    )
    fm_tags = [
        t.lstrip("#").strip("/").strip()
        for t in _string_items(frontmatter.get("tags", frontmatter.get("tag")), split=True)
    ]
    tags = _dedupe([*fm_tags, *walker.tags], fold=True)

    links = _merge_links(_frontmatter_links(frontmatter), walker.links)

    return ParsedNote(
        path=rel_path,
        source_type=source_type,
        title=title,
        subject=subject.strip(),
        aliases=aliases,
        tags=tags,
        links=links,
        inline_fields=tuple(walker.fields),
        blocks=tuple(walker.blocks),
        frontmatter=MappingProxyType(frontmatter),
        body=body,
        content_hash=content_hash(raw),
        mtime=mtime,
        bytes=len(raw),
        frontmatter_lines=fm_lines,
        urls=tuple(dict.fromkeys(walker.urls)),
    )


def split_frontmatter(text: str, rel_path: str) -> tuple[dict[str, Any], str, int]:
    """(frontmatter mapping, body, number of lines the frontmatter block takes).

    Frontmatter is a ``---`` first line closed by ``---`` (or ``...``). Without a closing
    fence, a ``---`` followed by a blank line or a line that is no property is a thematic
    break (the file has no frontmatter, as in Obsidian); followed by a property line
    (``subject: Redis``) it opens a frontmatter that was never closed, refused rather than
    read as body (which would silently lose its properties).
    """
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return {}, text, 0
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _FM_CLOSE), None)
    if close is None:
        if len(lines) > 1 and _FM_KEY_LINE.match(lines[1]):
            raise InputError(
                "frontmatter opened by '---' is never closed (no '---' line after its "
                "properties); close it, or leave a blank line after a '---' meant as a rule",
                file=rel_path,
                line=1,
            )
        return {}, text, 0
    yaml_text = "\n".join(lines[1:close])
    body = "\n".join(lines[close + 1 :])
    try:
        data = _load_yaml(yaml_text) if yaml_text.strip() else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # The YAML starts on the file's line 2 (after "---"); marks are 0-based.
        line = mark.line + 2 if mark is not None else 2
        problem = exc.problem or exc.context or "syntax error"
        if exc.problem and exc.context and exc.context_mark is not None:
            # "while parsing a flow sequence" says where the broken construct began.
            started = exc.context_mark.line + 2
            problem = f"{exc.context} started at line {started}: {exc.problem}"
        raise InputError(f"invalid YAML frontmatter: {problem}", file=rel_path, line=line) from exc
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError) as exc:
        # ValueError/OverflowError: a constructor refusing a value (not a YAML error).
        raise InputError(f"invalid YAML frontmatter: {exc}", file=rel_path, line=2) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(
            f"frontmatter must be a mapping of properties, not a {_yaml_kind(data)}",
            file=rel_path,
            line=2,
        )
    return {str(k).strip(): v for k, v in data.items()}, body, close + 1


class _YamlRefused(yaml.MarkedYAMLError):
    """The frontmatter's node graph exceeds a bound or holds a key twice (reported like a
    YAML syntax error, with its line)."""


def _load_yaml(text: str) -> Any:
    """``yaml.load`` with the bounds above: compose the node graph (libyaml when present),
    measure it, and only then construct Python values from it."""
    loader = _YamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_graph(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_yaml_graph(root: yaml.Node) -> None:
    """Refuse a node graph that expands to more than MAX_YAML_VALUES values, nests deeper
    than MAX_YAML_DEPTH, refers to itself or holds a key twice in one mapping.

    Each node is measured once (a node reached again through an alias reuses its size and
    height), so the check costs as little as the YAML text is long; the recursion stops at
    MAX_YAML_DEPTH, far below Python's limit; it adds little to a load (figures in
    docs/benchmarks-history.md).
    """
    # id(node) -> (values expanded, height, whether an alias was expanded within it)
    measured: dict[int, tuple[int, int, bool]] = {}
    path: set[int] = set()  # the nodes being measured: the path from the root

    def measure(node: yaml.Node, depth: int) -> tuple[int, int, bool]:
        if depth > MAX_YAML_DEPTH:
            raise _YamlRefused(
                problem=f"values nest too deep (more than {MAX_YAML_DEPTH} levels)",
                problem_mark=node.start_mark,
            )
        if isinstance(node, yaml.ScalarNode):
            return 1, 1, False
        key = id(node)
        known = measured.get(key)
        if known is not None:  # an alias of a node measured already
            return measure_alias(node, depth, known)
        if key in path:
            raise _YamlRefused(
                problem="an alias refers to itself (a recursive value)",
                problem_mark=node.start_mark,
            )
        path.add(key)
        if isinstance(node, yaml.MappingNode):
            _check_keys(node)
            children = [child for pair in node.value for child in pair]
        else:
            children = node.value
        size, height, aliased = 1, 0, False
        for child in children:
            child_size, child_height, child_aliased = measure(child, depth + 1)
            size += child_size
            height = max(height, child_height)
            aliased = aliased or child_aliased
        path.discard(key)
        if size > MAX_YAML_VALUES:
            raise _YamlRefused(problem=_too_many(node, size, aliased), problem_mark=node.start_mark)
        measured[key] = (size, height + 1, aliased)
        return measured[key]

    def measure_alias(
        node: yaml.Node, depth: int, known: tuple[int, int, bool]
    ) -> tuple[int, int, bool]:
        if depth + known[1] - 1 > MAX_YAML_DEPTH:
            raise _YamlRefused(
                problem=f"values nest too deep (more than {MAX_YAML_DEPTH} levels) "
                "through an alias",
                problem_mark=node.start_mark,
            )
        return known[0], known[1], True

    measure(root, 1)


def _too_many(node: yaml.Node, size: int, aliased: bool) -> str:
    """Why a value of ``size`` values (more than MAX_YAML_VALUES) is refused: what was found
    and the limit; an alias bomb only when aliases were expanded to get there."""
    if aliased:
        return (
            f"this value expands through aliases to {size:,} values, more than the "
            f"{MAX_YAML_VALUES:,} allowed (a YAML alias bomb?)"
        )
    if isinstance(node, yaml.SequenceNode):
        found = f"this list holds {len(node.value):,} items"
    else:
        found = f"this mapping holds {len(node.value):,} keys"
    return f"{found}, {size:,} values in all; at most {MAX_YAML_VALUES:,} values are allowed"


#: Longest key quoted in a duplicate-key report (a hostile key can be megabytes long).
_KEY_SHOWN_CHARS = 60


def _check_keys(node: yaml.MappingNode) -> None:
    """Refuse a mapping that holds a key twice: YAML requires keys to be unique, and
    PyYAML would silently keep the last value. Keys compare as the frontmatter uses them,
    stripped text, so ``a`` and ``'a'`` collide; a merge key (``<<``) is not a key."""
    seen: dict[str, yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _YAML_MERGE_TAG:
            continue
        name = str(key_node.value).strip()
        first = seen.setdefault(name, key_node)
        if first is not key_node:
            shown = name if len(name) <= _KEY_SHOWN_CHARS else name[: _KEY_SHOWN_CHARS - 1] + "…"
            # Marks are 0-based within the YAML, which starts on the file's line 2.
            raise _YamlRefused(
                problem=f"duplicate key {shown!r} (first at line {first.start_mark.line + 2})",
                problem_mark=key_node.start_mark,
            )


def _yaml_kind(data: Any) -> str:
    if isinstance(data, list):
        return "list"
    if isinstance(data, str):
        return "string"
    return type(data).__name__


# --------------------------------------------------------------------------- values


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    """The one parser instance (building it costs more than parsing a typical note)."""
    md = MarkdownIt("commonmark")
    # Keep escapes and entities as separate tokens, so "\[\[x\]\]" is never a link.
    md.disable("text_join")
    return md


def stringify(value: Any) -> str:
    """A frontmatter scalar as text: ISO dates, lower-case booleans, plain numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _scalar_text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = stringify(value)
    return text or None


def _string_items(value: Any, *, split: bool = False) -> list[str]:
    """A list-or-string property as strings; ``split`` also splits strings on commas/spaces."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if item is None or isinstance(item, dict | list):
            continue
        text = stringify(item)
        if split:
            out.extend(p for p in re.split(r"[,\s]+", text) if p)
        elif text:
            out.append(text)
    return out


def _dedupe(items: Iterator[str] | Sequence[str], *, fold: bool = False) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        item = item.strip()
        key = item.casefold() if fold else item
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return tuple(out)


def _title_from_stem(rel_path: str) -> str:
    stem = PurePosixPath(rel_path).stem
    return WHITESPACE.sub(" ", stem.replace("-", " ").replace("_", " ")).strip() or stem


def is_attachment(target: str) -> bool:
    """True when a link target names an attachment file rather than a note."""
    name = PurePosixPath(target).name
    if "." not in name:
        return False
    return name.rsplit(".", 1)[1].lower() in ATTACHMENT_EXTENSIONS


def link_subject(target: str) -> str:
    """The subject a link target stands for: its last path segment."""
    return PurePosixPath(target).name.strip() if target else ""


def lone_link(text: str) -> str | None:
    """The target of a value that is one wikilink and nothing else (``"[[X|alias]]"`` -> X),
    else None."""
    m = _WHOLE_WIKILINK.match(text)
    return split_link(m["inner"])[0] if m else None


def unwrap_value(text: str) -> str:
    """A property value: a lone ``[[X]]`` becomes X; other links become their display text."""
    target = lone_link(text)
    if target is not None:
        return link_subject(target) or text.strip()
    return _WIKILINK.sub(lambda mm: _display(mm["inner"]), text).strip()


def wikilink_subjects(text: str) -> list[str]:
    """Subjects of the note links written in ``text`` (attachments left out), in order."""
    out = []
    for m in _WIKILINK.finditer(text):
        target, _ = split_link(m["inner"])
        if target and not is_attachment(target):
            out.append(link_subject(target))
    return out


def _display(inner: str) -> str:
    target, alias = split_link(inner)
    if alias:
        return alias
    if is_attachment(target):
        return ""
    return link_subject(target)


def _frontmatter_links(frontmatter: Mapping[str, Any]) -> list[Link]:
    """Wikilinks written in property values (Obsidian counts them as links)."""
    found: list[Link] = []

    def visit(value: Any) -> None:
        if isinstance(value, str):
            for m in _WIKILINK.finditer(value):
                target, _ = split_link(m["inner"])
                if target and not is_attachment(target):
                    found.append(Link(target, link_subject(target), bool(m["embed"]), None, None))
        elif isinstance(value, list):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    for key, value in frontmatter.items():
        if key not in NOTE_META_KEYS:
            visit(value)
    return found


def _merge_links(first: Sequence[Link], second: Sequence[Link]) -> tuple[Link, ...]:
    """Distinct targets (case-insensitive); a body mention's context wins over frontmatter."""
    by_key: dict[str, Link] = {}
    for link in [*first, *second]:
        key = link.target.casefold()
        old = by_key.get(key)
        if old is None:
            by_key[key] = link
        elif old.context is None and link.context is not None:
            by_key[key] = Link(old.target, old.subject, old.embed, link.context, link.line)
    return tuple(by_key.values())


# --------------------------------------------------------------------------- body walk


@dataclass
class _Line:
    scan: str  # text with opaque parts replaced by _OPAQUE
    opaque: list[str]  # the original text of each _OPAQUE, in order


class _BodyWalker:
    """Collects blocks, links, tags and inline fields from markdown-it tokens."""

    def __init__(self, line_offset: int, rel_path: str = "") -> None:
        self.line_offset = line_offset
        self.folder = PurePosixPath(rel_path).parent.as_posix() if rel_path else "."
        self.urls: list[str] = []
        self.blocks: list[Block] = []
        self.links: list[Link] = []
        self.tags: list[str] = []
        self.fields: list[InlineField] = []
        self.first_h1: str | None = None
        self._section: str | None = None
        self._section_level = 0
        self._with_context: set[str] = set()  # case-folded targets with a context already

    def walk(self, tokens: Sequence[Token]) -> None:
        containers: list[str] = []
        heading_level = 0
        for tok in tokens:
            if tok.type in ("list_item_open", "blockquote_open"):
                containers.append(tok.type)
            elif tok.type in ("list_item_close", "blockquote_close"):
                if containers:
                    containers.pop()
            elif tok.type == "heading_open":
                heading_level = int(tok.tag[1:])
            elif tok.type == "heading_close":
                heading_level = 0
            elif tok.type == "inline":
                line = (tok.map[0] if tok.map else 0) + 1 + self.line_offset
                if heading_level:
                    kind = "heading"
                elif containers and containers[-1] == "list_item_open":
                    kind = "item"
                elif containers:
                    kind = "quote"
                else:
                    kind = "paragraph"
                self._inline(tok.children or [], kind, heading_level, line)
            # fence, code_block, html_block: never scanned (code and raw HTML).

    def _inline(self, children: Sequence[Token], kind: str, level: int, line: int) -> None:
        """One block, or several where the lines hold a pipe table (the lines before it,
        the table, the lines after it: ``_table_parts``)."""
        lines = list(enumerate(_split_lines(children, self.folder, self.urls), line))
        if kind == "heading":
            self._block(lines, kind, level)
            return
        for is_table, part in _table_parts(lines):
            first = part[0] is lines[0]
            self._block(
                part,
                "table" if is_table else kind,
                level,
                callout=kind == "quote" and first,
                continued=not first,
            )

    def _block(
        self,
        lines: Sequence[tuple[int, _Line]],
        kind: str,
        level: int,
        *,
        callout: bool = False,
        continued: bool = False,
    ) -> None:
        """A block of ``lines`` (file line, line), its links with their contexts and its
        fields; a table's lines are its rows, each read as its cells (``_row_line``)."""
        texts: list[str] = []
        # True: the line stands alone (a field, a callout title, a table row).
        line_kinds: list[bool] = []
        spans: list[Span] = []
        mentions: list[tuple[str, str, bool, int, int]] = []  # target, subject, embed, pos, line
        offset = 0
        for i, (file_line, ln) in enumerate(lines):
            alone = kind == "table"
            if callout and i == 0:
                # A callout's "[!note]" marker is syntax, not text; its title stands alone.
                m = _CALLOUT_MARK.match(ln.scan)
                if m:
                    ln = _Line(ln.scan[m.end() :], ln.opaque)
                    alone = True
            shown = _row_line(ln) if kind == "table" else ln
            plain, line_spans = _render(shown.scan, shown.opaque, 0, len(shown.scan))
            if i:
                offset += 1  # the joining space
            for target, subject, embed, start, end in line_spans:
                spans.append(Span(subject, offset + start, offset + end))
                mentions.append((target, subject, embed, offset + start, file_line))
            texts.append(plain)
            offset += len(plain)
            if kind != "heading" and self._fields(ln, file_line):
                alone = True
            line_kinds.append(alone)
            self.tags.extend(_tags(ln.scan))
        text = " ".join(texts)
        if kind == "heading" and level == 1 and self.first_h1 is None:
            self.first_h1 = WHITESPACE.sub(" ", text).strip() or None
        self.blocks.append(
            Block(
                kind=kind,
                level=level,
                text=text,
                line=lines[0][0],
                section=self._section,
                section_level=self._section_level,
                spans=tuple(spans),
                continued=continued,
            )
        )
        if kind == "heading":
            self._section = WHITESPACE.sub(" ", text).strip()
            self._section_level = level
        self._contexts(text, texts, line_kinds, spans, mentions, whole=kind in ("heading", "item"))

    def _contexts(
        self,
        text: str,
        texts: Sequence[str],
        line_kinds: Sequence[bool],
        spans: Sequence[Span],
        mentions: Sequence[tuple[str, str, bool, int, int]],
        *,
        whole: bool,
    ) -> None:
        """Each mention's link, with the sentence (field, row, whole block) it sits in as
        its context when that says more than the link."""
        ranges = _sentence_ranges(texts, line_kinds, spans, whole=whole)
        starts = [a for a, _ in ranges]
        collapsed = Collapsed(text) if mentions else None
        words = _free_words(text, spans) if mentions else []
        for target, subject, embed, pos, file_line in mentions:
            key = target.casefold()
            if key in self._with_context:
                continue  # _merge_links keeps a target's first mention that has a context
            k = bisect.bisect_right(starts, pos) - 1
            context = None
            if collapsed is not None and k >= 0 and pos < ranges[k][1]:
                a, b = ranges[k]
                if _says_more(text, words, a, b, pos):
                    context = collapsed.clip(a, b, pos, CONTEXT_MAX_CHARS) or None
            if context is not None:
                self._with_context.add(key)
            self.links.append(Link(target, subject, embed, context, file_line))

    def _fields(self, ln: _Line, file_line: int) -> bool:
        """Record the inline fields of one line; True when the whole line is a field."""
        m = _LINE_FIELD.match(ln.scan)
        if m and _OPAQUE not in m["key"]:
            start, end = m.start("value"), m.end("value")
            value, _ = _render(ln.scan, ln.opaque, start, end)
            raw = _lone_link_raw(ln, start, end, ln.scan.count(_OPAQUE, 0, start))
            self._add_field(m["key"], raw, value, file_line)
            return True
        opaque_at = [i for i, ch in enumerate(ln.scan) if ch == _OPAQUE] if ln.opaque else []
        for m in _BRACKET_FIELD.finditer(ln.scan):
            group = "value" if m["key"] is not None else "pvalue"
            key = m["key"] if m["key"] is not None else m["pkey"]
            # The value may end in whitespace (the pattern does not backtrack to leave it
            # out); _add_field strips it from the plain and the raw value alike.
            start, end = m.start(group), m.end(group)
            index = bisect.bisect_left(opaque_at, start)
            value, _ = _render(ln.scan, ln.opaque, start, end, index=index)
            self._add_field(key, _lone_link_raw(ln, start, end, index), value, file_line)
        return False

    def _add_field(self, key: str, raw_value: str, plain_value: str, file_line: int) -> None:
        key = key.strip()
        value = unwrap_value(raw_value) if lone_link(raw_value) is not None else plain_value.strip()
        if key and value:
            self.fields.append(InlineField(key, value, file_line))


def _lone_link_raw(ln: _Line, start: int, end: int, index: int) -> str:
    """``ln.scan[start:end]``, a field's raw value, with the stand-ins of a lone link put
    back (``[[Ops team\\|Ops]]`` names "Ops team"); other values are only ever read through
    their plain rendering, so their stand-ins stay (an escaped ``\\[\\[x\\]\\]`` is no link).
    ``index``: how many stand-ins precede ``start``."""
    raw = ln.scan[start:end]
    if _OPAQUE in raw and _WHOLE_WIKILINK.match(raw):
        raw, _ = _restore(raw, ln.opaque, index)
    return raw


def _split_lines(
    children: Sequence[Token], folder: str = ".", urls: list[str] | None = None
) -> list[_Line]:
    """The inline children as lines of scannable text (code, escapes, alt text opaque).

    A markdown link to a note (``[Text](other%20note.md)``, relative to the note's folder,
    as Obsidian writes them) is read as the wikilink ``[[folder/other note|Text]]``, so it
    counts like one; web links (http, https) are collected in ``urls``.
    """
    # Pieces are joined once per line: appending to a string attribute copies the line
    # so far each time, quadratic on a long line of many tokens.
    lines: list[_Line] = []
    pieces: list[str] = []
    opaque: list[str] = []
    opens, closes = _note_links(children, folder)
    for i, tok in enumerate(children):
        if tok.type == "link_open":
            if i in opens:
                pieces.append(f"[[{opens[i]}|")
            elif urls is not None:
                href = str(tok.attrs.get("href") or "")
                if _WEB_LINK.match(href):
                    urls.append(href)
        elif tok.type == "link_close":
            if i in closes:
                pieces.append("]]")
        elif tok.type == "text":
            pieces.append(tok.content.replace(_OPAQUE, ""))
        elif tok.type in ("code_inline", "text_special", "image"):
            pieces.append(_OPAQUE)
            opaque.append(tok.content.replace(_OPAQUE, ""))
        elif tok.type in ("softbreak", "hardbreak"):
            lines.append(_Line("".join(pieces), opaque))
            pieces, opaque = [], []
        # html_inline: raw HTML tags are markup, not text
    lines.append(_Line("".join(pieces), opaque))
    return lines


def _cells(scan: str) -> list[str]:
    """A table row's cells: split at its pipes (not one escaped or in a code span, both
    opaque in the scan, nor one inside a wikilink, an alias written in a table), the
    outer pipes' empty cells left out."""
    if "|" not in scan:
        return [scan]
    links = [(m.start(), m.end()) for m in _WIKILINK.finditer(scan)] if "[[" in scan else []
    cells: list[str] = []
    begin = 0
    k = 0
    for at in (i for i, ch in enumerate(scan) if ch == "|"):
        while k < len(links) and links[k][1] <= at:
            k += 1
        if k < len(links) and links[k][0] <= at:
            continue
        cells.append(scan[begin:at])
        begin = at + 1
    cells.append(scan[begin:])
    if len(cells) > 1 and not cells[0].strip():
        cells.pop(0)
    if len(cells) > 1 and not cells[-1].strip():
        cells.pop()
    return cells


def _row_line(ln: _Line) -> _Line:
    """A table row as text: its non-empty cells joined by ``ROW_SEPARATOR``."""
    cells = [c.strip() for c in _cells(ln.scan)]
    return _Line(ROW_SEPARATOR.join(c for c in cells if c), ln.opaque)


def _table_parts(
    lines: Sequence[tuple[int, _Line]],
) -> Iterator[tuple[bool, Sequence[tuple[int, _Line]]]]:
    """The block's lines as (is a table, lines) parts in order. A table (GitHub's pipe
    table) is a line of cells, then a delimiter row of as many cells ("|---|:--:|"), then
    the rows that follow it holding a pipe; its delimiter row is left out."""
    if not any("|" in ln.scan for _, ln in lines):
        yield False, lines
        return
    begin = 0
    i = 0
    while i + 1 < len(lines):
        head, rule = lines[i][1].scan, lines[i + 1][1].scan
        if "|" in rule and "|" in head and _is_delimiter_row(rule, len(_cells(head))):
            end = i + 2
            while end < len(lines) and "|" in lines[end][1].scan:
                end += 1
            if i > begin:
                yield False, lines[begin:i]
            yield True, [lines[i], *lines[i + 2 : end]]
            begin = i = end
        else:
            i += 1
    if begin < len(lines):
        yield False, lines[begin:]


def _is_delimiter_row(scan: str, columns: int) -> bool:
    cells = _cells(scan)
    return len(cells) == columns and all(_DELIMITER_CELL.match(c) for c in cells)


#: Web links kept as ``references`` (other schemes, mail and anchors are not sources).
_WEB_LINK = re.compile(r"https?://\S+\Z", re.IGNORECASE)
_URL_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def note_link_target(href: str, folder: str = ".") -> str | None:
    """The vault path (no ``.md``) a markdown link's href names when it is a note link:
    relative (to ``folder``, the linking note's folder) or vault-absolute (``/x.md``),
    percent-decoded, ``#heading`` dropped; None for web links, anchors and attachments."""
    href = href.strip()
    if not href or href.startswith("#") or _URL_SCHEME.match(href):
        return None
    path = unquote(href.split("#", 1)[0].split("?", 1)[0]).strip()
    if not path or any(c in path for c in "[]|\n" + _OPAQUE):
        return None  # cannot be written as a wikilink target
    name = PurePosixPath(path).name
    if "." in name and not name.lower().endswith(".md"):
        return None  # an attachment (image, pdf, …) or another file type
    joined = path.lstrip("/") if path.startswith("/") else posixpath.join(folder, path)
    norm = posixpath.normpath(joined)
    if norm.startswith("../") or norm == "..":
        norm = PurePosixPath(norm).name  # outside the vault: only the name can resolve
    if norm.lower().endswith(".md"):
        norm = norm[:-3].rstrip()
    return norm or None


def _note_links(children: Sequence[Token], folder: str) -> tuple[dict[int, str], set[int]]:
    """Markdown links to notes among inline tokens: {link_open index: target} and the
    indices of their link_close tokens. A link whose text spans a line break or holds
    brackets cannot become a wikilink and stays plain text."""
    opens: dict[int, str] = {}
    closes: set[int] = set()
    start: int | None = None
    target: str | None = None
    clean = True
    for i, tok in enumerate(children):
        if tok.type == "link_open":
            start, clean = i, True
            target = note_link_target(str(tok.attrs.get("href") or ""), folder)
        elif tok.type == "link_close" and start is not None:
            if target is not None and clean:
                opens[start] = target
                closes.add(i)
            start, target = None, None
        elif start is not None and (
            tok.type in ("softbreak", "hardbreak") or any(c in tok.content for c in "[]|")
        ):
            clean = False
    return opens, closes


def _render(
    scan: str, opaque: Sequence[str], start: int, end: int, *, index: int | None = None
) -> tuple[str, list[tuple[str, str, bool, int, int]]]:
    """Plain text of ``scan[start:end]`` and where each note link's display text landed.

    ``index``: how many opaque stand-ins precede ``start`` (counted when not given).
    """
    if index is None:
        index = scan.count(_OPAQUE, 0, start)
    out: list[str] = []
    pos = 0
    spans: list[tuple[str, str, bool, int, int]] = []

    def emit(piece: str) -> None:
        nonlocal index, pos
        if _OPAQUE in piece:
            piece, index = _restore(piece, opaque, index)
        out.append(piece)
        pos += len(piece)

    cursor = start
    for m in _WIKILINK.finditer(scan, start, end):
        if cursor < m.start():
            emit(scan[cursor : m.start()])
        inner = m["inner"]
        if _OPAQUE in inner:
            # An escape, entity or code span inside the link: the link names what it
            # stands for (a table's "[[A\|b]]" is "[[A|b]]"), and the stand-ins after
            # the link stay in step.
            inner, index = _restore(inner, opaque, index)
            inner = WHITESPACE.sub(" ", inner)  # an entity may stand for a line break
        target, shown, subject = _link_parts(inner)
        begin = pos
        out.append(shown)
        pos += len(shown)
        if subject is not None:
            spans.append((target, subject, bool(m["embed"]), begin, pos))
        cursor = m.end()
    emit(scan[cursor:end])
    return "".join(out), spans


def _restore(piece: str, opaque: Sequence[str], index: int) -> tuple[str, int]:
    """``piece`` with each stand-in replaced by its text, from ``opaque[index]`` on, and
    the index after the last one used."""
    parts = piece.split(_OPAQUE)
    out = [parts[0]]
    for part in parts[1:]:
        out.append(opaque[index] if index < len(opaque) else "")
        out.append(part)
        index += 1
    return "".join(out), index


@lru_cache(maxsize=4096)
def _link_parts(inner: str) -> tuple[str, str, str | None]:
    """(target, display text, subject or None for an attachment/empty target) of a
    wikilink's inside; memoised, since a long note repeats the same links many times."""
    target, _alias = split_link(inner)
    subject = link_subject(target) if target and not is_attachment(target) else None
    return target, _display(inner), subject


def _tags(scan: str) -> list[str]:
    found = []
    # "[[Note#Heading]]" names a heading, not a tag.
    scan = _WIKILINK.sub(lambda m: " " * len(m[0]), scan)
    for m in _TAG.finditer(scan):
        tag = m["tag"].strip("/")
        if tag and _TAG_HAS_NON_DIGIT.search(tag):
            found.append(tag)
    return found


#: The fewest words a link's sentence must hold besides its links (and a field's name) to
#: say something about what it names: "See [[Observability]].", a line holding an embed
#: alone, "Related: [[A]], [[B]]" or "owner:: [[Platform team]]" (already a property of the
#: note's subject) say no more than that the note mentions it (``mentioned_in``); "Owned by
#: [[Platform team]]" does.
CONTEXT_MIN_WORDS = 2
#: A word, for that count: a run of letters and digits, or one Han or kana character (those
#: scripts write no spaces between words).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CONTEXT_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


def _free_words(text: str, links: Sequence[Span]) -> list[int]:
    """Where the words of ``text`` outside its ``links`` (in order) start, in one pass: a
    paragraph of thousands of links is one sentence, asked about each."""
    out: list[int] = []
    k = 0
    for m in _CONTEXT_WORD.finditer(text):
        at = m.start()
        while k < len(links) and links[k].end <= at:
            k += 1
        if k == len(links) or at < links[k].start:
            out.append(at)
    return out


def _says_more(text: str, words: Sequence[int], start: int, end: int, link: int) -> bool:
    """Whether ``text[start:end]``, a sentence holding a link at ``link``, holds
    ``CONTEXT_MIN_WORDS`` of the ``words`` outside links besides a field's name."""
    field = _FIELD_LINE_START.match(text, start)
    if field is not None and field.end() <= link:
        start = field.end()
    held = bisect.bisect_left(words, end) - bisect.bisect_left(words, start)
    return held >= CONTEXT_MIN_WORDS


def _sentence_ranges(
    texts: Sequence[str], field_lines: Sequence[bool], links: Sequence[Span], *, whole: bool
) -> list[tuple[int, int]]:
    """Ranges of the block text that count as one context: sentences, fields, or the whole
    (a sentence never ends inside a link's text, ``links`` in order)."""
    total = sum(len(t) for t in texts) + max(len(texts) - 1, 0)
    if whole:
        return [(0, total + 1)]
    ranges: list[tuple[int, int]] = []
    offset = 0
    run_start: int | None = None
    joined = " ".join(texts)
    for text, is_field in zip(texts, field_lines, strict=True):
        if is_field:
            if run_start is not None:
                ranges.extend(_sentences(joined, run_start, offset - 1, links))
                run_start = None
            ranges.append((offset, offset + len(text) + 1))
        elif run_start is None:
            run_start = offset
        offset += len(text) + 1
    if run_start is not None:
        ranges.extend(_sentences(joined, run_start, total, links))
    return ranges


def _span_end(span: Span) -> int:
    return span.end


def _sentences(
    text: str, start: int, end: int, links: Sequence[Span] = ()
) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` at sentence ends followed by a non-lower-case letter,
    except inside a link's text (``links`` in order): "[[12. Use Redis]]" is one name."""
    out: list[tuple[int, int]] = []
    begin = start
    k = bisect.bisect_right(links, start, key=_span_end)  # a run of a long block's lines
    for m in _SENTENCE_END.finditer(text, start, end):
        at = m.start()
        while k < len(links) and links[k].end <= at:
            k += 1
        if k < len(links) and links[k].start <= at and m.end() < links[k].end:
            continue  # the next sentence would start inside the link: "[[12. Use Redis]]"
        nxt = text[m.end()] if m.end() < len(text) else ""
        if nxt and not nxt.islower():
            out.append((begin, m.end()))
            begin = m.end()
    out.append((begin, end + 1))
    return out
