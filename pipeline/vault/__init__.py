"""The vault: scanning folders, parsing markdown notes, extracting facts.

``scan.scan_vault`` finds the notes and their source types, ``parse.read_note`` parses one
note into a ``ParsedNote`` (its ``embed_text`` is what the graph embeds),
``extract.extract_facts`` turns it into KO-DB facts, and ``edits.unsynced_edits`` compares
the notes on disk with KO-DB's registry.

Nothing is imported here: the parser's libraries (markdown-it, YAML) cost a cold question
that only scans the folders (``edits``) tens of milliseconds, so each module is imported
by name.
"""
