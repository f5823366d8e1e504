"""Reading and validating a facts file (JSONL or CSV) from the user's own extractor.

Every row is checked (the KO-DB side is ``KoDB.import_facts``, one transaction, so any bad
row leaves KO-DB as it was):
- ``subject``, ``predicate``, ``object``, ``source_file``: present, non-empty strings
  (surrounding whitespace is trimmed; a NUL character or invalid Unicode is refused, since
  PostgreSQL cannot store either);
- ``confidence``: a finite number in [0, 1] (JSON: a number, not a string or a boolean;
  CSV: a plain decimal such as ``0.8`` or ``8e-1``; NaN and infinities are refused);
- ``source_type``: one of ``session``, ``wiki``, ``adr``;
- ``extractor`` (optional): a non-empty string; absent or empty means ``"import"``. The
  name ``ingest`` (in any case) is refused: it names the facts ingest extracts from notes,
  which the next ingest of a note replaces, so an imported row under it would be lost.

Line numbers are physical lines of the file, counted from 1. A JSONL line that is blank is
skipped; one that is not UTF-8, not JSON, or not an object is a bad row, and so is one that
Python's JSON reader cannot hold (an integer longer than 4,300 digits, arrays or objects
nested about a thousand deep): hostile rows are reasons, never tracebacks. A CSV file needs a
header naming at least the required columns (in any order); a missing column is reported
at the header's line and stops the import whatever the options, since no row can be valid.

The file is read as a stream (``FactStream``): memory stays flat whatever its size, only the
rejected rows are kept; holding the file and its facts would grow with the file (figures in
BENCHMARKS.md and docs/benchmarks-history.md).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pipeline.errors import FactRowsError, InputError, RowProblem
from pipeline.model import INGEST_EXTRACTOR, SOURCE_TYPES, Fact

FORMATS = ("jsonl", "csv")
REQUIRED_FIELDS = ("subject", "predicate", "object", "confidence", "source_type", "source_file")
TEXT_FIELDS = ("subject", "predicate", "object", "source_file")
DEFAULT_EXTRACTOR = "import"
#: File extensions -> format, for when --format is not given.
EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
# A plain decimal number as a CSV cell may spell it; float() alone would also accept
# "nan", "infinity" and "1_0", which a confidence must not be.
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_BOM = "\ufeff"
#: Numbers longer than this are shown by their digit count, not their digits.
SHOWN_DIGITS = 30


@dataclass(frozen=True)
class RejectedRow:
    """A bad row: its line, its original text and why it was refused."""

    line: int
    text: str
    reason: str


@dataclass(frozen=True)
class FactFile:
    """A read facts file: the valid facts and the rejected rows, each in file order."""

    path: str
    format: str
    facts: tuple[Fact, ...]
    rejected: tuple[RejectedRow, ...]

    @property
    def rows(self) -> int:
        return len(self.facts) + len(self.rejected)

    def problems(self) -> list[RowProblem]:
        """The rejected rows as ``file:line: reason`` problems."""
        return [RowProblem(self.path, r.line, r.reason) for r in self.rejected]


class RowInvalid(ValueError):
    """A row failed validation; the message lists every reason."""


def infer_format(path: str | Path, fmt: str | None = None) -> str:
    """The explicit format, else the one the file's extension implies."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        raise InputError(
            f"cannot tell the format from the extension {suffix or '(none)'!r}; "
            "pass --format jsonl or --format csv",
            file=str(path),
        )
    return EXTENSIONS[suffix]


class FactStream:
    """A facts file read row by row: iterate ``facts()`` once to get the valid facts in file
    order; meanwhile ``rows``, ``valid`` and ``rejected`` (the bad rows, file order) fill in.

    Raises InputError when the file cannot be read or its format is unknown (at
    construction), and FactRowsError from ``facts()`` when a CSV header lacks required
    columns or the CSV syntax breaks (no further row could be read).
    """

    def __init__(self, path: str | Path, fmt: str | None = None) -> None:
        self.path = str(path)
        self.format = infer_format(path, fmt)
        self._file = Path(path)
        self.valid = 0
        self.rejected: list[RejectedRow] = []
        try:
            if not self._file.is_file():
                self._file.open("rb").close()  # the OSError names the problem
        except OSError as exc:
            raise InputError(
                f"cannot read the facts file: {exc.strerror or exc}", file=self.path
            ) from exc

    @property
    def rows(self) -> int:
        return self.valid + len(self.rejected)

    def problems(self) -> list[RowProblem]:
        """The rejected rows so far as ``file:line: reason`` problems."""
        return [RowProblem(self.path, r.line, r.reason) for r in self.rejected]

    def facts(self) -> Iterator[Fact]:
        """The valid facts, in file order, read lazily."""
        reader = _read_jsonl if self.format == "jsonl" else _read_csv
        from_csv = self.format == "csv"
        try:
            fh = self._file.open("rb")
        except OSError as exc:
            raise InputError(
                f"cannot read the facts file: {exc.strerror or exc}", file=self.path
            ) from exc
        with fh:
            for line, text, row in reader(self.path, fh):
                try:
                    if isinstance(row, RowInvalid):
                        raise row
                    fact = validate_row(row, from_csv=from_csv)
                except RowInvalid as exc:
                    self.rejected.append(RejectedRow(line, text, str(exc)))
                    continue
                self.valid += 1
                yield fact


def read_fact_file(path: str | Path, fmt: str | None = None) -> FactFile:
    """Read and validate every row of a facts file into memory; bad rows are collected, not
    raised (a small file's convenience: ``FactStream`` is the import's path).

    Raises InputError when the file cannot be read or its format is unknown, and
    FactRowsError when a CSV header lacks required columns (no row could be valid).
    """
    stream = FactStream(path, fmt)
    facts = tuple(stream.facts())
    return FactFile(
        path=stream.path, format=stream.format, facts=facts, rejected=tuple(stream.rejected)
    )


def validate_row(row: Mapping[str, Any], *, from_csv: bool = False) -> Fact:
    """A Fact from one row, or RowInvalid listing every problem of the row."""
    reasons: list[str] = []
    values: dict[str, str] = {}
    for name in TEXT_FIELDS:
        text = _text_field(row, name, reasons, required=True)
        if text is not None:
            values[name] = text
    confidence = _confidence(row, reasons, from_csv)
    source_type = _source_type(row, reasons)
    extractor = _text_field(row, "extractor", reasons, required=False) or DEFAULT_EXTRACTOR
    if extractor.casefold() == INGEST_EXTRACTOR:
        reasons.append(
            f"extractor {INGEST_EXTRACTOR!r} is reserved for the facts vault-ko extracts from "
            "notes (ingest replaces them); give your extractor another name"
        )
    if reasons:
        raise RowInvalid("; ".join(reasons))
    assert confidence is not None and source_type is not None
    return Fact(
        subject=values["subject"],
        predicate=values["predicate"],
        object=values["object"],
        confidence=confidence,
        source_type=source_type,  # type: ignore[arg-type]  # checked against SOURCE_TYPES
        source_file=values["source_file"],
        extractor=extractor,
    )


def _text_field(
    row: Mapping[str, Any], name: str, reasons: list[str], *, required: bool
) -> str | None:
    value = row.get(name)
    if value is None or (not required and value == ""):
        if required:
            reasons.append(f"missing field {name!r}")
        return None
    if not isinstance(value, str):
        reasons.append(f"field {name!r} must be a string, got {_kind(value)}")
        return None
    text = value.strip()
    if not text:
        reasons.append(f"field {name!r} is empty")
        return None
    if "\x00" in text:
        reasons.append(f"field {name!r} contains a NUL character")
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        reasons.append(f"field {name!r} is not valid Unicode (lone surrogate)")
        return None
    return text


def _confidence(row: Mapping[str, Any], reasons: list[str], from_csv: bool) -> float | None:
    value = row.get("confidence")
    if value is None or (from_csv and isinstance(value, str) and not value.strip()):
        reasons.append("missing field 'confidence'")
        return None
    if from_csv and isinstance(value, str):
        text = value.strip()
        if not _DECIMAL.fullmatch(text):
            reasons.append(f"confidence must be a number in [0, 1], got {_shorten(value)!r}")
            return None
        number = float(text)
        if not math.isfinite(number):  # a plain decimal too big for a float
            reasons.append(f"confidence must be in [0, 1], got {_number_text(text)}")
            return None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        reasons.append(f"confidence must be a number in [0, 1], got {_kind(value)}")
        return None
    elif isinstance(value, int) and not 0 <= value <= 1:
        # Compared as an integer: float() of one longer than 308 digits overflows.
        reasons.append(f"confidence must be in [0, 1], got {_number_text(str(value))}")
        return None
    else:
        number = float(value)
    if not math.isfinite(number):
        reasons.append(f"confidence must be a finite number, got {number}")
        return None
    if not 0.0 <= number <= 1.0:
        reasons.append(f"confidence must be in [0, 1], got {number:g}")
        return None
    return number


def _source_type(row: Mapping[str, Any], reasons: list[str]) -> str | None:
    value = row.get("source_type")
    if value is None:
        reasons.append("missing field 'source_type'")
        return None
    if not isinstance(value, str) or value.strip() not in SOURCE_TYPES:
        shown = repr(value) if isinstance(value, str) else _kind(value)
        reasons.append(f"source_type must be one of {', '.join(SOURCE_TYPES)}, got {shown}")
        return None
    return value.strip()


def _kind(value: Any) -> str:
    """How a JSON value reads in a message: its JSON type and, for scalars, the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, int | float):
        shown = _number_text(str(value))
        return shown if shown.startswith("a ") else f"number {shown}"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _number_text(text: str) -> str:
    """A number as a message shows it: its digits, or its digit count when it is long."""
    digits = sum(ch.isdigit() for ch in text)
    return text if len(text) <= SHOWN_DIGITS else f"a {digits}-digit number"


def _shorten(text: str) -> str:
    return text if len(text) <= SHOWN_DIGITS else text[: SHOWN_DIGITS - 1] + "…"


# --- readers: yield (line, original text, row or RowInvalid) ----------------------------


class _IntegerTooLong(ValueError):
    """A JSON integer longer than Python converts (``sys.get_int_max_str_digits``)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits
        super().__init__(f"a {digits}-digit integer is too long to read")


def _json_int(text: str) -> int:
    try:
        return int(text)
    except ValueError as exc:  # json's own int() raises a bare ValueError past the limit
        raise _IntegerTooLong(len(text.lstrip("-"))) from exc


def _parse_json_row(text: str) -> Any:
    """``json.loads`` whose failures on hostile input are RowInvalid reasons."""
    try:
        return json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise RowInvalid(f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except _IntegerTooLong as exc:
        raise RowInvalid(f"invalid JSON: {exc}") from exc
    except RecursionError as exc:
        raise RowInvalid("invalid JSON: arrays or objects nested too deep") from exc


Row = Mapping[str, Any] | RowInvalid


def _read_jsonl(name: str, fh: IO[bytes]) -> Iterator[tuple[int, str, Row]]:
    for number, raw in enumerate(fh, start=1):
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        if number == 1:
            raw = raw.removeprefix(_BOM.encode("utf-8"))
        shown = raw.decode("utf-8", "backslashreplace")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, shown, RowInvalid(_utf8_reason(raw, exc.start))
            continue
        if not text.strip():
            continue
        try:
            row = _parse_json_row(text)
        except RowInvalid as exc:
            yield number, shown, exc
            continue
        if not isinstance(row, dict):
            yield number, shown, RowInvalid(f"expected a JSON object, got {_kind(row)}")
            continue
        yield number, shown, row


def _utf8_reason(raw: bytes, start: int, where: str = "line") -> str:
    return f"not valid UTF-8 (byte 0x{raw[start]:02x} at byte {start + 1} of the {where})"


class _LineRecorder:
    """Feeds csv.reader physical lines while keeping those of the record being parsed."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self.consumed = 0
        self.pending: list[str] = []

    def __iter__(self) -> _LineRecorder:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.consumed += 1
        self.pending.append(line)
        return line

    def take(self) -> str:
        text, self.pending = "".join(self.pending), []
        return text


def _without_bom(lines: Iterator[str]) -> Iterator[str]:
    for number, line in enumerate(lines):
        yield line.removeprefix(_BOM) if number == 0 else line


def _read_csv(name: str, fh: IO[bytes]) -> Iterator[tuple[int, str, Row]]:
    # surrogateescape keeps undecodable bytes visible per record instead of failing the
    # whole file; a record holding one is rejected below with its line. newline="" splits
    # lines as csv needs (\n, \r\n, \r) without translating them.
    text = io.TextIOWrapper(fh, encoding="utf-8", errors="surrogateescape", newline="")
    lines = _LineRecorder(_without_bom(iter(text)))
    reader = csv.reader(lines)
    header: list[str] | None = None
    header_line = 0
    while True:
        start = lines.consumed + 1
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            # The csv module cannot resume after a syntax error: stop with this line.
            raise FactRowsError([RowProblem(name, start, f"invalid CSV: {exc}")]) from exc
        original = _shown(lines.take().rstrip("\r\n"))
        if not record:  # a blank line
            continue
        bad = next((cell for cell in record if _has_bad_bytes(cell)), None)
        if bad is not None:
            reason = _bad_cell_reason(bad)
            if header is None:
                raise FactRowsError([RowProblem(name, start, f"CSV header is {reason}")])
            yield start, original, RowInvalid(reason)
            continue
        if header is None:
            header = [cell.strip() for cell in record]
            header_line = start
            missing = [f for f in REQUIRED_FIELDS if f not in header]
            if missing:
                reason = f"CSV header lacks required column(s): {', '.join(missing)}"
                raise FactRowsError([RowProblem(name, header_line, reason)])
            continue
        if len(record) != len(header):
            yield (
                start,
                original,
                RowInvalid(f"has {len(record)} field(s), the header has {len(header)}"),
            )
            continue
        yield start, original, dict(zip(header, record, strict=True))


def _bad_cell_reason(cell: str) -> str:
    raw = cell.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _utf8_reason(raw, exc.start, "field")
    raise AssertionError("a cell with escaped bytes decodes")  # _has_bad_bytes said it has


def _has_bad_bytes(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def _shown(text: str) -> str:
    """Original text for the rejects file, undecodable bytes as ``\\xNN``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# --- rejects ----------------------------------------------------------------------------


def write_rejects(path: str | Path, fact_file: FactFile | FactStream) -> None:
    """Write the rejected rows as JSONL: ``{"line", "reason", "text"}`` per row, file order.

    ``text`` is the row's original text (undecodable bytes as ``\\xNN``). The file is
    written even when empty, so an old rejects file never outlives a clean run.
    """
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            for row in fact_file.rejected:
                record = {"line": row.line, "reason": row.reason, "text": row.text}
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise InputError(
            f"cannot write the rejects file: {exc.strerror or exc}", file=str(path)
        ) from exc
