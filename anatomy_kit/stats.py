"""Uncertainty for the reproduction verdicts: paired seeds, rank correlations, permutation nulls.

Pure functions; bad input (empty, NaN, mismatched lengths, too few values) raises
:class:`~anatomy_kit.validate.AnatomyKitError`; results are small frozen dataclasses.
:func:`paired_t_interval` (t interval of paired differences: with 3 seeds it covers at its stated
rate, a percentile bootstrap only about 0.67, see ``tests/test_stats.py``); :func:`sign_flip_test`
and :func:`sign_flip_interval` (exact over all ``2**n`` sign patterns); :func:`paired_difference`
(pairs ``{seed: value}`` results); :func:`spearman` and :func:`format_spearman` (exact p for n ≤ 9,
permutation above, no p printed below 6 points); :func:`permutation_null` (a depth-profile statistic
against shuffled layer orders). A ratio of paired means: :mod:`anatomy_kit.ratio_interval`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping

import numpy as np
from scipy import stats as _sps

from .validate import AnatomyKitError, check_choice, check_int
from .overlap import overlap_chance  # the chance of a set overlap (here for one import path)

__all__ = ["Interval", "TInterval", "paired_t_interval", "SignFlipResult", "sign_flip_test", "SignFlipInterval", "signed",
           "sign_flip_interval", "PairedComparison", "paired_difference", "overlap_chance", "SpearmanResult", "spearman", "format_spearman",
           "format_p", "PermutationNull", "permutation_null"]

ALTERNATIVES = ("two-sided", "less", "greater")
EXACT_SIGN_FLIP_MAX_N = 16   # 2**16 = 65,536 sign patterns
EXACT_SPEARMAN_MAX_N = 9     # 9! = 362,880 permutations
_TOL = 1e-9                  # relative tolerance for "as extreme as observed" under float ties


def _sample(name: str, values: Any, min_n: int = 1) -> np.ndarray:
    """``values`` as a finite 1-D float array of at least ``min_n`` entries."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise AnatomyKitError(f"{name} must be a sequence of numbers, got {type(values).__name__}") from None
    if arr.ndim != 1:
        raise AnatomyKitError(f"{name} must be one-dimensional (one value per seed or layer), got shape {arr.shape}")
    if arr.size < min_n:
        raise AnatomyKitError(f"{name} has {arr.size} values; at least {min_n} are needed")
    if not np.isfinite(arr).all():
        raise AnatomyKitError(f"{name} holds {int((~np.isfinite(arr)).sum())} non-finite values (NaN or inf) out of {arr.size}")
    return arr


def _confidence(confidence: Any) -> float:
    if not 0.0 < float(confidence) < 1.0:
        raise AnatomyKitError(f"confidence={confidence!r} must lie strictly between 0 and 1 (e.g. 0.95)")
    return float(confidence)


def signed(x: float, digits: int = 3) -> str:
    """``x`` with an explicit sign and a true minus: ``+0.006``, ``−0.030``, ``−∞``; a non-zero ``x``
    that would print as zero gets two significant digits (``+0.00047``), so no end reads as 0."""
    if math.isinf(x) or math.isnan(x):
        return "NaN" if math.isnan(x) else "+∞" if x > 0 else "−∞"
    text = f"{x:+.{digits}f}" if x == 0 or float(f"{x:.{digits}f}") != 0 else f"{x:+.2g}"
    return text.replace("-", "−")


def format_p(p: float) -> str:
    """``p = 0.083`` (two significant digits) or ``p < 0.001``; never ``p = 0.00``."""
    return "p = NaN" if math.isnan(p) else "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


@dataclass(frozen=True)
class Interval:
    """An interval for the mean (``t``) or centre of symmetry (``sign-flip``) of paired differences.

    ``sd`` and ``df`` belong to the t interval (``df = n − 1``; NaN/0 for ``sign-flip``);
    ``achieved`` is the sign-flip interval's exact coverage (NaN for ``t``, whose coverage is
    ``confidence`` for normal differences).
    """

    mean: float
    low: float
    high: float
    n: int
    sd: float
    df: int
    confidence: float = 0.95
    method: str = "t"
    achieved: float = math.nan

    def excludes(self, value: float = 0.0) -> bool:
        """True when ``value`` lies strictly outside ``[low, high]``."""
        return value < self.low or value > self.high


TInterval = SignFlipInterval = Interval   # the names the two constructors' docs use


def paired_t_interval(deltas: Any, confidence: float = 0.95) -> TInterval:
    """Student-t interval of the mean of paired differences.

    ``s = sd(deltas, ddof=1)``, ``half = t.ppf(1 − α/2, n − 1) · s / √n``. With ``n = 1`` the
    spread is unknown: ``sd`` is NaN and the bounds are ``−inf, +inf`` (the interval is
    undefined and excludes nothing), never a fake narrow interval. Identical differences give a
    zero-width interval; check :func:`sign_flip_test` too in that case.
    """
    d = _sample("deltas", deltas)
    c = _confidence(confidence)
    n, mean = d.size, float(d.mean())
    if n == 1:
        return TInterval(mean, -math.inf, math.inf, 1, math.nan, 0, c)
    sd = float(d.std(ddof=1))
    half = float(_sps.t.ppf(0.5 + c / 2, n - 1)) * sd / math.sqrt(n)
    return TInterval(mean, mean - half, mean + half, n, sd, n - 1, c)


@lru_cache(maxsize=None)
def _bits(n: int) -> np.ndarray:
    """All ``2**n`` rows of ``n`` bits (row ``k`` is the binary expansion of ``k``)."""
    return ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(np.int8)


@dataclass(frozen=True)
class SignFlipResult:
    """Sign-flip test of the mean of paired differences; ``method`` is ``exact`` or ``monte carlo``."""

    mean: float
    p: float
    n: int
    alternative: str
    method: str
    n_patterns: int


def sign_flip_test(deltas: Any, alternative: str = "two-sided", *, n_mc: int = 100_000,
                   seed: int = 0) -> SignFlipResult:
    """Randomization test of H0 "the differences are symmetric about 0", statistic ``S = Σ dᵢ``.

    Under H0 every sign pattern ``ε ∈ {±1}ⁿ`` is equally likely, so with ``S*(ε) = Σ εᵢ dᵢ``:
    two-sided ``p = P(|S*| ≥ |S|)``, ``less``: ``P(S* ≤ S)``, ``greater``: ``P(S* ≥ S)``, counting
    values within a relative 1e-9 as ties. For ``n ≤ 16`` all ``2**n`` patterns are enumerated
    (exact; the smallest two-sided p is ``2/2**n``, 0.25 for 3 seeds); above that ``n_mc`` random
    patterns with ``seed`` give ``p = (1 + #as extreme) / (1 + n_mc)``.
    """
    d = _sample("deltas", deltas)
    check_choice("alternative", alternative, ALTERNATIVES)
    n, s = d.size, float(d.sum())
    if n <= EXACT_SIGN_FLIP_MAX_N:
        null, method, total = (1 - 2 * _bits(n).astype(float)) @ d, "exact", 2 ** n
    else:
        rng, total, method = np.random.default_rng(seed), check_int("n_mc", n_mc, minimum=1), "monte carlo"
        null = np.concatenate([rng.choice((-1.0, 1.0), size=(min(10_000, total - k), n)) @ d
                               for k in range(0, total, 10_000)])
    count = _count_extreme(null, s, alternative)
    p = count / total if method == "exact" else (1 + count) / (1 + total)
    return SignFlipResult(s / n, float(p), n, alternative, method, total)


def sign_flip_interval(deltas: Any, confidence: float = 0.95) -> SignFlipInterval:
    """Exact interval: all μ not rejected by either one-sided sign-flip test of ``d − μ`` at ``α/2``.

    The one-sided p-value is ``(1 + #{A ≠ ∅ : mean(d_A) ≤ μ}) / 2**n`` over subsets ``A`` of the
    seeds, so the bounds are order statistics of the ``2**n − 1`` subset means: with
    ``k = ⌊(α/2) · 2**n⌋`` the interval is ``[m_(k), m_(2**n − k)]`` and its exact coverage
    (``achieved``) is ``1 − 2k/2**n`` for continuous symmetric differences. When ``k = 0`` (n ≤ 5
    at 95 %) no μ can be rejected and the interval is ``(−inf, +inf)``. Needs ``n ≤ 16``.
    """
    d = _sample("deltas", deltas)
    c = _confidence(confidence)
    n = d.size
    if n > EXACT_SIGN_FLIP_MAX_N:
        raise AnatomyKitError(f"sign_flip_interval enumerates 2**n subsets and accepts n ≤ "
                              f"{EXACT_SIGN_FLIP_MAX_N}; got n = {n} (use paired_t_interval)")
    k = math.floor((1 - c) / 2 * 2 ** n + 1e-9)
    if k == 0:
        return Interval(float(d.mean()), -math.inf, math.inf, n, math.nan, 0, c, "sign-flip", 1.0)
    bits = _bits(n)[1:].astype(float)
    means = np.sort(bits @ d / bits.sum(axis=1))
    return Interval(float(d.mean()), float(means[k - 1]), float(means[means.size - k]), n, math.nan, 0, c,
                    "sign-flip", 1 - 2 * k / 2 ** n)


@dataclass(frozen=True)
class PairedComparison:
    """``a − b`` on the seeds both have: t interval, two-sided sign-flip p, and the seeds used."""

    deltas: tuple[float, ...]
    seeds: tuple[Any, ...]
    t: TInterval
    sign_flip: SignFlipResult
    unit: str = ""
    unpaired: tuple[Any, ...] = ()

    @property
    def mean(self) -> float:
        return self.t.mean

    @property
    def n(self) -> int:
        return self.t.n

    def t_interval(self, confidence: float = 0.95) -> TInterval:
        """The t interval at another confidence level."""
        return paired_t_interval(self.deltas, confidence)

    def describe(self, digits: int = 3) -> str:
        """``Δ = −0.012 nats, 95 % t interval [−0.030, +0.006], n = 3 seeds, sign-flip p = 0.25``."""
        unit, pct = (f" {self.unit}" if self.unit else ""), f"{100 * self.t.confidence:g} % t interval"
        ci = (f"{pct} undefined (one seed)" if self.n < 2
              else f"{pct} [{signed(self.t.low, digits)}, {signed(self.t.high, digits)}]")
        text = (f"Δ = {signed(self.mean, digits)}{unit}, {ci}, n = {self.n} seed{'s' * (self.n != 1)}, "
                f"sign-flip {format_p(self.sign_flip.p)}")
        return text + (f" ({len(self.unpaired)} unpaired seed(s) left out)" if self.unpaired else "")

    def to_dict(self) -> dict:
        return asdict(self.t) | {"sign_flip_p": self.sign_flip.p, "seeds": list(self.seeds), "unit": self.unit,
                                 "describe": self.describe()}


def paired_difference(a: Mapping[Any, float] | Any, b: Mapping[Any, float] | Any, *, confidence: float = 0.95,
                      unit: str = "") -> PairedComparison:
    """Pair ``a`` and ``b`` and summarise ``a − b``.

    Two mappings ``{seed: value}`` are paired on their shared seeds (at least one; seeds in only
    one of them are listed in ``unpaired``). Two sequences are paired by position and must have
    the same length.
    """
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise AnatomyKitError("a and b must both be {seed: value} mappings or both be sequences")
    if isinstance(a, Mapping):
        seeds = tuple(sorted(set(a) & set(b), key=str))
        if not seeds:
            raise AnatomyKitError(f"a and b share no seed (a has {sorted(a, key=str)}, b has {sorted(b, key=str)})")
        unpaired = tuple(sorted(set(a) ^ set(b), key=str))
        va = _sample("a", [a[s] for s in seeds])
        vb = _sample("b", [b[s] for s in seeds])
    else:
        va, vb = _sample("a", a), _sample("b", b)
        if va.size != vb.size:
            raise AnatomyKitError(f"a has {va.size} values and b has {vb.size}; paired sequences need equal lengths")
        seeds, unpaired = tuple(range(va.size)), ()
    d = va - vb
    return PairedComparison(tuple(float(x) for x in d), seeds, paired_t_interval(d, confidence),
                            sign_flip_test(d), unit, unpaired)


@lru_cache(maxsize=None)
def _permutations(n: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(n))), dtype=np.int8)


@dataclass(frozen=True)
class SpearmanResult:
    """Spearman's ρ; ``method`` is ``exact``, ``permutation`` or ``undefined`` (constant input)."""

    rho: float
    p: float
    n: int
    method: str
    alternative: str = "two-sided"


def _count_extreme(null: np.ndarray, obs: float, alternative: str, centre: float = 0.0) -> int:
    """How many null values are at least as extreme as ``obs`` (ties within a relative 1e-9)."""
    tol = _TOL * max(1.0, abs(obs))
    if alternative == "two-sided":
        return int((np.abs(null - centre) >= abs(obs - centre) - tol).sum())
    if alternative == "less":
        return int((null <= obs + tol).sum())
    return int((null >= obs - tol).sum())


def spearman(x: Any, y: Any, *, alternative: str = "two-sided", n_perm: int = 20_000,
             seed: int = 0) -> SpearmanResult:
    """Spearman's ρ (Pearson correlation of average ranks) with a permutation p-value.

    ``ρ = Σ (rxᵢ − r̄x)(ryᵢ − r̄y) / √(Σ(rx − r̄x)² Σ(ry − r̄y)²)``. Under H0 (no association) every
    ordering of ``y`` against ``x`` is equally likely. For ``n ≤ 9`` all ``n!`` orderings are
    enumerated (exact: two-sided ``p = P(|ρ*| ≥ |ρ|)``; n = 4 and a perfect monotone pair give
    ``p = 2/24 = 1/12``); above, ``n_perm`` random orderings with ``seed`` give
    ``p = (1 + #as extreme)/(1 + n_perm)``. A constant ``x`` or ``y`` gives NaN (``undefined``).
    """
    xs, ys = _sample("x", x, min_n=3), _sample("y", y, min_n=3)
    if xs.size != ys.size:
        raise AnatomyKitError(f"x has {xs.size} values and y has {ys.size}; Spearman needs pairs")
    check_choice("alternative", alternative, ALTERNATIVES)
    n, rx, ry = xs.size, _sps.rankdata(xs), _sps.rankdata(ys)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float(rx @ rx) * float(ry @ ry))
    if denom == 0:
        return SpearmanResult(math.nan, math.nan, n, "undefined", alternative)
    rho = float(rx @ ry) / denom
    if n <= EXACT_SPEARMAN_MAX_N:
        null = ry[_permutations(n)] @ rx / denom
        return SpearmanResult(rho, _count_extreme(null, rho, alternative) / null.size, n, "exact", alternative)
    n_perm = check_int("n_perm", n_perm, minimum=1)
    rng = np.random.default_rng(seed)
    null = np.concatenate([ry[rng.random((min(5_000, n_perm - k), n)).argsort(axis=1)] @ rx / denom
                           for k in range(0, n_perm, 5_000)])
    p = (1 + _count_extreme(null, rho, alternative)) / (1 + n_perm)
    return SpearmanResult(rho, p, n, "permutation", alternative)


def format_spearman(result: SpearmanResult, *, min_n: int = 6, noun: str = "layers") -> str:
    """``ρ = −0.62 (n = 12, permutation p = 0.031)``; below ``min_n`` points no p-value is printed:
    ``ρ = −1.00 (n = 4, too few layers for a p-value)``."""
    if result.method == "undefined":
        return f"ρ undefined (n = {result.n}, one of the two profiles is constant)"
    rho = f"ρ = {signed(result.rho, 2).lstrip('+')}"
    if result.n < min_n:
        return f"{rho} (n = {result.n}, too few {noun} for a p-value)"
    side = "" if result.alternative == "two-sided" else f"one-sided ({result.alternative}) "
    return f"{rho} (n = {result.n}, {side}{result.method} {format_p(result.p)})"


def _multiset_permutations(values: np.ndarray) -> np.ndarray:
    """Every distinct ordering of ``values`` once (each is equally likely under a uniform shuffle)."""
    uniq, counts = np.unique(values, return_counts=True)

    def orders(left: tuple[int, ...]):
        if not any(left):
            yield ()
        for i, c in enumerate(left):
            if c:
                for tail in orders(left[:i] + (c - 1,) + left[i + 1:]):
                    yield (uniq[i],) + tail

    return np.array(list(orders(tuple(int(c) for c in counts))), dtype=float)


@dataclass(frozen=True)
class PermutationNull:
    """A profile statistic against its values in shuffled orders (``null`` holds every null value)."""

    observed: float
    p: float
    alternative: str
    n: int
    n_perm: int
    method: str
    null_mean: float
    null_sd: float
    null_low: float
    null_high: float
    null: np.ndarray = field(repr=False, compare=False)

    def p_value(self, alternative: str) -> float:
        """The p-value for another alternative, from the same null draws."""
        check_choice("alternative", alternative, ALTERNATIVES)
        count = _count_extreme(self.null, self.observed, alternative, self.null_mean)
        return count / self.n_perm if self.method == "exact" else (1 + count) / (1 + self.n_perm)

    def describe(self, digits: int = 3) -> str:
        what = f"all {self.n_perm:,} distinct orders" if self.method == "exact" else f"{self.n_perm:,} shuffles"
        return (f"observed {self.observed:.{digits}f} vs shuffled-order null {self.null_mean:.{digits}f} "
                f"[{self.null_low:.{digits}f}, {self.null_high:.{digits}f}] (central 95 % of {what}), "
                f"{self.alternative} {format_p(self.p)}")

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "null"} | {"describe": self.describe()}


def permutation_null(statistic_fn: Callable[[np.ndarray], float], values: Any, *, n_perm: int = 10_000,
                     seed: int = 0, alternative: str = "greater") -> PermutationNull:
    """``statistic_fn(values)`` against ``statistic_fn`` of the same values in shuffled orders.

    For a depth profile (one value per layer) this asks whether its order matters, e.g. whether a
    front-loading share is larger than shuffled layer orders give. If the number of distinct
    orders ``n! / Π mᵥ!`` (``mᵥ`` = multiplicity of value v) is at most ``n_perm`` they are all
    enumerated and ``p = #as extreme / #orders`` (exact, observed order included); otherwise
    ``n_perm`` seeded shuffles give ``p = (1 + #as extreme) / (1 + n_perm)``. ``greater``:
    ``P(T* ≥ T)``; ``less``: ``P(T* ≤ T)``; two-sided: ``P(|T* − E T*| ≥ |T − E T*|)``.
    """
    v = _sample("values", values, min_n=2)
    check_choice("alternative", alternative, ALTERNATIVES)
    n_perm = check_int("n_perm", n_perm, minimum=1)
    observed = _statistic(statistic_fn, v)
    _, counts = np.unique(v, return_counts=True)
    distinct = math.factorial(v.size) // math.prod(math.factorial(int(c)) for c in counts)
    if distinct <= n_perm:
        orders, method = _multiset_permutations(v), "exact"
    else:
        rng = np.random.default_rng(seed)
        orders, method = np.array([rng.permutation(v) for _ in range(n_perm)]), "monte carlo"
    null = np.array([_statistic(statistic_fn, row) for row in orders])
    mean, count = float(null.mean()), _count_extreme(null, observed, alternative, float(null.mean()))
    p = count / null.size if method == "exact" else (1 + count) / (1 + null.size)
    low, high = np.quantile(null, [0.025, 0.975])
    return PermutationNull(observed, float(p), alternative, v.size, int(null.size), method, mean,
                           float(null.std()), float(low), float(high), null)


def _statistic(fn: Callable[[np.ndarray], float], values: np.ndarray) -> float:
    try:
        t = float(fn(values.copy()))
    except (TypeError, ValueError):
        raise AnatomyKitError("statistic_fn must return one number for a 1-D array of values") from None
    if not math.isfinite(t):
        raise AnatomyKitError(f"statistic_fn returned {t} (not finite) for values {values.tolist()}")
    return t
