"""Self-checks for chapter 7 (*Do the layer signals agree?*).

- :func:`check_block_influence` – the reader's Block Influence of one layer from its input and output states
  (the card page, which chapter 7 reads), against a loop over tokens written out here;
- :func:`check_spearman` – the reader's Spearman ρ of two per-layer signals (average ranks for ties), against
  a rank count written out here and the shortcut 1 − 6Σd²/(n(n² − 1)) where there are no ties;
- :func:`check_one_shot` – the reader's one-shot pruning set (the k layers a signal calls least
  important), against :func:`anatomy_kit.synthesis.pruning.one_shot`;
- :func:`check_random_set_p` – the reader's p-value of a pruned set against random sets of its size,
  against :func:`anatomy_kit.synthesis.pruning.random_set_null`.

Each check runs the reader's function on copies of small inputs (per-layer numbers, not text) and
names the slip in one sentence when the answer matches a typical mistake.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from .core import check, generic

__all__ = ["check_block_influence", "check_spearman", "check_one_shot", "check_random_set_p", "WRONG_ANSWERS"]


# ---------------------------------------------------------------------------- Block Influence (the card page)

def _bi_states() -> tuple[torch.Tensor, torch.Tensor]:
    """``(h_in, h_out)`` float32 (2, 5, 8): a layer's input and output states, the output the input plus an update
    of about half its size (cosines between 0.5 and 1, as in a trained model's middle layers)."""
    g = torch.Generator().manual_seed(41)
    h_in = torch.randn(2, 5, 8, generator=g) + 1.0
    return h_in, h_in + 0.6 * torch.randn(2, 5, 8, generator=g)


def _bi_values(h_in: torch.Tensor, h_out: torch.Tensor) -> dict[str, float]:
    """The right value and each slip's, token by token in float64 (``"right"``: 1 − the mean cosine)."""
    a, b = h_in.double().reshape(-1, h_in.shape[-1]), h_out.double().reshape(-1, h_out.shape[-1])
    cos = [float(x @ y / (x.norm() * y.norm())) for x, y in zip(a, b)]
    update = [float(x @ (y - x) / (x.norm() * (y - x).norm())) for x, y in zip(a, b)]
    across = torch.nn.functional.cosine_similarity(h_in.double(), h_out.double(), dim=1)   # over positions
    mean = sum(cos) / len(cos)
    return {"right": 1 - mean, "cosine": mean, "angular": sum(math.acos(min(1.0, c)) for c in cos) / len(cos) / math.pi,
            "update norm": float(sum((y - x).norm() for x, y in zip(a, b)) / sum(x.norm() for x in a)),
            "update": 1 - sum(update) / len(update), "positions": float(1 - across.mean())}


_BI_SLIPS = {
    "cosine": "you returned the mean cosine itself; Block Influence is 1 minus it (0 for a layer that changes nothing)",
    "angular": "that is PruneMe's angular distance, mean arccos(cos)/π; Block Influence is 1 − the mean cosine",
    "update norm": "that is the relative update norm Σ‖h_out − h_in‖/Σ‖h_in‖; Block Influence is 1 − the mean cosine",
    "update": "compare each token's input with the layer's output h_out, not with the update h_out − h_in",
    "positions": "take the cosine of each token's two d-dimensional states (dim=-1), not across positions",
}


@check("check_block_influence", hint="Block Influence asks how far a layer turns each token's state: compare "
                                      "each token's input and output directions, average over the tokens, and "
                                      "make a layer that changes nothing score 0")
def check_block_influence(fn: Callable) -> str | None:
    """``fn(h_in, h_out)`` (a layer's input and output states, both (blocks, T, d)) returns Block Influence as a
    float: 1 − the mean over tokens of cos(h_in, h_out), the cosine of each token's two d-dimensional states."""
    h_in, h_out = _bi_states()
    yours = float(fn(h_in.clone(), h_out.clone()))
    values = _bi_values(h_in, h_out)
    # float32 cosines of 8-dimensional states averaged over 10 tokens: ~20 roundings of 6e-8, relative
    if math.isclose(yours, values["right"], rel_tol=1e-5, abs_tol=1e-7):
        return None
    for slip, message in _BI_SLIPS.items():
        if math.isclose(yours, values[slip], rel_tol=1e-5, abs_tol=1e-7):
            return message
    return generic(f"your Block Influence is {yours:.6g}, 1 − the mean cosine over tokens is {values['right']:.6g}")


# ---------------------------------------------------------------------------- Spearman's ρ

def _average_ranks(v: np.ndarray) -> np.ndarray:
    """Ranks 1 … n, tied values sharing the mean of their ranks: #smaller + (#equal + 1)/2, one value at a time."""
    return np.array([float((v < a).sum()) + ((v == a).sum() + 1) / 2 for a in v])


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    return float(a @ b / math.sqrt(float(a @ a) * float(b @ b)))


def _spearman_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``[(name, x, y), …]`` (L,) float: two signals without ties, then two with ties (as ΔPPL rounded to a
    printed digit has)."""
    rng = np.random.default_rng(31)
    x = rng.normal(size=12)
    y = x + rng.normal(scale=0.8, size=12)
    tx = np.array([3.0, 1.0, 1.0, 4.0, 2.0, 2.0, 2.0, 5.0, 0.5, 6.0])
    ty = np.array([2.0, 0.0, 1.0, 3.0, 3.0, 1.0, 2.0, 4.0, 0.0, 2.5])
    return [("signals without ties", x, y), ("signals with ties", tx, ty)]


def _spearman_values(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    n = len(x)
    ordinal = lambda v: np.argsort(np.argsort(v, kind="stable"), kind="stable").astype(float)   # noqa: E731
    d = _average_ranks(x) - _average_ranks(y)
    return {"right": _pearson(_average_ranks(x), _average_ranks(y)), "values": _pearson(x, y),
            "argsort": _pearson(np.argsort(x, kind="stable").astype(float), np.argsort(y, kind="stable").astype(float)),
            "ordinal": _pearson(ordinal(x), ordinal(y)), "shortcut": 1 - 6 * float(d @ d) / (n * (n * n - 1))}


_SPEARMAN_SLIPS = {
    "values": "you correlated the values themselves (Pearson); Spearman's ρ correlates their ranks",
    "argsort": "np.argsort(v) lists the layers in order, it is not their ranks: rank = argsort(argsort(v))",
    "ordinal": "tied values must share the mean of their ranks; yours breaks ties by position",
    "shortcut": "1 − 6Σd²/(n(n² − 1)) is exact only without ties; with ties take the Pearson correlation of the "
                "average ranks",
}


@check("check_spearman")
def check_spearman(fn: Callable) -> str | None:
    """``fn(x, y)`` (two (L,) per-layer signals) returns Spearman's ρ: the Pearson correlation of the ranks of x
    and of y, tied values sharing the mean of their ranks."""
    for name, x, y in _spearman_cases():
        yours = float(fn(x.copy(), y.copy()))
        values = _spearman_values(x, y)
        # float64 sums of ≤ 12 products of small integers or halves: exact up to ~1e-15
        if math.isclose(yours, values["right"], rel_tol=1e-9, abs_tol=1e-12):
            continue
        for slip, message in _SPEARMAN_SLIPS.items():
            if math.isclose(yours, values[slip], rel_tol=1e-9, abs_tol=1e-12):
                return message
        return generic(f"on {name} your ρ is {yours:.6g}, the correlation of the average ranks is "
                       f"{values['right']:.6g}")
    return None


def _signal() -> np.ndarray:
    """A per-layer signal (10,) with one undefined layer (NaN) and a tie, higher = more important."""
    return np.array([9.0, 0.4, np.nan, 0.2, 5.0, 0.4, 3.0, 0.1, 7.0, 8.0])


@check("check_one_shot")
def check_one_shot(one_shot: Callable) -> str | None:
    """``one_shot(values, k)`` (values: (L,) per-layer signal, higher = more important, NaN = undefined) returns
    the k layers with the lowest defined values as a sorted tuple of ints (ties: the lower layer first)."""
    from ..synthesis.pruning import one_shot as kit

    v = _signal()
    for k in (1, 3, 4):
        want = kit(v, k)
        got = one_shot(v.copy(), k)
        try:
            got_t = tuple(int(x) for x in got)
        except TypeError:
            return generic(f"return the layers as a tuple of ints; got {got!r}")
        if got_t == want:
            continue
        if set(got_t) == set(want):
            return "your layers are right but not sorted; return them in increasing order"
        order = np.argsort(-np.nan_to_num(v, nan=-np.inf), kind="stable")
        if set(got_t) == set(int(x) for x in order[:k]):
            return "you picked the most important layers; a pruning set removes the k *least* important (lowest values)"
        if 2 in got_t:
            return "layer 2's value is NaN (undefined): never choose a layer the signal does not score"
        if len(got_t) != k:
            return generic(f"for k = {k} return exactly {k} layers; got {len(got_t)}")
        if k == 3 and set(got_t) == {3, 5, 7}:
            return "on a tie choose the lower layer first (layer 1 before layer 5, both 0.4)"
        return generic(f"for k = {k} the kit removes layers {list(want)}; you removed {list(got_t)}")
    return None


def _null() -> tuple[float, np.ndarray]:
    """A pruned set's PPL and 19 random sets' PPLs (two of them tie with ours)."""
    pool = np.array([40.0, 52.0, 61.0, 38.5, 70.0, 44.0, 90.0, 38.5, 55.0, 47.0, 66.0, 58.0, 49.0, 81.0, 73.0,
                     63.0, 41.0, 95.0, 57.0])
    return 38.5, pool


@check("check_random_set_p", hint="count the random sets that do at least as well as ours, and count our own "
                                   "set among the draws as well, so that the p of a finite sample is never 0")
def check_random_set_p(random_set_p: Callable) -> str | None:
    """``random_set_p(ppl, random_ppls)`` returns the one-sided Monte Carlo p that a random set of the same size
    does at least as well (PPL ≤ ours, ties count): (1 + #{random ≤ ours}) / (1 + n)."""
    ppl, pool = _null()
    want = (1 + int((pool <= ppl).sum())) / (1 + pool.size)
    got = float(random_set_p(ppl, pool.copy()))
    if math.isclose(got, want, rel_tol=1e-12):
        worst = float(random_set_p(100.0, pool.copy()))
        if not math.isclose(worst, 1.0, rel_tol=1e-12):
            return generic(f"a set worse than every random one must get p = 1; yours gets {worst:.4g}")
        return None
    count_le, count_lt, count_ge = int((pool <= ppl).sum()), int((pool < ppl).sum()), int((pool >= ppl).sum())
    if math.isclose(got, count_le / pool.size, rel_tol=1e-12):
        return "add one to the count and to n: (1 + #) / (1 + n), so the observed set counts as one draw and p is never 0"
    if math.isclose(got, (1 + count_lt) / (1 + pool.size), rel_tol=1e-12):
        return "ties count as 'at least as good': use random ≤ ours, not <"
    if math.isclose(got, (1 + count_ge) / (1 + pool.size), rel_tol=1e-12):
        return "that is the other direction: a lower PPL is better, so count random sets with PPL ≤ ours"
    return generic(f"p = {got:.4g}; the kit's is {want:.4g}")


def _one_shot_highest(v, k):
    return tuple(sorted(int(x) for x in np.argsort(-np.nan_to_num(v, nan=-np.inf), kind="stable")[:k]))


def _one_shot_unsorted(v, k):
    ok = [l for l in range(len(v)) if np.isfinite(v[l])]
    return tuple(sorted(ok, key=lambda l: (v[l], l))[:k][::-1]) if k > 1 else (sorted(ok, key=lambda l: (v[l], l))[0],)


def _one_shot_nan(v, k):
    return tuple(sorted(int(x) for x in np.argsort(np.nan_to_num(v, nan=-1.0), kind="stable")[:k]))


def _p_no_correction(ppl, pool):
    return float((np.asarray(pool) <= ppl).mean())


def _p_strict(ppl, pool):
    pool = np.asarray(pool)
    return (1 + int((pool < ppl).sum())) / (1 + pool.size)


def _p_wrong_side(ppl, pool):
    pool = np.asarray(pool)
    return (1 + int((pool >= ppl).sum())) / (1 + pool.size)


#: Typical mistakes each check must name: (answer, words its message must contain) (tests/test_exercises.py).
def _spearman_slip(name: str) -> Callable:
    def wrong(x, y):
        return _spearman_values(x, y)[name]
    wrong.__name__ = f"spearman_{name}"
    return wrong


def _bi_slip(name: str) -> Callable:
    def wrong(h_in, h_out):
        return _bi_values(h_in, h_out)[name]
    wrong.__name__ = f"block_influence_{name.replace(' ', '_')}"
    return wrong


WRONG_ANSWERS = {
    "check_block_influence": [(_bi_slip("cosine"), "1 minus it"), (_bi_slip("angular"), "angular distance"),
                              (_bi_slip("update norm"), "update norm"), (_bi_slip("update"), "not with the update"),
                              (_bi_slip("positions"), "not across positions")],
    "check_spearman": [(_spearman_slip("values"), "values themselves"), (_spearman_slip("argsort"), "argsort"),
                       (_spearman_slip("ordinal"), "mean of their ranks"), (_spearman_slip("shortcut"), "without ties")],
    "check_one_shot": [(_one_shot_highest, "most important"), (_one_shot_unsorted, "not sorted"),
                       (_one_shot_nan, "NaN")],
    "check_random_set_p": [(_p_no_correction, "add one"), (_p_strict, "ties"), (_p_wrong_side, "other direction")],
}
