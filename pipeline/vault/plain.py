"""Plain text from a note's markdown without its parser: what the model reads of prose
(``embed_plain``), a wikilink's target (``split_link``), and text clipped around a point
(``clip_text``). Kept apart from ``parse`` so that what needs only these (the answers'
excerpts, passages) does not import markdown-it and YAML in a cold process; ``parse``
re-exports them.
"""

from __future__ import annotations

import bisect
import itertools
import re

#: Between a table row's cells, in a block's text and in an excerpt.
ROW_SEPARATOR = " · "

WHITESPACE = re.compile(r"\s+")
_EMBED_WIKILINK = re.compile(r"!?\[\[([^\[\]\n]+?)\]\]")
_EMBED_MD_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
_EMBED_MARKS = re.compile(r"\*+|__+|`+")


def _embed_link_text(match: re.Match[str]) -> str:
    target, alias = split_link(match.group(1))
    # "[[#Heading]]" links inside the note: its target is empty, the heading is the text.
    return alias or target.rsplit("/", 1)[-1] or match.group(1).strip("#^ ")


_MD_LINK = re.compile(r"\[([^\[\]\n]*)\]\([^()\n]*\)")


def link_texts(text: str) -> str:
    """``text`` with wikilinks and markdown links by their text, as ``embed_plain`` gives
    them, and nothing else changed (an embed's "!" stays): what a word search should see of
    links, at a third of ``embed_plain``'s cost."""
    if "[" not in text:
        return text
    return _MD_LINK.sub(r"\1", _EMBED_WIKILINK.sub(_embed_link_text, text))


def embed_plain(body: str) -> str:
    """The body as a model reads prose: wikilinks and markdown links by their text, no emphasis
    or code ticks (the bracket syntax costs the model tokens and pulls hub notes full of links
    towards every question). Heading marks stay: removing them did not help on both judged
    sets. Each pattern is linear in the text."""
    text = _EMBED_WIKILINK.sub(_embed_link_text, body)
    text = _EMBED_MD_LINK.sub(r"\1", text)
    return _EMBED_MARKS.sub("", text)


def split_link(inner: str) -> tuple[str, str | None]:
    """(target, alias) of a wikilink's inside: alias, ``#heading``, ``^block``, ``.md`` gone."""
    target, _, alias = inner.partition("|")
    target = target.replace("\\", "")  # "[[A\|b]]" escapes the pipe inside tables
    target = target.split("#", 1)[0].strip()
    if target.lower().endswith(".md"):
        target = target[:-3].rstrip()
    alias = alias.strip() or None
    return target, alias


def clip_text(text: str, limit: int, focus: int = 0) -> str:
    """Collapse whitespace and cut to ``limit`` characters at word boundaries, keeping the
    character at ``focus`` (an index into ``text``) inside the result; cuts are marked "…".

    ``limit`` is at least 3 (room for a character between the two marks).
    """
    return Collapsed(text).clip(0, len(text), min(max(focus, 0), len(text)), limit)


class Collapsed:
    """A text with every whitespace run collapsed to one space, and where each offset of the
    text lands in it.

    Built in one pass; then ``clip`` of any range costs O(limit + log runs) instead of
    collapsing the range again, so the contexts of all link mentions of a block cost no
    more than the block is long (clipping each mention's sentence anew was quadratic in the
    number of links in a paragraph).
    """

    def __init__(self, text: str) -> None:
        self.text = WHITESPACE.sub(" ", text)
        self._length = len(text)
        runs = [m.span() for m in WHITESPACE.finditer(text)]
        # Each run's start and end in the original text, and the characters the runs
        # before it dropped.
        self._starts = [a for a, _ in runs]
        self._ends = [b for _, b in runs]
        self._dropped = list(itertools.accumulate((b - a - 1 for a, b in runs), initial=0))

    def offset(self, i: int) -> int:
        """``len(collapse(text[:i]))``: where original offset ``i`` lands."""
        k = bisect.bisect_right(self._starts, i) - 1
        if k < 0:
            return i
        # A run cut at i still leaves its one space.
        return i - self._dropped[k] - max(0, min(i, self._ends[k]) - self._starts[k] - 1)

    def _inside_run(self, i: int) -> bool:
        """Whether original offset ``i`` is inside a whitespace run, not at its start."""
        k = bisect.bisect_left(self._starts, i) - 1
        return k >= 0 and i < self._ends[k]

    def clip(self, start: int, end: int, focus: int, limit: int) -> str:
        """``clip_text(original[start:end], limit, focus - start)``, for start <= focus <= end.

        The head (before the focus, left-stripped) and the tail (from it, right-stripped)
        are ranges of the collapsed text; only the part that can reach the result is
        sliced out of them.
        """
        c = self.text
        end = min(end, self._length)  # sentence ranges may run one past the text
        h0, f0, t1 = self.offset(start), self.offset(focus), self.offset(end)
        if h0 < f0 and c[h0] == " ":
            h0 += 1  # the head is left-stripped
        head_len = f0 - h0
        # Inside a run, the collapsed text has put the run's space before the focus; the
        # tail, collapsed on its own, starts with a space of its own.
        lead = focus < end and self._inside_run(focus)
        t0 = f0
        if t0 < t1 and c[t1 - 1] == " ":
            t1 -= 1  # the tail is right-stripped
        if t0 == t1:
            lead = False  # the tail was only that space
        if head_len == 0:  # no head: the tail is left-stripped too
            if lead:
                lead = False
            elif t0 < t1 and c[t0] == " ":
                t0 += 1
        gap = 1 if lead else 0
        full_len = head_len + gap + t1 - t0

        def part(i: int, j: int) -> str:
            """``full[i:j]`` where full = head + (" " if lead) + tail."""
            out = []
            if i < head_len:
                out.append(c[h0 + i : h0 + min(j, head_len)])
            if gap and i <= head_len < j:
                out.append(" ")
            body = head_len + gap
            if j > body:
                out.append(c[t0 + max(i - body, 0) : t0 + j - body])
            return "".join(out)

        if full_len <= limit:
            return part(0, full_len)
        begin = 0
        if head_len > limit // 3:
            begin = head_len - limit // 3
            # Start after a space at most 39 characters before, so the first word is whole.
            low = max(0, begin - 39)
            space = part(low, begin + 1).rfind(" ")
            if space != -1 and low + space > 0:
                begin = low + space + 1
        prefix = "…" if begin > 0 else ""
        room = limit - len(prefix) - 1  # leave one character for a trailing ellipsis
        if begin + room < full_len:
            piece = part(begin, begin + room)
            space = piece.rfind(" ")
            if space > len(piece) // 2:
                piece = piece[:space]
            return prefix + piece.rstrip() + "…"
        return prefix + part(begin, full_len)
