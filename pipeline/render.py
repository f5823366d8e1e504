"""Render an Answer as the stable JSON contract, as markdown and as the hook's compact
context; the words every format shares (labels, evidence). The terminal's layout is
``render_text``.
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pipeline import noisefloor as nf
from pipeline.calibrate import Basis, is_trusted
from pipeline.config import HOOK_LABELS
from pipeline.model import (
    WORD_POOL,
    Answer,
    BandPrecision,
    Calibration,
    FactView,
    Hit,
    Recency,
    Relevance,
    SubjectRank,
    TimeWindow,
    UnsyncedEdits,
    predicate_preference,
)
from pipeline.noisefloor import is_tight_vault

_FLOAT_DIGITS = 4
#: The answer JSON's version: 2 added ``status`` and ``superseded_by`` to hits and
#: subjects, ``date`` to hits and ``time_window``; 3 added ``relevance.precision``; 4 its
#: ``lowest``, and ``unsynced``; 5 ``recency``; 6 ``unsynced.unreadable`` and
#: ``hits[].since_sync``; 7 ``word_matches``; 8 ``word_matches`` in weak answers too; 9
#: ``word_match_count``, and a no_match's three best when more notes hold the words.
ANSWER_SCHEMA_VERSION = 9


def _num(value: float | None, digits: int | None = _FLOAT_DIGITS) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value if digits is None else round(value, digits)


@functools.singledispatch
def to_dict(value: Any, **options: Any) -> dict[str, Any]:
    """The JSON form of a value: the one converter of everything vault-ko prints or sends
    as JSON. The model's plain values (an answer, a subject, a calibration, a pack) are
    registered below and in their modules; a record that knows its own form (the reports)
    has a ``to_dict()`` method, which this calls."""
    method = getattr(value, "to_dict", None)
    if method is None:
        raise TypeError(f"no JSON form for {type(value).__name__}")
    return method(**options)  # type: ignore[no-any-return]


@to_dict.register
def _subject(s: SubjectRank, *, digits: int | None = _FLOAT_DIGITS) -> dict[str, Any]:
    return {
        "subject": s.subject,
        "score": s.score,
        "source_count": s.source_count,
        "per_type": dict(s.per_type),
        "total_facts": s.total_facts,
        "raw_facts": s.raw_facts,
        "max_confidence": _num(s.max_confidence, digits),
        "best_cosine": _num(s.best_cosine, digits),
        "best_bm25": _num(s.best_bm25, digits),
        "band": s.band,
        "evidence": s.evidence,
        "status": s.status,
        "superseded_by": s.superseded_by,
        "crystal_ready": s.crystal_ready,
        "predicates": dict(s.predicates),
        "facts": [
            {
                "predicate": f.predicate,
                "object": f.object,
                "confidence": _num(f.confidence, digits),
                "source_type": f.source_type,
                "source_file": f.source_file,
            }
            for f in s.facts
        ],
    }


@to_dict.register
def _answer(answer: Answer, *, digits: int | None = _FLOAT_DIGITS) -> dict[str, Any]:
    """The answer JSON of DESIGN §5 (documented in the README); keys are a contract.

    ``digits`` None keeps every float as computed: the service sends answers so to the CLI,
    whose output then equals an in-process answer's to the last digit."""
    rel = asdict(answer.relevance)
    for key in ("top_cosine", "z", "noise_floor", "sigma", "floor_cosine"):
        rel[key] = _num(rel[key], digits)
    if rel["precision"] is not None:
        for key in ("value", "lowest"):
            rel["precision"][key] = _num(rel["precision"][key], digits)
    return {
        "schema_version": ANSWER_SCHEMA_VERSION,
        "query": answer.query,
        "mode": answer.mode,
        "degraded_reason": answer.degraded_reason,
        "relevance": rel,
        "hits": [
            {
                "path": h.path,
                "title": h.title,
                "source_type": h.source_type,
                "cosine": _num(h.cosine, digits),
                "bm25": _num(h.bm25, digits),
                "excerpt": h.excerpt,
                "status": h.status,
                "superseded_by": h.superseded_by,
                "date": h.date,
                "since_sync": h.since_sync,
            }
            for h in answer.hits
        ],
        "subjects": [to_dict(s, digits=digits) for s in answer.subjects],
        "time_window": _window(answer.time_window),
        "recency": None if answer.recency is None else asdict(answer.recency),
        "notice": answer.notice,
        "unsynced": None if answer.unsynced is None else asdict(answer.unsynced),
        "word_matches": [
            {
                "path": h.path,
                "title": h.title,
                "source_type": h.source_type,
                "bm25": _num(h.bm25, digits),
            }
            for h in answer.word_matches
        ],
        "word_match_count": answer.word_match_count,
        "timings_ms": {k: round(v, 1) for k, v in answer.timings_ms.items()},
    }


def _window(w: TimeWindow | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {
        "text": w.text,
        "from": w.start,
        "to": w.end,
        "applied": w.applied,
        "undated": w.undated,
        "outside": w.outside,
    }


def _window_from(data: dict[str, Any] | None) -> TimeWindow | None:
    if not data:
        return None
    return TimeWindow(
        data["text"],
        data["from"],
        data["to"],
        bool(data.get("applied", True)),
        int(data.get("undated", 0)),
        int(data.get("outside", 0)),
    )


def _recency_from(data: dict[str, Any] | None) -> Recency | None:
    if not data:
        return None
    within = data.get("within_sigma")
    return Recency(str(data["text"]), None if within is None else float(within))


def _precision_from(data: dict[str, Any] | None) -> BandPrecision | None:
    if not data:
        return None
    return BandPrecision(
        float(data["value"]),
        int(data["n"]),
        int(data["collections"]),
        _float(data.get("lowest")),
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def answer_from_dict(data: dict[str, Any]) -> Answer:
    """The Answer an answer JSON describes (the service's answers, read back by the CLI,
    the hook and the MCP server). Raises KeyError / TypeError / ValueError on a document
    that is not an answer."""
    rel = data["relevance"]
    relevance = Relevance(
        rel["label"],
        _float(rel["top_cosine"]),
        _float(rel["z"]),
        _float(rel["noise_floor"]),
        _float(rel["sigma"]),
        _float(rel["floor_cosine"]),
        rel["calibration"],
        bool(rel["tight_vault"]),
        rel.get("hint"),
        rel.get("warning"),
        _precision_from(rel.get("precision")),
    )
    hits = tuple(
        Hit(
            h["path"],
            h["title"],
            h["source_type"],
            _float(h["cosine"]),
            h.get("excerpt"),
            _float(h.get("bm25")),
            h.get("status"),
            h.get("superseded_by"),
            h.get("date"),
            since_sync=h.get("since_sync"),
        )
        for h in data["hits"]
    )
    subjects = tuple(_subject_from(s) for s in data["subjects"])
    return Answer(
        query=data["query"],
        mode=data["mode"],
        degraded_reason=data["degraded_reason"],
        relevance=relevance,
        hits=hits,
        subjects=subjects,
        timings_ms={k: float(v) for k, v in (data.get("timings_ms") or {}).items()},
        notice=data.get("notice"),
        time_window=_window_from(data.get("time_window")),
        recency=_recency_from(data.get("recency")),
        unsynced=_unsynced_from(data.get("unsynced")),
        word_matches=tuple(
            Hit(w["path"], w["title"], w["source_type"], None, bm25=_float(w.get("bm25")))
            for w in data.get("word_matches") or ()  # a service of schema 6 has none
        ),
        word_match_count=data.get("word_match_count"),
    )


def _subject_from(s: dict[str, Any]) -> SubjectRank:
    """One subject of an answer JSON."""
    return SubjectRank(
        subject=s["subject"],
        score=int(s["score"]),
        source_count=int(s["source_count"]),
        per_type=dict(s["per_type"]),
        total_facts=int(s["total_facts"]),
        raw_facts=int(s["raw_facts"]),
        max_confidence=float(s["max_confidence"]),
        best_cosine=_float(s["best_cosine"]),
        crystal_ready=bool(s["crystal_ready"]),
        predicates=dict(s["predicates"]),
        facts=tuple(
            FactView(
                f["predicate"],
                f["object"],
                float(f["confidence"]),
                f["source_type"],
                f["source_file"],
            )
            for f in s["facts"]
        ),
        band=s.get("band"),
        evidence=s.get("evidence"),
        best_bm25=_float(s.get("best_bm25")),
        status=s.get("status"),
        superseded_by=s.get("superseded_by"),
    )


def _unsynced_from(data: dict[str, Any] | None) -> UnsyncedEdits | None:
    if data is None:
        return None
    return UnsyncedEdits(
        int(data["changed"]),
        int(data["added"]),
        int(data["removed"]),
        int(data.get("unreadable", 0)),  # a service of schema 5 does not count them
    )


def answer_notes(answer: Answer) -> list[str]:
    """The notes a person or an agent reads under the label: the tight-vault hint, the
    warning (not in fallback, where the degraded line says it), the preset's notice, a
    weak answer's pointer to notes holding every word of the question, and what the
    answer cannot see since the last sync."""
    r = answer.relevance
    warning = None if answer.mode == "fallback" else r.warning
    notes = (r.hint, warning, answer.notice, word_match_words(answer), *sync_words(answer))
    return [n for n in notes if n]


def sync_words(answer: Answer) -> list[str]:
    """What the answer cannot see of the vault as it is on disk, in words: notes edited
    since the last sync, and, where the answer is weak, unscored or silent, notes that
    cannot be read at all (one of them may be what the question is about)."""
    return [w for w in (unsynced_words(answer.unsynced), unread_words(answer)) if w]


def silence_notes(answer: Answer) -> list[str]:
    """What a no_match answer says under its one line: the period it read, notes its words
    are in, and what it cannot see since the last sync."""
    period = None if answer.time_window is None else window_words(answer.time_window)
    return [w for w in (period, word_match_words(answer), *sync_words(answer)) if w]


def word_match_words(answer: Answer) -> str | None:
    """A no_match or weak answer's pointer, in words, to the few notes holding every word
    of the question that it does not show (``Answer.word_matches``); None when none."""
    found = answer.word_matches
    if not found:
        return None
    count = max(answer.word_match_count or 0, len(found))
    notes = "; ".join(f"{h.title} ({h.path})" for h in found)
    where = "" if answer.relevance.label == "no_match" else " not among the notes below"
    if count == len(found):
        one = count == 1
        return (
            f"every word of the question is in {'1 note' if one else f'{count} notes'}"
            f"{where}, which the model did not find close in meaning: {notes}; a word search "
            f"(`--no-semantic`) answers from {'it' if one else 'them'}"
        )
    held = f"more than {WORD_POOL}" if count > WORD_POOL else str(count)
    return (
        f"every word of the question is in {held} notes{where}, none of which the model "
        f"found close in meaning; those that hold them most: {notes}; a word search "
        "(`--no-semantic`) answers from them"
    )


def unread_words(answer: Answer) -> str | None:
    """Notes sync skips as they stand (``UnsyncedEdits.unreadable``), said where the vault
    seems to know little; None for a strong or moderate answer, which found its notes."""
    count = answer.unsynced.unreadable if answer.unsynced is not None else 0
    if not count or answer.relevance.label in ("strong", "moderate"):
        return None
    which = "a note" if count == 1 else f"{count} notes"
    return (
        f"{which} of this vault cannot be read as {'it stands' if count == 1 else 'they stand'} "
        "(bad input, or too big), so this answer cannot see "
        f"{'it' if count == 1 else 'them'}: `vault-ko sync` says which and why"
    )


def unsynced_words(unsynced: UnsyncedEdits | None) -> str | None:
    """What an answer cannot see, in words; None when it sees the vault as it is (or was
    not compared)."""
    if unsynced is None or not unsynced.total:
        return None
    parts = [
        f"{n} {what}"
        for n, what in (
            (unsynced.changed, "changed"),
            (unsynced.added, "new"),
            (unsynced.removed, "deleted"),
        )
        if n
    ]
    notes = "a note" if unsynced.total == 1 else "notes"
    return (
        f"this answer does not reflect {notes} edited since the last sync ({', '.join(parts)}): "
        "`vault-ko sync` applies them, `vault-ko watch` keeps the vault current"
    )


#: Longest excerpt of a note in markdown (one line for an agent's context).
MD_EXCERPT_CHARS = 160
#: The answer's first notes, shown to people (text and markdown).
NOTES_SHOWN = 5
EVIDENCE_WORDS = {
    "own": "its note",
    "title": "title match",
    "mentioned": "mentioned",
    "words": "name words",
    "successor": "successor",
}
#: What each evidence value means (the --explain legend).
EVIDENCE_MEANING = {
    "own": "a note the search found is this subject's own note",
    "title": "its name holds the title of a note the search found",
    "mentioned": "several of the best notes link to it",
    "words": "its name holds words of the question (the notes' words were searched)",
    "successor": "the decision replacing one the search found (it joins right before it)",
}


def window_words(w: TimeWindow) -> str:
    """What an answer says of the period it understood and what it did with it."""
    if w.start == w.end:  # one day
        span = w.text if w.text == w.start else f"{w.text} ({w.start})"
        kind, within = "day", "dated on it"
    else:
        span, kind, within = f"{w.text} ({w.start} – {w.end})", "period", "dated within it"
    if not w.applied:
        return f"{kind} {span}: no note is {within}, so it was not applied"
    said = f"{kind} {span}: only notes {within}"
    if w.undated:
        said += f", and {w.undated} undated (marked)"
    if w.outside:
        said += f"; {w.outside} dated outside it left out"
    return said


def recency_words(r: Recency) -> str:
    """What an answer says of a question asking for the latest and what it did with it."""
    if r.within_sigma is None:
        return f"newest first ({r.text}): the notes found, the most recent first"
    return (
        f"newest first ({r.text}): of the notes within {r.within_sigma:g} σ of the best, "
        "the most recent first"
    )


def time_words(answer: Answer) -> list[str]:
    """What an answer says of the time its question named: the period, the latest, and
    where the label's note went when the time left it out."""
    said = [] if answer.time_window is None else [window_words(answer.time_window)]
    said += [] if answer.recency is None else [recency_words(answer.recency)]
    return said + [w for w in (label_elsewhere(answer),) if w]


#: Cosines this close are the same note's (the label's is computed apart from the hits').
SAME_COSINE = 5e-5


def label_elsewhere(answer: Answer) -> str | None:
    """In an answer whose notes a period or the latest chose, when the note the label
    measures (the best found for the question) is not among the notes shown: its cosine,
    and the best of those shown, so that a strong label over notes of 0.2 reads right."""
    r = answer.relevance
    if r.top_cosine is None or r.label in ("no_match", "unscored") or not dates_shown(answer):
        return None
    shown = [h.cosine for h in answer.hits[:NOTES_SHOWN] if h.cosine is not None]
    if not shown or _label_note(answer) is not None:
        return None
    return (
        f"the label is that of the best note found (cosine {r.top_cosine:.3f}), which is not "
        f"among the notes shown; the best of them has {max(shown):.3f}"
    )


def _label_note(answer: Answer) -> int | None:
    """The place among the notes shown (0 the first) of the note the label measures, the
    best found for the question; None when it is not shown."""
    top = answer.relevance.top_cosine
    for i, h in enumerate(answer.hits[:NOTES_SHOWN]):
        if top is not None and h.cosine is not None and h.cosine >= top - SAME_COSINE:
            return i
    return None


def _best_place(answer: Answer) -> str:
    """Which shown note the label measures, when it is not the first (", note 4,"): the
    notes are in fused order, so the closest in meaning may stand lower."""
    place = _label_note(answer)
    return f", note {place + 1}," if place else ""


def dates_shown(answer: Answer) -> bool:
    """Whether the answer's notes were chosen or ordered by their dates (a period, the
    latest), so each note says its date."""
    w = answer.time_window
    return (w is not None and w.applied) or answer.recency is not None


def status_words(status: str | None, superseded_by: str | None) -> str | None:
    """A decision's status in words for people and agents ("superseded by 0014 …")."""
    if status == "superseded":
        return f"superseded by {superseded_by}" if superseded_by else "superseded"
    return status


def shown_status(s: SubjectRank, successors: set[str]) -> str | None:
    """What an answer says of a subject's status: every status but current, which is said
    only of a subject that replaced another one in the answer."""
    if s.status == "current" and s.subject not in successors:
        return None
    return status_words(s.status, s.superseded_by)


def successors_in(subjects: Sequence[SubjectRank]) -> set[str]:
    """The subjects named as the successor of another subject of the answer."""
    return {s.superseded_by for s in subjects if s.superseded_by}


def label_line(answer: Answer) -> str:
    """The measurements behind the label on one line (mode, label, cosines, z, basis)."""
    r = answer.relevance
    parts = [f"{answer.mode} · {r.label}"]
    if r.top_cosine is not None:
        parts.append(f"top cosine {r.top_cosine:.3f}")
    if r.floor_cosine is not None:
        parts.append(f"floor {r.floor_cosine:.3f}")
    if r.z is not None:
        parts.append(f"z {r.z:.2f}")
    if answer.mode != "fallback":  # words were not measured against it: "none" read as "lost"
        parts.append(f"calibration {r.calibration}")
    return " · ".join(parts)


#: What each label means, in words (the first line of a text answer says it for the answer).
LABEL_WORDS = {
    "strong": "the vault clearly knows this",
    "moderate": "the vault knows something about this",
    "weak": "the vault holds related words, perhaps not the answer",
    "no_match": "nothing in this vault is about this question",
    "unscored": "answered from the notes' words, so no label could be measured",
}


def label_in_words(answer: Answer) -> str:
    """The answer's label said in words, with the measurement behind it."""
    r = answer.relevance
    meaning = LABEL_WORDS.get(r.label, r.label)
    measured = (r.z, r.top_cosine, r.floor_cosine)
    said = f"{r.label}: {meaning}"
    if r.label != "no_match" and all(v is not None and math.isfinite(v) for v in measured):
        said += (
            f": the best note{_best_place(answer)} is {r.z:.1f} σ above what off-topic "
            f"questions reach here (cosine {r.top_cosine:.3f} against a floor of "
            f"{r.floor_cosine:.3f})"
        )
    measured_meaning = precision_in_words(r.label, r.precision)
    return f"{said}; {measured_meaning}" if measured_meaning else said


def precision_in_words(label: str, precision: BandPrecision | None) -> str | None:
    """What a band is measured to mean, in words ("a strong answer's best note was right 8
    times in 10 on 6 judged collections"); None when unmeasured."""
    if precision is None:
        return None
    said = (
        f"a {label} answer's best note was right {round(precision.value * 10)} times in 10 "
        f"on {precision.collections} judged collections"
    )
    # Only a hardest collection below the mean is news (it is chosen among collections of
    # enough answers; the mean counts every one).
    if precision.lowest is None or round(precision.lowest * 10) >= round(precision.value * 10):
        return said
    return f"{said}, {round(precision.lowest * 10)} in 10 on the hardest"


def legend(answer: Answer) -> str:
    """What every column and mark of the text answer means (`vault-ko query --explain`)."""
    from pipeline import rank

    r = answer.relevance
    lines = [
        "How to read this answer",
        *textwrap.wrap(
            f"{label_in_words(answer)}.",
            width=100,
            initial_indent="  label      ",
            subsequent_indent=" " * 13,
            break_on_hyphens=False,  # "off-" at a line's end, "topic" below it
        ),
        "             Bands: the best note's cosine is compared with the vault's noise floor "
        "(what off-topic",
        "             questions reach) in units of σ, the spread of its notes: at or under "
        "the floor",
        f"             no_match, z ≤ {nf.WEAK_MAX_Z:g} weak, z ≤ {nf.MODERATE_MAX_Z:g} moderate, "
        "higher strong"
        + (" (a tight vault: weak may be the best correct match)." if r.tight_vault else "."),
        "  notes      #, then cos: the note's cosine to the question (bm25: its word score when "
        "the graph was",
        "             not used; –: found by its date alone); its title · where it is in the vault;",
        "             the paragraph of its text that meets the question, under its heading (its "
        "first",
        "             paragraph when none does better). Their order: hybrid retrieval (the "
        "default) fuses",
        "             meaning and words, so a lower cosine may come first; a question for "
        "the latest gets",
        "             its newest notes first.",
        "  subjects   #: the order, relevance first (subjects whose notes are comparably "
        "relevant),",
        "             then score;",
        "             after the name (below it when they do not fit): the band of the note "
        "that makes",
        "             it relevant, how it became a candidate:",
    ]
    lines += [
        f"               {words:<12} {EVIDENCE_MEANING[key]}"
        for key, words in EVIDENCE_WORDS.items()
    ]
    lines += [
        "             cos: that note's cosine (bm25: its word score);",
        f"             score: source files × {rank.SOURCE_WEIGHT} + files of its least "
        f"represented source type × {rank.TYPE_SPREAD_WEIGHT}",
        "             + facts (each predicate counted up to a cap, 3 by default): how many",
        "             sources corroborate it;",
        "             s/w/a: source files of each type (session / wiki / adr);",
        f"             ✦ crystal-ready: at least {rank.CRYSTAL_MIN_TYPES} source types, "
        f"{rank.CRYSTAL_MIN_FILES} files and a fact of confidence ≥ "
        f"{rank.CRYSTAL_MIN_CONFIDENCE}.",
        "  facts      predicate: object · the file that states it (note N: the note listed "
        "above as N);",
        "             facts from the question's notes first, then decisions, reasons and "
        "summaries before",
        "             properties, links and tags; a fact longer than two lines ends with …",
        "             (--json and --format md have it whole); (+N more): the property has N "
        "more values.",
        "  marks      in brackets after a name: a decision's status when it is not current "
        "(superseded by",
        "             what replaced it, deprecated, rejected, proposed), current when what it "
        "replaced",
        "             is shown too; a note edited or deleted since the last sync (its cosine "
        "and facts",
        "             are the last sync's); in an answer chosen or ordered by dates, the note's "
        "date or",
        "             undated.",
        "  More: docs/ranking.md (the order and the score), docs/relevance.md (the labels).",
    ]
    if answer.mode == "fallback":
        lines.insert(
            1, f"  mode       fallback: {answer.degraded_reason or 'the graph was not used'}"
        )
    return "\n".join(lines)


def silence_line(answer: Answer) -> str:
    """The one line a no_match answer is: nothing in the vault is about the question."""
    r = answer.relevance
    if r.top_cosine is not None and r.floor_cosine is not None:
        why = f"best note {r.top_cosine:.3f} ≤ floor {r.floor_cosine:.3f}"
    else:
        why = r.warning or "no note came back"
    return f"no_match: {LABEL_WORDS['no_match']} ({why})"


def one_line(
    text: str | None,
    width: int,
    *,
    measure: Callable[[str], int] = len,
    clip: Callable[[str, int], str] | None = None,
) -> str:
    """``text`` on one line of at most ``width`` characters (or what ``measure`` counts, a
    terminal's cells, with ``clip`` cutting to them), cut at a word with an ellipsis if
    longer ("Cloudf…" read as a typo)."""
    flat = " ".join((text or "").split())
    if measure(flat) <= width:
        return flat
    cut = clip(flat, width - 1) if clip is not None else flat[: width - 1]
    word_end = cut.rfind(" ")
    if word_end > width // 2:
        cut = cut[:word_end]
    return cut.rstrip() + "…"


def _score_words(h: Hit) -> str:
    if h.cosine is not None:
        return f"cosine {h.cosine:.3f}"
    return f"bm25 {h.bm25:.2f}" if h.bm25 is not None else h.source_type


def hit_marks(h: Hit, dated: bool, successor: str | None = None) -> str | None:
    """What an answer says of a hit beside its title: that its file was edited or deleted
    since the last sync, its decision's status (not of a current one; ``successor`` names
    what replaced it, else its path), and in an answer chosen or ordered by dates
    (``dates_shown``), its date or that it has none."""
    parts = [f"{h.since_sync} since the last sync"] if h.since_sync else []
    if h.status != "current":
        parts.append(status_words(h.status, successor or h.superseded_by))
    if dated:
        parts.append(h.date or "undated")
    said = "; ".join(p for p in parts if p)
    return said or None


def _why(s: SubjectRank) -> str:
    parts = [p for p in (s.band, EVIDENCE_WORDS.get(s.evidence or "", s.evidence)) if p]
    return " · ".join(parts)


def _types(s: SubjectRank) -> str:
    return ", ".join(f"{t} {n}" for t, n in s.per_type.items() if n)


def _files(s: SubjectRank) -> str:
    """How many files and of which types: "1 file: wiki 1", "3 files: session 2, wiki 1"."""
    return f"{s.source_count} file{'' if s.source_count == 1 else 's'}: {_types(s)}"


def to_markdown(answer: Answer, *, heading: str | None = None) -> str:
    """Compact markdown for an agent's context window: the best notes, then the subjects."""
    lines = [f"## {heading or 'Vault context'}: {answer.query}", ""]
    r = answer.relevance
    edits = sync_words(answer)
    if r.label == "no_match":
        lines.append(f"_{silence_line(answer)}_")
        lines += [f"_note: {said}_" for said in silence_notes(answer)]
        return "\n".join(lines) + "\n"
    head = label_line(answer)
    if answer.degraded_reason:
        head += f" · degraded: {answer.degraded_reason}"
    lines.append(f"_{head}_")
    if (measured := precision_in_words(r.label, r.precision)) is not None:
        lines.append(f"_{measured}_")
    for note in (r.hint, r.warning, answer.notice, word_match_words(answer), *edits):
        if note:
            lines.append(f"_note: {note}_")
    lines += [f"_{said}_" for said in time_words(answer)]
    dated = dates_shown(answer)
    if answer.hits:
        lines += ["", "### Notes"]
        for i, h in enumerate(answer.hits[:NOTES_SHOWN], start=1):
            score = _score_words(h)
            status = hit_marks(h, dated)
            line = f"{i}. **{h.title}** (`{h.path}`, {score}{f'; {status}' if status else ''})"
            if h.excerpt:
                line += f" — {one_line(h.excerpt, MD_EXCERPT_CHARS)}"
            lines.append(line)
    if answer.subjects:
        lines += ["", "### Subjects"]
    successors = successors_in(answer.subjects)
    for s in answer.subjects:
        mark = " ✦ crystal-ready" if s.crystal_ready else ""
        status = shown_status(s, successors)
        why = "; ".join(p for p in (status, _why(s)) if p)
        why = f"{why}; " if why else ""
        lines.append(f"- **{s.subject}** ({why}score {s.score}; {_files(s)}){mark}")
        more = more_values(s)
        for f in s.facts:
            lines.append(
                f"  - {f.predicate}: {f.object}{_more_said(more, f.predicate)} "
                f"[{f.source_type}: {f.source_file}, {f.confidence:.2f}]"
            )
    return "\n".join(lines).rstrip() + "\n"


#: The hook's context: notes listed, and a line's longest excerpt or fact object.
CONTEXT_NOTES = 5
CONTEXT_TEXT_CHARS = 200
WEAK_MARK = "weak match: these notes are only loosely related to the prompt; use them with care"


def to_context_pack(answer: Answer, *, max_chars: int, min_label: str = "weak") -> str | None:
    """The compact context an agent's hook injects, at most ``max_chars`` characters; None
    when there is nothing to inject: no_match (silence beats noise), a label below
    ``min_label``, or a degraded answer that found no subject (an unscored one has no label
    to hold against ``min_label``: it is marked degraded instead)."""
    r = answer.relevance
    if r.label == "no_match":
        return None
    if r.label in HOOK_LABELS and HOOK_LABELS.index(r.label) < HOOK_LABELS.index(min_label):
        return None
    if answer.mode == "fallback" and not answer.subjects:
        return None
    if not answer.hits and not answer.subjects:
        return None
    head = f"vault-ko: what the notes vault knows about this prompt ({r.label}"
    if r.z is not None:
        head += f", z {r.z:.2f}"
    if r.top_cosine is not None:
        head += f", best note cosine {r.top_cosine:.3f}"
    lines = [head + ")"]
    if (measured := precision_in_words(r.label, r.precision)) is not None:
        lines.append(f"[{measured}]")
    if r.label == "weak":
        lines.append(f"[{WEAK_MARK}]")
    if answer.mode == "fallback":
        lines.append(
            f"[degraded: {answer.degraded_reason}; subjects found by word search on the "
            "facts database, not by meaning]"
        )
    lines += [f"[{note}]" for note in answer_notes(answer)]
    lines += [f"[{said}]" for said in time_words(answer)]
    dated = dates_shown(answer)
    if answer.hits:
        lines.append("Notes:")
        for h in answer.hits[:CONTEXT_NOTES]:
            status = hit_marks(h, dated)
            line = f"- {h.title} ({h.path}{f'; {status}' if status else ''})"
            if h.excerpt:
                line += f": {one_line(h.excerpt, CONTEXT_TEXT_CHARS)}"
            lines.append(line)
    if answer.subjects:
        lines.append("Subjects (ranked by how many files and source types corroborate them):")
    successors = successors_in(answer.subjects)
    for s in answer.subjects:
        mark = ", crystal-ready" if s.crystal_ready else ""
        status = shown_status(s, successors)
        said = f"{status}; " if status else ""
        lines.append(f"- {s.subject} ({said}{_files(s)}{mark})")
        more = more_values(s)
        for f in s.facts:
            text = one_line(f.object, CONTEXT_TEXT_CHARS) + _more_said(more, f.predicate)
            lines.append(f"  - {f.predicate}: {text} [{f.source_file}]")
    return _cut(lines, max_chars)


def more_values(s: SubjectRank) -> dict[str, int]:
    """How many more facts than shown each shown property predicate has ("members: Dávid
    Kovács" alone read as the team's one member, "participants: Bert Belder" as a meeting's
    one attendee); prose and structural predicates say nothing by their count. Said after
    the first fact of the predicate, "(+3 more)", by every output that shows facts."""
    shown = Counter(f.predicate for f in s.facts)
    return {
        p: s.predicates.get(p, 0) - n
        for p, n in shown.items()
        if predicate_preference(p)[0] == 1 and s.predicates.get(p, 0) > n
    }


def _more_said(more: dict[str, int], predicate: str) -> str:
    """ " (+N more)" after the first fact of ``predicate`` (``more`` is spent as it is said)."""
    n = more.pop(predicate, 0)
    return f" (+{n} more)" if n else ""


def _cut(lines: list[str], max_chars: int) -> str:
    """Whole lines up to ``max_chars`` (with a closing line saying the rest was cut)."""
    tail = "[cut to fit; ask `vault-ko query` for the whole answer]"
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    kept: list[str] = []
    size = len(tail)
    for line in lines:
        if size + len(line) + 1 > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join([*kept, tail])[:max_chars]


@dataclass(frozen=True)
class CalibrationView:
    """A stored calibration (None: none stored) and the basis an answer would use."""

    stored: Calibration | None
    basis: Basis | None = None


@to_dict.register
def _calibration(view: CalibrationView) -> dict[str, Any]:
    """A stored calibration plus what an answer would use from it."""
    cal, basis = view.stored, view.basis
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
