"""Width schedules and allocation rules: from a per-layer profile to integer FFN widths (chapter 5).

Uniform, the TLM cosine taper and its contrasts, the geometric rule (the solver of
:mod:`.solver` on a work profile), its anti control, and an importance rule; :func:`allocate`
turns a rule string such as ``"geometric:gw/spherical"`` into widths.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validate import AnatomyKitError, as_vector, check_choice, check_int, check_positive
from .rounding import round_widths
from .solver import solve_widths

__all__ = ["exponents_from_intrinsic_dimension", "coefficients_from_profile", "anti_profile", "resample_profile",
           "SCHEDULE_KINDS", "continuous_schedule", "width_schedule", "parse_rule", "allocate"]


def exponents_from_intrinsic_dimension(d_int: Any, rate_scale: float = 1.0) -> np.ndarray:
    """``a_ℓ = ν / d_int,ℓ`` — the surrogate exponents from per-layer intrinsic dimensions.

    Chapter 5. INFERRED (our reconstruction, not read in paper 2): the classical rate for
    approximating a Lipschitz map on a ``d``-dimensional manifold with ``w`` units is
    ``w^(−1/d)``; ``rate_scale`` (the chapter's ν) rescales it (smoothness / a fitted constant).
    """
    d = as_vector("d_int", d_int, None)
    rate_scale = check_positive("rate_scale", rate_scale)
    return rate_scale / d


def coefficients_from_profile(profile: Any) -> np.ndarray:
    """``c_ℓ`` from a per-layer work profile, normalised to mean 1 (chapter 5).

    The scale of ``c`` does not change the optimal widths (it only rescales ``μ``); normalising
    makes ``μ`` comparable between profiles. Zero work in a layer is allowed (the solver gives
    that layer its lower bound); an all-zero profile is not.
    """
    p = as_vector("profile", profile, None, allow_zero=True)
    if not p.any():
        raise AnatomyKitError("profile is zero in every layer: it says nothing about where width helps")
    return p / p.mean()


def anti_profile(profile: Any) -> np.ndarray:
    """The rank-reversed profile: the layer with the k-th largest work gets the k-th smallest value.

    Chapter 5. Our choice for the paper's anti-topological control (INFERRED): the same multiset of
    values, assigned in the opposite order, so the control keeps the spread of the geometric
    allocation and changes only its alignment with depth-wise work.
    """
    p = as_vector("profile", profile, None, allow_zero=True)
    order = np.argsort(p, kind="stable")  # ascending
    out = np.empty_like(p)
    out[order] = np.sort(p)[::-1]
    return out


def resample_profile(profile: Any, n_layers: int) -> np.ndarray:
    """Transfer a per-layer profile to a model with ``n_layers`` layers by relative depth (chapter 5).

    Layer ``ℓ`` of an ``L``-layer model is read as the depth interval ``[ℓ/L, (ℓ+1)/L)`` and the
    profile as piecewise constant on those intervals; each target layer gets the *mean* of the
    profile over its own interval (exact overlap integral). So 30 → 6 layers averages groups of
    five, ``L → L`` is the identity, and the mean of the profile is preserved. Our choice (the
    paper measures a schedule on a reference model and transfers it; how is not known).
    """
    p = as_vector("profile", profile, None, positive=False)
    n = check_int("n_layers", n_layers, minimum=1)
    src = len(p)
    edges_src = np.arange(src + 1) / src
    edges_tgt = np.arange(n + 1) / n
    out = np.empty(n)
    for j in range(n):
        lo, hi = edges_tgt[j], edges_tgt[j + 1]
        overlap = np.clip(np.minimum(edges_src[1:], hi) - np.maximum(edges_src[:-1], lo), 0.0, None)
        out[j] = float(np.dot(overlap, p) / (hi - lo))
    return out


# ---------------------------------------------------------------------------------------------
# Schedules
# ---------------------------------------------------------------------------------------------

SCHEDULE_KINDS = ("uniform", "cosine", "reverse-cosine", "linear", "geometric", "anti", "importance")


def _taper(kind: str, n: int, mean: float, start: float, end: float) -> np.ndarray:
    if n == 1:
        return np.array([mean])
    x = np.arange(n) / (n - 1)
    d0, d1 = start * mean, end * mean
    if kind in ("cosine", "reverse-cosine"):
        d = d1 + (d0 - d1) * (1.0 + np.cos(np.pi * x)) / 2.0
    else:  # linear
        d = d0 + (d1 - d0) * x
    return d[::-1].copy() if kind == "reverse-cosine" else d


def continuous_schedule(kind: str, n_layers: int, mean_width: float, *, profile: Any = None,
                        exponent: Any = 1.0, lam: Any = None, ratio: tuple[float, float] = (1.5, 0.5),
                        lower_frac: float = 0.25, upper_frac: float | None = None) -> np.ndarray:
    """The schedule before rounding: float widths with mean exactly ``mean_width`` (chapter 5).

    See :func:`width_schedule` for the kinds and arguments.
    """
    kind = check_choice("kind", kind, SCHEDULE_KINDS)
    n = check_int("n_layers", n_layers, minimum=1)
    mean = check_positive("mean_width", mean_width)
    if kind == "uniform":
        return np.full(n, mean)
    if kind in ("cosine", "reverse-cosine", "linear"):
        start, end = (check_positive("ratio[0]", ratio[0]), check_positive("ratio[1]", ratio[1], allow_zero=True))
        if abs((start + end) / 2 - 1.0) > 1e-12:
            raise AnatomyKitError(f"ratio={tuple(ratio)!r} must average to 1 (e.g. (1.5, 0.5)) so the mean width is kept")
        return _taper(kind, n, mean, start, end)
    if profile is None:
        raise AnatomyKitError(f"kind={kind!r} needs a per-layer profile (a sequence of {n} positive values)")
    p = as_vector("profile", profile, n, positive=(kind != "importance"), allow_zero=True)
    if kind == "importance":
        # Importance (e.g. ablation damage in %) spans orders of magnitude and may be negative
        # (anti-layers): compress with log1p of the positive part, floored at 1 % of the maximum.
        q = np.log1p(np.maximum(p, 0.0))
        if q.max() <= 0:
            raise AnatomyKitError("profile has no positive importance; cannot allocate by importance")
        p = np.maximum(q, 0.01 * q.max())
    elif kind == "anti":
        p = anti_profile(p)
    lower = check_positive("lower_frac", lower_frac, allow_zero=True) * mean
    upper = None if upper_frac is None else check_positive("upper_frac", upper_frac) * mean
    sol = solve_widths(coefficients_from_profile(p), exponent, lam, budget=n * mean, lower=lower, upper=upper)
    return sol.widths


def width_schedule(kind: str, n_layers: int, mean_width: int, *, multiple: int = 64, profile: Any = None,
                   exponent: Any = 1.0, lam: Any = None, ratio: tuple[float, float] = (1.5, 0.5),
                   lower_frac: float = 0.25, upper_frac: float | None = None) -> list[int]:
    """Integer per-layer FFN widths, multiples of ``multiple``, summing to ``n_layers * mean_width``.

    Chapter 5. Kinds:

    - ``"uniform"``: every layer ``mean_width``;
    - ``"cosine"``: the TLM taper ``d(ℓ) = d_end + (d_start − d_end)(1 + cos(π ℓ/(L−1)))/2`` with
      ``(d_start, d_end) = ratio · mean_width`` (default 1.5×→0.5×; mean exact before rounding);
    - ``"reverse-cosine"`` (0.5×→1.5×) and ``"linear"`` (1.5×→0.5×): contrasts;
    - ``"geometric"``: the surrogate optimum with ``c ∝ profile`` (a per-layer work profile),
      exponents ``exponent`` (scalar or per layer, e.g. from
      :func:`exponents_from_intrinsic_dimension`), sensitivities ``lam`` (default 1), bounds
      ``lower_frac·mean ≤ w ≤ upper_frac·mean``;
    - ``"anti"``: the control — the same solver on :func:`anti_profile` (rank-reversed profile);
    - ``"importance"``: the solver on a compressed importance profile (``log1p`` of the positive
      part, e.g. chapter 1's ablation damage).
    """
    w = continuous_schedule(kind, n_layers, mean_width, profile=profile, exponent=exponent, lam=lam,
                            ratio=ratio, lower_frac=lower_frac, upper_frac=upper_frac)
    mean = check_int("mean_width", mean_width, minimum=1)
    m = check_int("multiple", multiple, minimum=1)
    budget = n_layers * mean
    lower = None
    upper = None
    if kind in ("geometric", "anti", "importance"):
        lower = lower_frac * mean
        upper = None if upper_frac is None else upper_frac * mean
    return round_widths(w, m, budget, lower=lower, upper=upper)


def parse_rule(rule: str) -> tuple[str, str | None]:
    """Split an allocation rule ``"kind"`` or ``"kind:profile"`` (chapter 5).

    ``"uniform"``, ``"cosine"``, ``"linear"``, ``"reverse-cosine"`` take no profile;
    ``"geometric:<statistic>/<geometry>"``, ``"anti:<statistic>/<geometry>"`` and
    ``"importance:<name>"`` name the profile they allocate by, e.g. ``"geometric:topology/hyperbolic"``.
    """
    if not isinstance(rule, str) or not rule:
        raise AnatomyKitError(f"rule={rule!r} must be a string like 'cosine' or 'geometric:gw/spherical'")
    kind, _, name = rule.partition(":")
    check_choice("rule kind", kind, SCHEDULE_KINDS)
    needs = kind in ("geometric", "anti", "importance")
    if needs and not name:
        raise AnatomyKitError(f"rule={rule!r} needs a profile name after ':' (e.g. '{kind}:topology/hyperbolic')")
    if not needs and name:
        raise AnatomyKitError(f"rule={rule!r}: kind {kind!r} takes no profile; write just {kind!r}")
    return kind, (name or None)


def allocate(rule: str, n_layers: int, mean_width: int, *, multiple: int = 64, profiles: Any = None,
             exponent: Any = 1.0, lam: Any = None, lower_frac: float = 0.25, upper_frac: float | None = None,
             continuous: bool = False) -> Any:
    """Per-layer widths for an allocation rule (see :func:`parse_rule`) — chapter 5.

    ``profiles`` maps profile names to per-layer values of *any* depth: they are transferred to
    ``n_layers`` with :func:`resample_profile`. ``exponent`` and ``lam`` may also be per-layer
    arrays of any depth (resampled the same way). Returns the integer widths of
    :func:`width_schedule`, or with ``continuous=True`` the float widths before rounding.
    """
    kind, name = parse_rule(rule)
    profile = None
    if name is not None:
        if profiles is None or name not in profiles:
            have = sorted(profiles) if profiles is not None else []
            raise AnatomyKitError(f"rule={rule!r} needs profile {name!r}; available: {have}")
        profile = resample_profile(profiles[name], n_layers)
    if np.ndim(exponent) == 1:
        exponent = resample_profile(exponent, n_layers)
    if lam is not None and np.ndim(lam) == 1:
        lam = resample_profile(lam, n_layers)
    kw = dict(profile=profile, exponent=exponent, lam=lam, lower_frac=lower_frac, upper_frac=upper_frac)
    if continuous:
        return continuous_schedule(kind, n_layers, mean_width, **kw)
    return width_schedule(kind, n_layers, mean_width, multiple=multiple, **kw)
