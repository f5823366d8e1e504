"""scripts/excerpt_choice.py reads a judged answering passage from its sentence, or from
the lines of the vault's note that hold it (the TSC minutes may not be quoted in the
repository); the TSC pointers name notes the judged questions name."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
JUDGED = ROOT / "tests" / "data" / "judged"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "excerpt_choice", ROOT / "scripts" / "excerpt_choice.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_passage_is_its_sentence_or_the_lines_that_hold_it(tmp_path: Path) -> None:
    script = _script()
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "n.md").write_text(
        "# N\n\n* Proposal [#1338](https://github.com/x/y/1338)\n"
        "  * no objections, see <https://example.com/doc>\n    for the charter\n",
        encoding="utf-8",
    )
    pointer = {"source_file": "m/n.md", "lines": [4, 5]}
    got = " ".join(script.answering_text(tmp_path, pointer).split())
    assert got == "* no objections, see for the charter"
    assert script.answering_text(tmp_path, {"object": "A sentence.", **pointer}) == "A sentence."
    assert script.shows("Proposal #1338 — no objections, see for the charter", got)


def test_the_tsc_pointers_are_judged_questions_naming_their_relevant_notes() -> None:
    questions = {
        row["question"]: row["relevant"]
        for row in map(json.loads, (JUDGED / "tsc-meetings.jsonl").read_text().splitlines())
    }
    rows = [
        json.loads(line)
        for line in (JUDGED / "tsc-meetings.answers.jsonl").read_text().splitlines()
    ]
    assert len(rows) == len(questions) == 38
    for row in rows:
        relevant = questions[row["question"]]
        assert row["answering"]
        for passage in row["answering"]:
            assert set(passage) == {"source_file", "lines"}  # no quoted text
            assert passage["source_file"] in relevant
            first, last = passage["lines"]
            assert 1 <= first <= last
