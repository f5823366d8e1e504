"""The Bolt driver decodes with its Rust codec (the ``neo4j-rust-ext`` dependency)."""

from __future__ import annotations

from neo4j._codec.packstream import _common


def test_bolt_records_are_decoded_by_the_rust_extension() -> None:
    # Without it the driver silently falls back to pure Python: the warm service's vector
    # read is half as fast again and starves questions answered beside it of the GIL.
    assert _common.Structure.__module__ == "builtins", (
        "neo4j-rust-ext is not installed: pip install -e . (pyproject lists it)"
    )
