"""A long note cut into passages the model reads whole.

The model reads at most ``max_seq_length`` tokens of a text (256 for the bundled MiniLM) and
drops the rest, so a note embedded as one text is found only by its head. A note that fits
stays one passage, exactly the text the embed sync embeds today. A longer one is cut at its
headings (outside code fences) into a passage per section, and a section that does not fit
alone into windows of its words that do (its heading in the first). Every passage starts
with the note's title, so a later section still says what it belongs to. Packing small
sections together, or cutting a long one at its blank lines first, found fewer answers
(docs/benchmarks-history.md).

What this buys on long notes, and what it costs (vectors a note, embedding time), is
measured by ``scripts/long_notes.py`` and ``vault-ko eval``; the embed sync uses it with
``embed_long_notes = "passages"`` (docs/long-notes.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from pipeline.vault.parse import EMBED_TEXT_VERSION
from pipeline.vault.plain import embed_plain

#: lengths(texts) -> each text's token count as the model's tokenizer reads it, special
#: tokens included and capped at the model's limit (``Embedder.token_lengths``).
Lengths = Callable[[Sequence[str]], Sequence[int]]

_HEADING: Final = re.compile(r"#{1,6}\s")
_FENCE: Final = re.compile(r"(```|~~~)")
#: The version of the cutting rules below, part of the text version a vault embedded as
#: passages stores with each note (``text_version``).
PASSAGE_RULES_VERSION: Final = 1


def text_version(mode: str) -> int:
    """The text version stored with each embedding under ``embed_long_notes = mode``: the
    embed text's own version, plus the cutting rules' when long notes are cut, so changing
    either (or the mode) embeds the vault again."""
    if mode == "head":
        return EMBED_TEXT_VERSION
    return EMBED_TEXT_VERSION + 1000 * PASSAGE_RULES_VERSION


#: Below this many tokens left after the title, a note is not cut: its passages would be a
#: word or two each, thousands of vectors that all say the title.
MIN_PASSAGE_TOKENS: Final = 32
#: Tokens the join of the title and a passage may cost beyond their own counts (the blank
#: line, a word piece split differently at the seam).
SEAM_TOKENS: Final = 2


def sections(body: str) -> list[str]:
    """The body cut before each heading line that is not inside a code fence; the text
    before the first heading is the first section. Empty sections are dropped."""
    out: list[list[str]] = [[]]
    fence: str | None = None
    for line in body.splitlines():
        stripped = line.lstrip()
        opened = _FENCE.match(stripped)
        if opened:
            fence = None if fence == opened.group(1) else (fence or opened.group(1))
        elif fence is None and _HEADING.match(stripped) and out[-1]:
            out.append([])
        out[-1].append(line)
    return [text for part in out if (text := "\n".join(part).strip())]


def passages(title: str, body: str, lengths: Lengths, limit: int) -> list[str]:
    """The texts to embed for a note: one when title and body fit in ``limit`` tokens
    (the embed sync's text), else a passage per section, and a section that does not fit
    alone as windows of its words that do, each passage led by the title."""
    whole = f"{title}\n\n{embed_plain(body)}"
    if limit <= 0 or lengths([whole])[0] < limit:
        return [whole]
    head = f"{title}\n\n"
    # The title's count holds the special tokens, which every passage pays once.
    budget = limit - lengths([title])[0] - SEAM_TOKENS
    if budget < MIN_PASSAGE_TOKENS:  # a title that fills the model: nothing left to cut
        return [whole]
    out: list[str] = []
    plain = [embed_plain(s) for s in sections(body)]
    for text, n in zip(plain, _own(plain, lengths), strict=True):
        pieces = [text] if n <= budget else _windows(text, lengths, budget)
        out.extend(head + piece for piece in pieces)
    return out


def _windows(text: str, lengths: Lengths, budget: int) -> list[str]:
    """A section too long for one passage, as consecutive runs of its words that fit."""
    words = text.split()
    out: list[str] = []
    start = 0
    while start < len(words):
        size = max(1, budget)  # a word is at least one token: never more words than that
        while True:
            piece = " ".join(words[start : start + size])
            n = _own([piece], lengths)[0]
            if n <= budget or size == 1:
                break
            size = max(1, min(size - 1, size * budget // max(n, 1)))
        out.append(piece)
        start += size
    return out


def _own(texts: Sequence[str], lengths: Lengths) -> list[int]:
    """Token counts without the special tokens every text pays (two for BERT's [CLS] and
    [SEP], measured as the count of an empty text)."""
    if not texts:
        return []
    counts = list(lengths([*texts, ""]))
    specials = counts.pop()
    return [max(0, n - specials) for n in counts]
