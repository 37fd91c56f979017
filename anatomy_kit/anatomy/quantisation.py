"""How far 4-bit Q4_1 quantisation moved the weights we load (chapter 1; chapter 2 cites it).

The embedded model is SmolLM2-135M-Instruct stored in the GGUF format's **Q4_1**: every run of
32 consecutive weights of a row (a *block*) is stored as 4-bit integers ``q ∈ {0, …, 15}`` with
one step ``d`` and one offset ``m`` (both float16), and dequantised as ``w = d·q + m``. The
quantiser sets ``m`` to the block's minimum and ``d = (max − min)/15`` and rounds every weight
to the nearest of the 16 levels.

We do not have the full-precision weights, but the dequantised ones carry the information
needed to estimate the error. In each block the lowest and highest levels are both used, so
``d = (max − min)/15`` of the *dequantised* block is the step exactly (:func:`q4_1_steps`); all
other weights were rounded to a level ``d`` apart, an error spread evenly over ``[−d/2, d/2]``
(variance ``d²/12``), while the block's minimum and maximum are kept (almost) exactly. The
estimated mean squared error of a matrix is therefore

    MSE ≈ mean over blocks of  d_b² / 12 · (32 − 2) / 32

(:func:`q4_1_rms_error`). We report it relative to the matrix's **scale**, which in this book
means the standard deviation of all its (dequantised) elements: ``RMS error / std(W)``
(:func:`quantisation_error`). :func:`on_q4_1_lattice` checks the premise first, that every
block's values lie on 16 levels ``m + d·q``; for weights that were never quantised it is false
and the estimate means nothing. ``tests/test_quantisation.py`` checks the estimate against the
true error of the reference quantiser (the ``gguf`` package) on known weights.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..hf.layers import MODULE_PATHS, decoder_layers, layer_module
from ..validate import AnatomyKitError, check_choice

__all__ = ["Q4_1_BLOCK", "Q4_1_LEVELS", "q4_1_blocks", "q4_1_steps", "on_q4_1_lattice", "q4_1_rms_error",
           "quantisation_error"]

Q4_1_BLOCK = 32    # weights per block, consecutive along a row (the input dimension of an nn.Linear)
Q4_1_LEVELS = 16   # 4-bit levels per block


def q4_1_blocks(W: torch.Tensor) -> torch.Tensor:
    """The Q4_1 blocks of a weight matrix (out, in) as rows: shape (out · in/32, 32), float64."""
    if not isinstance(W, torch.Tensor) or W.dim() != 2:
        raise AnatomyKitError(f"W must be a 2-D weight matrix (out, in), got {getattr(W, 'shape', type(W).__name__)!r}")
    if W.shape[1] % Q4_1_BLOCK:
        raise AnatomyKitError(f"W has {W.shape[1]} columns; Q4_1 blocks need a multiple of {Q4_1_BLOCK}")
    return W.detach().to("cpu", torch.float64).reshape(-1, Q4_1_BLOCK)


def q4_1_steps(W: torch.Tensor) -> torch.Tensor:
    """The step ``d = (max − min)/15`` of every block of a dequantised matrix; shape (n_blocks,)."""
    b = q4_1_blocks(W)
    return (b.max(dim=1).values - b.min(dim=1).values) / (Q4_1_LEVELS - 1)


def on_q4_1_lattice(W: torch.Tensor, tol: float = 1e-3) -> float:
    """The share of blocks whose values all lie on ``min + d·q``, q integer (1.0 for a Q4_1 matrix).

    ``tol`` is the allowed distance from an integer level, in units of ``d`` (float32 rounding
    of the dequantised values is far below it). A constant block counts as on the lattice.
    """
    b = q4_1_blocks(W)
    d = q4_1_steps(W)
    q = (b - b.min(dim=1, keepdim=True).values) / d.clamp_min(1e-300)[:, None]
    ok = ((q - q.round()).abs().max(dim=1).values <= tol) | (d == 0)
    return float(ok.double().mean())


def q4_1_rms_error(W: torch.Tensor) -> float:
    """Estimated RMS rounding error of a Q4_1-dequantised matrix: √(mean d² /12 · 30/32) (module docstring)."""
    d = q4_1_steps(W)
    return float(torch.sqrt((d ** 2).mean() / 12 * (Q4_1_BLOCK - 2) / Q4_1_BLOCK))


def quantisation_error(model: nn.Module, modules: Sequence[str] = tuple(MODULE_PATHS)) -> dict[str, np.ndarray]:
    """``{module: (L,) RMS error / std(W)}`` for every decoder layer's ``nn.Linear`` (chapter 1).

    Raises :class:`AnatomyKitError` naming the first matrix that is not on a Q4_1 lattice (the
    model was not dequantised from Q4_1, and the estimate would mean nothing).
    """
    if isinstance(modules, str) or not modules:
        raise AnatomyKitError(f"modules={modules!r} must be a non-empty list of names from {list(MODULE_PATHS)}")
    out = {}
    for m in modules:
        check_choice("module", m, MODULE_PATHS)
        rel = []
        for layer in range(len(decoder_layers(model))):
            W = layer_module(model, layer, m).weight
            share = on_q4_1_lattice(W)
            if share < 0.999:
                raise AnatomyKitError(f"layer {layer} {m}: only {share:.1%} of its blocks lie on a Q4_1 lattice; "
                                      "these weights were not dequantised from Q4_1")
            rel.append(q4_1_rms_error(W) / float(W.detach().double().std()))
        out[m] = np.asarray(rel)
    return out
