"""Self-checks of chapter 5 (*The width solver*).

``check_widths_at`` (exercise 1): the reader writes the stationarity clip, the widths at a given Lagrange
multiplier μ; the check tests the KKT conditions on the reader's widths (a free layer's marginal benefit
equals μ, a layer at a bound has the matching inequality) and names the usual slips.
``check_round_widths`` (exercise 3): the reader rounds continuous FFN widths to multiples that sum
exactly to the budget, by largest remainders; the check compares with
:func:`anatomy_kit.allocation.round_widths`. ``check_sign_flip_p`` (exercise 4): the reader writes the
exact two-sided sign-flip p of paired differences; the check compares with
:func:`anatomy_kit.stats.sign_flip_test`. Each names the usual slips (:data:`WRONG_ANSWERS`).
"""

from __future__ import annotations

import itertools
import math
from typing import Callable

import numpy as np

from .core import check, generic

__all__ = ["check_widths_at", "check_round_widths", "check_sign_flip_p", "WRONG_ANSWERS"]

#: (continuous widths, multiple, budget): remainders that differ from layer to layer, every layer
#: at least one multiple after flooring; in the second, nearest rounding misses the budget and the
#: widest layers are not those with the largest remainders.
_ROUNDING = (
    ([95.0, 40.0, 70.0, 51.0], 32, 256),
    ([78.4, 76.8, 43.2, 57.6], 32, 256),
    ([300.0, 141.0, 77.0, 250.0, 190.0, 66.0], 64, 1024),
)


# ---------------------------------------------------------------------------- the widths at a given μ

#: (work c_ℓ, exponents a_ℓ, μ, lower, upper): free layers, one at each bound, and one with no work (which
#: sits at the lower bound); the second case moves μ so that other layers are free.
_MU_CASES = (
    (np.array([3.0, 1.0, 0.1, 50.0, 0.0]), np.array([0.5, 0.3, 0.8, 0.5, 0.4]), 1e-3, 40.0, 200.0),
    (np.array([3.0, 1.0, 0.1, 50.0, 0.0]), np.array([0.5, 0.3, 0.8, 0.5, 0.4]), 2e-4, 40.0, 600.0),
)


def _kkt_problem(w: np.ndarray, c, a, mu: float, lower: float, upper: float) -> str | None:
    """Whether widths ``w`` (L,) meet the KKT conditions at μ, told from the marginal benefit
    m_ℓ(w) = c_ℓ a_ℓ w^(−a_ℓ−1) (not from the clip formula): None, or which layer fails."""
    # float64 powers and logs: ~1e-15 relative; 1e-9 on log m leaves room for any order of operations
    for layer, (wl, cl, al) in enumerate(zip(w, c, a)):
        if not lower * (1 - 1e-12) <= wl <= upper * (1 + 1e-12):
            return f"layer {layer}'s width {wl:.6g} lies outside the bounds [{lower:g}, {upper:g}]"
        m = lambda x: cl * al * x ** (-al - 1)      # noqa: E731  the marginal benefit of one more unit
        at_low, at_high = math.isclose(wl, lower, rel_tol=1e-9), math.isclose(wl, upper, rel_tol=1e-9)
        if at_low and m(lower) <= mu * (1 + 1e-9) or at_high and m(upper) >= mu * (1 - 1e-9):
            continue
        if not at_low and not at_high and cl > 0 and abs(math.log(m(wl)) - math.log(mu)) <= 1e-9:
            continue
        return (f"at μ = {mu:g} layer {layer} (width {wl:.6g}) is neither free with c·a·w^(−a−1) = μ nor at a "
                "bound that its marginal benefit there allows")
    return None


def _mu_slips(c, a, mu, lower, upper) -> dict[str, np.ndarray]:
    with np.errstate(divide="ignore"):
        return {"exponent": np.clip((c * a / mu) ** (1 / a), lower, upper),
                "no clip": (c * a / mu) ** (1 / (a + 1)),
                "no a": np.clip((c / mu) ** (1 / (a + 1)), lower, upper),
                "inverted": np.clip((mu / (c * a)) ** (1 / (a + 1)), lower, upper)}


_MU_SLIPS = {
    "exponent": "m_ℓ(w) = c_ℓ a_ℓ w^(−a_ℓ−1) = μ gives w = (c_ℓ a_ℓ/μ)^(1/(a_ℓ+1)); your exponent is 1/a_ℓ",
    "no clip": "your widths leave the bounds: clip each to [lower, upper] (a layer at a bound meets μ with an "
               "inequality)",
    "no a": "the marginal benefit of E = c w^(−a) is c·a·w^(−a−1): your widths leave out the factor a_ℓ",
    "inverted": "your ratio is upside down: more work (larger c_ℓ a_ℓ) or a smaller μ must give a wider layer",
}


@check("check_widths_at", hint="a free layer sits where one more unit of width buys exactly μ: set its marginal "
                                "benefit equal to μ and solve for the width; a layer the bounds stop keeps the "
                                "bound")
def check_widths_at(fn: Callable) -> str | None:
    """``fn(c, a, mu, lower, upper)`` (work c (L,) ≥ 0, exponents a (L,) > 0, the multiplier μ > 0, the bounds)
    returns the widths (L,) where one more unit buys μ: clip((c_ℓ a_ℓ/μ)^(1/(a_ℓ+1)), lower, upper)."""
    for c, a, mu, lower, upper in _MU_CASES:
        with np.errstate(divide="ignore"):
            w = np.asarray(fn(c.copy(), a.copy(), mu, lower, upper), dtype=np.float64).reshape(-1)
        if w.shape != c.shape:
            return f"return one width per layer ({len(c)}); you returned {w.size}"
        failing = _kkt_problem(w, c, a, mu, lower, upper)
        if failing is None:
            continue
        for slip, wrong in _mu_slips(c, a, mu, lower, upper).items():
            if np.allclose(w, wrong, rtol=1e-9):
                return _MU_SLIPS[slip]
        return generic(failing)
    return None


def _largest_remainders(widths, multiple, budget):
    """The kit's answer without bounds (each layer keeps at least one multiple)."""
    from ..allocation import round_widths

    return round_widths(widths, multiple, budget)


def _floor_only(widths, multiple, budget):
    return [int(w // multiple) * multiple for w in widths]


def _nearest(widths, multiple, budget):
    return [int(round(w / multiple)) * multiple for w in widths]


def _extras_to_widest(widths, multiple, budget):
    units = [int(w // multiple) for w in widths]
    for i in np.argsort(-np.asarray(widths), kind="stable")[:budget // multiple - sum(units)]:
        units[i] += 1
    return [u * multiple for u in units]


def _continuous(widths, multiple, budget):
    return [float(w) for w in widths]


@check("check_round_widths", hint="flooring every width to a multiple leaves the budget short by a whole number "
                                  "of multiples; hand them back to the layers that flooring cut the most")
def check_round_widths(fn: Callable) -> str | None:
    """``fn(widths, multiple, budget)`` → integer widths, multiples of ``multiple``, summing to ``budget``."""
    for widths, multiple, budget in _ROUNDING:
        want = _largest_remainders(widths, multiple, budget)
        got = list(fn(list(widths), multiple, budget))
        if len(got) != len(widths):
            return f"return one width per layer ({len(widths)} here), not {len(got)}"
        if any(float(g) % multiple for g in got):
            return f"every width must be a multiple of {multiple}; you returned {got}"
        got = [int(g) for g in got]
        if got == want:
            continue
        if got == _floor_only(widths, multiple, budget):
            left = (budget - sum(got)) // multiple
            return (f"flooring alone leaves {left} multiple(s) of the budget {budget} unassigned: hand them "
                    "to the layers with the largest remainders")
        if got == _nearest(widths, multiple, budget):
            return (f"rounding each width to its nearest multiple gives a sum of {sum(got)}, not the budget "
                    f"{budget}, so the parameter count changes: floor, then hand out the rest by remainder")
        if got == _extras_to_widest(widths, multiple, budget):
            return ("you gave the leftover multiples to the widest layers; give them to the largest "
                    "remainders, the layers that flooring cut the most")
        if sum(got) != budget:
            return f"your widths sum to {sum(got)}, not the budget {budget}"
        return generic(f"for widths {widths} (multiple {multiple}, budget {budget}) you return {got}, "
                       f"largest remainders give {want}")
    return None


#: Paired differences for the sign-flip check: dyadic numbers (k/1024), so every signed sum is exact in
#: floating point and ties are ties whatever the order of summation.
_DELTAS = (
    [32 / 1024, 12 / 1024, 20 / 1024, 45 / 1024, 8 / 1024, 27 / 1024],       # six seeds, one sign
    [32 / 1024, -12 / 1024, 20 / 1024, 45 / 1024, -8 / 1024, 27 / 1024],     # six seeds, mixed
    [-50 / 1024, -20 / 1024, -30 / 1024],                                    # three seeds
)


def _signed_sums(d: np.ndarray) -> np.ndarray:
    return np.array([np.dot(s, d) for s in itertools.product((1.0, -1.0), repeat=len(d))])


def _two_sided(d) -> float:
    d = np.asarray(d, dtype=float)
    return float(np.mean(np.abs(_signed_sums(d)) >= abs(d.sum())))


def _one_sided(d) -> float:
    d = np.asarray(d, dtype=float)
    sums, s = _signed_sums(d), d.sum()
    return float(np.mean(sums >= s) if s > 0 else np.mean(sums <= s))


def _strict(d) -> float:
    d = np.asarray(d, dtype=float)
    return float(np.mean(np.abs(_signed_sums(d)) > abs(d.sum())))


def _complement(d) -> float:
    return 1.0 - _two_sided(d)


@check("check_sign_flip_p", hint="under no difference every pattern of signs on your differences is equally "
                                 "likely: list them all and ask what share gives a sum at least as far from zero "
                                 "as yours, in either direction")
def check_sign_flip_p(fn: Callable) -> str | None:
    """``fn(deltas)`` → the exact two-sided sign-flip p of the paired differences ``deltas`` (n ≤ 16)."""
    from ..stats import sign_flip_test

    for d in _DELTAS:
        want = sign_flip_test(d).p
        got = float(fn(list(d)))
        if math.isclose(got, want, abs_tol=1e-12):
            continue
        n = len(d)
        if math.isclose(got, _one_sided(d), abs_tol=1e-12):
            return (f"for {n} differences you return the one-sided p {got:.4g}; the claim is about a difference "
                    f"of either sign, so count |S*| ≥ |S| on both sides (two-sided p {want:.4g})")
        if math.isclose(got, _strict(d), abs_tol=1e-12):
            return (f"for {n} differences you return {got:.4g}: you counted only patterns strictly more extreme, "
                    f"but the observed pattern and its mirror are as extreme, so use ≥ (p = {want:.4g})")
        if math.isclose(got, _complement(d), abs_tol=1e-12):
            return (f"for {n} differences you return 1 − p = {got:.4g}: p is the share of sign patterns at "
                    f"least as extreme as ours, not less extreme ({want:.4g})")
        return generic(f"for the differences {np.round(d, 4).tolist()} you return p = {got:.4g}, "
                       f"the exact sign-flip test gives {want:.4g}")
    return None


#: (wrong answer, words its message must contain): each slip a check names.
def _mu_slip(name: str) -> Callable:
    def wrong(c, a, mu, lower, upper):
        return _mu_slips(c, a, mu, lower, upper)[name]
    wrong.__name__ = f"widths_at_{name.replace(' ', '_')}"
    return wrong


WRONG_ANSWERS = {
    "check_widths_at": [(_mu_slip("exponent"), "1/a_ℓ"), (_mu_slip("no clip"), "leave the bounds"),
                        (_mu_slip("no a"), "factor a_ℓ"), (_mu_slip("inverted"), "upside down")],
    "check_round_widths": [(_floor_only, "flooring alone"), (_nearest, "nearest multiple"),
                           (_extras_to_widest, "widest layers"), (_continuous, "multiple of")],
    "check_sign_flip_p": [(_one_sided, "one-sided"), (_strict, "strictly more extreme"),
                          (_complement, "1 − p")],
}
