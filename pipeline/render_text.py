"""The answer people read at a terminal: the best notes, then the top subjects with their
facts, laid out for the console's width.

Nothing is cut mid-word or mid-name: titles and facts wrap under their own indent, paths
lose middle folders (never part of a name) when they do not fit, a web link too long for a
line stands whole on its own, and only a note's excerpt is cut to its one line. rich is
imported when an answer is printed, never by the hook.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.model import Answer, FactView, Hit, SubjectRank
from pipeline.render import (
    EVIDENCE_WORDS,
    NOTES_SHOWN,
    answer_notes,
    dates_shown,
    hit_marks,
    label_in_words,
    label_line,
    more_values,
    one_line,
    shown_status,
    silence_line,
    silence_notes,
    successors_in,
    time_words,
)

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.text import Text

#: Subjects the text answer of a plain question shows (no preset, no --top-k): the rest
#: are counted in one line that names the option showing them.
TEXT_SUBJECTS_SHOWN = 5
#: Lines a fact may take in the text answer, besides a line of its own for each web link
#: too long for a line; a longer one ends at a word with "…" (JSON, markdown and the hook
#: carry it whole).
FACT_LINES = 2
#: Where a note's title starts (after its number and cosine), a subject's name (after its
#: rank) and its facts.
NOTE_GUTTER = 12
SUBJECT_GUTTER = 5
FACT_INDENT = 7
LABEL_STYLE = {"strong": "bold green", "moderate": "green", "weak": "yellow"}
_WEB_LINK = re.compile(r"\bhttps?://[^\s<>\"]+")
#: What ends a sentence or a bracket after a link rather than the link itself.
_LINK_TAIL = ".,;:!?'\"…]}>"


def short_path(path: str, width: int = 40) -> str:
    """``path`` within ``width`` characters by leaving out folders after the first one (then
    that one too), never part of a name; a file name longer than ``width`` stays whole."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    if len(parts) == 1:
        return path
    first, folders, name = parts[0], parts[1:-1], parts[-1]
    for kept in range(len(folders) - 1, -1, -1):
        candidate = "/".join([first, "…", *folders[len(folders) - kept :], name])
        if len(candidate) <= width:
            return candidate
    bare = f"…/{name}"
    return bare if len(bare) <= width or len(name) > width else name


def subjects_shown(answer: Answer, limit: int | None) -> tuple[SubjectRank, ...]:
    return answer.subjects if limit is None else answer.subjects[:limit]


@dataclass(frozen=True)
class TextAnswer:
    """An answer as rich renders it: ``subjects`` limits the subjects shown (None: all) and
    the rest are counted, naming the ``--top-k`` that shows them."""

    answer: Answer
    subjects: int | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        width = max(options.max_width, 40)
        answer = self.answer
        for text in _head(answer):
            yield from _indented(console, text, "", 0, width)
        if answer.relevance.label == "no_match":
            return
        notes = answer.hits[:NOTES_SHOWN]
        if notes:
            yield Text("notes", style="bold")
            numbered = {hit.path: i for i, hit in enumerate(notes, start=1)}
            dated = dates_shown(answer)
            for number, hit in enumerate(notes, start=1):
                yield from _note_lines(console, number, hit, width, numbered, dated)
        shown = subjects_shown(answer, self.subjects)
        if shown:
            yield Text(_subjects_heading(answer, len(shown)), style="bold")
            numbers = {hit.path: i for i, hit in enumerate(notes, start=1)}
            successors = successors_in(answer.subjects)
            for rank, subject in enumerate(shown, start=1):
                status = shown_status(subject, successors)
                yield from _subject_lines(console, rank, subject, width, numbers, status)
        elif answer.mode == "fallback" and not answer.hits:
            yield Text("no subject's name holds the question's words", style="dim")


def _head(answer: Answer) -> list[Text]:
    """The question, the label in words, and the measurements when the words leave some
    out (another mode or calibration than the vault's own)."""
    from rich.text import Text

    r = answer.relevance
    head = [Text(answer.query, style="bold")]
    if r.label == "no_match":
        head.append(Text(silence_line(answer), style="dim"))
        return head + [Text(f"note: {said}", style="italic") for said in silence_notes(answer)]
    head.append(Text(label_in_words(answer), style=LABEL_STYLE.get(r.label, "red")))
    if answer.mode != "semantic" or r.calibration != "vault" or r.z is None:
        head.append(Text(label_line(answer), style="dim"))
    if answer.degraded_reason:
        head.append(Text(f"degraded: {answer.degraded_reason}", style="magenta"))
    head += [Text(f"note: {n}", style="italic") for n in answer_notes(answer)]
    head += [Text(said, style="cyan") for said in time_words(answer)]
    return head


def _subjects_heading(answer: Answer, shown: int) -> str:
    total = len(answer.subjects)
    if shown >= total:
        return "subjects"
    return f"subjects ({shown} of {total}; {total - shown} more: --top-k {total})"


def _indented(console: Console, text: Text, first: str, indent: int, width: int) -> Iterator[Text]:
    """``text`` wrapped at words to ``width`` (``_wrapped``), after ``first`` on its first
    line and under ``indent`` spaces on the others."""
    from rich.text import Text

    for i, (line, _) in enumerate(_wrapped(console, text, width - indent)):
        line.rstrip()
        prefix = first.ljust(indent) if i == 0 else " " * indent
        yield Text(prefix) + line


def _wrapped(console: Console, text: Text, width: int) -> list[tuple[Text, bool]]:
    """The lines of ``text`` wrapped at words to ``width``, each with whether it is a web
    link longer than a line: such a link has a line of its own, whole and linked, past the
    width (the terminal wraps it softly); folded under an indent it could be neither clicked
    nor copied."""
    lines: list[tuple[Text, bool]] = []
    for piece, whole in _around_long_links(text, width):
        if whole:
            lines.append((piece, True))
        else:
            lines.extend((line, False) for line in piece.wrap(console, width))
    return lines


def _long_links(plain: str, width: int) -> list[tuple[int, int, int]]:
    """The web links longer than ``width``: where each starts, where the link ends without
    the punctuation that ends the sentence around it ("(see https://…/a)." links
    https://…/a), and where that punctuation ends."""
    spans = []
    for m in _WEB_LINK.finditer(plain):
        link = m.group().rstrip(_LINK_TAIL)
        while link.endswith(")") and link.count(")") > link.count("("):
            link = link[:-1].rstrip(_LINK_TAIL)
        if len(link) > width:
            spans.append((m.start(), m.start() + len(link), m.end()))
    return spans


def _around_long_links(text: Text, width: int) -> Iterator[tuple[Text, bool]]:
    """``text`` in pieces: the web links longer than ``width`` with the punctuation right
    after them (True, the link styled as a link to itself) and the text between them
    (False, without the spaces next to a link)."""
    from rich.style import Style

    plain = text.plain
    links = _long_links(plain, width)
    if not links:
        yield text, False
        return
    offsets = sorted({0, len(plain), *(i for start, _, end in links for i in (start, end))})
    ends = {start: link_end - start for start, link_end, _ in links}
    for start, piece in zip(offsets[:-1], text.divide(offsets[1:-1]), strict=True):
        if start in ends:
            piece.stylize(Style(link=piece.plain[: ends[start]]), 0, ends[start])
            yield piece, True
            continue
        piece = piece.copy()
        piece.rstrip()
        lead = len(piece.plain) - len(piece.plain.lstrip())
        if lead:
            piece = piece[lead:]
        if piece.plain:
            yield piece, False


def _note_lines(
    console: Console,
    number: int,
    hit: Hit,
    width: int,
    numbered: Mapping[str, int],
    dated: bool,
) -> Iterator[Text]:
    from rich.cells import cell_len
    from rich.text import Text

    # A note found by its date alone (a question asking only for a period or the latest,
    # answered degraded) has no score: "–", not a word score of 0.
    score = (
        f"{hit.cosine:.3f}"
        if hit.cosine is not None
        else "–"
        if hit.bm25 is None
        else f"{hit.bm25:.2f}"
    )
    first = f"{number:>3}  {score:>5}"
    room = width - NOTE_GUTTER
    title = Text(hit.title, style="bold")
    successor = hit.superseded_by
    if successor in numbered:
        successor = f"note {numbered[successor]}"
    marks = hit_marks(hit, dated, successor)
    if marks:
        title.append(f" [{marks}]", style="yellow")
    path = short_path(hit.path, room - title.cell_len - 3)
    marked = path == hit.path or "…" in path  # a bare file name would hide its folder
    if marked and title.cell_len + 3 + cell_len(path) <= room:
        title.append(" · ")
        title.append(path, style="cyan")
        yield from _indented(console, title, first, NOTE_GUTTER, width)
    else:
        yield from _indented(console, title, first, NOTE_GUTTER, width)
        yield Text(" " * NOTE_GUTTER) + Text(short_path(hit.path, room), style="cyan")
    if hit.excerpt:
        yield Text(" " * NOTE_GUTTER) + Text(_one_line(hit.excerpt, room), style="dim")


def _one_line(text: str, width: int) -> str:
    """``text`` on one line of ``width`` cells, cut at a word with an ellipsis if longer."""
    from rich.cells import cell_len, set_cell_size

    return one_line(text, width, measure=cell_len, clip=set_cell_size)


def _subject_lines(
    console: Console,
    rank: int,
    s: SubjectRank,
    width: int,
    notes: Mapping[str, int],
    status: str | None,
) -> Iterator[Text]:
    from rich.cells import cell_len
    from rich.text import Text

    line = Text(s.subject, style="bold")
    if s.crystal_ready:
        line.append(" ✦", style="bold magenta")
    if status:
        line.append(f" [{status}]", style="yellow")
    measures = _measures(s)
    room = width - SUBJECT_GUTTER
    if line.cell_len + 2 + cell_len(" · ".join(measures)) <= room:
        line.append("  " + " · ".join(measures), style="dim")
        yield from _indented(console, line, f"{rank:>3}", SUBJECT_GUTTER, width)
    else:
        # The measures on lines of their own, broken only between two of them: wrapped at
        # any space, "cos 0.621" had read as "cos" at a line's end and a number below.
        yield from _indented(console, line, f"{rank:>3}", SUBJECT_GUTTER, width)
        for group in _grouped(measures, room):
            yield Text(" " * SUBJECT_GUTTER) + Text(group, style="dim")
    more = more_values(s)
    for fact in s.facts:
        text = _fact_text(console, fact, width, notes, more.pop(fact.predicate, 0))
        yield from _indented(console, text, "", FACT_INDENT, width)


def _measures(s: SubjectRank) -> list[str]:
    parts = [p for p in (s.band, EVIDENCE_WORDS.get(s.evidence or "", s.evidence)) if p]
    if s.best_cosine is not None:
        parts.append(f"cos {s.best_cosine:.3f}")
    elif s.best_bm25 is not None:
        parts.append(f"bm25 {s.best_bm25:.2f}")
    parts.append(f"score {s.score}")
    parts.append("s/w/a " + "/".join(str(s.per_type.get(t, 0)) for t in ("session", "wiki", "adr")))
    return parts


def _grouped(parts: Sequence[str], width: int) -> list[str]:
    """``parts`` joined by " · " into lines of at most ``width`` cells, broken only between
    two parts (a part wider than a line has a line of its own)."""
    from rich.cells import cell_len

    lines: list[str] = []
    for part in parts:
        joined = f"{lines[-1]} · {part}" if lines else part
        if lines and cell_len(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(part)
    return lines


def _fact_text(
    console: Console, fact: FactView, width: int, notes: Mapping[str, int], more: int = 0
) -> Text:
    """``predicate: object · where`` (the note's number when it is listed above, else its
    path) in at most ``FACT_LINES`` lines: a longer object ends at a word with "…"; ``more``
    other values of the predicate are said after the first of its facts ("(+3 more)")."""
    number = notes.get(fact.source_file)
    source = (
        f"note {number}"
        if number is not None
        else short_path(fact.source_file, max(24, (width - FACT_INDENT) // 2))
    )
    words = fact.object.split()

    def text_of(kept: int) -> Text:
        from rich.text import Text

        text = Text(f"{fact.predicate}: ", style="cyan")
        text.append(" ".join(words[:kept]) + ("…" if kept < len(words) else ""))
        if more:
            text.append(f" (+{more} more)", style="dim")
        text.append(f" · {source}", style="dim")
        return text

    def fits(kept: int) -> bool:
        # measured as laid out: a long web link's own line comes on top of the fact's lines
        lines = _wrapped(console, text_of(kept), width - FACT_INDENT)
        return sum(not link for _, link in lines) <= FACT_LINES

    if fits(len(words)):
        return text_of(len(words))
    low, high = 1, len(words) - 1  # the most words that fit (at least one)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return text_of(low)
