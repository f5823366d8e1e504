"""The vault: scanning folders, parsing markdown notes, extracting facts.

``scan_vault`` finds the notes and their source types, ``read_note`` parses one note into a
``ParsedNote`` (its ``embed_text`` is what the graph embeds), ``extract_facts`` turns it into
KO-DB facts.
"""

from pipeline.vault.extract import EXTRACTOR, extract_facts
from pipeline.vault.parse import Block, InlineField, Link, ParsedNote, parse_note, read_note
from pipeline.vault.scan import ScannedFile, glob_match, scan_vault, source_type_for

__all__ = [
    "EXTRACTOR",
    "Block",
    "InlineField",
    "Link",
    "ParsedNote",
    "ScannedFile",
    "extract_facts",
    "glob_match",
    "parse_note",
    "read_note",
    "scan_vault",
    "source_type_for",
]
