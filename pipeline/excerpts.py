"""The excerpt an answer shows of a hit: the part of its note that meets the question.

A note's summary, its first paragraph that is no template line, says why it is a hit only
when the note opens with what it is about. Notes that open alike (meeting minutes: links to
the agenda, who was present) or long notes found by a later section showed their
boilerplate. So each hit's excerpt is the paragraph of its note that holds most of the
question's words, each word weighted by how few of the note's paragraphs hold it (a word in
every paragraph, such as the project's name, tells them apart least), as a search engine
shows a snippet biased by the query. A paragraph under a heading counts the heading's words
too and shows the heading before it. A paragraph that other notes of the answer hold word
for word (a template's line such as "Items labelled for this agenda, collected before the
meeting", an agenda item carried over from the last meeting) says less of the note it is in:
its score is weighted by how few of the answer's notes hold it, as a word's is by how few
paragraphs hold it.

The note's summary stays when no paragraph holds more of the question than the summary
does, when the question has no content words, or when the file cannot be read as the scan
reads notes (gone, unreadable, not a regular file, a symlink leading out of the vault or to
a private note, over the size limit, not UTF-8). The file is read as it is now: an edit
since the last sync shows in the excerpt. Words are compared by their stems
under the note's language (``kodb/text.py``): a paragraph's folded word matches when it
starts with a stem of the question's, so "caching" meets a paragraph saying "cache"
without stemming every word of the note. No markdown parser is loaded (a cold question pays
for none): paragraphs are runs of lines between blank lines, headings and code fences.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Final

from pipeline.errors import InputError
from pipeline.kodb import text
from pipeline.model import Hit
from pipeline.vault.plain import ROW_SEPARATOR, clip_text, embed_plain, link_texts
from pipeline.vault.scan import read_note_bytes

#: An excerpt's length, the same as a summary's (``parse.SUMMARY_MAX_CHARS``).
EXCERPT_CHARS: Final = 300
#: The most of the list item a nested one sits in that its excerpt shows before it.
PARENT_CHARS: Final = 120
#: The items a nested one counts the words of, the nearest first.
MAX_NESTING: Final = 8
#: A note with more paragraphs than this is searched in its first ones only.
MAX_PARAGRAPHS: Final = 2_000
#: Notes kept searchable between questions (the hits of a few recent answers), each at
#: most ``KEPT_NOTE_BYTES`` (a larger one is read again for each question).
NOTES_KEPT: Final = 128
KEPT_NOTE_BYTES: Final = 256 * 1024

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*)$")
#: A heading's closing hashes (``## Title ##``); linear, unlike a lazy group before them.
_CLOSING_HASHES = re.compile(r"[ \t]+#+[ \t]*$")
#: A code fence at any indentation (one nested in a list item too).
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")
#: A quote's marks, and a callout's "[!note]" after them (syntax, not text).
_QUOTE_MARK = re.compile(r"^\s*(?:>\s?)+(?:\[![\w\-]+\][+\-]?\s*)?")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")
#: HTML comments, over several lines too: the full-text index never reads them.
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
#: A line that opens an HTML block as CommonMark reads one (the parser leaves those out of a
#: note's text): a block-level tag, a comment or declaration, or a tag alone on its line;
#: "<b>Note:</b> text" is a paragraph.
_HTML_BLOCK = re.compile(
    r"^\s*(?:<(?:/?(?:address|article|aside|blockquote|body|details|dialog|div|dl|fieldset|"
    r"figcaption|figure|footer|form|h[1-6]|head|header|hr|html|iframe|main|nav|ol|p|pre|"
    r"script|section|style|summary|table|tbody|td|textarea|tfoot|th|thead|tr|ul)(?:[\s/>]|$)"
    r"|[!?])|</?[A-Za-z][^<>]*>\s*$)",
    re.IGNORECASE,
)
_TABLE_RULE_CHARS = frozenset("|-: \t")
_URL = re.compile(r"(?:https?|ftp)://[^\s<>()\[\]]+")
#: A line holding embeds or images alone (``![[On-call#What pages]]``, ``![[map.png|200]]``,
#: ``![rota](rota.png)``): another note's text or a picture, which would show as its name.
_EMBED_ALONE = re.compile(r"(?:!\[\[[^\[\]\n]*\]\]|!\[[^\[\]\n]*\]\([^()\n]*\)|\s)+")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s]+)>")
_WORD = re.compile(r"[^\W_]+")
#: A markdown backslash escape: the punctuation it keeps literal ("\\[Converge\\]").
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_SEPARATOR = "\n\x00\n"
#: What a table row's pipes are read among: code span marks, wikilinks, escapes, pipes.
_ROW_TOKEN = re.compile(r"`+|\[\[[^\[\]\n]*\]\]|\\.|\|")
_TICKS = re.compile(r"`+")
#: The first characters of a line that may open a list item or a quote.
_MARK_STARTS = frozenset("-*+>0123456789")

Allowed = Callable[[str], bool]


@dataclass(frozen=True)
class Paragraphs:
    """A note's paragraphs as written (list marks and quote marks gone) and its headings
    below the title; ``under[i]`` is the heading paragraph ``i`` sits under (None: none, or
    a level-1 heading: the note's title, shown beside the excerpt already and as much about
    every paragraph as about any); ``parent[i]`` the list item paragraph ``i`` is nested
    in (None: none)."""

    texts: tuple[str, ...]
    headings: tuple[str, ...]
    under: tuple[int | None, ...]
    parent: tuple[int | None, ...]

    def enclosing(self, i: int) -> list[int]:
        """The list items paragraph ``i`` is nested in, the nearest first (at most
        ``MAX_NESTING``: a note nested deeper says no more, and would cost an answer the
        square of its depth)."""
        out: list[int] = []
        p = self.parent[i]
        while p is not None and p < (out[-1] if out else i) and len(out) < MAX_NESTING:
            out.append(p)  # an item nests in an earlier one
            p = self.parent[p]
        return out

    def shown(self, i: int, item: int | None = None, stems: Sequence[tuple[str, ...]] = ()) -> str:
        """Paragraph ``i`` as an excerpt shows it: its heading first, then ``item`` (one
        it is nested in; by default the nearest), clipped around the first of the
        question's words (``stems``) it holds (minutes' "Proposal: drop mandatory
        attendance #1338" above the discussion), the text as the model reads prose (links
        by their text, no emphasis marks), no HTML tags."""
        parts = [_prose(self.texts[i])]
        if (above := self.parent[i] if item is None else item) is not None:
            text = _prose(self.texts[above])
            parts.insert(0, clip_text(text, PARENT_CHARS, _first_match(text, stems)))
        if (h := self.under[i]) is not None:
            parts.insert(0, _prose(self.headings[h]))
        return " — ".join(parts)


class _Lists:
    """The list items open around the line being read, for ``paragraphs``: which item the
    paragraph being read is nested in."""

    def __init__(self) -> None:
        self.open: list[tuple[int, int]] = []  # (indentation of the mark, item's paragraph)
        self.nested: int | None = None

    def item(self, indent: int, index: int) -> None:
        """A list item opens at ``indent``; its paragraph will be ``index``."""
        while self.open and self.open[-1][0] >= indent:
            self.open.pop()
        self.nested = self.open[-1][1] if self.open else None
        self.open.append((indent, index))

    def paragraph(self, indent: int, index: int) -> None:
        """A paragraph that is no list item opens at ``indent`` (``index``: the paragraphs
        so far): it continues the item whose mark is left of it (at the margin, it ends
        the lists above it); the first lines of an item whose mark stands alone are its."""
        while self.open and self.open[-1][0] >= indent:
            self.open.pop()
        if not self.open:
            self.end()
        elif self.open[-1][1] < index:
            self.nested = self.open[-1][1]

    def lost(self, index: int) -> None:
        """A block closed with no paragraph (``index``: the paragraphs so far): an empty
        item, or one past the limit, has no paragraph to nest in."""
        if self.open and self.open[-1][1] == index:
            self.open.pop()

    def leave(self, line: str) -> None:
        """A block that is no paragraph starts on ``line``: at the margin, it ends the
        lists above it."""
        if not _indent(line):
            self.end()

    def end(self) -> None:
        """No list is open (a heading, or a block at the margin)."""
        self.open.clear()
        self.nested = None


def _prose(raw: str) -> str:
    plain = embed_plain(_ESCAPE.sub(r"\1", raw))
    text = _HTML_TAG.sub(" ", _AUTOLINK.sub(r"\1", plain)).replace("\x00", " ")
    return " ".join(text.split())


# long: one pass over the lines, where each kind of block ends the one before it
def paragraphs(markdown: str) -> Paragraphs:
    """The paragraphs of a note's markdown: runs of lines between blank lines, headings,
    code fences, list items and table rows; frontmatter, code and lone embeds left out."""
    texts: list[str] = []
    headings: list[str] = []
    under: list[int | None] = []
    parent: list[int | None] = []
    current: int | None = None
    block: list[str] = []
    fence: str | None = None
    lists = _Lists()
    html = False
    header: int | None = None  # the paragraph of the current table's header row
    table_at = -2  # the line of the last table row or rule read

    def close() -> None:
        nonlocal html
        html = False
        if block and len(texts) < MAX_PARAGRAPHS:
            texts.append(" ".join(block))
            under.append(current)
            parent.append(lists.nested)
        else:
            lists.lost(len(texts))
        block.clear()

    for n, line in enumerate(_body_lines(markdown)):
        first = line.lstrip()[:1]
        if fence is not None:
            if _closes(line, fence):
                fence = None
            continue
        if not first:
            close()
            continue
        if first in "`~" and (m := _FENCE.match(line)):
            close()
            lists.leave(line)
            fence = m.group(1)
            continue
        if first == "#" and (m := _HEADING.match(line)):
            close()
            lists.end()
            if len(m.group(1)) == 1:
                current = None
            else:
                headings.append(_CLOSING_HASHES.sub("", m.group(2)))
                current = len(headings) - 1
            continue
        if first == "=" and set(line.strip()) == {"="}:  # a setext heading's underline
            close()
            continue
        if first in "|:-" and "---" in line and set(line) <= _TABLE_RULE_CHARS:
            close()
            lists.leave(line)  # a thematic break, or a table's rule
            header = header if table_at == n - 1 else None  # no row above: no table's rule
            table_at = n
            continue
        if not block and first == "<" and _HTML_BLOCK.match(line):
            html = True  # an HTML block, left out as the index leaves it out
            lists.leave(line)
        if html:
            continue
        indent = _indent(line)
        if first in _MARK_STARTS and _LIST_MARK.match(line):  # each item its own paragraph
            close()
            lists.item(indent, len(texts))
        elif not block:
            lists.paragraph(indent, len(texts))
        if first in _MARK_STARTS:
            line = _LIST_MARK.sub("", _QUOTE_MARK.sub("", line))
        stripped = line.strip()
        if stripped.startswith("|"):  # a table row: its cells, a paragraph of its own
            if block:
                close()
                lists.paragraph(indent, len(texts))
            row = len(texts) < MAX_PARAGRAPHS and not set(stripped) <= _TABLE_RULE_CHARS
            if row:
                block.append(row_text(stripped))  # (a quoted table's rule is no row)
            close()
            if row and header is not None and table_at == n - 1:
                parent[-1] = header  # a row shows its table's header row before it
            elif row:
                header = len(texts) - 1
            table_at = n
            continue
        if stripped and not _EMBED_ALONE.fullmatch(stripped):
            block.append(stripped)
    close()
    return Paragraphs(tuple(texts), tuple(headings), tuple(under), tuple(parent))


def row_text(row: str) -> str:
    """A table row as an excerpt shows it (as ``parse`` makes a row a link's context): its
    non-empty cells joined by " · ". A pipe splits cells unless escaped (``\\|``), in a
    code span (backticks closed by a run as long; an unclosed run is text) or in a wikilink
    (an alias, written ``[[X\\|y]]`` in a table, stays one)."""
    if not any(mark in row for mark in ("`", "\\", "[[")):
        return ROW_SEPARATOR.join(c.strip() for c in row.split("|") if c.strip())
    span_end = _code_span_ends(row)
    cells: list[str] = []
    parts: list[str] = []
    last = pos = 0
    while (m := _ROW_TOKEN.search(row, pos)) is not None:
        token, pos = m.group(), m.end()
        if token[0] == "`":  # a code span is text as it stands; unclosed, so are the ticks
            pos = span_end(m.start(), pos) or pos
        elif token == "|":
            parts.append(row[last : m.start()])
            cells.append("".join(parts))
            parts, last = [], pos
        elif token[0] == "[":  # a wikilink: an alias's escaped pipe is the alias's
            parts += [row[last : m.start()], token.replace("\\|", "|")]
            last = pos
    parts.append(row[last:])
    cells.append("".join(parts))
    return ROW_SEPARATOR.join(c.strip() for c in cells if c.strip())


def _code_span_ends(row: str) -> Callable[[int, int], int | None]:
    """For a backtick run that opens at ``start`` and ends at ``end``: where its code span
    ends, after the next run as long (CommonMark's rule), or None (no such run: the
    backticks are text)."""
    starts: dict[int, list[int]] = {}
    for m in _TICKS.finditer(row):
        starts.setdefault(m.end() - m.start(), []).append(m.start())

    def span_end(start: int, end: int) -> int | None:
        later = starts.get(end - start, [])
        k = bisect.bisect_right(later, start)
        return later[k] + end - start if k < len(later) else None

    return span_end


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a code block opened by ``fence``: a run of the same mark at
    least as long, alone on its line."""
    closing = line.strip()
    return closing[:1] == fence[0] and len(closing) >= len(fence) and set(closing) == {fence[0]}


def _indent(line: str) -> int:
    """Where a line's text starts, in columns (a tab to the next multiple of four)."""
    wide = line.expandtabs(4) if "\t" in line else line
    return len(wide) - len(wide.lstrip())


def _body_lines(markdown: str) -> list[str]:
    """The note's lines after its YAML frontmatter (when it opens with one), HTML comments
    left out."""
    lines = _HTML_COMMENT.sub("", markdown.removeprefix("\ufeff")).splitlines()
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                return lines[i + 1 :]
    return lines


def _folded(parts: Sequence[str]) -> list[str]:
    """``parts`` folded by ``text.fold`` in one call over their joint text (a call per
    paragraph cost more than the rest of an answer's excerpts)."""
    return text.fold(_SEPARATOR.join(parts)).split(_SEPARATOR)


@dataclass(frozen=True)
class Searchable:
    """A note ready to be searched for any question: its paragraphs, and their texts and
    headings folded (link addresses blanked) and joined, with where each part starts."""

    paras: Paragraphs
    joined: str
    starts: tuple[int, ...]

    def folded_texts(self) -> tuple[str, ...]:
        """Each paragraph's folded text (headings left out)."""
        sep = len(_SEPARATOR)
        return tuple(
            self.joined[self.starts[i] : self.starts[i + 1] - sep]
            for i in range(len(self.paras.texts))
        )


def searchable(markdown: str) -> Searchable:
    paras = paragraphs(markdown)
    # Matched as shown: links by their text (one pass over the joint text; no link spans a
    # separator's line break), and a word inside a web address ("github.com/nodejs/node")
    # is not the text's.
    plain = _URL.sub(" ", link_texts(_SEPARATOR.join((*paras.texts, *paras.headings))))
    folded = _folded(plain.split(_SEPARATOR))
    starts = itertools.accumulate((len(f) + len(_SEPARATOR) for f in folded), initial=0)
    return Searchable(paras, _SEPARATOR.join(folded), tuple(starts))


def best_paragraph(
    note: Searchable,
    stems: Sequence[tuple[str, ...]],
    summary: str | None,
    rarity: Sequence[float] = (),
) -> str | None:
    """The paragraph holding most of the question's words (weighted by how few paragraphs
    hold each, the words of a heading and of the list items a paragraph is nested in
    counting for it too), its score weighted by ``rarity[i]`` (how few of the answer's notes
    hold paragraph ``i``; all alike when empty), clipped around its first match; None when
    none holds more than the summary (``stems``: each question word's stems, as
    ``text.query_groups`` gives them)."""
    paras = note.paras
    n = len(paras.texts)
    if not n or not stems:
        return None
    # Each word searched once over the note's joint folded text; a match's offset says
    # which paragraph (or heading) holds it.
    entries = [_holding(note.joined, note.starts, g) for g in stems]
    # A paragraph holds its heading's words and those of the list items it is nested in.
    around = [
        ([] if h is None else [n + h]) + paras.enclosing(i) for i, h in enumerate(paras.under)
    ]
    held = [
        [i in found or any(a in found for a in around[i]) for found in entries] for i in range(n)
    ]
    weights = [
        math.log(1.0 + n / k) if (k := sum(row[g] for row in held)) else 0.0
        for g in range(len(stems))
    ]
    scores = [sum(w for w, h in zip(weights, row, strict=True) if h) for row in held]
    weighted = [x * r for x, r in zip(scores, rarity, strict=True)] if rarity else scores
    best = _followed(paras, max(range(n), key=lambda i: (weighted[i], -i)), weighted)
    if scores[best] <= 0.0:
        return None
    if summary:
        (plain,) = _folded([_URL.sub(" ", summary)])
        bounds = (0, len(plain) + len(_SEPARATOR))
        in_summary = sum(
            w for w, g in zip(weights, stems, strict=True) if _holding(plain, bounds, g)
        )
        if in_summary >= scores[best]:
            return None
    # The item shown above a nested paragraph: the nearest holding a question word.
    item = next((a for a in around[best] if a < n and any(a in f for f in entries)), None)
    shown = paras.shown(best, item, stems)
    return clip_text(shown, EXCERPT_CHARS, _first_match(shown, stems))


def _followed(paras: Paragraphs, best: int, weighted: Sequence[float]) -> int:
    """``best``, or the first paragraph nested in it that weighs as much: it shows the
    item and what was said under it ("Proposal: drop attendance #1338 — no
    objections")."""
    for i in range(best + 1, len(paras.texts)):
        if paras.parent[i] == best and weighted[i] >= weighted[best]:
            return i
    return best


def _holding(joined: str, starts: Sequence[int], spellings: Iterable[str]) -> set[int]:
    """The entries of ``joined`` (its parts begin at ``starts``) holding a word that starts
    with one of ``spellings``: ``str.find`` with the word boundary checked by hand, an order
    of magnitude faster than a regex with a word boundary over a long note."""
    found: set[int] = set()
    for spelling in spellings:
        at = joined.find(spelling)
        while at != -1:
            entry = bisect.bisect_right(starts, at) - 1
            if at == 0 or not joined[at - 1].isalnum():
                found.add(entry)
                at = joined.find(spelling, starts[entry + 1])  # on in the next entry
            else:
                at = joined.find(spelling, at + 1)
    return found


def _first_match(shown: str, stems: Sequence[tuple[str, ...]]) -> int:
    """Where in ``shown`` the first question word is, word by word so the offset is the
    text's own whatever folding does to its length (0: none outside a web address)."""
    spellings = tuple(w for g in stems for w in g)
    urls = [m.span() for m in _URL.finditer(shown)]
    for m in _WORD.finditer(shown):
        if any(a <= m.start() < b for a, b in urls):
            continue
        (folded,) = _folded([m.group(0)])
        if folded.startswith(spellings):
            return m.start()
    return 0


def with_excerpts(
    hits: Sequence[Hit],
    question_terms: Sequence[str],
    vault: Path,
    max_bytes: int,
    languages: dict[str, str | None],
    default_language: str,
    allowed: Allowed = lambda rel: True,
) -> list[Hit]:
    """The hits, each with the excerpt of its note that meets the question (its summary
    kept where none does better or the note cannot be read). ``languages``: each note's
    stemmer as its full text was indexed; a note without one takes ``default_language``;
    ``allowed``: whether a vault-relative path may be read (a symlinked note's target must
    not be a private note)."""
    if not question_terms:
        return list(hits)
    try:
        root = vault.resolve()
    except (OSError, RuntimeError):
        return list(hits)
    found = [_note(root, hit, max_bytes, allowed) for hit in hits]
    notes = [None if f is None else f[1] for f in found]
    rarities = _rarities(found)
    groups: dict[str | None, list[tuple[str, ...]]] = {}
    out: list[Hit] = []
    for hit, note, rarity in zip(hits, notes, rarities, strict=True):
        language = languages.get(hit.path) or default_language
        if language not in groups:
            # The whole word too: the stemmer's "queri" is no prefix of a note's "query".
            groups[language] = text.query_groups(question_terms, (language, None))
        excerpt = (
            None if note is None else best_paragraph(note, groups[language], hit.excerpt, rarity)
        )
        out.append(hit if excerpt is None else replace(hit, excerpt=excerpt))
    return out


def _rarities(notes: Sequence[tuple[str, Searchable] | None]) -> list[tuple[float, ...]]:
    """For each note (its file and text), how few of ``notes`` hold each of its
    paragraphs, compared folded: log(1 + files / files holding it), so a paragraph no other
    note holds weighs alike in every note (a file found twice, through a symlink, is one)."""
    folded = [() if n is None else n[1].folded_texts() for n in notes]
    holders: dict[str, set[str]] = {}
    for note, texts in zip(notes, folded, strict=True):
        if note is not None:
            for t in texts:
                holders.setdefault(t, set()).add(note[0])
    files = len({n[0] for n in notes if n is not None})
    return [tuple(math.log(1.0 + files / len(holders[t])) for t in texts) for texts in folded]


def _note(root: Path, hit: Hit, max_bytes: int, allowed: Allowed) -> tuple[str, Searchable] | None:
    """The hit's note made searchable as the scan would read it, with its file's path: a
    regular file inside the vault (``root``, resolved; a symlink only where it leads
    inside, and not to a note the answer may not show), at most ``max_bytes``; None
    otherwise (the summary stays)."""
    try:
        real = (root / hit.path).resolve(strict=True)
        rel = real.relative_to(root).as_posix()
        st = real.stat()
    except (OSError, RuntimeError, ValueError):  # gone, a loop, outside the vault
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes or not allowed(rel):
        return None
    key = (str(real), st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, max_bytes)
    note = _kept(*key) if st.st_size <= KEPT_NOTE_BYTES else _searchable_file(*key)
    return None if note is None else (str(real), note)


def _searchable_file(
    full: str, ino: int, mtime_ns: int, ctime_ns: int, size: int, max_bytes: int
) -> Searchable | None:
    """A note file made searchable; None: unreadable or not UTF-8."""
    path = Path(full)
    try:
        raw, _ = read_note_bytes(path.parent, path.name, max_bytes)
        return searchable(raw.decode("utf-8-sig"))
    except (InputError, UnicodeDecodeError):
        return None


#: Kept per version of the file (its stat): a warm service or a batch meets the same notes
#: question after question.
_kept = lru_cache(maxsize=NOTES_KEPT)(_searchable_file)
