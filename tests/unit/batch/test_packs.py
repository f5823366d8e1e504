"""Pack file names: safe, and distinct for distinct session ids."""

from __future__ import annotations

from pipeline.batch.packs import safe_file_name


def test_safe_file_names_are_distinct_for_distinct_ids() -> None:
    ids = ["a", "A", "a b", "a-b", "a/b", "a\\b", "é", "x" * 200, "x" * 201, "con", ".hidden"]
    names = [safe_file_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert safe_file_name("12") == "12.md"
    for name in names:
        assert name.endswith(".md") and len(name) < 100
        assert not name.startswith(".") and "/" not in name and "\\" not in name
