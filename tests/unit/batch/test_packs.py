"""Pack file names: safe, and distinct for distinct session ids."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from pipeline.batch.packs import safe_file_name


def test_safe_file_names_are_distinct_for_distinct_ids() -> None:
    ids = ["a", "A", "a b", "a-b", "a/b", "a\\b", "é", "x" * 200, "x" * 201, "con", ".hidden"]
    names = [safe_file_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert safe_file_name("12") == "12.md"
    for name in names:
        assert name.endswith(".md") and len(name) < 100
        assert not name.startswith(".") and "/" not in name and "\\" not in name


#: Lower-case, portable, and never starting with "." (hidden) or "-" (read as an option).
SAFE_PACK_NAME = re.compile(r"[a-z0-9_][a-z0-9._-]{0,98}\.md")


def hashed_stem(session_id: str) -> str:
    """The stem safe_file_name gives an id that is not plain (e.g. "X" -> "x-c032adc1")."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", session_id.lower()).strip("-.")[:60] or "session"
    return f"{slug}-{hashlib.sha1(session_id.encode()).hexdigest()[:8]}"


def test_an_id_that_spells_another_ids_hashed_name_gets_a_name_of_its_own() -> None:
    assert hashed_stem("X") == "x-c032adc1"
    assert safe_file_name("X") != safe_file_name("x-c032adc1")
    assert safe_file_name("x-c032adc1") != "x-c032adc1.md"  # the suffix is reserved


@given(st.lists(st.text(max_size=90), min_size=1, max_size=20, unique=True), st.data())
def test_distinct_ids_get_distinct_safe_file_names(ids: list[str], data: st.DataObject) -> None:
    # Adversarial ids too: the hashed names of the others, in either case.
    spelled = [hashed_stem(i) for i in ids] + [hashed_stem(i).upper() for i in ids]
    extra = data.draw(st.lists(st.sampled_from(spelled), max_size=10))
    every = list(dict.fromkeys(ids + extra))
    names = [safe_file_name(i) for i in every]
    assert len(set(names)) == len(every)
    assert len({n.casefold() for n in names}) == len(every)  # case-insensitive disks too
    for name in names:
        assert SAFE_PACK_NAME.fullmatch(name), name
