"""Per-layer diagnostics beside the work profiles (chapter 4): norms, front-loading, rank
correlations over depth, TwoNN intrinsic dimension, and FFN perturbation sensitivity."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from scipy.spatial.distance import cdist

import torch
from torch import nn

from ..hf.layers import decoder_layers, hidden_of, hooked, mlp_of, replace_hidden
from ..validate import AnatomyKitError, check_choice, check_finite, check_int, check_positive
from .clouds import FFNCloud, _check_inputs
from .metrics import _points
from .work import WorkProfiles

__all__ = ["residual_norm_growth", "mean_norms", "front_loading", "profile_correlations", "twonn_dimension",
           "intrinsic_dimensions", "ffn_sensitivity"]


def residual_norm_growth(clouds: Sequence[FFNCloud], kind: str = "difference") -> np.ndarray:
    """Per-layer growth of the state norm across the FFN, (L,) (chapter 4).

    ``"difference"`` (default): mean over tokens of ``‖y_i‖ − ‖x_i‖`` — in the units of raw work,
    and bounded by the raw shift (``‖y‖ − ‖x‖ ≤ ‖y − x‖``); ``"ratio"``: mean of ``‖y_i‖/‖x_i‖``.
    With ``point="residual"`` clouds this is residual-norm growth through the FFN sub-block.
    """
    check_choice("kind", kind, ("difference", "ratio"))
    out = []
    for c in clouds:
        nx, ny = np.linalg.norm(c.x, axis=1), np.linalg.norm(c.y, axis=1)
        if kind == "ratio":
            if (nx == 0).any():
                raise AnatomyKitError(f"layer {c.layer} has zero-norm input states; use kind='difference'")
            out.append(float(np.mean(ny / nx)))
        else:
            out.append(float(np.mean(ny - nx)))
    return np.array(out)


def mean_norms(clouds: Sequence[FFNCloud], which: str = "x") -> np.ndarray:
    """Mean state norm ``(1/n) Σ ‖x_i‖`` (or of ``y``) of every layer's cloud, (L,) (chapter 4)."""
    check_choice("which", which, ("x", "y"))
    return np.array([float(np.linalg.norm(getattr(c, which), axis=1).mean()) for c in clouds])


def front_loading(profile: Any, fraction: float = 1 / 3) -> float:
    """Share of a non-negative profile's total that falls in the first ``fraction`` of layers (chapter 4).

    A flat profile gives ≈ ``fraction``; a "front-loaded" one more. The first
    ``round(fraction·L)`` layers count (at least one).
    """
    p = np.asarray(profile, dtype=np.float64).reshape(-1)
    check_finite("profile", p)
    if p.size == 0 or (p < 0).any():
        raise AnatomyKitError(f"profile must be a non-empty, non-negative array, got {p!r}")
    f = check_positive("fraction", fraction)
    if f >= 1:
        raise AnatomyKitError(f"fraction={fraction!r} must be in (0, 1)")
    k = max(1, int(round(f * p.size)))
    total = p.sum()
    return float(p[:k].sum() / total) if total > 0 else float("nan")


def profile_correlations(profiles: WorkProfiles, target: Any, method: str = "spearman") -> dict[str, float]:
    """Correlation over layers of every profile with ``target`` (L,): ``{"statistic/geometry": r}``.

    ``method``: ``"spearman"`` (rank) or ``"pearson"``. A constant profile gives NaN.
    Chapter 4 (*Geometric work*).
    """
    from scipy import stats

    check_choice("method", method, ("spearman", "pearson"))
    t = np.asarray(target, dtype=np.float64).reshape(-1)
    if t.shape[0] != len(profiles.layers):
        raise AnatomyKitError(f"target has {t.shape[0]} values but the profiles have {len(profiles.layers)} layers")
    check_finite("target", t)
    fn = stats.spearmanr if method == "spearman" else stats.pearsonr
    out = {}
    for s, g, p in profiles.items():
        if np.ptp(p) == 0 or np.ptp(t) == 0 or len(t) < 3:
            out[f"{s}/{g}"] = float("nan")
        else:
            out[f"{s}/{g}"] = float(fn(p, t)[0])
    return out


def _two_nearest(points: np.ndarray, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    n = points.shape[0]
    r = np.empty((n, 2))
    for s in range(0, n, chunk):
        d = cdist(points[s:s + chunk], points)
        d[np.arange(d.shape[0]), np.arange(s, s + d.shape[0])] = np.inf
        r[s:s + chunk] = np.partition(d, 1, axis=1)[:, :2]
    return r[:, 0], r[:, 1]


def twonn_dimension(points: Any, *, discard_fraction: float = 0.1) -> float:
    """Intrinsic dimension of a point cloud (n, d) by TwoNN (Facco et al. 2017) (chapter 4).

    ``μ_i = r₂/r₁`` (second over first nearest-neighbour distance, Euclidean) is Pareto with
    exponent ``d``; with the ``μ`` sorted and ``F_i = i/N``, ``d`` is the slope through the
    origin of ``−log(1 − F_i)`` against ``log μ_i``, after discarding the largest
    ``discard_fraction`` of ``μ`` (the paper's 10 %). Points with a duplicate (``r₁ = 0``) are
    dropped.
    """
    p = _points("points", points)
    f = check_positive("discard_fraction", discard_fraction, allow_zero=True)
    if f >= 1:
        raise AnatomyKitError(f"discard_fraction={discard_fraction!r} must be in [0, 1)")
    r1, r2 = _two_nearest(p)
    keep = r1 > 0
    mu = np.sort(r2[keep] / r1[keep])
    n = mu.size
    if n < 3:
        raise AnatomyKitError(f"TwoNN needs at least 3 distinct points, got {n}")
    f_emp = np.arange(1, n + 1) / n
    m = max(2, int(np.floor(n * (1 - f))))
    m = min(m, n - 1)  # F = 1 at the last point
    x, y = np.log(mu[:m]), -np.log(1 - f_emp[:m])
    return float((x @ y) / (x @ x)) if x @ x > 0 else float("inf")


def intrinsic_dimensions(clouds: Sequence[FFNCloud], *, which: str = "x", discard_fraction: float = 0.1) -> np.ndarray:
    """TwoNN intrinsic dimension of every layer's FFN input (``"x"``) or output (``"y"``) cloud, (L,)."""
    check_choice("which", which, ("x", "y"))
    return np.array([twonn_dimension(getattr(c, which), discard_fraction=discard_fraction) for c in clouds])


@torch.no_grad()
def ffn_sensitivity(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                    noise_scale: float = 0.1, seed: int = 0, n_draws: int = 1, batch_size: int = 8,
                    layers: list[int] | None = None) -> np.ndarray:
    """Per-FFN loss sensitivity to output noise (chapter 4, *Geometric work*): (n_layers,) nats.

    For one FFN at a time, a forward hook adds Gaussian noise ``ε ~ N(0, σ²I)`` to the MLP
    output of every token, with ``σ = noise_scale × RMS`` of that token's MLP output vector;
    the value is the mean next-token loss (labels = ``input_ids``, padding → −100) of the
    perturbed model minus that of the clean model, averaged over ``n_draws`` noise draws.
    Noise is drawn from a ``torch.Generator`` seeded by ``(seed, layer, draw)``. Layers before
    the perturbed one are not recomputed (:func:`anatomy_kit.hf.evaluation.capture_prefix`).
    INFERRED: paper 2 says "perturbation-based layer sensitivity" without a definition; this
    one is ours.
    """
    from ..hf.evaluation import capture_prefix, make_batches, nll_from_layer

    noise_scale = check_positive("noise_scale", noise_scale)
    check_int("n_draws", n_draws, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    check_int("seed", seed, minimum=0)
    ids, mask = _check_inputs(model, input_ids, attention_mask)
    dec = decoder_layers(model)
    layers = list(range(len(dec))) if layers is None else [check_int("layer", l, minimum=0, maximum=len(dec) - 1) for l in layers]
    batches = make_batches(ids, batch_size, device=ids.device, attention_mask=mask)
    n_targets = sum(b.n_targets for b in batches)
    if n_targets == 0:
        raise AnatomyKitError("input_ids has no token with a next-token target; give sequences of length >= 2")
    cache = capture_prefix(model, batches)
    base = cache.baseline_nll / n_targets
    out = np.zeros(len(layers))
    for j, l in enumerate(layers):
        for draw in range(n_draws):
            gen = torch.Generator(device=ids.device).manual_seed(int(seed) * 1_000_003 + l * 1009 + draw)

            def add_noise(i, module, args, output):
                h = hidden_of(output)
                rms = h.float().pow(2).mean(-1, keepdim=True).sqrt()
                eps = torch.randn(h.shape, generator=gen, device=h.device, dtype=torch.float32)
                return replace_hidden(output, (h.float() + noise_scale * rms * eps).to(h.dtype))

            with hooked([mlp_of(dec[l])], add_noise):
                loss = nll_from_layer(model, cache, l) / n_targets
            check_finite(f"loss with noise at layer {l}", torch.tensor(loss))
            out[j] += (loss - base) / n_draws
    return out
