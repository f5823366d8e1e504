"""Render an Answer as the stable JSON contract, as markdown, or as a rich table."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pipeline.calibrate import Basis, is_trusted
from pipeline.model import Answer, Calibration, SubjectRank
from pipeline.noisefloor import is_tight_vault

_FLOAT_DIGITS = 4


def _num(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, _FLOAT_DIGITS)


def subject_to_dict(s: SubjectRank) -> dict[str, Any]:
    return {
        "subject": s.subject,
        "score": s.score,
        "source_count": s.source_count,
        "per_type": dict(s.per_type),
        "total_facts": s.total_facts,
        "raw_facts": s.raw_facts,
        "max_confidence": _num(s.max_confidence),
        "best_cosine": _num(s.best_cosine),
        "crystal_ready": s.crystal_ready,
        "predicates": dict(s.predicates),
        "facts": [
            {
                "predicate": f.predicate,
                "object": f.object,
                "confidence": _num(f.confidence),
                "source_type": f.source_type,
                "source_file": f.source_file,
            }
            for f in s.facts
        ],
    }


def answer_to_dict(answer: Answer) -> dict[str, Any]:
    """The answer JSON of DESIGN §5 (documented in the README); keys are a contract."""
    rel = asdict(answer.relevance)
    for key in ("top_cosine", "z", "noise_floor", "sigma", "floor_cosine"):
        rel[key] = _num(rel[key])
    return {
        "query": answer.query,
        "mode": answer.mode,
        "degraded_reason": answer.degraded_reason,
        "relevance": rel,
        "hits": [
            {
                "path": h.path,
                "title": h.title,
                "source_type": h.source_type,
                "cosine": _num(h.cosine),
            }
            for h in answer.hits
        ],
        "subjects": [subject_to_dict(s) for s in answer.subjects],
        "timings_ms": {k: round(v, 1) for k, v in answer.timings_ms.items()},
    }


def _label_line(answer: Answer) -> str:
    r = answer.relevance
    parts = [f"relevance: {r.label}"]
    if r.top_cosine is not None:
        parts.append(f"top cosine {r.top_cosine:.3f}")
    if r.floor_cosine is not None:
        parts.append(f"floor {r.floor_cosine:.3f}")
    if r.z is not None:
        parts.append(f"z {r.z:.2f}")
    parts.append(f"calibration: {r.calibration}")
    return " · ".join(parts)


def to_markdown(answer: Answer, *, heading: str | None = None) -> str:
    """Compact markdown for an agent's context window."""
    lines = [f"## {heading or 'Vault context'}: {answer.query}", ""]
    mode = answer.mode
    if answer.degraded_reason:
        mode += f" ({answer.degraded_reason})"
    lines.append(f"_mode: {mode} · {_label_line(answer)}_")
    r = answer.relevance
    for note in (r.hint, r.warning):
        if note:
            lines.append(f"_note: {note}_")
    lines.append("")
    if not answer.subjects and answer.relevance.label == "no_match":
        lines.append("nothing relevant")
    for s in answer.subjects:
        mark = " ✦ crystal-ready" if s.crystal_ready else ""
        types = ", ".join(f"{t} {n}" for t, n in s.per_type.items() if n)
        lines.append(f"- **{s.subject}** (score {s.score}; {s.source_count} files: {types}){mark}")
        for f in s.facts:
            lines.append(
                f"  - {f.predicate}: {f.object} [{f.source_type}: {f.source_file}, "
                f"{f.confidence:.2f}]"
            )
    if answer.hits and not answer.subjects and answer.relevance.label != "no_match":
        for h in answer.hits:
            lines.append(f"- {h.title} ({h.path}, cosine {h.cosine:.3f})")
    return "\n".join(lines).rstrip() + "\n"


def to_rich(answer: Answer) -> RenderableType:
    """A readable table for people at a terminal."""
    r = answer.relevance
    header = Text()
    style = {"strong": "bold green", "moderate": "green", "weak": "yellow"}.get(r.label, "red")
    header.append(f"{answer.query}\n", style="bold")
    header.append(f"mode {answer.mode}", style="cyan" if answer.mode == "semantic" else "magenta")
    if answer.degraded_reason:
        header.append(f" — {answer.degraded_reason}", style="magenta")
    header.append("\n")
    header.append(_label_line(answer), style=style)
    parts: list[RenderableType] = [header]
    for note in (r.hint, r.warning):
        if note:
            parts.append(Text(f"note: {note}", style="italic"))
    if answer.subjects:
        table = Table(show_lines=False, expand=False)
        for col in ("subject", "score", "files", "s/w/a", "facts", "best cos", "top facts"):
            table.add_column(col, overflow="fold")
        for s in answer.subjects:
            facts = "\n".join(f"{f.predicate}: {f.object} ({f.source_file})" for f in s.facts)
            name = s.subject + (" ✦" if s.crystal_ready else "")
            table.add_row(
                name,
                str(s.score),
                str(s.source_count),
                "/".join(str(s.per_type.get(t, 0)) for t in ("session", "wiki", "adr")),
                f"{s.total_facts}/{s.raw_facts}",
                "" if s.best_cosine is None else f"{s.best_cosine:.3f}",
                facts,
            )
        parts.append(table)
    elif r.label == "no_match":
        parts.append(Text("nothing relevant in this vault", style="dim"))
    if answer.hits and not answer.subjects and r.label != "no_match":
        notes = Table("note", "type", "cosine")
        for h in answer.hits:
            notes.add_row(f"{h.title} ({h.path})", h.source_type, f"{h.cosine:.3f}")
        parts.append(notes)
    return Group(*parts)


def calibration_to_dict(cal: Calibration | None, basis: Basis | None = None) -> dict[str, Any]:
    """A stored calibration plus what an answer would use from it."""
    data: dict[str, Any] = {"stored": None}
    if cal is not None:
        stored = asdict(cal)
        for key in ("noise_floor", "sigma", "mu"):
            stored[key] = _num(stored[key])
        stored["trusted"] = is_trusted(cal)
        data["stored"] = stored
    if basis is not None:
        data["used"] = basis.source
        data["noise_floor"] = _num(basis.noise_floor)
        data["sigma"] = _num(basis.sigma)
        data["floor_cosine"] = _num(basis.floor_cosine)
        data["tight_vault"] = is_tight_vault(basis.mu)
        data["warning"] = basis.warning
    return data
