"""A long note as passages that each fit the model: a passage per heading's section, and a
section too long for one as windows of its words; a note that fits stays the one text the
embed sync embeds."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.vault.parse import embed_plain
from pipeline.vault.passages import passages, sections

LIMIT = 40


def words(texts: Sequence[str]) -> list[int]:
    """A tokenizer whose tokens are words, with two special tokens, capped like the model's."""
    return [min(len(t.split()) + 2, LIMIT) for t in texts]


def fits(text: str) -> bool:
    return words([text])[0] < LIMIT


def test_a_note_that_fits_is_the_embed_syncs_one_text() -> None:
    body = "Short body with a [[Link|link]] in it."
    assert passages("Title", body, words, LIMIT) == [f"Title\n\n{embed_plain(body)}"]


def test_sections_are_cut_at_headings_but_not_inside_code_fences() -> None:
    body = "Intro line.\n\n## One\nfirst\n```\n# not a heading\n```\n### Two\nsecond\n"
    assert sections(body) == [
        "Intro line.",
        "## One\nfirst\n```\n# not a heading\n```",
        "### Two\nsecond",
    ]
    assert sections("") == []


def test_a_long_note_is_a_passage_per_section_each_fitting_and_naming_the_note() -> None:
    parts = [f"## Part {i}\n" + " ".join(f"w{i}x{j}" for j in range(12)) for i in range(6)]
    out = passages("Big note", "\n\n".join(parts), words, LIMIT)
    assert out == [f"Big note\n\n{part}" for part in parts]
    assert all(fits(p) for p in out)


def test_a_section_too_long_alone_becomes_windows_of_its_words_in_order() -> None:
    paragraph = " ".join(f"p{j}" for j in range(100))  # far past the limit
    body = "## Long\nshort opening paragraph\n\n" + paragraph + "\n\n## Next\nend"
    out = passages("T", body, words, LIMIT)
    assert len(out) == 4 and all(fits(p) for p in out)  # 105 words in windows of 35, then Next
    assert out[0].startswith("T\n\n## Long short opening paragraph p0 ")
    assert out[-1] == "T\n\n## Next\nend"
    kept = " ".join(p.removeprefix("T\n\n") for p in out[:-1]).split()
    assert kept == ["##", "Long", "short", "opening", "paragraph", *paragraph.split()]
