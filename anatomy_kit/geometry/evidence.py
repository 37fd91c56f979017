"""The statistics chapter 4's verdicts rest on, each with its null model (chapter 4, *Geometric work*).

Paper 2 makes three claims about work profiles over depth. Each is decided by **one primary
statistic**, fixed before the data: the profiles the claim names, each divided by its total and
averaged over layers into one *composite* profile (:func:`composite_profile`; :data:`CLAIM_PROFILES`
says which), judged against a null model. The single profiles are secondary readings, shown and
never judged:

- *raw work tracks the residual norm*, controlled for depth: the residual norm grows with depth
  almost in rank order (ρ with the layer index near 1), so any profile that rises with depth
  correlates with it, and a layer-shuffle null ignores depth. The statistic is the partial rank
  correlation given depth (:func:`depth_partial_spearman`): Spearman ρ of what is left of the
  logarithm of the composite of the three raw profiles and of the mean residual norm once each
  loses its least-squares line in the layer index, with a permutation p over those residuals;
- *normalised work is front-loaded*: the share of the composite of the six scale-normalised
  profiles in the first third of the layers against shuffled layer orders (:func:`front_loading_null`);
- *GW goes with sensitivity more than topology*: ρ(GW, λ) − ρ(topology, λ) of the composites of
  the three GW and the three topology profiles against per-layer swaps of the two
  (:func:`association_difference_null`).

:func:`model_evidence` computes all of them, and the single-profile readings, for one model's
work-profiles bundle.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from scipy import stats as _sps

from ..stats import PermutationNull, SpearmanResult, format_p, permutation_null, spearman
from ..validate import AnatomyKitError, check_choice, check_int, check_positive
from .diagnostics import front_loading
from .profiles import ProfileBundle

__all__ = ["composite_profile", "front_loading_null", "SwapNull", "association_difference_null", "ModelEvidence",
           "model_evidence", "SCALE_FREE", "CLAIM_PROFILES", "depth_residuals", "depth_partial_spearman",
           "DEPTH_SCALES"]

SCALE_FREE = ("spherical", "hyperbolic")
#: The profiles (statistics, geometries) whose composite is each claim's primary statistic: exactly the
#: profiles the claim names, so that no single profile is picked after seeing the data.
CLAIM_PROFILES = {
    "raw_tracks_norm": (("shift", "gw", "topology"), ("raw",)),
    "normalised_front_loaded": (("shift", "gw", "topology"), SCALE_FREE),
    "gw_vs_sensitivity": (("gw", "topology"), ("raw", "spherical", "hyperbolic")),
}


def _profile_matrix(profiles: Any) -> np.ndarray:
    """Profiles as columns of an (L, k) array; a mapping ``{name: (L,)}`` or one (L,) profile works too."""
    if isinstance(profiles, Mapping):
        profiles = np.column_stack([np.asarray(v, dtype=np.float64).reshape(-1) for v in profiles.values()])
    p = np.asarray(profiles, dtype=np.float64)
    p = p[:, None] if p.ndim == 1 else p
    if p.ndim != 2 or p.shape[0] < 2 or p.shape[1] < 1:
        raise AnatomyKitError(f"profiles must be (L, k) with L >= 2 layers and k >= 1 profiles, got shape {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any() or (p.sum(axis=0) <= 0).any():
        raise AnatomyKitError("every profile must be finite, non-negative and not all zero")
    return p


def composite_profile(profiles: Any) -> np.ndarray:
    """The average (L,) of several depth profiles, each first divided by its total (chapter 4).

    ``profiles``: (L,), (L, k) or ``{name: (L,)}``, non-negative with a positive total each. Each
    profile weighs the same whatever its units; the result sums to 1. One profile: itself, unit-sum.
    """
    p = _profile_matrix(profiles)
    return (p / p.sum(axis=0)).mean(axis=1)


def front_loading_null(profiles: Any, fraction: float = 1 / 3, *, n_perm: int = 10_000,
                       seed: int = 0, keep_edges: bool = False) -> PermutationNull:
    """Front-loading of one or several depth profiles against shuffled layer orders (chapter 4).

    ``profiles``: (L,), (L, k) or ``{name: (L,)}``. Each profile is divided by its total, the
    ``k`` unit-sum profiles are averaged into ``q`` (L,), and the statistic is the share of ``q``
    in the first ``round(fraction·L)`` layers (:func:`front_loading`; for one profile, its own
    share). The null shuffles the layer order, the same shuffle for every profile (so their
    correlation is kept): its mean is exactly ``round(fraction·L)/L``. One-sided, ``greater``.
    ``keep_edges=True`` keeps the first and the last layer in place and shuffles only the layers
    between them (needs L ≥ 4): a null for a profile whose edge layers are special by position
    (the first layer reads the token embedding, the last writes for the unembedding).
    """
    q = composite_profile(profiles)
    fraction = check_positive("fraction", fraction)
    if fraction >= 1:
        raise AnatomyKitError(f"fraction={fraction!r} must be in (0, 1)")
    if not isinstance(keep_edges, bool):
        raise AnatomyKitError(f"keep_edges must be True or False, got {keep_edges!r}")
    if not keep_edges:
        return permutation_null(lambda order: front_loading(q[order.astype(int)], fraction), np.arange(len(q)),
                                n_perm=n_perm, seed=seed, alternative="greater")
    if len(q) < 4:
        raise AnatomyKitError(f"keep_edges needs at least 4 layers to shuffle the inner ones, got {len(q)}")
    last = len(q) - 1
    return permutation_null(lambda inner: front_loading(q[np.r_[0, inner.astype(int), last]], fraction),
                            np.arange(1, last), n_perm=n_perm, seed=seed, alternative="greater")


#: How :func:`depth_residuals` reads a profile before removing its line in depth: ``"log"`` (the
#: declared one: raw statistics scale with the states' norm, so "tracks" is a ratio, a difference of
#: logarithms) or ``"linear"`` (shown beside it, never deciding).
DEPTH_SCALES = ("log", "linear")


def depth_residuals(values: Any, scale: str = "log", name: str = "values") -> np.ndarray:
    """(L,) what is left of a depth profile once its least-squares line in the layer index is removed.

    ``values`` (L,), L ≥ 3 layers in order; ``scale="log"`` fits ``log v_ℓ ≈ a + b·ℓ`` (every value
    must be positive), ``"linear"`` fits ``v_ℓ ≈ a + b·ℓ``; returns ``y − (a + b·ℓ)`` (orthogonal to
    the constant and to ℓ). A profile that is exactly such a line in depth leaves residuals of
    rounding size only: they are returned as exact zeros (``|r| ≤ 8·L·ε·(1 + max |y|)``), so that a
    rank correlation of them is undefined instead of ranking rounding noise.
    """
    check_choice("scale", scale, DEPTH_SCALES)
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size < 3 or not np.isfinite(v).all():
        raise AnatomyKitError(f"{name} must hold at least 3 finite values (one per layer), got {v.size}")
    if scale == "log":
        if (v <= 0).any():
            raise AnatomyKitError(f"{name} must be positive on the log scale; layers "
                                  f"{np.flatnonzero(v <= 0).tolist()} are not")
        v = np.log(v)
    depth = np.arange(v.size, dtype=np.float64)
    design = np.column_stack([np.ones_like(depth), depth])                     # (L, 2)
    coef = np.linalg.lstsq(design, v, rcond=None)[0]
    r = v - design @ coef
    if np.abs(r).max() <= 8 * v.size * np.finfo(np.float64).eps * (1 + np.abs(v).max()):
        return np.zeros_like(r)
    return r


def depth_partial_spearman(x: Any, y: Any, *, scale: str = "log", n_perm: int = 10_000, seed: int = 0,
                           alternative: str = "two-sided") -> SpearmanResult:
    """Do two depth profiles go together beyond what depth gives both? (chapter 4, ``p2.raw_tracks_norm``)

    The partial rank correlation given depth: Spearman ρ of :func:`depth_residuals` of ``x`` and of
    ``y`` (both (L,), the same layers), with its p from random orderings of the residuals
    (:func:`anatomy_kit.stats.spearman`: exact for L ≤ 9, else ``n_perm`` draws with ``seed``,
    ``p = (1 + #as extreme)/(1 + n_perm)``). The null keeps each profile's line in depth and breaks
    only how their deviations from it line up. Two profiles that both grow with depth, each in its
    own way, give ρ near 0 here, whatever their plain ρ.
    """
    rx = depth_residuals(x, scale, "x")
    ry = depth_residuals(y, scale, "y")
    if rx.size != ry.size:
        raise AnatomyKitError(f"x has {rx.size} layers and y has {ry.size}; the profiles must share their layers")
    return spearman(rx, ry, alternative=alternative, n_perm=n_perm, seed=seed)


def _centred_ranks(name: str, x: Any, n: int | None = None) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64).reshape(-1)
    if (n is not None and v.size != n) or v.size < 3 or not np.isfinite(v).all():
        raise AnatomyKitError(f"{name} must hold {n or 'at least 3'} finite values, got {v.size}")
    r = _sps.rankdata(v)
    r = r - r.mean()
    if not r.any():
        raise AnatomyKitError(f"{name} is constant: its rank correlation is undefined")
    return r


def _row_corr(u: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Pearson correlation of every row of ``u`` (m, n) with the centred vector ``t`` (n,)."""
    u = u - u.mean(axis=1, keepdims=True)
    return (u @ t) / np.sqrt((u * u).sum(axis=1) * float(t @ t))


@dataclass(frozen=True)
class SwapNull(PermutationNull):
    """A :class:`~anatomy_kit.stats.PermutationNull` whose null swaps two profiles layer by layer."""

    def describe(self, digits: int = 3) -> str:
        what = f"all {self.n_perm:,} swap patterns" if self.method == "exact" else f"{self.n_perm:,} random swaps"
        return (f"observed {self.observed:.{digits}f} vs layer-swap null {self.null_mean:.{digits}f} "
                f"[{self.null_low:.{digits}f}, {self.null_high:.{digits}f}] (central 95 % of {what}), "
                f"{self.alternative} {format_p(self.p)}")


def association_difference_null(a: Any, b: Any, target: Any, *, n_perm: int = 10_000, seed: int = 0,
                                alternative: str = "greater") -> SwapNull:
    """Is ``a`` more rank-correlated with ``target`` than ``b`` is? (chapter 4; all (L,), one value per layer)

    Statistic: ``D = ρ(a, target) − ρ(b, target)`` with Spearman's ρ. Null model: ``a`` and ``b``
    carry the same information about ``target``, so in every layer their ranks may be swapped.
    The null draws every swap pattern (``2**L`` of them, enumerated when that is at most
    ``n_perm``) or ``n_perm`` seeded random ones, and recomputes ``D`` with the swapped rank
    vectors; it is symmetric about 0. ``p`` counts null values at least as extreme as ``D``.
    """
    check_choice("alternative", alternative, ("two-sided", "less", "greater"))
    n_perm = check_int("n_perm", n_perm, minimum=1)
    ra = _centred_ranks("a", a)
    n = ra.size
    rb, rt = _centred_ranks("b", b, n), _centred_ranks("target", target, n)
    observed = float(_row_corr(ra[None], rt)[0] - _row_corr(rb[None], rt)[0])
    if 2 ** n <= n_perm:
        swap, method = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(bool), "exact"
    else:
        swap, method = np.random.default_rng(seed).random((n_perm, n)) < 0.5, "monte carlo"
    null = np.concatenate([_row_corr(np.where(s, rb, ra), rt) - _row_corr(np.where(s, ra, rb), rt)
                           for s in np.array_split(swap, max(1, len(swap) // 4096))])
    low, high = np.quantile(null, [0.025, 0.975])
    r = SwapNull(observed, math.nan, alternative, n, int(null.size), method, float(null.mean()),
                        float(null.std()), float(low), float(high), null)
    return dataclasses.replace(r, p=r.p_value(alternative))


@dataclass(frozen=True)
class ModelEvidence:
    """One model's evidence for the three claims (chapter 4): the primary statistic of each
    (``raw_norm_depth``, ``front``, ``gw_vs_topology``, on the composites of :data:`CLAIM_PROFILES`) and
    the secondary readings. Keys are ``"statistic/geometry"`` (single profiles) or geometry names."""

    model: str
    n_layers: int
    raw_norm_depth: SpearmanResult                    # primary: composite raw profile vs the norm, given depth (log)
    raw_norm_depth_linear: SpearmanResult             # the same on the linear scale (shown, never deciding)
    norm_depth: SpearmanResult                        # the mean residual norm vs the layer index: the confound
    raw_norm: SpearmanResult                          # composite raw profile vs the mean residual norm, no control
    raw_growth: SpearmanResult | None                 # composite raw profile vs the FFN's own norm increment
    front: PermutationNull                            # primary: the six scale-normalised profiles together
    front_edges_fixed: PermutationNull                # the same share against shuffles of the inner layers only
    gw_vs_topology: SwapNull                          # primary: ρ(GW, λ) − ρ(topology, λ) of the composites
    gw_sensitivity: SpearmanResult                    # composite GW profile vs λ
    topology_sensitivity: SpearmanResult              # composite topology profile vs λ
    norm_correlation: dict[str, SpearmanResult]       # every profile vs the mean residual norm
    front_by_profile: dict[str, PermutationNull]      # each scale-normalised profile alone
    sensitivity_correlation: dict[str, SpearmanResult]  # every profile vs λ
    gw_minus_topology: dict[str, SwapNull]            # ρ(gw/g, λ) − ρ(topology/g, λ), per geometry g


def _claim_profiles(P: Any, claim: str) -> dict[str, np.ndarray]:
    statistics, geometries = CLAIM_PROFILES[claim]
    return {f"{s}/{g}": P.profile(s, g) for s in statistics for g in geometries
            if s in P.statistics and g in P.geometries}


def model_evidence(name: str, bundle: ProfileBundle, *, fraction: float = 1 / 3, n_perm: int = 10_000,
                   seed: int = 0) -> ModelEvidence:
    """:class:`ModelEvidence` of one model's work-profiles bundle (chapter 4).

    Needs the bundle's sensitivity and its ``meta["residual_norm"]`` (both written by
    :func:`anatomy_kit.geometry.measure_work`) and every profile :data:`CLAIM_PROFILES` names.
    """
    P = bundle.profiles
    if bundle.sensitivity is None or "residual_norm" not in bundle.meta:
        raise AnatomyKitError(f"the bundle of {name!r} lacks the sensitivity or meta['residual_norm']; "
                              "measure it with anatomy_kit.geometry.measure_work")
    for claim, (statistics, geometries) in CLAIM_PROFILES.items():
        missing = [f"{s}/{g}" for s in statistics for g in geometries if s not in P.statistics or g not in P.geometries]
        if missing:
            raise AnatomyKitError(f"the profiles of {name!r} lack {missing}, which the claim {claim!r} needs")
    norm, lam = np.asarray(bundle.meta["residual_norm"], dtype=np.float64), bundle.sensitivity
    rank = lambda p, target: spearman(p, target, n_perm=n_perm, seed=seed)  # noqa: E731
    corr = lambda target: {f"{s}/{g}": rank(p, target) for s, g, p in P.items()}  # noqa: E731
    raw = composite_profile(_claim_profiles(P, "raw_tracks_norm"))
    free = _claim_profiles(P, "normalised_front_loaded")
    gw = composite_profile({k: v for k, v in _claim_profiles(P, "gw_vs_sensitivity").items() if k.startswith("gw/")})
    top = composite_profile({k: v for k, v in _claim_profiles(P, "gw_vs_sensitivity").items()
                             if k.startswith("topology/")})
    growth = bundle.residual_norm_growth
    depth = np.arange(len(P.layers))
    given_depth = lambda scale: depth_partial_spearman(raw, norm, scale=scale, n_perm=n_perm, seed=seed)  # noqa: E731
    diff = {g: association_difference_null(P.profile("gw", g), P.profile("topology", g), lam, n_perm=n_perm, seed=seed)
            for g in P.geometries}
    return ModelEvidence(
        name, len(P.layers), raw_norm_depth=given_depth("log"), raw_norm_depth_linear=given_depth("linear"),
        norm_depth=rank(norm, depth), raw_norm=rank(raw, norm), raw_growth=None if growth is None else rank(raw, growth),
        front=front_loading_null(free, fraction, n_perm=n_perm, seed=seed),
        front_edges_fixed=front_loading_null(free, fraction, n_perm=n_perm, seed=seed, keep_edges=True),
        gw_vs_topology=association_difference_null(gw, top, lam, n_perm=n_perm, seed=seed),
        gw_sensitivity=rank(gw, lam), topology_sensitivity=rank(top, lam), norm_correlation=corr(norm),
        front_by_profile={k: front_loading_null(v, fraction, n_perm=n_perm, seed=seed) for k, v in free.items()},
        sensitivity_correlation=corr(lam), gw_minus_topology=diff)
