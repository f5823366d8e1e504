"""Fitting the band cut-offs and measuring them on a collection left out
(pipeline/evaluate/bands.py)."""

from __future__ import annotations

import math

import pytest

from pipeline.evaluate.bands import (
    MIN_BAND_ANSWERS,
    SEED,
    Cutoffs,
    Point,
    band_meaning,
    band_table,
    fit,
    leave_one_out,
)


def pts(collection: str, zs: list[float], relevant: list[bool]) -> list[Point]:
    return [
        Point(collection, z, False, "weak", relevant=r, answering=r)
        for z, r in zip(zs, relevant, strict=True)
    ]


def ladder(collection: str) -> list[Point]:
    """Relevant above z 2.2; three in four relevant in (1.0, 2.2]; none under."""
    zs = [0.5, 1.0, 1.5, 1.8, 2.0, 2.2, 2.5, 3.0, 3.5, 4.0]
    relevant = [False, False, True, True, True, False, True, True, True, True]
    return pts(collection, zs, relevant)


def test_the_cutoffs_are_the_lowest_that_keep_each_bands_promise() -> None:
    """Strong: above 2.2 all four are relevant, above 2.0 four of five (0.8 < 0.9).
    Moderate under 2.2: above 1.0 three of four (≥ 0.7), above 0.5 three of five."""
    assert fit(ladder("a"), min_n=2) == Cutoffs(1.0, 2.2)
    # With five answers needed, strong would reach down to 2.0 and miss its promise: it
    # stays shut, and moderate holds every answer (seven of ten relevant).
    assert fit(ladder("a"), min_n=5) == Cutoffs(-math.inf, math.inf)


def test_every_answer_above_the_floor_may_be_strong() -> None:
    points = pts("a", [0.5, 0.7, 0.9], [True, True, True])
    assert fit(points, min_n=3) == Cutoffs(-math.inf, -math.inf)


def test_no_cutoff_keeping_the_promise_leaves_the_band_empty() -> None:
    """Every answer relevant one time in two: no strong or moderate band can be promised."""
    points = pts("a", [0.1 * i for i in range(1, 41)], [i % 2 == 0 for i in range(40)])
    cut = fit(points)
    assert math.isinf(cut.moderate_max_z) and math.isinf(cut.weak_max_z)
    assert band_table(points, cut)["strong"]["n"] == 0
    assert band_table(points, cut)["weak"]["n"] == 40


def test_a_band_needs_enough_answers_to_be_promised() -> None:
    points = pts("a", [5.0] * (MIN_BAND_ANSWERS - 1) + [0.5] * 20, [True] * 29)
    assert math.isinf(fit(points).moderate_max_z)


def test_collections_count_equally_in_a_fit() -> None:
    """A big collection whose high-z answers are all relevant does not outvote a small one
    whose are not: macro precision 0.5 keeps the strong band shut."""
    big = pts("big", [3.0] * 90, [True] * 90)
    small = pts("small", [3.0] * 10, [False] * 10)
    assert fit(big + small, min_n=5).moderate_max_z == math.inf
    assert fit(big, min_n=5).moderate_max_z == -math.inf


def test_silenced_and_offtopic_answers_are_not_fitted_but_counted() -> None:
    points = [
        *ladder("a") * 2,
        Point("a", 9.0, True, "no_match", relevant=False),
        Point("a", 9.0, False, "strong", on_topic=False),
    ]
    assert fit(points, min_n=2) == fit(ladder("a") * 2, min_n=2) == Cutoffs(1.0, 2.2)
    table = band_table(points, fit(points, min_n=2))
    assert leave_one_out({"a": points, "b": ladder("b")}).offtopic_max_z["a"] == 9.0
    assert table["no_match"]["n"] == 1
    assert table["strong"]["offtopic_n"] == 1


def test_labels_band_the_answers_when_no_cutoffs_are_given() -> None:
    points = [Point("a", 0.2, False, "moderate", relevant=True)]
    assert band_table(points, None)["moderate"]["n"] == 1
    assert band_table(points, SEED)["weak"]["n"] == 1  # z 0.2 ≤ the seed's 1.0


def test_leave_one_out_fits_without_the_collection_it_measures() -> None:
    by = {"a": ladder("a") * 2, "b": ladder("b") * 2, "c": pts("c", [4.0] * 12, [False] * 12)}
    result = leave_one_out(by)
    folds = {f.held_out: f for f in result.folds}
    # Held out, c's strong answers are all wrong: the promise is broken there.
    assert folds["c"].cutoffs == fit(by["a"] + by["b"])
    assert folds["c"].bands["strong"]["precision_relevant"] == 0.0
    assert not folds["c"].meets and not result.meets_targets
    # Fitted with c, no strong band keeps its promise (c's strong answers are all wrong,
    # and collections count equally): a's and b's held-out answers have none.
    assert folds["a"].cutoffs.moderate_max_z == math.inf
    pooled = result.held_out["strong"]
    assert (pooled["n"], pooled["collections"]) == (12, 1)
    data = result.to_dict()
    assert data["leave_one_out"][2]["held_out"] == "c"
    assert data["offtopic_max_z"] == {"a": None, "b": None, "c": None}
    assert set(data["bands_by_collection"]) == {"a", "b", "c"}


def test_a_fit_needs_two_collections() -> None:
    with pytest.raises(ValueError, match="two collections"):
        leave_one_out({"a": ladder("a")})


def test_cutoffs_band_by_z_and_the_floor() -> None:
    cut = Cutoffs(1.0, 2.5)
    assert cut.band(Point("a", 0.5, False, "")) == "weak"
    assert cut.band(Point("a", 2.5, False, "")) == "moderate"
    assert cut.band(Point("a", 2.6, False, "")) == "strong"
    assert cut.band(Point("a", 9.0, True, "")) == "no_match"
    assert cut.band(Point("a", None, False, "")) == "no_match"
    assert Cutoffs(1.0, math.inf).to_dict() == {"weak_max_z": 1.0, "moderate_max_z": None}


def test_a_bands_meaning_counts_collections_equally_and_names_the_hardest() -> None:
    """Strong (z > 2.5): "a" 12 of 12 relevant, "b" 3 of 12, "c" 1 of 2 (too few to be
    the hardest). Moderate: 4 answers in all, too few to say."""
    by = {
        "a": pts("a", [3.0] * 12 + [2.0] * 2, [True] * 12 + [False] * 2),
        "b": pts("b", [3.0] * 12 + [2.0] * 2, [True] * 3 + [False] * 9 + [True] * 2),
        "c": pts("c", [3.0, 3.0], [True, False]),
    }
    meaning = band_meaning(by, SEED)
    strong = meaning["strong"]
    assert strong is not None
    assert strong["value"] == pytest.approx((1.0 + 0.25 + 0.5) / 3)
    assert (strong["n"], strong["collections"]) == (26, 3)
    assert (strong["lowest"], strong["lowest_collection"]) == (0.25, "b")
    assert meaning["moderate"] is None and meaning["weak"] is None


def test_a_band_without_a_collection_of_enough_answers_has_no_lowest() -> None:
    by = {name: pts(name, [3.0] * 6, [True] * 5 + [False]) for name in ("a", "b")}
    strong = band_meaning(by, SEED)["strong"]
    assert strong is not None and strong["lowest"] is None and strong["n"] == 12


def test_a_fit_reports_the_seeds_meaning_of_each_band() -> None:
    fitted = leave_one_out({"a": ladder("a"), "b": ladder("b")}).to_dict()
    assert fitted["seed_meaning"] == band_meaning({"a": ladder("a"), "b": ladder("b")}, SEED)
