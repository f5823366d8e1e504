"""Read a retrieval collection in the common BEIR layout.

A collection is a folder holding

    docs.jsonl     one JSON object a line: {"id", "title", "text"}   (BEIR: corpus.jsonl, "_id")
    queries.jsonl  one JSON object a line: {"id", "text"}            (BEIR: "_id")
    qrels.tsv      query-id, doc-id, relevance; a header row allowed (BEIR: qrels/test.tsv)

Relevance is an integer; > 0 means relevant, and the grade is the gain of nDCG. The
four-column TREC form (query-id, iteration, doc-id, relevance) is read too. Blank lines
are skipped; anything else that is wrong stops the reader with ``file:line: reason``.
Judgements naming a query or document the collection does not have are not errors (real
collections have them) but are counted in ``Collection.warnings``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import InputError

DOCS_FILES = ("docs.jsonl", "corpus.jsonl")
QUERIES_FILES = ("queries.jsonl",)
QRELS_FILES = ("qrels.tsv", "qrels/test.tsv")


@dataclass(frozen=True)
class Doc:
    """One document of docs.jsonl."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Query:
    """One query of queries.jsonl."""

    id: str
    text: str


@dataclass(frozen=True)
class Collection:
    """A collection as read from disk; ``qrels[query_id][doc_id]`` is the graded judgement."""

    name: str
    root: Path
    docs: dict[str, Doc]
    queries: dict[str, Query]
    qrels: dict[str, dict[str, int]]
    warnings: tuple[str, ...] = field(default=())

    def judged_queries(self) -> list[Query]:
        """Queries with at least one relevant document, in the order of queries.jsonl."""
        return [q for q in self.queries.values() if _has_relevant(self.qrels.get(q.id, {}))]


def _has_relevant(judged: dict[str, int]) -> bool:
    return any(grade > 0 for grade in judged.values())


def _find(root: Path, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        path = root / name
        if path.is_file():
            return path
    raise InputError(f"no {what} file: expected one of {', '.join(names)}", file=str(root))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank lines of a UTF-8 file (a BOM is tolerated)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 ({exc.reason} at byte {exc.start})", file=str(path)) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
    # Lines end at "\n" only: str.splitlines also splits at U+2028 and other breaks a
    # JSON string may hold raw.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield number, line


def _json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in _lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=number) from exc
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", file=str(path), line=number)
        yield number, obj


def _id_of(obj: dict[str, Any], path: Path, line: int) -> str:
    raw = obj.get("id", obj.get("_id"))
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise InputError(
            'missing "id" (a string; BEIR\'s "_id" is accepted too)', file=str(path), line=line
        )
    value = str(raw).strip()
    if not value:
        raise InputError('"id" is empty', file=str(path), line=line)
    return value


def _text_of(obj: dict[str, Any], key: str, path: Path, line: int) -> str:
    raw = obj.get(key, "")
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise InputError(f'"{key}" must be a string', file=str(path), line=line, field=key)
    return raw


def read_docs(path: Path, warnings: list[str] | None = None) -> dict[str, Doc]:
    """Documents by id, in file order.

    A document with neither title nor text (real collections have a few: Cranfield's 471
    and 995) is left out, with a line in ``warnings``: it can never be retrieved, and a
    judgement naming it counts as a relevant document that is missing.
    """
    docs: dict[str, Doc] = {}
    empty: list[tuple[int, str]] = []
    seen: set[str] = set()
    for line, obj in _json_objects(path):
        doc_id = _id_of(obj, path, line)
        if doc_id in seen:
            raise InputError(f"duplicate document id {doc_id!r}", file=str(path), line=line)
        seen.add(doc_id)
        title = _text_of(obj, "title", path, line).strip()
        text = _text_of(obj, "text", path, line)
        if not title and not text.strip():
            empty.append((line, doc_id))
            continue
        docs[doc_id] = Doc(doc_id, title, text)
    if empty and warnings is not None:
        shown = ", ".join(f"{d!r} (line {n})" for n, d in empty[:5])
        more = f" and {len(empty) - 5} more" if len(empty) > 5 else ""
        warnings.append(
            f"{path}: {len(empty)} empty document(s) skipped (neither title nor text): "
            f"{shown}{more}"
        )
    if not docs:
        raise InputError("no documents", file=str(path))
    return docs


def read_queries(path: Path) -> dict[str, Query]:
    """Queries by id, in file order."""
    queries: dict[str, Query] = {}
    for line, obj in _json_objects(path):
        query_id = _id_of(obj, path, line)
        if query_id in queries:
            raise InputError(f"duplicate query id {query_id!r}", file=str(path), line=line)
        text = _text_of(obj, "text", path, line).strip()
        if not text:
            raise InputError(f'query {query_id!r} has no "text"', file=str(path), line=line)
        queries[query_id] = Query(query_id, text)
    if not queries:
        raise InputError("no queries", file=str(path))
    return queries


_INT = re.compile(r"[+-]?\d+\Z")


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Judgements ``{query_id: {doc_id: relevance}}``; line 1 may be a header row."""
    qrels: dict[str, dict[str, int]] = {}
    for line, text in _lines(path):
        parts = text.split("\t") if "\t" in text else text.split()
        parts = [p.strip() for p in parts]
        if len(parts) == 4:  # TREC: query-id, iteration (ignored), doc-id, relevance
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise InputError(
                f"expected 3 tab-separated fields (query-id, doc-id, relevance), got {len(parts)}",
                file=str(path),
                line=line,
            )
        query_id, doc_id, grade = parts
        if not _INT.match(grade):
            if line == 1 and not qrels:
                continue  # a header row such as "query-id  corpus-id  score"
            raise InputError(f"relevance {grade!r} is not an integer", file=str(path), line=line)
        if not query_id or not doc_id:
            raise InputError("empty query-id or doc-id", file=str(path), line=line)
        judged = qrels.setdefault(query_id, {})
        value = int(grade)
        if doc_id in judged and judged[doc_id] != value:
            raise InputError(
                f"conflicting judgements for ({query_id}, {doc_id}): {judged[doc_id]} and {value}",
                file=str(path),
                line=line,
            )
        judged[doc_id] = value
    return qrels


def read_collection(root: str | Path) -> Collection:
    """A whole collection (docs, queries, judgements) from its folder."""
    folder = Path(root)
    if not folder.is_dir():
        raise InputError("not a directory", file=str(folder))
    warnings: list[str] = []
    docs = read_docs(_find(folder, DOCS_FILES, "documents"), warnings)
    queries = read_queries(_find(folder, QUERIES_FILES, "queries"))
    qrels_path = _find(folder, QRELS_FILES, "relevance judgements")
    qrels = read_qrels(qrels_path)
    unknown_queries = sorted(set(qrels) - set(queries))
    if unknown_queries:
        warnings.append(
            f"{qrels_path}: {len(unknown_queries)} judged query id(s) not in queries.jsonl "
            f"(first: {unknown_queries[0]!r}); ignored"
        )
    missing_docs = sorted({d for q in qrels.values() for d in q if d not in docs})
    if missing_docs:
        warnings.append(
            f"{qrels_path}: {len(missing_docs)} judged document id(s) not among the documents "
            f"(first: {missing_docs[0]!r}); they count as relevant but can never be retrieved"
        )
    kept = {q: judged for q, judged in qrels.items() if q in queries}
    if not any(r > 0 for judged in kept.values() for r in judged.values()):
        raise InputError(
            "no relevant judgement (relevance > 0) for any known query", file=str(qrels_path)
        )
    return Collection(folder.resolve().name, folder, docs, queries, kept, tuple(warnings))


def read_offtopic(root: str | Path) -> tuple[str, list[Query]]:
    """(name, queries) of an off-topic collection: only its queries.jsonl is read."""
    folder = Path(root)
    if not folder.is_dir():
        raise InputError("not a directory", file=str(folder))
    queries = read_queries(_find(folder, QUERIES_FILES, "queries"))
    return folder.resolve().name, list(queries.values())
