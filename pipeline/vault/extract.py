"""Deterministic facts from one parsed note (extractor name ``"ingest"``).

Facts are about the subjects a note talks about. The note's own subject is its frontmatter
``subject:``, else its title; its properties are facts about that subject. Every note it
links to is a subject too: the link is evidence about the target from this file and this
source type, so a subject discussed across the vault gathers facts from many files and
types — which is what corroboration ranking measures.

Rules and confidences (the confidence says how directly the note states the fact):

    rule                                   subject        predicate             conf
    -------------------------------------  -------------  --------------------  ----
    frontmatter property ``key: value``    note subject   key (``a.b`` nested)  0.95
    frontmatter ``aliases``                note subject   ``alias``             0.95
    ADR status (frontmatter / section)     note subject   ``adr_status``        0.95
    Dataview inline field ``key:: value``  note subject   key                   0.90
    tag ``#a/b`` (body or frontmatter)     note subject   ``tagged`` (≤ 100)    0.90
    ADR decision (frontmatter / section)   note subject   ``decision``          0.90
    ADR "Superseded by [[X]]"              note subject   ``superseded_by``     0.90
    ADR "Replaced by", "Felváltotta" [[X]] note subject   ``superseded_by``     0.90
    ADR "Supersedes", "Replaces",          note subject   ``supersedes``        0.90
      "helyettesíti" [[X]]
    ADR ``Date:`` line (Nygard preamble)   note subject   ``date``              0.90
    link in an ADR's decision              link target    ``decided_in``        0.85
    wikilink / embed ``[[X]]``             note subject   ``links_to``          0.80
    wikilink / embed ``[[X]]``             link target X  ``mentioned_in``      0.70
    wikilink / embed ``[[X]]``             link target X  ``context``           0.60
    every note: its title                  note subject   ``title``             0.95
    ISO date starting the file name        note subject   ``date``              0.90
    web link ``[text](https://…)``         note subject   ``references`` (≤ 50) 0.80
    item under Present, Attendees, …       note subject   ``participants``      0.85
      (Members, Tagok: ``members``)                        (≤ 100)
    first paragraph (≥ 5 words, ≤ 300)*    note subject   ``summary``           0.75
    heading (not the title, not template)  note subject   ``section`` (≤ 30)    0.70

* The first that is no template line: a paragraph that opens three notes or more of the
vault (``ParsedNote.templates``, set by ingest from KO-DB's counts; docs/ingestion.md).

A markdown link to a note (``[Text](other.md)``) counts as a wikilink to it. The rules of
the last block give every note facts about its own subject, so a vault of plain prose
notes without links or frontmatter still has subjects to answer with; they come from one
file each, so they add to ``total_facts`` but never to corroboration. Template headings
(an ADR's Status, Context, Decision, Consequences; "See also", "References" …) are not
sections. A file-name date counts only when it is a real calendar day of a year from
1000 to 2999 (``2026-02-30`` and ``0000-00-00`` are no dates, and give no fact); tags,
web links and sections keep the first ones up to their bound (a note of 100,000 tags
says no more about its subject than one of a hundred). ``EXTRACTOR_VERSION`` names these
rules: ingest re-extracts every note whose registry row was written under another version.

Details: frontmatter ``title``, ``subject``, ``aliases``, ``tags`` and ``cssclasses`` are
not properties; lists give one fact per item; nested mappings are flattened to ``a.b``; a
lone ``"[[X]]"`` value becomes ``X`` (other links in text become their display text);
dates, numbers and booleans are written as ISO dates, plain numbers and ``true``/``false``.
``mentioned_in`` has the note's title as object; ``context`` is the plain sentence or list
item of the first mention (≤ 240 characters) that holds two words or more outside its links
and a field's name ("See [[X]].", an embed on a line of its own, "Related: [[X]], [[Y]]",
``owner:: [[X]]`` give none: the note only mentions X, and a field is already a property of
its subject). Each distinct target counts once per note; links to the note itself are
ignored. ADR rules apply to notes of source type ``adr``: the status is the first known
word of frontmatter ``status`` or of the first line of the ``## Status`` section,
normalised to proposed / accepted / rejected / deprecated / superseded (``approved`` counts
as accepted, ``draft`` and ``in review`` as proposed; Hungarian words count too: elfogadva,
elutasítva, elavult, felváltva, javasolt; an unknown word gives no ``adr_status``); an ADR
that names what replaced it (a ``superseded_by`` fact of its own: "Accepted on ….
Superseded by [[X]]") is ``superseded`` whatever its word, as answers mark it. The succession
phrases other than "Superseded by" count in the Status section or at the start
of a paragraph or callout (elsewhere they are more likely about something the ADR
discusses); the decision is frontmatter ``decision`` or the first paragraph of the
``## Decision`` section, as plain text cut to 300 characters.

Link resolution: ``extract_facts(note, resolve)`` takes a resolver (ingest builds one over
the whole vault) that maps a link target as written (``[[0007-use-redis]]``,
``[[adr/0007-use-redis]]``, ``[[Redis]]``) to the subject of the note it names, or None. A
resolved link uses that subject as the subject of ``mentioned_in`` / ``context`` /
``decided_in`` and as the object of ``links_to`` / ``superseded_by`` and of a property whose
value is a lone ``"[[X]]"`` (``superseded_by: "[[0014-…]]"``), so the facts about a
note gather on the subject its own facts use. An unresolved link (or no resolver) keeps the
target's last path segment. Ingest gives a public note a resolver that resolves no link
to a private note (``vault_private_globs``), so what a private note says never becomes a
public note's fact. With a resolver, a link to the note's own path or file stem is a
self-link as well; a self-link in a decision or "Superseded by" names the note's own subject.

There is no generic ``has_value`` predicate: each fact keeps a meaningful predicate. Empty
subjects, predicates and objects are dropped; a fact produced twice keeps its highest
confidence; the order is deterministic (properties, aliases, ADR facts, inline fields, tags,
then links in order of first mention).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from pipeline.model import INGEST_EXTRACTOR, Fact, fact_key, normalize_text
from pipeline.succession import PREDECESSOR_PREDICATE, STATUS_PREDICATE, SUCCESSOR_PREDICATE
from pipeline.vault.parse import (
    DATE_LINE,
    NOTE_META_KEYS,
    STATUS_SECTIONS,
    SUCCESSION_PHRASES,
    SUPERSEDED_BY,
    Block,
    ParsedNote,
    Span,
    clip_text,
    is_attachment,
    link_subject,
    lone_link,
    name_date,
    section_key,
    stringify,
    unwrap_value,
    wikilink_subjects,
)

EXTRACTOR = INGEST_EXTRACTOR
#: Bump when the rules change: ingest then re-extracts notes extracted under another one.
#: 2: title, summary, section, file-name date, references; markdown links to notes.
#: 3: each note's full text goes to KO-DB's index too (KO-DB migration 5).
#: 4: a public note's link to a private note keeps its target as written (ingest's
#:    ``LinkResolver.public``), never the private note's subject (issue 35).
#: 5: ``[[target\|alias]]`` (a table's escaped pipe) links to target; at most MAX_TAGS
#:    tags per note; a file-name date must be a real calendar day (issue 35, item 17).
#: 6: succession in other words ("Replaced by", "Supersedes", "Replaces", Hungarian
#:    "felváltotta", "helyettesíti") and Hungarian status words (issue 37).
#: 7: each note's date (frontmatter date/created, file name, ADR Date:) in the registry
#:    (KO-DB migration 12, issue 37).
#: 8: frontmatter ``lang`` names the note's language (its full text's stemmer), not a fact
#:    about its subject (issue 39).
#: 9: a link's sentence is its ``context`` only when it holds two words outside its links
#:    and a field's name ("See [[X]].", an embed alone, "owner:: [[X]]" give none).
#: 10: a note's summary skips template lines, paragraphs that open three notes or more
#:    (an attendee, "Previous minutes: <url>"); the re-read fills KO-DB's note_openings.
#: 11: an ADR's status (its Status section, a "Status:" line, a succession banner) is never
#:    its summary (its status and successor are facts of their own), a sentence does not
#:    end inside a link's text ("[[12. Use Redis]]"), and a pipe table is a block of rows:
#:    a link's context there is its row, not the whole table.
#: 12: an ADR that names what replaced it (a ``superseded_by`` fact of its own) is
#:    ``superseded`` whatever its status word ("Accepted on …. Superseded by [[0028-…]]"
#:    gave ``accepted``), as the answer marks it.
#: 13: a paragraph right under a heading that lists (Links, References, Present, Attendees,
#:    Participants, Members …) is never a summary: a roll call's names, a link line.
#: 14: a roll call's items (under Present, Attendees, Participants, Members …) are
#:    ``participants`` / ``members`` facts, and its heading no ``section``.
#: 15: a day stated as a link to its daily note (``date: "[[2024-03-10]]"``, as Obsidian's
#:    properties keep it) dates the note.
EXTRACTOR_VERSION = 15

#: resolve(link target as written) -> the subject of the note it names, or None.
Resolver = Callable[[str], str | None]

CONF_PROPERTY = 0.95
CONF_ALIAS = 0.95
CONF_ADR_STATUS = 0.95
CONF_INLINE_FIELD = 0.9
CONF_TAG = 0.9
CONF_ADR_DECISION = 0.9
CONF_SUPERSEDED_BY = 0.9
CONF_ADR_DATE = 0.9
CONF_DECIDED_IN = 0.85
CONF_LINKS_TO = 0.8
CONF_MENTIONED_IN = 0.7
CONF_CONTEXT = 0.6
CONF_TITLE = 0.95  # the note's own name: certain
CONF_NAME_DATE = 0.9  # as sure as an ADR's Date: line
CONF_REFERENCE = 0.8  # as direct as a wikilink
CONF_SUMMARY = 0.75  # the author's words, quoted, but not a stated property
CONF_SECTION = 0.7  # a heading says the note covers a topic, not what it says of it

SECTION_MAX_CHARS = 200
MAX_SECTIONS = 30
MAX_REFERENCES = 50
#: A note's ``tagged`` facts (frontmatter tags first, then the body's in order).
MAX_TAGS = 100
#: Headings that structure every note of a template and so say nothing about one note.
TEMPLATE_HEADINGS = frozenset(
    {
        "status", "context", "decision", "decisions", "decision outcome", "consequences",
        "considered options", "options", "pros and cons", "context and problem statement",
        "decision drivers", "links", "see also", "related", "references", "notes",
    }
)  # fmt: skip

DECISION_MAX_CHARS = 300

#: A roll call: the list right under one of these headings names who took part (a
#: meeting's "Present", "Attendees"; a team's "Members"), one ``participants`` or
#: ``members`` fact per item, so "who attended …?" is answered by the people themselves.
ROLL_CALLS = {
    **dict.fromkeys(
        (
            "present", "attendees", "attendance", "in attendance", "participants",
            "observers", "guests", "jelen vannak", "jelenlévők", "jelen voltak",
            "résztvevők",
        ),
        "participants",
    ),
    "members": "members", "tagok": "members",
}  # fmt: skip
CONF_ROLL_CALL = 0.85  # the note lists them by name, as a link would
MAX_ROLL_CALL = 100
ROLL_CALL_MAX_CHARS = 120

#: Frontmatter keys that describe the note itself rather than stating properties (its
#: ``subject`` too, which is still a link when it holds one).
NON_PROPERTY_KEYS = NOTE_META_KEYS | {"subject"}

#: A YAML document can expand to a huge tree (anchors/aliases); stop flattening there.
MAX_PROPERTY_FACTS = 2000
MAX_PROPERTY_DEPTH = 8

#: Status words → the normalised ADR status (first known word of the status line wins).
ADR_STATUS_WORDS: Mapping[str, str] = {
    "proposed": "proposed",
    "proposal": "proposed",
    "draft": "proposed",
    "review": "proposed",  # "In Review", "Under Review"
    "pending": "proposed",
    "accepted": "accepted",
    "approved": "accepted",
    "adopted": "accepted",
    "rejected": "rejected",
    "declined": "rejected",
    "deprecated": "deprecated",
    "superseded": "superseded",
    "superceded": "superseded",  # a common misspelling in real ADRs
    "replaced": "superseded",
    # Hungarian
    "javasolt": "proposed",
    "javaslat": "proposed",
    "tervezet": "proposed",
    "elfogadva": "accepted",
    "elfogadott": "accepted",
    "elutasítva": "rejected",
    "elutasított": "rejected",
    "elvetve": "rejected",
    "elvetett": "rejected",
    "elavult": "deprecated",
    "felváltva": "superseded",
    "felváltott": "superseded",
    "leváltva": "superseded",
}

#: Section headings that hold an ADR's decision (Nygard, MADR and common variants).
DECISION_SECTIONS = frozenset({"decision", "decisions", "decision outcome", "the decision"})

_WORD = re.compile(r"[^\W\d_]+")
_SUPERSEDED_BY = re.compile(rf"\b{SUPERSEDED_BY}\b[\s:]*", re.IGNORECASE)
#: What a template leaves after "Superseded by:" when nothing replaced the ADR.
_NO_SUCCESSOR = re.compile(
    r"[\W_]*(?:n/?a|none(?: yet)?|not yet|nothing|null|nil|tbd|-)?[\W_]*", re.IGNORECASE
)
#: The other succession phrases (``parse.SUCCESSION_PHRASES``) count in the Status section
#: or at the start of a paragraph or callout, where they are about the ADR itself rather
#: than something it discusses.
_SUCCESSION_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rf"\b(?:{phrase})\b[\s:]*", re.IGNORECASE), direction)
    for phrase, direction in SUCCESSION_PHRASES
)


def extract_facts(note: ParsedNote, resolve: Resolver | None = None) -> tuple[Fact, ...]:
    """All facts of one note, deduplicated, in a deterministic order.

    ``resolve`` maps link targets to the subjects of the notes they name (see the module
    docstring); without it every link stands for its target's last path segment.
    """
    subject = note.subject
    links = _Links(note, resolve)
    raw: list[tuple[str, str, str, float]] = []
    link = (lambda t: links.subject(t, link_subject(t))) if resolve is not None else None
    properties = frontmatter_properties(note.frontmatter, link)
    raw.extend((subject, k, v, CONF_PROPERTY) for k, v in properties)
    raw.extend((subject, "alias", a, CONF_ALIAS) for a in note.aliases)
    if note.source_type == "adr":
        named = any(k == SUCCESSOR_PREDICATE for k, _ in properties)
        raw.extend(_adr_facts(note, links, successor_property=named))
    raw.extend((subject, f.key, f.value, CONF_INLINE_FIELD) for f in note.inline_fields)
    raw.extend((subject, "tagged", t, CONF_TAG) for t in note.tags[:MAX_TAGS])
    raw.extend(_link_facts(note, links))
    raw.extend(_own_facts(note, has_date=any(p == "date" for _, p, _, _ in raw)))
    return _finalise(raw, note)


def _own_facts(note: ParsedNote, *, has_date: bool) -> Iterator[tuple[str, str, str, float]]:
    """What every note says of its own subject: title, date, web links, summary, sections."""
    subject = note.subject
    yield subject, "title", note.title, CONF_TITLE
    date = name_date(PurePosixPath(note.path).stem)
    if date and not has_date:
        yield subject, "date", date, CONF_NAME_DATE
    for url in note.urls[:MAX_REFERENCES]:
        yield subject, "references", url, CONF_REFERENCE
    yield from _roll_call(note)
    summary = note.summary
    if summary:
        yield subject, "summary", summary, CONF_SUMMARY
    sections = 0
    own_names = {note.title.casefold(), note.subject.casefold()}
    for block in note.blocks:
        if sections >= MAX_SECTIONS:
            break
        if (
            block.kind != "heading"
            or section_key(block.text) in TEMPLATE_HEADINGS | ROLL_CALLS.keys()
        ):
            continue
        if block.text.strip().casefold() in own_names:
            continue  # the title, not a section
        yield subject, "section", clip_text(block.text, SECTION_MAX_CHARS), CONF_SECTION
        sections += 1


def _roll_call(note: ParsedNote) -> Iterator[tuple[str, str, str, float]]:
    """Who the note's roll calls name: each list item right under a ``ROLL_CALLS`` heading
    (the nearest heading: an agenda nested under "Participants" is no roll call)."""
    named = 0
    for block in note.blocks:
        predicate = ROLL_CALLS.get(section_key(block.section)) if block.section else None
        if predicate is None or block.kind != "item" or not block.text.strip():
            continue
        if named >= MAX_ROLL_CALL:
            return
        yield note.subject, predicate, clip_text(block.text, ROLL_CALL_MAX_CHARS), CONF_ROLL_CALL
        named += 1


def link_key(target: str) -> str:
    """A link target or note path as a resolver key: normalised, ``.md`` and slashes trimmed."""
    key = normalize_text(target).strip().strip("/")
    if key.endswith(".md"):
        key = key[:-3].rstrip()
    return key


class _Links:
    """Which subject each link of one note stands for, and which links are self-links."""

    def __init__(self, note: ParsedNote, resolve: Resolver | None) -> None:
        self._note = note
        self._resolve = resolve
        # Last path segment -> target as written: decision and "Superseded by" spans only
        # keep the segment; the note's links (frontmatter and body) have the full target.
        self._targets: dict[str, str] = {}
        for link in note.links:
            self._targets.setdefault(link.subject.casefold(), link.target)
        self._own_names = {note.subject.casefold(), note.title.casefold()}
        if resolve is not None:
            path = link_key(note.path)
            self._own_norm = {
                normalize_text(note.subject),
                normalize_text(note.title),
                path,
                PurePosixPath(path).name,
            }

    def is_self(self, target: str, segment: str) -> bool:
        """True when the link names the note itself (never resolver-dependent, so an
        unchanged note's self-links stay the same when other notes change)."""
        if segment.casefold() in self._own_names:
            return True
        return self._resolve is not None and link_key(target) in self._own_norm

    def subject(self, target: str, segment: str) -> str:
        """The subject a link to ``target`` (last segment ``segment``) stands for."""
        if self._resolve is None:
            return segment
        if self.is_self(target, segment):
            return self._note.subject
        return self._resolve(target) or segment

    def span_subject(self, segment: str) -> str:
        """The subject of a link known only by its last segment (a decision/status span)."""
        return self.subject(self._targets.get(segment.casefold(), segment), segment)


def frontmatter_properties(
    frontmatter: Mapping[str, Any], link: Callable[[str], str] | None = None
) -> list[tuple[str, str]]:
    """(predicate, object) pairs of the frontmatter properties, flattened per the rules.

    ``link`` names the subject a lone ``"[[X]]"`` value stands for (given the target X as
    written); without it the value is X's last path segment.
    """
    pairs: list[tuple[str, str]] = []

    def visit(key: str, value: Any, depth: int) -> None:
        if len(pairs) >= MAX_PROPERTY_FACTS or depth > MAX_PROPERTY_DEPTH or value is None:
            return
        if isinstance(value, dict):
            for sub, item in value.items():
                visit(f"{key}.{stringify(sub)}", item, depth + 1)
        elif isinstance(value, list | tuple | set):
            for item in value:
                visit(key, item, depth + 1)
        else:
            text = unwrap_value(stringify(value)) if isinstance(value, str) else stringify(value)
            target = lone_link(value) if link and isinstance(value, str) else None
            if link and target and not is_attachment(target):
                text = link(target) or text
            if text:
                pairs.append((key, text))

    for key, value in frontmatter.items():
        if key.strip().casefold() in NON_PROPERTY_KEYS:
            continue
        visit(key.strip(), value, 0)
    return pairs


def normalise_adr_status(text: str) -> str | None:
    """The ADR status named by the first known status word of ``text``, else None."""
    for word in _WORD.findall(text.casefold()):
        status = ADR_STATUS_WORDS.get(word)
        if status:
            return status
    return None


def _section_blocks(note: ParsedNote, names: frozenset[str]) -> list[Block]:
    """Non-empty, non-heading blocks directly under a heading named one of ``names``."""
    return [
        block
        for block in note.blocks
        if block.kind != "heading"
        and block.section
        and section_key(block.section) in names
        and block.text.strip()
    ]


def _paragraph(blocks: Sequence[Block]) -> tuple[str, list[Span]]:
    """The text and links of the first of ``blocks`` with the rest of its paragraph (a
    table right under its first line: "We adopt the following:" and the table)."""
    end = 1
    while end < len(blocks) and blocks[end].continued:
        end += 1
    part = blocks[:end]
    return " ".join(b.text for b in part), [span for b in part for span in b.spans]


def _adr_facts(
    note: ParsedNote, links: _Links, *, successor_property: bool = False
) -> Iterator[tuple[str, str, str, float]]:
    subject = note.subject
    fm = note.frontmatter

    status_src = fm.get("status")
    status_blocks = _section_blocks(note, STATUS_SECTIONS)
    status = None
    if isinstance(status_src, str | list):
        items = status_src if isinstance(status_src, list) else [status_src]
        status = next((s for s in (normalise_adr_status(str(i)) for i in items) if s), None)
    if status is None and status_blocks:
        status = normalise_adr_status(_paragraph(status_blocks)[0])
    succession = [
        *_superseded_by(note, status_blocks, links),
        *_succession_phrases(note, status_blocks, links),
    ]
    named = successor_property or any(f[1] == SUCCESSOR_PREDICATE for f in succession)
    if named and status is not None:
        # Its status line may keep its history ("Accepted on …. Superseded by [[0028-…]]"):
        # an ADR that names what replaced it is superseded now, as the answer marks it
        # (``succession``: a successor decides, whatever the word).
        status = "superseded"
    if status:
        yield subject, STATUS_PREDICATE, status, CONF_ADR_STATUS

    decision_src = fm.get("decision")
    if isinstance(decision_src, str) and decision_src.strip():
        decision = clip_text(unwrap_value(decision_src), DECISION_MAX_CHARS)
        yield subject, "decision", decision, CONF_ADR_DECISION
        decided = wikilink_subjects(decision_src)
    else:
        decision_blocks = _section_blocks(note, DECISION_SECTIONS)
        decided = []
        if decision_blocks:
            text, spans = _paragraph(decision_blocks)
            yield subject, "decision", clip_text(text, DECISION_MAX_CHARS), CONF_ADR_DECISION
            decided = [span.subject for span in spans]

    yield from succession

    if "date" not in {k.casefold() for k in fm}:
        for block in note.blocks:
            if block.section_level > 1:
                break  # the Nygard "Date:" line sits above the first section
            m = DATE_LINE.match(block.text) if block.kind == "paragraph" else None
            if m:
                yield subject, "date", m["value"], CONF_ADR_DATE
                break

    for target in decided:
        yield links.span_subject(target), "decided_in", note.title, CONF_DECIDED_IN


def _superseded_by(
    note: ParsedNote, status_blocks: list[Block], links: _Links
) -> Iterator[tuple[str, str, str, float]]:
    """'Superseded by [[X]]' anywhere; in the Status section also 'Superseded by <text>'."""
    first_status = status_blocks[0] if status_blocks else None
    for block in note.blocks:
        starts = [s.start for s in block.spans]  # in text order: bisect, not a scan per match
        for m in _SUPERSEDED_BY.finditer(block.text):
            k = bisect.bisect_left(starts, m.end())
            span = block.spans[k].subject if k < len(starts) else None
            target = links.span_subject(span) if span else None
            if target is None and block is first_status:
                # A markdown link or plain title: "Superseded by [20. User models](0020-….md)".
                target = block.text[m.end() :].strip().rstrip(".;,")
                if _NO_SUCCESSOR.fullmatch(target):
                    target = None  # a template's "Superseded by: N/A"
            if target:
                yield note.subject, SUCCESSOR_PREDICATE, target, CONF_SUPERSEDED_BY
                return


def _succession_phrases(
    note: ParsedNote, status_blocks: list[Block], links: _Links
) -> Iterator[tuple[str, str, str, float]]:
    """'Replaced by [[X]]', 'Felváltotta: [[X]]' (X replaced this ADR); 'Supersedes [[X]]',
    'Replaces [[X]]', '… helyettesíti a [[X]] döntést' (this ADR replaced X): the first
    link after the phrase, in the Status section or a block that starts with the phrase."""
    in_status = {id(b) for b in status_blocks}
    for block in note.blocks:
        if block.kind == "heading" or not block.spans:
            continue
        starts = [s.start for s in block.spans]
        for pattern, direction in _SUCCESSION_PHRASES:
            for m in pattern.finditer(block.text):
                if id(block) not in in_status and block.text[: m.start()].strip(" >*_[]!"):
                    continue
                k = bisect.bisect_left(starts, m.end())
                if k >= len(starts):
                    continue
                target = links.span_subject(block.spans[k].subject)
                if not target or target == note.subject:
                    continue
                if direction == "by":
                    yield note.subject, SUCCESSOR_PREDICATE, target, CONF_SUPERSEDED_BY
                else:
                    yield note.subject, PREDECESSOR_PREDICATE, target, CONF_SUPERSEDED_BY


def _link_facts(note: ParsedNote, links: _Links) -> Iterator[tuple[str, str, str, float]]:
    for link in note.links:
        if not link.subject or links.is_self(link.target, link.subject):
            continue  # a note linking to itself says nothing new about itself
        target = links.subject(link.target, link.subject)
        yield note.subject, "links_to", target, CONF_LINKS_TO
        yield target, "mentioned_in", note.title, CONF_MENTIONED_IN
        if link.context:
            yield target, "context", link.context, CONF_CONTEXT


def _finalise(raw: list[tuple[str, str, str, float]], note: ParsedNote) -> tuple[Fact, ...]:
    """Strip, drop empties, keep each (subject, predicate, object) once at its best confidence."""
    # Keyed like KO-DB's unique fact_key, so two spellings that collide there collide here.
    best: dict[str, tuple[tuple[str, str, str], float]] = {}
    for subject, predicate, obj, conf in raw:
        triple = (subject.strip(), predicate.strip(), obj.strip())
        if not all(triple):
            continue
        key = fact_key(*triple, note.path, EXTRACTOR)
        if key not in best or conf > best[key][1]:
            best[key] = (best[key][0] if key in best else triple, conf)
    return tuple(
        Fact(
            subject=s,
            predicate=p,
            object=o,
            confidence=conf,
            source_type=note.source_type,
            source_file=note.path,
            extractor=EXTRACTOR,
        ).with_key(key)
        for key, ((s, p, o), conf) in best.items()
    )
