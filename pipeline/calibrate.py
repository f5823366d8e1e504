"""Calibration: measure a vault's noise floor N, note spread σ and mean μ; decide which
calibration an answer uses; label a top cosine with it.

N is measured with the probe set of the embedder's profile (the seed's maximum over its 8
probes for BGE-M3 and unknown models; the 90th percentile of 48 per-probe maxima for
MiniLM). μ and σ are the mean and standard deviation of note-to-note cosines, over every
pair on small vaults and over a seeded random sample of pairs on large ones (the sample
size is stored as n_pairs). A measurement is trusted only with at least 30 notes and 100
pairs; otherwise the embedder defaults are used, and every answer says which.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pipeline import noisefloor as nf
from pipeline.model import Band, BandPrecision, Calibration, CalibrationSource, Relevance

if TYPE_CHECKING:
    # numpy is imported where vectors are measured: labelling an answer (assess,
    # choose_basis) must stay light for --help, the fallback path and the hook.
    import numpy as np

PAIR_SAMPLE_SEED = 20260530
#: (pair, passage) entries scored at once when passages are measured (bounds the memory).
PASSAGE_CHUNK = 16_384  # fixed, so recalibrating an unchanged vault gives the same σ


class _Embedder(Protocol):
    model_id: str
    dims: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def probe_noise_floor(
    probe_vectors: np.ndarray,
    notes: np.ndarray,
    quantile: float,
    owners: Sequence[str] | None = None,
) -> float:
    """N: the chosen quantile (1.0 = max) of each probe's best score to any note, a note
    scored as a hit is (``owners``: each row's note, a long note's passages after its own
    vector; see ``graph.scoring.note_score``)."""
    if len(notes) == 0 or len(probe_vectors) == 0:
        return 0.0
    scores = probe_vectors @ notes.T
    if owners is not None:
        scores = scores - _Rows(owners).discount[None, :]
    per_probe_max = scores.max(axis=1)
    if quantile >= 1.0:
        return float(per_probe_max.max())
    import numpy as np

    return float(np.quantile(per_probe_max, quantile))


def note_to_note_stats(
    notes: np.ndarray, max_pairs: int, owners: Sequence[str] | None = None
) -> tuple[float, float, int]:
    """(μ, σ, pairs) of note-to-note scores; (0, 0, 0) for fewer than two notes.

    Without ``owners`` each row is a note and a pair's score is its cosine. With them
    (each row's note, a long note's passages after its own vector), a pair (a, b) is
    scored as a hit is: b against a's own vector taken as the question, b's passages less
    the discount (``graph.scoring.note_score``), so μ and σ are measured on the unit the
    labels compare."""
    import numpy as np

    rows = _Rows(owners if owners is not None else range(len(notes)))
    heads = notes[rows.starts]
    n = len(heads)
    if n < 2:
        return 0.0, 0.0, 0
    total = n * (n - 1) // 2
    if total <= max_pairs:
        i, j = np.triu_indices(n, k=1)
        if rows.has_passages:  # a pair scores differently each way: take both
            i, j = np.concatenate([i, j]), np.concatenate([j, i])
    else:
        rng = np.random.default_rng(PAIR_SAMPLE_SEED)
        i = rng.integers(0, n, size=max_pairs * 2)
        j = rng.integers(0, n, size=max_pairs * 2)
        keep = i != j
        i, j = i[keep][:max_pairs], j[keep][:max_pairs]
    scores = np.einsum("ij,ij->i", heads[i], heads[j])
    if rows.has_passages:
        scores = np.maximum(scores, rows.best_passage(notes, heads, i, j))
    return float(scores.mean()), float(scores.std()), len(scores)


class _Rows:
    """Where each note's rows are (``graph.scoring.RowLayout``), and the best passage of a
    pair's second note."""

    def __init__(self, owners: Sequence[str] | range) -> None:
        from pipeline.graph.scoring import RowLayout

        layout = RowLayout(owners)
        self.starts, self.ends = layout.starts, layout.ends
        self.has_passages, self.discount = layout.has_passages, layout.discount

    def best_passage(
        self, notes: np.ndarray, heads: np.ndarray, i: np.ndarray, j: np.ndarray
    ) -> np.ndarray:
        """For each pair, the best passage of note ``j`` against note ``i``'s own vector,
        less the discount (-inf for a note without passages)."""
        import numpy as np

        counts = self.ends[j] - self.starts[j] - 1  # passages of each pair's second note
        best = np.full(len(i), -np.inf)
        has = np.flatnonzero(counts > 0)
        # In chunks of about PASSAGE_CHUNK (pair, passage) entries: all at once, a vault of
        # long notes would gather pairs × passages × dims floats twice.
        ends = np.cumsum(counts[has])
        first = 0
        while first < has.size:
            last = int(np.searchsorted(ends, ends[first] - counts[has[first]] + PASSAGE_CHUNK))
            last = max(last, first + 1)
            part = has[first:last]
            pair = np.repeat(part, counts[part])  # one entry per (pair, passage)
            before = np.cumsum(counts[part]) - counts[part]
            offsets = np.arange(pair.size) - np.repeat(before, counts[part])
            row = self.starts[j[pair]] + 1 + offsets
            dots = np.einsum("ij,ij->i", heads[i[pair]], notes[row]) - self.discount[row]
            np.maximum.at(best, pair, dots)
            first = last
        return best


def measure(
    embedder: _Embedder,
    note_vectors: np.ndarray,
    *,
    vault_notes: int,
    max_pairs: int,
    owners: Sequence[str] | None = None,
) -> Calibration:
    """Measure N, μ, σ for the vectors of a vault's notes (``owners``: each row's note, when
    long notes have a row per passage; N and μ, σ are then measured on passages, the unit
    hits are scored by, and ``n_notes`` counts notes)."""
    profile = nf.profile_for(embedder.model_id)
    version = profile.probe_set_version if profile else nf.PROBE_SET_VERSION
    quantile = profile.n_quantile if profile else 1.0
    probes = embedder.embed(list(nf.PROBE_SETS[version]))
    import numpy as np

    notes = np.asarray(note_vectors, dtype=np.float32)
    n_floor = probe_noise_floor(probes, notes, quantile, owners)
    mu, sigma, pairs = note_to_note_stats(notes, max_pairs, owners)
    return Calibration(
        embedder=embedder.model_id,
        dims=embedder.dims,
        probe_set_version=version,
        noise_floor=n_floor,
        sigma=sigma,
        mu=mu,
        n_notes=len(_Rows(owners).starts) if owners is not None else len(notes),
        n_pairs=pairs,
        vault_notes_at_calibration=vault_notes,
        measured_at=time.time(),
    )


def is_trusted(cal: Calibration) -> bool:
    """The seed's gate: a floor measured on a handful of notes is noise."""
    return cal.n_notes >= nf.MIN_CALIB_NOTES and cal.n_pairs >= nf.MIN_CALIB_PAIRS


def outdated_reasons(
    cal: Calibration | None,
    *,
    model_id: str,
    dims: int,
    vault_notes: int,
    max_drift: float,
    max_age_days: float,
    now: float | None = None,
) -> list[str]:
    """Why a stored calibration no longer describes the vault (empty list: it does)."""
    if cal is None:
        return ["no calibration stored yet"]
    reasons = []
    profile = nf.profile_for(model_id)
    version = profile.probe_set_version if profile else nf.PROBE_SET_VERSION
    if cal.embedder != model_id or cal.dims != dims:
        reasons.append(f"measured with {cal.embedder} ({cal.dims}d), vault uses {model_id}")
    if cal.probe_set_version != version:
        reasons.append(f"probe set {cal.probe_set_version} is not the current {version}")
    base = max(cal.vault_notes_at_calibration, 1)
    drift = abs(vault_notes - cal.vault_notes_at_calibration) / base
    if drift > max_drift:
        reasons.append(
            f"note count drifted {drift:.0%} ({cal.vault_notes_at_calibration} -> {vault_notes})"
        )
    age_days = ((now or time.time()) - cal.measured_at) / 86400
    if age_days > max_age_days:
        reasons.append(f"{age_days:.0f} days old (limit {max_age_days:g})")
    return reasons


@dataclass(frozen=True)
class Basis:
    """The numbers a label is computed from, and where they came from."""

    source: CalibrationSource
    noise_floor: float | None
    sigma: float | None
    mu: float
    default_n: float | None
    margin: float
    warning: str | None
    #: What each band is measured to mean (the model's profile; only for a vault's own
    #: calibration, the basis it was measured on).
    precision: tuple[tuple[str, BandPrecision], ...] = ()

    @property
    def floor_cosine(self) -> float | None:
        """The no_match cut-off these numbers give (None when there is nothing to judge by)."""
        if self.noise_floor is None or self.sigma is None:
            return None
        return nf.floor_cosine(self.noise_floor, self.sigma, self.default_n, self.margin)


def choose_basis(cal: Calibration | None, model_id: str, dims: int) -> Basis:
    """A trusted, current vault calibration, else the embedder's defaults, else nothing."""
    profile = nf.profile_for(model_id)
    floor_lo = profile.sigma_floor if profile else nf.SIGMA_FLOOR
    ceil = profile.sigma_ceil if profile else nf.SIGMA_CEIL
    margin = profile.floor_sigma_margin if profile else nf.FLOOR_SIGMA_MARGIN
    version = profile.probe_set_version if profile else nf.PROBE_SET_VERSION
    default_n = profile.default_n if profile else None
    usable = (
        cal is not None
        and cal.embedder == model_id
        and cal.dims == dims
        and cal.probe_set_version == version
    )
    if cal is not None and usable and is_trusted(cal):
        return Basis(
            "vault",
            cal.noise_floor,
            nf.clamp_sigma(cal.sigma, floor_lo, ceil),
            cal.mu,
            default_n,
            margin,
            None,
            profile.band_precision if profile else (),
        )
    why = (
        "no usable vault calibration"
        if cal is None or not usable
        else f"vault calibration untrusted ({cal.n_notes} notes, {cal.n_pairs} pairs)"
    )
    if default_n is not None:
        sigma = nf.clamp_sigma(nf.default_dispersion(model_id), floor_lo, ceil)
        return Basis("embedder-default", default_n, sigma, 0.0, default_n, margin, None)
    return Basis(
        "none",
        None,
        None,
        0.0,
        None,
        margin,
        f"{why} and no default noise floor for {model_id}: no_match is disabled, so "
        "off-topic questions are not silenced; run `vault-ko calibrate` on a vault of "
        f"at least {nf.MIN_CALIB_NOTES} notes",
    )


TIGHT_HINT = (
    "tight vault: its notes are very alike, so 'weak' may be the best available correct match"
)


def band_of(cosine: float, basis: Basis) -> Band | None:
    """The answer label's z-band of one cosine (a subject's relevance); None when there is
    no calibration to judge by or the cosine is at or below the floor."""
    if basis.noise_floor is None or basis.sigma is None:
        return None
    label = nf.relevance(cosine, basis.noise_floor, basis.sigma, basis.default_n, basis.margin)
    return label.label if label.label in (nf.STRONG, nf.MODERATE, nf.WEAK) else None  # type: ignore[return-value]


def assess(top_cosine: float | None, basis: Basis) -> Relevance:
    """The relevance block of an answer for the best hit's cosine. The tight-vault hint is
    about weak answers, so only a weak answer carries it (``tight_vault`` says it always)."""
    tight = nf.is_tight_vault(basis.mu)
    if top_cosine is None:
        return Relevance(
            "no_match",
            None,
            None,
            basis.noise_floor,
            basis.sigma,
            None,
            basis.source,
            tight,
            None,
            basis.warning or "the graph returned no notes",
        )
    if basis.noise_floor is None or basis.sigma is None:
        return Relevance(
            "unscored",
            top_cosine,
            None,
            None,
            None,
            None,
            basis.source,
            tight,
            None,
            basis.warning,
        )
    v = nf.relevance(top_cosine, basis.noise_floor, basis.sigma, basis.default_n, basis.margin)
    z = v.z if v.z is not None and math.isfinite(v.z) else None
    return Relevance(
        v.label,  # type: ignore[arg-type]
        top_cosine,
        z,
        basis.noise_floor,
        basis.sigma,
        v.floor_cosine,
        basis.source,
        tight,
        TIGHT_HINT if tight and v.label == nf.WEAK else None,
        basis.warning,
        dict(basis.precision).get(v.label),
    )


class _Graph(Protocol):
    def all_vectors(self) -> tuple[list, np.ndarray]: ...


class _Kodb(Protocol):
    def notes(self) -> dict: ...

    def save_calibration(self, cal: Calibration) -> None: ...


def calibrate_vault(
    kodb: _Kodb, graph: _Graph, embedder: _Embedder, *, max_pairs: int
) -> Calibration:
    """Measure the vault's embedded notes (current model only) and store the result."""
    states, matrix = graph.all_vectors()
    keep = [
        i for i, s in enumerate(states) if s.model == embedder.model_id and s.dims == embedder.dims
    ]
    import numpy as np

    vectors = matrix[keep] if len(keep) else np.zeros((0, embedder.dims), dtype=np.float32)
    owners = [states[i].path for i in keep]
    cal = measure(
        embedder, vectors, vault_notes=len(kodb.notes()), max_pairs=max_pairs, owners=owners
    )
    kodb.save_calibration(cal)
    return cal
