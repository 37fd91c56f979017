"""Attainable p: a rule whose null or exact test cannot reach alpha even in its best case gives "not
comparable" with that smallest p in the reason, whatever the data; at or below alpha the data decide.
Every boundary is worked by hand: a sign-flip test on n values reaches 2/2ⁿ at best, Spearman's exact
test on n untied points 2/n!, an enumerated null of n values 1/n, n Monte Carlo draws 1/(n + 1), one
of the paper's layers among n exchangeable ones 1/n, a top-k rank among n exchangeable layers k/n."""

from __future__ import annotations

import numpy as np
import pytest

from anatomy_kit import stats
from anatomy_kit.verdicts import rules as R
from anatomy_kit.verdicts.decision import sign_flip_floor, unattainable
from anatomy_kit.validate import AnatomyKitError

NEG = {"value": "negative"}
ALL_BELOW = [-1.0, -1.2, -1.4, -1.6, -1.8, -2.0, -2.2]      # every seed on the claimed side


def test_the_floors_by_hand():
    assert sign_flip_floor(3) == 0.25 and sign_flip_floor(5) == 1 / 16 and sign_flip_floor(6) == 1 / 32
    assert unattainable(0.05, 0.05, "x") is None and unattainable(0.049, 0.05, "x") is None
    d = unattainable(0.0625, 0.05, "sign-flip test on n = 5")
    assert d.verdict == "not comparable" and "0.0625 > α = 0.05" in d.reason
    with pytest.raises(AnatomyKitError, match="probability"):
        unattainable(0.0, 0.05, "x")


@pytest.mark.parametrize("n, confidence, expected", [
    (5, 0.95, "not comparable"),          # 1/16 = 0.0625 above 0.05
    (6, 0.95, "reproduced"),              # 1/32 below 0.05
    (6, 1 - 1 / 32, "reproduced"),        # equal: 1/32 reaches alpha = 1/32
    (6, 1 - 0.031, "not comparable"),     # 1/32 = 0.03125 just above alpha = 0.031
    (3, 0.95, "not comparable"),          # 1/4: the three-seed TLM comparison
])
def test_sign_flip_floor_against_alpha(n, confidence, expected):
    d = R.DifferenceSign("negative", method="sign-flip", confidence=confidence).decide(ALL_BELOW[:n], NEG)
    assert d.verdict == expected
    assert (f"smallest attainable sign-flip p {sign_flip_floor(n):.4g}" in d.reason) == (expected == "not comparable")


def test_a_sign_flip_interval_passed_in_is_judged_by_its_own_n():
    few = stats.sign_flip_interval([-1.0, -2.0, -3.0])
    assert R.IntervalBelow(0.0).decide(few, NEG).verdict == "not comparable"
    # the claim of no difference is no longer met by an interval that cannot exclude anything
    assert R.IntervalContains(method="sign-flip").decide([1.0, 2.0, 3.0], NEG).verdict == "not comparable"
    assert R.IntervalContains(method="sign-flip").decide([1.0, -2.0, 3.0, -1.0, 2.0, -3.0], NEG).verdict == \
        "reproduced"
    # a t interval has no such floor: three seeds decide (the chapters no longer judge seeds by it)
    assert R.DifferenceSign("negative", method="t").decide([-1.0, -1.1, -0.9], NEG).verdict == "reproduced"


def test_one_part_unattainable_beside_a_reproduced_part_is_partly():
    rule = R.AllOf({"six": R.DifferenceSign("negative", method="sign-flip"),
                    "three": R.DifferenceSign("negative", method="sign-flip")})
    d = rule.decide({"six": ALL_BELOW[:6], "three": ALL_BELOW[:3]}, NEG)
    assert d.verdict == "partly reproduced" and "three: not comparable" in d.reason


@pytest.mark.parametrize("alpha, expected", [(2 / 24, "reproduced"), (0.08, "not comparable"),
                                             (0.1, "reproduced")])
def test_spearman_exact_floor_two_over_n_factorial(alpha, expected):
    r = stats.spearman(range(4), range(4))                 # perfect order: p = 2/4! = 1/12, the floor
    assert R.RankCorrelation("positive", alpha=alpha, min_n=4).decide(r, NEG).verdict == expected
    assert R.RankCorrelation.smallest_p(r) == 2 / 24


def test_spearman_five_points_can_reach_the_usual_alpha():
    r = stats.spearman(range(5), range(5))                 # 2/120 below 0.05: the data decide
    assert R.RankCorrelation("positive", min_n=5).decide(r, NEG).verdict == "reproduced"


def _greater_null(values):
    """Σ i·vᵢ: largest for the ascending order alone, so ours (ascending) is beyond every other order."""
    return stats.permutation_null(lambda v: float(v @ np.arange(1, v.size + 1)), values, alternative="greater")


@pytest.mark.parametrize("alpha, expected", [(1 / 6, "reproduced"), (0.16, "not comparable")])
def test_enumerated_null_floor_one_over_its_values(alpha, expected):
    null = _greater_null([1.0, 2.0, 3.0])                  # 3! = 6 distinct orders, ours the largest: p = 1/6
    assert null.method == "exact" and null.n_perm == 6
    d = R.BeyondNull("greater", alpha=alpha).decide(null, NEG)
    assert d.verdict == expected and ("0.167 > α" in d.reason) == (expected == "not comparable")


@pytest.mark.parametrize("draws, expected", [(19, "not established"), (18, "not comparable"), (20, "reproduced"),
                                             (99, "reproduced")])
def test_monte_carlo_null_floor_one_over_draws_plus_one(draws, expected):
    # ours beyond every draw: p = 1/(draws + 1): 1/19 > α (the design cannot speak), 1/20 = α exactly (a Monte
    # Carlo p at α does not decide), 1/21 and 1/100 below α
    base = stats.permutation_null(lambda v: float(v[-1]), np.arange(8.0), alternative="greater", n_perm=draws)
    null = stats.PermutationNull(100.0, 1 / (draws + 1), "greater", 8, draws, "monte carlo", 3.5, 1.0, 0.0, 7.0,
                                 base.null)
    d = R.BeyondNull("greater").decide(null, NEG)
    assert d.verdict == expected
    assert ("exactly α" in d.reason) == (draws == 19)


def test_an_enumerated_p_at_alpha_still_decides():
    # 20 enumerated values, ours the largest: p = 1/20 = α exactly, and an exact p at α reaches it
    values = np.arange(20.0)
    null = stats.PermutationNull(100.0, 0.05, "greater", 20, 20, "exact", 9.5, 1.0, 0.0, 19.0, values)
    assert R.BeyondNull("greater").decide(null, NEG).verdict == "reproduced"


@pytest.mark.parametrize("n_layers, expected", [(19, "not comparable"), (20, "reproduced"), (21, "reproduced")])
def test_set_overlap_exchangeable_floor(n_layers, expected):
    # one paper layer, a one-layer set: the best chance p is 1/n_layers (0.0526, 0.05, 0.0476)
    d = R.SetOverlap(full=1, partly=1, n_layers=n_layers).decide([3], {"value": [3]})
    assert d.verdict == expected
    assert R.SetOverlap(full=1, partly=1).smallest_p(1, 1, n_layers) == pytest.approx(1 / n_layers, rel=1e-12)


@pytest.mark.parametrize("n, expected", [(19, "not comparable"), (20, "reproduced"), (21, "reproduced")])
def test_rank_exchangeable_floor_k_over_n(n, expected):
    assert R.RankAtMost(1, of=n).decide(1, NEG).verdict == expected
