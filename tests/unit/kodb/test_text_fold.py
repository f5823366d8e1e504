"""The ASCII fast path of ``fold`` gives exactly what the Unicode path gives."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from pipeline.kodb.text import fold


def unicode_fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
    )


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_folds_as_the_unicode_path_folds_it(text: str) -> None:
    assert fold(text) == unicode_fold(text)


def test_accented_text_still_loses_its_marks() -> None:
    assert fold("Gyorsítótár ŐSZ") == "gyorsitotar osz"


@given(st.text())
def test_any_text_folds_as_the_character_by_character_rule_folds_it(text: str) -> None:
    assert fold(text) == unicode_fold(text)


def test_every_script_s_marks_go_and_the_grapheme_joiner_stays() -> None:
    for sample in ("أمن الشبكة", "हिन्दी", "が", "ő\u034fű", "Straße"):
        assert fold(sample) == unicode_fold(sample), sample
