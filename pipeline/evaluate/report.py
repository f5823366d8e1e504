"""The markdown form of an evaluation report (the JSON form is ``EvalReport.to_dict``)."""

from __future__ import annotations

from typing import Any

from pipeline.evaluate.bands import BANDS, BandFit
from pipeline.evaluate.harness import LABELS, EvalReport
from pipeline.evaluate.metrics import ANSWER_METRICS, METRICS


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


_RETRIEVAL_NAMES = {
    "dense": "dense (graph vectors)",
    "hybrid": "hybrid (vectors + full text, fused scores)",
    "fallback": "fallback (full text only)",
    "bm25_baseline": "plain BM25 (bm25s), the yardstick",
    "bm25_whole_words": "plain BM25, whole words (no stemming)",
}


def _retrieval_name(mode: str, data: dict[str, Any]) -> str:
    name = _RETRIEVAL_NAMES[mode]
    return f"{name} ← default" if mode == data["default_retrieval"] else name


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if not a or not b else f"{a / b:.2f}"


def _answer_rows(data: dict[str, Any]) -> list[list[str]]:
    answers = data["answers"]
    rows = []
    for mode in ("dense", "hybrid", "fallback"):
        groups = [("all", answers[mode], answers["questions"])]
        groups += [
            (name, answers[mode]["by_split"][name], count)
            for name, count in answers["splits"].items()
        ]
        for name, figures, count in groups:
            note = figures["note_ndcg@10"]
            ratio = figures["subject_ndcg@10"] / note if note else None
            label = mode if name == "all" else f"{mode}, {name}"
            rows.append(
                [label, str(count), *(_num(figures[m]) for m in ANSWER_METRICS), _num(ratio)]
            )
    return rows


def _answer_note(report: EvalReport) -> str:
    if report.kind == "vault":
        return (
            "Grades come from the judged questions: a note hit counts as its own subject, "
            "once; top3_answer = a subject of grade 2 among the first three."
        )
    return (
        "A subject is its document's title; top3_answer = a relevant document's subject "
        "among the first three."
    )


def to_markdown(report: EvalReport) -> str:
    """A markdown report: retrieval table, labels, silence rates, calibration, model."""
    data: dict[str, Any] = report.to_dict()
    lines = [
        *_head_lines(report, data),
        *_retrieval_lines(data),
        *_answer_lines(report, data),
        *_label_lines(data),
        *_calibration_lines(data),
    ]
    if report.warnings:
        lines += ["## Warnings", "", *(f"- {w}" for w in report.warnings), ""]
    return "\n".join(lines)


def _head_lines(report: EvalReport, data: dict[str, Any]) -> list[str]:
    """The title and what was evaluated: model, documents, queries."""
    off_names = ", ".join(report.offtopic) or "none"
    return [
        f"# vault-ko eval: {report.collection}",
        "",
        f"Model `{report.model}` ({report.dims}d); {report.docs} documents as {report.notes} "
        f"notes; {data['queries']['on_topic']} judged on-topic queries; "
        f"{data['queries']['off_topic']} off-topic queries (from {off_names}).",
        "",
    ]


def _retrieval_lines(data: dict[str, Any]) -> list[str]:
    """The metrics of each retrieval mode, the default one, and the fallback's reach."""
    return [
        "## Retrieval",
        "",
        *_table(
            ["retrieval", *METRICS],
            [
                [_retrieval_name(mode, data), *(_num(data[mode][m]) for m in METRICS)]
                for mode in ("dense", "hybrid", "fallback", "bm25_baseline", "bm25_whole_words")
            ],
        ),
        "",
        f"The default retrieval (setting query_retrieval, the JSON's `semantic`) is "
        f"{data['default_retrieval']}; fallback/BM25 nDCG@10: "
        f"{_ratio(data['fallback']['ndcg@10'], data['bm25_baseline']['ndcg@10'])}. "
        f"The full text is stemmed as {data['language']} (setting vault_language; a note's "
        "`lang:` overrides it); BM25 over whole words shows the words before stemming. "
        f"{_long_notes(data)}",
        "",
        f"Fallback (degraded mode) {data['fallback_reach']}.",
        "",
        *_recommendation(data),
    ]


def _recommendation(data: dict[str, Any]) -> list[str]:
    best, default = data["recommended_retrieval"], data["default_retrieval"]
    if best == default:
        return [f"The default retrieval ({default}) is the better one here.", ""]
    return [
        f"{best.capitalize()} retrieval finds these notes better than {default} "
        f"(nDCG@10 {_num(data[best]['ndcg@10'])} against {_num(data[default]['ndcg@10'])}): "
        f'set `query_retrieval = "{best}"` ([query] retrieval) for this vault.',
        "",
    ]


def _answer_lines(report: EvalReport, data: dict[str, Any]) -> list[str]:
    """The answers' metrics by mode and split, and how their grades were given."""
    return [
        "## Answers: the subjects a person reads",
        "",
        *_table(["mode", "questions", *ANSWER_METRICS, "subject/note nDCG"], _answer_rows(data)),
        "",
        _answer_note(report),
        "",
    ]


def _label_lines(data: dict[str, Any]) -> list[str]:
    """The relevance labels of on- and off-topic queries, silence rates, ROC AUC."""
    return [
        "## Relevance labels",
        "",
        *_table(
            ["queries", *LABELS],
            [
                ["on-topic", *(str(data["labels"]["on_topic"][lb]) for lb in LABELS)],
                ["off-topic", *(str(data["labels"]["off_topic"][lb]) for lb in LABELS)],
                *(
                    [f"off-topic: {name}", *(str(counts[lb]) for lb in LABELS)]
                    for name, counts in data["labels"]["off_topic_by_collection"].items()
                ),
            ],
        ),
        "",
        *_table(
            ["policy", "false silence", "off-topic silence", "off-topic confident"],
            [
                [
                    "vault-ko noise floor",
                    _pct(data["false_silence"]),
                    _pct(data["offtopic_silence"]),
                    _pct(data["offtopic_confident"]),
                ],
                *(
                    [row["policy"], _pct(row["false_silence"]), _pct(row["offtopic_silence"]), "–"]
                    for row in data["fixed_thresholds"]
                ),
            ],
        ),
        "",
        *_band_lines(data),
        f"ROC AUC, on-topic vs off-topic: z {_num(data['auc_z'])}, "
        f"raw cosine {_num(data['auc_cosine'])} (within one calibration z is an increasing "
        "function of the cosine, so the two agree; they differ only across vaults).",
        "",
    ]


def _band_lines(data: dict[str, Any]) -> list[str]:
    """What each band's answers deliver: the share whose top note is relevant, answering,
    with an answering subject in the top three, and the off-topic answers in the band."""
    bands = data["bands"]
    return [
        "What each band delivers (on-topic answers in the default retrieval; the top note "
        "relevant = judged grade ≥ 1, answering = its question's highest grade):",
        "",
        *_table(
            [
                "band",
                "answers",
                "top note relevant",
                "top note answering",
                "answering subject in top 3",
                "off-topic",
            ],
            [
                [
                    band,
                    str(bands[band]["n"]),
                    _pct(bands[band]["precision_relevant"]),
                    _pct(bands[band]["precision_answering"]),
                    _pct(bands[band]["top3_answering"]),
                    str(bands[band]["offtopic_n"]),
                ]
                for band in BANDS
            ],
        ),
        "",
    ]


def _calibration_lines(data: dict[str, Any]) -> list[str]:
    """The calibration used, and the one measured on this vault, if any."""
    cal = data["calibration"]
    measured = cal["measured"] or {}
    lines = [
        "## Calibration used",
        "",
        *_table(
            ["source", "N", "σ (used)", "μ", "tight", "floor cosine", "notes", "pairs"],
            [
                [
                    str(cal["source"]),
                    _num(cal["noise_floor"]),
                    _num(cal["sigma"]),
                    _num(cal["mu"]),
                    "yes" if cal["tight"] else "no",
                    _num(cal["floor_cosine"]),
                    str(measured.get("n_notes", "–")),
                    str(measured.get("n_pairs", "–")),
                ]
            ],
        ),
        "",
    ]
    if measured:
        lines += [
            f"Measured on this vault: N {_num(measured['noise_floor'])}, "
            f"σ {_num(measured['sigma'])}, μ {_num(measured['mu'])} "
            f"(probe set {measured['probe_set_version']}).",
            "",
        ]
    return lines


def _long_notes(data: dict[str, Any]) -> str:
    """How long notes were embedded, and what it cost in vectors."""
    per_note = data.get("vectors_per_note")
    cost = f" ({per_note:.2f} vectors a note)" if per_note is not None else ""
    if data.get("long_notes") == "head":
        return (
            f"Long notes are embedded by their head alone (setting embed_long_notes = head){cost}."
        )
    return (
        "Long notes are embedded as passages too, a note scored by the better of its own "
        f"vector and its best passage less a discount{cost}."
    )


def _band_cells(row: dict[str, Any]) -> str:
    return f"{row['n']} · {_pct(row['precision_relevant'])}"


def fit_markdown(
    fit: BandFit, models: list[str], calibrations: dict[str, dict[str, Any]] | None = None
) -> str:
    """The leave-one-collection-out table of ``vault-ko eval --fit-bands``, and each
    collection's calibration (how tight it is: the profile's μ and σ bounds are judged by
    these)."""
    data = fit.to_dict()
    cut = data["cutoffs"]
    lines = [
        "# vault-ko eval --fit-bands",
        "",
        f"Model {', '.join(f'`{m}`' for m in models)}; {len(fit.collections)} collections. "
        "Cells: answers in the band · the share whose top note is judged relevant. "
        f"Targets: strong ≥ {data['targets']['strong_precision_relevant']:.0%}, moderate ≥ "
        f"{data['targets']['moderate_precision_relevant']:.0%} on every collection held "
        f"out, false silence ≤ {data['targets']['false_silence']:.0%}.",
        "",
        "## Leave one collection out",
        "",
        *_table(
            [
                "held out",
                "weak ≤ z",
                "moderate ≤ z",
                *BANDS,
                "off-topic strong/moderate",
                "false silence",
                "targets",
            ],
            [
                [
                    row["held_out"],
                    _num(row["cutoffs"]["weak_max_z"], 2),
                    _num(row["cutoffs"]["moderate_max_z"], 2),
                    *(_band_cells(row["bands"][b]) for b in BANDS),
                    f"{row['bands']['strong']['offtopic_n']}/{row['bands']['moderate']['offtopic_n']}",
                    _pct(row["false_silence"]),
                    "met" if row["meets"] else "missed",
                ]
                for row in data["leave_one_out"]
            ],
        ),
        "",
        "## Pooled",
        "",
        *_table(
            ["cut-offs", *BANDS],
            [
                [
                    "each collection by the cut-offs fitted without it",
                    *(_band_cells(data["held_out_pooled"][b]) for b in BANDS),
                ],
                [
                    f"the seed's (weak ≤ {_num(data['seed_cutoffs']['weak_max_z'], 2)}, "
                    f"moderate ≤ {_num(data['seed_cutoffs']['moderate_max_z'], 2)}), every answer",
                    *(_band_cells(data["seed_pooled"][b]) for b in BANDS),
                ],
            ],
        ),
        "",
        *_meaning_lines(data["seed_meaning"]),
        "The highest z an off-topic answer reached above the floor: "
        + ", ".join(f"{n} {_num(z, 2)}" for n, z in data["offtopic_max_z"].items())
        + ".",
        "",
        f"Fitted on every collection: weak ≤ z {_num(cut['weak_max_z'], 2)} < moderate ≤ z "
        f"{_num(cut['moderate_max_z'], 2)} < strong (– : no such band reaches its target). "
        + ("Every target is met." if data["meets_targets"] else "Not every target is met."),
        "",
    ]
    if calibrations:
        lines += _calibration_table(calibrations)
    return "\n".join(lines)


def _meaning_lines(meaning: dict[str, dict[str, Any] | None]) -> list[str]:
    """What each band means under the seed's cut-offs, collections counted equally: the
    figures a profile's ``band_precision`` carries into every answer."""
    lines = ["What each band means by the seed's cut-offs, each collection counted equally:", ""]
    for band, m in meaning.items():
        if m is None:
            lines.append(f"* {band}: too few answers to say")
            continue
        hardest = (
            f"; lowest {_num(m['lowest'], 2)} ({m['lowest_collection']})"
            if m["lowest"] is not None
            else ""
        )
        lines.append(
            f"* {band}: top note relevant {_num(m['value'], 3)} over {m['n']} answers from "
            f"{m['collections']} collections{hardest}"
        )
    return [*lines, ""]


def _calibration_table(calibrations: dict[str, dict[str, Any]]) -> list[str]:
    """Each collection's calibration: how tight it is and the σ the labels used."""
    return [
        "## Calibrations",
        "",
        *_table(
            ["collection", "N", "σ (as used)", "σ measured", "μ", "tight", "floor"],
            [
                [
                    name,
                    _num(cal["noise_floor"]),
                    _num(cal["sigma"]),
                    _num((cal["measured"] or {}).get("sigma")),
                    _num(cal["mu"]),
                    "yes" if cal["tight"] else "no",
                    _num(cal["floor_cosine"]),
                ]
                for name, cal in calibrations.items()
            ],
        ),
        "",
    ]
