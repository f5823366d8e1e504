"""Earning the bands: z cut-offs above the noise floor, fitted on judged collections and
measured on a collection left out (``vault-ko eval --fit-bands``).

The floor (``no_match``) is the seed's validated part and is not refitted: an answer at or
under it stays silent whatever the cut-offs. Above it, an answer's ``z`` is banded weak /
moderate / strong at two cut-offs, the seed's 1.0 and 2.5 until measured. A fit chooses
them so that each band keeps a promise about the answer's top note:

* strong: the lowest cut-off above which at least ``STRONG_TARGET`` of the answers lead with
  a note judged relevant;
* moderate: under the strong cut-off, the lowest one above which at least
  ``MODERATE_TARGET`` do;
* the rest above the floor is weak.

Collections count equally (each its own precision, averaged), so a collection of 225
questions does not outvote one of 25; a band needs ``MIN_BAND_ANSWERS`` answers before its
precision is trusted. Leave-one-collection-out: the cut-offs are fitted on all but one
collection and the left-out one's answers are banded by them, for each collection in turn;
the pooled held-out precision of a band is what the band is measured to mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline import noisefloor as nf

STRONG_TARGET = 0.90
MODERATE_TARGET = 0.70
#: Fewer answers than this in a band make its precision a guess: a cut-off giving fewer is
#: not chosen.
MIN_BAND_ANSWERS = 10
ABOVE_FLOOR = (nf.STRONG, nf.MODERATE, nf.WEAK)
BANDS = (*ABOVE_FLOOR, nf.NO_MATCH)


@dataclass(frozen=True)
class Point:
    """One answer of a collection: its ``z``, whether the floor silenced it, and (on-topic
    answers) whether its top note is judged relevant, answering, and whether an answering
    subject is in its top three (None: the collection judges no subjects)."""

    collection: str
    z: float | None
    silenced: bool
    label: str  # as the answer was labelled (the profile's cut-offs of the run)
    on_topic: bool = True
    relevant: bool = False
    answering: bool = False
    top3: bool | None = None


@dataclass(frozen=True)
class Cutoffs:
    """``weak_max_z`` < z ≤ ``moderate_max_z`` is moderate, above it strong (infinite: no
    strong band)."""

    weak_max_z: float
    moderate_max_z: float

    def band(self, point: Point) -> str:
        if point.silenced or point.z is None or not math.isfinite(point.z):
            return nf.NO_MATCH
        if point.z <= self.weak_max_z:
            return nf.WEAK
        if point.z <= self.moderate_max_z:
            return nf.MODERATE
        return nf.STRONG

    def to_dict(self) -> dict[str, float | None]:
        def finite(v: float) -> float | None:
            return round(v, 4) if math.isfinite(v) else None

        return {
            "weak_max_z": finite(self.weak_max_z),
            "moderate_max_z": finite(self.moderate_max_z),
        }


SEED = Cutoffs(nf.WEAK_MAX_Z, nf.MODERATE_MAX_Z)


def _macro_precision(points: Sequence[Point]) -> float | None:
    """The mean over collections of the share of ``points`` whose top note is relevant."""
    by: dict[str, list[bool]] = {}
    for p in points:
        by.setdefault(p.collection, []).append(p.relevant)
    if not by:
        return None
    return sum(sum(v) / len(v) for v in by.values()) / len(by)


def _lowest_cut(points: Sequence[Point], upper: float, target: float, min_n: int) -> float | None:
    """The lowest cut-off t (below every point, else a point's z) under ``upper`` such
    that the points with t < z ≤ upper number ``min_n`` or more and reach ``target``
    precision; None if none."""
    zs = sorted({p.z for p in points if p.z is not None and p.z < upper})
    for t in (-math.inf, *zs):
        inside = [p for p in points if p.z is not None and t < p.z <= upper]
        if len(inside) < min_n:
            break  # higher cut-offs hold fewer still
        precision = _macro_precision(inside)
        if precision is not None and precision >= target:
            return t
    return None


def fit(
    points: Sequence[Point],
    *,
    strong: float = STRONG_TARGET,
    moderate: float = MODERATE_TARGET,
    min_n: int = MIN_BAND_ANSWERS,
) -> Cutoffs:
    """The cut-offs of ``points`` (on-topic answers above the floor; others are ignored)."""
    live = [
        p
        for p in points
        if p.on_topic and not p.silenced and p.z is not None and math.isfinite(p.z)
    ]
    top = _lowest_cut(live, math.inf, strong, min_n)
    moderate_max = math.inf if top is None else top
    low = _lowest_cut(live, moderate_max, moderate, min_n)
    return Cutoffs(moderate_max if low is None else low, moderate_max)


def band_table(points: Sequence[Point], cutoffs: Cutoffs | None) -> dict[str, dict[str, Any]]:
    """``EvalReport.bands``' figures for ``points`` banded by ``cutoffs`` (None: by the
    labels the answers carried)."""
    return _table([(p, cutoffs) for p in points])


def _band(point: Point, cutoffs: Cutoffs | None) -> str:
    return point.label if cutoffs is None else cutoffs.band(point)


def _table(banded: Sequence[tuple[Point, Cutoffs | None]]) -> dict[str, dict[str, Any]]:
    """Per band, of the answers each banded by its own cut-offs: the on-topic ones' count
    and top-note shares (pooled over answers), the collections they came from, and the
    off-topic answers that landed there."""
    out: dict[str, dict[str, Any]] = {}
    for band in BANDS:
        inside = [p for p, c in banded if _band(p, c) == band]
        on = [p for p in inside if p.on_topic]
        judged3 = [p.top3 for p in on if p.top3 is not None]
        n = len(on)
        out[band] = {
            "n": n,
            "precision_relevant": sum(p.relevant for p in on) / n if n else None,
            "precision_answering": sum(p.answering for p in on) / n if n else None,
            "top3_answering": sum(judged3) / len(judged3) if judged3 else None,
            "offtopic_n": len(inside) - n,
            "collections": len({p.collection for p in on}),
        }
    return out


def false_silence(points: Sequence[Point]) -> float | None:
    on = [p for p in points if p.on_topic]
    return sum(p.silenced for p in on) / len(on) if on else None


@dataclass(frozen=True)
class Fold:
    """One collection left out: the cut-offs fitted without it, and its bands by them."""

    held_out: str
    cutoffs: Cutoffs
    bands: Mapping[str, Mapping[str, Any]]
    false_silence: float | None
    meets: bool  # strong and moderate reach their targets on the held-out collection


@dataclass(frozen=True)
class BandFit:
    """A leave-one-collection-out fit, and the cut-offs fitted on every collection."""

    collections: tuple[str, ...]
    folds: tuple[Fold, ...]
    cutoffs: Cutoffs  # fitted on all collections: the ones to ship
    held_out: Mapping[str, Mapping[str, Any]]  # every fold's held-out answers, pooled
    seed: Mapping[str, Mapping[str, Any]]  # the seed's cut-offs on every answer, pooled
    #: What each band means under the seed's cut-offs, collections counted equally: what a
    #: profile's ``band_precision`` is set from (see ``band_meaning``).
    seed_meaning: Mapping[str, Mapping[str, Any] | None]
    per_collection: Mapping[str, Mapping[str, Mapping[str, Any]]]  # by the final cut-offs
    false_silence: Mapping[str, float | None]
    #: The highest z an off-topic answer reached above the floor, per collection (None:
    #: none did): where the weak band must reach for moderate to mean "on topic".
    offtopic_max_z: Mapping[str, float | None]

    @property
    def meets_targets(self) -> bool:
        worst = max((v for v in self.false_silence.values() if v is not None), default=0.0)
        return all(f.meets for f in self.folds) and worst <= 0.01

    def to_dict(self) -> dict[str, Any]:
        return {
            "collections": list(self.collections),
            "targets": {
                "strong_precision_relevant": STRONG_TARGET,
                "moderate_precision_relevant": MODERATE_TARGET,
                "false_silence": 0.01,
                "min_band_answers": MIN_BAND_ANSWERS,
            },
            "cutoffs": self.cutoffs.to_dict(),
            "seed_cutoffs": SEED.to_dict(),
            "meets_targets": self.meets_targets,
            "leave_one_out": [
                {
                    "held_out": f.held_out,
                    "cutoffs": f.cutoffs.to_dict(),
                    "bands": f.bands,
                    "false_silence": f.false_silence,
                    "meets": f.meets,
                }
                for f in self.folds
            ],
            "held_out_pooled": self.held_out,
            "seed_pooled": self.seed,
            "seed_meaning": dict(self.seed_meaning),
            "bands_by_collection": self.per_collection,
            "false_silence": dict(self.false_silence),
            "offtopic_max_z": dict(self.offtopic_max_z),
        }


def _meets(bands: Mapping[str, Mapping[str, Any]]) -> bool:
    """Strong and moderate reach their targets (an empty band promises nothing, so it
    breaks no promise)."""
    for band, target in ((nf.STRONG, STRONG_TARGET), (nf.MODERATE, MODERATE_TARGET)):
        value = bands[band]["precision_relevant"]
        if value is not None and value < target:
            return False
    return True


def leave_one_out(by_collection: Mapping[str, Sequence[Point]]) -> BandFit:
    """Fit on all collections but one and band the one left out, for each in turn."""
    names = tuple(by_collection)
    if len(names) < 2:
        raise ValueError("a leave-one-collection-out fit needs two collections or more")
    folds: list[Fold] = []
    held: list[tuple[Point, Cutoffs]] = []
    for name in names:
        train = [p for other in names if other != name for p in by_collection[other]]
        cutoffs = fit(train)
        test = list(by_collection[name])
        bands = band_table(test, cutoffs)
        folds.append(Fold(name, cutoffs, bands, false_silence(test), _meets(bands)))
        held.extend((p, cutoffs) for p in test)
    everything = [p for name in names for p in by_collection[name]]
    final = fit(everything)
    return BandFit(
        collections=names,
        folds=tuple(folds),
        cutoffs=final,
        held_out=_table(held),
        seed=band_table(everything, SEED),
        seed_meaning=band_meaning(by_collection, SEED),
        per_collection={n: band_table(by_collection[n], final) for n in names},
        false_silence={n: false_silence(by_collection[n]) for n in names},
        offtopic_max_z={n: offtopic_max_z(by_collection[n]) for n in names},
    )


def offtopic_max_z(points: Sequence[Point]) -> float | None:
    """The highest z of an off-topic answer above the floor (None: none was)."""
    zs = [p.z for p in points if not p.on_topic and not p.silenced and p.z is not None]
    return max(zs, default=None)


def band_meaning(
    by_collection: Mapping[str, Sequence[Point]], cutoffs: Cutoffs, min_n: int = MIN_BAND_ANSWERS
) -> dict[str, dict[str, Any] | None]:
    """Per band above the floor, what it is measured to mean: ``value``, the mean over
    collections of the share of on-topic answers in the band whose top note is relevant;
    ``n`` answers from ``collections`` collections; ``lowest``, the least of those shares
    among collections holding ``min_n`` answers or more in the band (None: none does), and
    ``lowest_collection`` its name. None for a band of fewer than ``min_n`` answers in all,
    whose precision would be a guess."""
    out: dict[str, dict[str, Any] | None] = {}
    for band in ABOVE_FLOOR:
        shares: dict[str, tuple[float, int]] = {}
        for name, points in by_collection.items():
            inside = [p for p in points if p.on_topic and cutoffs.band(p) == band]
            if inside:
                shares[name] = (sum(p.relevant for p in inside) / len(inside), len(inside))
        n = sum(k for _, k in shares.values())
        if n < min_n:
            out[band] = None
            continue
        enough = {name: v for name, (v, k) in shares.items() if k >= min_n}
        hardest = min(enough, key=enough.__getitem__) if enough else None
        out[band] = {
            "value": sum(v for v, _ in shares.values()) / len(shares),
            "n": n,
            "collections": len(shares),
            "lowest": enough[hardest] if hardest is not None else None,
            "lowest_collection": hardest,
        }
    return out
