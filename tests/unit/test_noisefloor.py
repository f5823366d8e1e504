"""The seed's noise-floor method, edge by edge."""

from __future__ import annotations

import math

import pytest

from pipeline import noisefloor as nf


@pytest.mark.parametrize(
    ("sigma", "expected"),
    [
        (math.nan, nf.SIGMA_FLOOR),
        (math.inf, nf.SIGMA_FLOOR),
        (-math.inf, nf.SIGMA_FLOOR),
        (0.0, nf.SIGMA_FLOOR),
        (-0.05, nf.SIGMA_FLOOR),
        (0.001, nf.SIGMA_FLOOR),
        (0.03, 0.03),
        (0.072, 0.072),
        (0.12, 0.12),
        (0.5, nf.SIGMA_CEIL),
    ],
)
def test_clamp_sigma_bounds_and_garbage(sigma: float, expected: float) -> None:
    assert nf.clamp_sigma(sigma) == pytest.approx(expected)


def test_clamp_sigma_uses_profile_bounds() -> None:
    p = nf.MINILM_L6_V2
    assert nf.clamp_sigma(0.146, p.sigma_floor, p.sigma_ceil) == pytest.approx(0.146)
    assert nf.clamp_sigma(0.146) == pytest.approx(nf.SIGMA_CEIL)


# N = 0.40, σ = 0.10, no ceiling: floor = 0.35; weak up to 0.50, moderate up to 0.65.
@pytest.mark.parametrize(
    ("top", "label"),
    [
        (0.20, "no_match"),
        (0.35, "no_match"),  # at the floor is indistinguishable from off-topic
        (0.3501, "weak"),
        (0.40, "weak"),
        (0.50, "weak"),  # z = 1.0 exactly is still weak
        (0.5001, "moderate"),
        (0.65, "moderate"),  # z = 2.5 exactly is still moderate
        (0.6501, "strong"),
        (0.99, "strong"),
    ],
)
def test_relevance_band_edges(top: float, label: str) -> None:
    v = nf.relevance(top, 0.40, 0.10, None)
    assert v.label == label
    assert v.floor_cosine == pytest.approx(0.35)
    assert v.z == pytest.approx((top - 0.40) / 0.10)


@pytest.mark.parametrize(
    ("top", "n", "sigma"),
    [
        (math.nan, 0.3, 0.1),
        (math.inf, 0.3, 0.1),
        (0.9, math.nan, 0.1),
        (0.9, 0.3, math.nan),
        (0.9, 0.3, 0.0),
        (0.9, -math.inf, 0.1),
    ],
)
def test_relevance_non_finite_never_strong(top: float, n: float, sigma: float) -> None:
    v = nf.relevance(top, n, sigma, 0.5)
    assert v.label == "no_match"
    assert v.z is None


def test_relevance_ceiling_only_relaxes_the_floor() -> None:
    # A tight vault measured N = 0.70: its own floor would be 0.65, the ceiling 0.42 wins.
    tight = nf.relevance(0.50, 0.70, 0.10, 0.42)
    assert tight.floor_cosine == pytest.approx(0.42)
    assert tight.label == "weak"  # z is negative, but the cosine clears the relaxed floor
    # A low-N vault keeps its own, lower floor: the ceiling never raises it.
    low = nf.relevance(0.20, 0.16, 0.10, 0.42)
    assert low.floor_cosine == pytest.approx(0.11)
    assert low.label == "weak"


def test_relevance_margin_is_the_seeds_half_sigma_by_default() -> None:
    assert nf.relevance(0.36, 0.40, 0.10, None).floor_cosine == pytest.approx(0.35)
    assert nf.relevance(0.36, 0.40, 0.10, None, margin=0.0).label == "no_match"


@pytest.mark.parametrize(
    ("mu", "tight"),
    [(0.0, False), (-0.2, False), (math.nan, False), (0.51, False), (0.58, False), (0.62, True)],
)
def test_is_tight_vault(mu: float, tight: bool) -> None:
    assert nf.is_tight_vault(mu) is tight


def test_seed_probe_set_is_verbatim_and_v2_is_ours() -> None:
    assert len(nf.PROBES_V1) == 8
    assert nf.PROBES_V1[4] == "instructions for assembling flat-pack furniture"
    assert len(nf.PROBES_V2) == 48
    assert len(set(nf.PROBES_V2)) == 48
    assert not set(nf.PROBES_V1) & set(nf.PROBES_V2)


@pytest.mark.parametrize("word", ["software", "code", "database", "server", "api", "wiki", "note"])
def test_probe_set_v2_avoids_knowledge_work(word: str) -> None:
    assert not [p for p in nf.PROBES_V2 if word in p.split()]


def test_profiles_are_keyed_by_model_not_dims() -> None:
    assert nf.profile_for("sentence-transformers/all-MiniLM-L6-v2") is nf.MINILM_L6_V2
    assert nf.profile_for("BAAI/BGE-M3") is nf.BGE_M3
    assert nf.profile_for("sentence-transformers/paraphrase-MiniLM-L3-v2") is None  # also 384-d


def test_unknown_embedder_defaults() -> None:
    assert nf.default_noise_floor("someone/unknown-model") is None
    assert nf.default_dispersion("someone/unknown-model") == 0.0
    assert nf.clamp_sigma(nf.default_dispersion("someone/unknown-model")) == nf.SIGMA_FLOOR
    assert nf.default_noise_floor("BAAI/bge-m3") is None  # the seed ships no N for it
    assert nf.default_dispersion("BAAI/bge-m3") == pytest.approx(0.072)


@pytest.mark.parametrize(
    ("n", "sigma", "default_n", "margin", "floor"),
    [
        (0.40, 0.10, None, 0.5, 0.35),
        (0.40, 0.10, 0.30, 0.5, 0.30),  # the ceiling relaxes
        (0.20, 0.10, 0.42, 0.5, 0.15),  # and never raises
        (0.19, 0.135, 0.42, 0.0, 0.19),  # MiniLM: floor at N
    ],
)
def test_floor_cosine(
    n: float, sigma: float, default_n: float | None, margin: float, floor: float
) -> None:
    assert nf.floor_cosine(n, sigma, default_n, margin) == pytest.approx(floor)
