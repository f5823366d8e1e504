"""Read a judged question set: the questions a vault should answer, and which subjects do.

One JSON object a line (UTF-8; blank lines skipped)::

    {"question": "why did we pick redis?", "relevant": {"Redis": 2, "Warm cache": 1},
     "split": "test"}

``relevant`` maps a subject's display name to its grade: 2 = answers the question, 1 =
related. ``split`` is optional (``tune`` or ``test``): rules are tuned on one half and
reported on the other. Anything wrong stops the reader with ``file:line: reason``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pipeline.errors import InputError
from pipeline.model import normalize_text

SPLITS: Final = ("tune", "test")
#: Grades a judgement may carry: 2 answers the question, 1 is related.
GRADES: Final = (1, 2)
ANSWER_GRADE: Final = 2


@dataclass(frozen=True)
class JudgedQuestion:
    """One question and the graded subjects (keys are case-folded subject names)."""

    line: int
    question: str
    relevant: dict[str, int]  # subject_norm -> grade
    names: dict[str, str]  # subject_norm -> the name as written
    split: str | None = None

    @property
    def answers(self) -> set[str]:
        """Subjects of grade 2 (case-folded)."""
        return {s for s, g in self.relevant.items() if g >= ANSWER_GRADE}


def read_judged(path: str | Path) -> list[JudgedQuestion]:
    """Every judged question of the file, in file order."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=str(file)) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(file)) from exc
    out: list[JudgedQuestion] = []
    seen: dict[str, int] = {}
    # Lines end at "\n" only: str.splitlines also splits at U+2028 and other breaks a
    # JSON string may hold raw.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        item = _parse(line, str(file), number)
        first = seen.get(normalize_text(item.question))
        if first is not None:
            raise InputError(
                f"the question is repeated (first on line {first})", file=str(file), line=number
            )
        seen[normalize_text(item.question)] = number
        out.append(item)
    if not out:
        raise InputError("no judged questions", file=str(file))
    return out


def _parse(line: str, file: str, number: int) -> JudgedQuestion:
    def bad(reason: str, field: str | None = None) -> InputError:
        return InputError(reason, file=file, line=number, field=field)

    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise bad(f"invalid JSON: {getattr(exc, 'msg', exc)}") from None
    if not isinstance(obj, dict):
        raise bad("expected a JSON object with question and relevant")
    unknown = sorted(set(obj) - {"question", "relevant", "split"})
    if unknown:
        raise bad(f"unknown key(s): {', '.join(unknown)}")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise bad("question must be a non-empty string", "question")
    relevant = obj.get("relevant")
    if not isinstance(relevant, dict) or not relevant:
        raise bad("relevant must be an object of subject -> grade (1 or 2)", "relevant")
    grades: dict[str, int] = {}
    names: dict[str, str] = {}
    for name, grade in relevant.items():
        if isinstance(grade, bool) or grade not in GRADES:
            raise bad(f"grade of {name!r} must be 1 or 2, got {grade!r}", "relevant")
        norm = normalize_text(name).strip()
        if not norm:
            raise bad("a subject name is empty", "relevant")
        if norm in grades:
            raise bad(f"subject {name!r} is graded twice", "relevant")
        grades[norm] = int(grade)
        names[norm] = name
    if not any(g >= ANSWER_GRADE for g in grades.values()):
        raise bad("no subject of grade 2 (one that answers the question)", "relevant")
    split = obj.get("split")
    if split is not None and split not in SPLITS:
        raise bad(f"split must be one of {', '.join(SPLITS)}, got {split!r}", "split")
    return JudgedQuestion(number, question.strip(), grades, names, split)
