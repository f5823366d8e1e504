"""Calibration measurements, trust gates and the choice of basis for labels."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from pipeline import noisefloor as nf
from pipeline.calibrate import (
    assess,
    choose_basis,
    is_trusted,
    measure,
    note_to_note_stats,
    outdated_reasons,
    probe_noise_floor,
)
from pipeline.model import Calibration

MINILM = nf.MINILM_L6_V2.model_id


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_noise_floor_is_max_or_quantile_of_per_probe_maxima() -> None:
    notes = np.eye(4, dtype=np.float32)
    probes = unit(np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 3]], dtype=np.float32))
    per_probe = (probes @ notes.T).max(axis=1)
    assert probe_noise_floor(probes, notes, 1.0) == pytest.approx(1.0)
    assert probe_noise_floor(probes, notes, 0.5) == pytest.approx(float(np.median(per_probe)))
    assert probe_noise_floor(probes, np.zeros((0, 4), np.float32), 0.9) == 0.0


def test_note_stats_all_pairs_and_fewer_than_two_notes() -> None:
    assert note_to_note_stats(np.ones((1, 3), np.float32), 100) == (0.0, 0.0, 0)
    rng = np.random.default_rng(1)
    v = unit(rng.standard_normal((20, 8)).astype(np.float32))
    mu, sigma, pairs = note_to_note_stats(v, 10_000)
    sims = (v @ v.T)[np.triu_indices(20, 1)]
    assert pairs == 190
    assert mu == pytest.approx(float(sims.mean()), abs=1e-6)
    assert sigma == pytest.approx(float(sims.std()), abs=1e-6)


def test_note_stats_sample_large_vaults_deterministically() -> None:
    rng = np.random.default_rng(2)
    v = unit(rng.standard_normal((400, 16)).astype(np.float32))
    a = note_to_note_stats(v, 500)
    assert a == note_to_note_stats(v, 500)
    assert a[2] == 500
    full = note_to_note_stats(v, 10**6)
    assert a[0] == pytest.approx(full[0], abs=0.02)
    assert a[1] == pytest.approx(full[1], abs=0.02)


class ProbeEmbedder:
    model_id = MINILM
    dims = 4

    def embed(self, texts: list[str]) -> np.ndarray:
        assert list(texts) == list(nf.PROBES_V2)  # MiniLM calibrates with probe set 2
        return unit(np.tile(np.array([[0, 0, 1, 1]], np.float32), (len(texts), 1)))


def test_measure_uses_the_profiles_probe_set_and_records_it() -> None:
    notes = unit(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], np.float32))
    cal = measure(ProbeEmbedder(), notes, vault_notes=3, max_pairs=100)
    assert cal.probe_set_version == 2
    assert cal.noise_floor == pytest.approx(math.sqrt(0.5))
    assert (cal.n_notes, cal.n_pairs, cal.vault_notes_at_calibration) == (3, 3, 3)
    assert not is_trusted(cal)


def cal(**kw: object) -> Calibration:
    base = dict(
        embedder=MINILM,
        dims=384,
        probe_set_version=2,
        noise_floor=0.2,
        sigma=0.15,
        mu=0.3,
        n_notes=60,
        n_pairs=1770,
        vault_notes_at_calibration=60,
        measured_at=time.time(),
    )
    base.update(kw)
    return Calibration(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"embedder": "BAAI/bge-m3"}, "measured with"),
        ({"probe_set_version": 1}, "probe set"),
        ({"vault_notes_at_calibration": 40}, "drifted"),
        ({"measured_at": time.time() - 100 * 86400}, "days old"),
    ],
)
def test_outdated_reasons(changes: dict, reason: str) -> None:
    reasons = outdated_reasons(
        cal(**changes), model_id=MINILM, dims=384, vault_notes=60, max_drift=0.1, max_age_days=90
    )
    assert any(reason in r for r in reasons)


def test_current_calibration_has_no_reasons_and_missing_has_one() -> None:
    kw = dict(model_id=MINILM, dims=384, vault_notes=62, max_drift=0.1, max_age_days=90)
    assert outdated_reasons(cal(), **kw) == []
    assert outdated_reasons(None, **kw) == ["no calibration stored yet"]


def test_trusted_vault_calibration_is_used_with_profile_sigma_bounds() -> None:
    b = choose_basis(cal(sigma=0.146), MINILM, 384)
    assert b.source == "vault"
    assert b.sigma == pytest.approx(0.146)  # not clamped to the seed's 0.12
    r = assess(0.21, b)
    assert r.label == "weak" and r.floor_cosine == pytest.approx(0.2)
    assert assess(0.2, b).label == "no_match"


@pytest.mark.parametrize(
    "stored",
    [None, cal(n_notes=29), cal(n_pairs=99), cal(embedder="other/model"), cal(dims=768)],
)
def test_untrusted_or_foreign_calibration_falls_back_to_defaults(stored) -> None:
    b = choose_basis(stored, MINILM, 384)
    assert b.source == "embedder-default"
    assert b.noise_floor == nf.MINILM_L6_V2.default_n


def test_bge_m3_has_no_ceiling_and_the_seeds_margin() -> None:
    c = cal(embedder="BAAI/bge-m3", dims=1024, probe_set_version=1, noise_floor=0.5, sigma=0.07)
    b = choose_basis(c, "BAAI/bge-m3", 1024)
    assert (b.source, b.default_n, b.margin) == ("vault", None, 0.5)
    assert assess(0.464, b).label == "no_match"  # floor = 0.5 − 0.035
    assert assess(0.466, b).label == "weak"
    assert choose_basis(None, "BAAI/bge-m3", 1024).source == "none"  # no default N shipped


def test_a_label_carries_what_its_band_is_measured_to_mean_for_the_model() -> None:
    """Issue 40, item 4: the MiniLM profile's measured precision per band, on a vault's
    own calibration; none where unmeasured (weak, no_match) or not measured the same way
    (the embedder's defaults, an unprofiled model)."""
    b = choose_basis(cal(sigma=0.1, noise_floor=0.2), MINILM, 384)
    strong = assess(0.6, b)
    assert strong.label == "strong"
    assert strong.precision == nf.MINILM_L6_V2.precision_of("strong")
    assert strong.precision is not None and strong.precision.collections >= 6
    assert assess(0.4, b).label == "moderate" and assess(0.4, b).precision is not None
    assert assess(0.25, b).label == "weak" and assess(0.25, b).precision is None
    assert assess(0.1, b).precision is None  # no_match
    assert assess(0.9, choose_basis(None, MINILM, 384)).precision is None
    bge = cal(embedder="BAAI/bge-m3", dims=1024, probe_set_version=1, noise_floor=0.5, sigma=0.07)
    assert assess(0.9, choose_basis(bge, "BAAI/bge-m3", 1024)).precision is None


def test_the_tight_vault_hint_comes_with_weak_answers_only() -> None:
    basis = choose_basis(cal(mu=0.65), MINILM, 384)
    weak = assess(basis.floor_cosine + 0.01, basis)  # type: ignore[operator]
    assert weak.label == "weak" and weak.tight_vault and weak.hint and "weak" in weak.hint
    # On a strong or moderate answer it would say nothing about the answer read.
    for cosine in (0.9, 0.5):
        r = assess(cosine, basis)
        assert r.label in ("strong", "moderate") and r.tight_vault and r.hint is None
    loose = assess(basis.floor_cosine + 0.01, choose_basis(cal(mu=0.3), MINILM, 384))  # type: ignore[operator]
    assert loose.label == "weak" and not loose.tight_vault and loose.hint is None


def test_non_finite_top_cosine_is_never_strong() -> None:
    assert assess(float("nan"), choose_basis(cal(), MINILM, 384)).label == "no_match"


def test_a_pair_of_notes_is_scored_as_a_hit_its_passages_less_the_discount() -> None:
    from pipeline.graph.scoring import PASSAGE_DISCOUNT

    rng = np.random.default_rng(11)
    rows = rng.standard_normal((6, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    owners = ["a.md", "a.md", "a.md", "b.md", "c.md", "c.md"]  # own vector, then passages
    heads = {"a.md": 0, "b.md": 3, "c.md": 4}
    parts = {"a.md": [1, 2], "b.md": [], "c.md": [5]}

    def score(q: str, note: str) -> float:
        own = float(rows[heads[q]] @ rows[heads[note]])
        return max(
            [own, *(float(rows[heads[q]] @ rows[p]) - PASSAGE_DISCOUNT for p in parts[note])]
        )

    mu, sigma, pairs = note_to_note_stats(rows, 1000, owners)
    notes = ["a.md", "b.md", "c.md"]
    expected = [score(q, n) for q in notes for n in notes if q != n]  # both ways
    assert pairs == 6
    assert mu == pytest.approx(np.mean(expected), abs=1e-6)
    assert sigma == pytest.approx(np.std(expected), abs=1e-6)
    # Sampled (more pairs than max_pairs): the same rule, pairs of two different notes.
    many = [f"n{i // 3}" for i in range(300)]
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    mu_s, _, sampled = note_to_note_stats(vectors, 50, many)
    assert sampled == 50 and np.isfinite(mu_s)
    plain_mu, _, _ = note_to_note_stats(vectors[::3], 50)
    assert mu_s >= plain_mu - 0.2  # passages only ever raise a pair's score


def test_the_floor_scores_passages_less_the_discount() -> None:
    from pipeline.graph.scoring import PASSAGE_DISCOUNT

    probe = np.array([[1.0, 0.0]], dtype=np.float32)
    rows = np.array([[0.6, 0.8], [1.0, 0.0]], dtype=np.float32)  # a note and its passage
    assert probe_noise_floor(probe, rows, 1.0) == pytest.approx(1.0)
    floor = probe_noise_floor(probe, rows, 1.0, ["a.md", "a.md"])
    assert floor == pytest.approx(1.0 - PASSAGE_DISCOUNT)


def test_measure_counts_notes_not_passages() -> None:
    class Probe:
        model_id = "sentence-transformers/all-MiniLM-L6-v2"
        dims = 8

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

    rows = np.eye(8, dtype=np.float32)
    owners = ["a", "a", "b", "c", "c", "c", "d", "e"]
    cal = measure(Probe(), rows, vault_notes=5, max_pairs=1000, owners=owners)
    assert cal.n_notes == 5


def test_pairs_with_passages_are_scored_the_same_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.calibrate as calibrate

    rng = np.random.default_rng(13)
    owners = [f"n{i:02d}" for i in range(40) for _ in range(1 + i % 5)]  # 0–4 passages each
    rows = rng.standard_normal((len(owners), 8)).astype(np.float32)
    whole = note_to_note_stats(rows, 200, owners)
    monkeypatch.setattr(calibrate, "PASSAGE_CHUNK", 3)
    assert note_to_note_stats(rows, 200, owners) == pytest.approx(whole)
    every = note_to_note_stats(rows, 10_000, owners)  # all pairs, both ways
    assert every[2] == 40 * 39
