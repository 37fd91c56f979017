"""What *is* predictable across depth: quantities tied to the shared residual basis (chapter 2).

Every decoder layer reads from and writes to the same residual stream, so the residual
dimensions ``i = 0 … d−1`` mean the same thing in every layer. The hidden units of an MLP and
the heads of an attention block do not: permuting the hidden units of one layer (the rows of
``gate`` and ``up`` and the columns of ``down`` together) leaves that layer's function exactly
unchanged (:func:`permuted_mlp_weights`), so nothing ties hidden unit ``j`` of layer ℓ to hidden
unit ``j`` of layer ℓ+1, and element-wise regressions across depth have nothing to find.

Quantities indexed by the residual dimension survive any such permutation:

- for a matrix that *reads* the residual stream (``q``, ``k``, ``v``, ``gate``, ``up``; weight
  shape (out, d)) the norm of column ``i``, ``‖W[:, i]‖``;
- for a matrix that *writes* it (``o``, ``down``; shape (d, in)) the norm of row ``i``, ``‖W[i, :]‖``

(:func:`residual_norms`, one vector of length ``d`` per layer). The same norms taken along the
*other* side (:func:`hidden_norms`, indexed by hidden unit or head dimension) are the control:
they are just as much a property of the layer, but their index order is arbitrary.
:func:`norm_predictability` fits chapter 2's held-out neighbour ridge
(:func:`~anatomy_kit.anatomy.predictability.neighbour_ridge`) to both.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ..hf.layers import MODULE_PATHS, decoder_layers, layer_module
from ..validate import AnatomyKitError, check_choice, check_layer_index
from .predictability import MODULES, neighbour_ridge

__all__ = ["READS_RESIDUAL", "WRITES_RESIDUAL", "residual_norms", "hidden_norms", "norm_predictability",
           "permuted_mlp_weights"]

READS_RESIDUAL = ("q", "k", "v", "gate", "up")   # weight (out, d): columns indexed by residual dimension
WRITES_RESIDUAL = ("o", "down")                  # weight (d, in): rows indexed by residual dimension


def _norms(model: nn.Module, module: str, residual_side: bool) -> torch.Tensor:
    check_choice("module", module, MODULE_PATHS)
    dim = 0 if (module in READS_RESIDUAL) == residual_side else 1   # dim reduced over
    return torch.stack([layer_module(model, l, module).weight.detach().to("cpu", torch.float64).norm(dim=dim)
                        for l in range(len(decoder_layers(model)))])


def residual_norms(model: nn.Module, module: str) -> torch.Tensor:
    """Per-residual-dimension norms of ``module`` in every layer; shape (L, d_model), float64."""
    return _norms(model, module, residual_side=True)


def hidden_norms(model: nn.Module, module: str) -> torch.Tensor:
    """Norms along the other side (per hidden unit or per attention output dimension); shape (L, n)."""
    return _norms(model, module, residual_side=False)


def norm_predictability(model: nn.Module, modules: Sequence[str] = MODULES, *,
                        ridge: float = 1e-3) -> dict[str, dict[str, float]]:
    """``{module: {"residual": R², "hidden": R²}}``: held-out pooled R² of the neighbour ridge on
    :func:`residual_norms` and on :func:`hidden_norms` (chapter 2). SS_tot is taken around each
    layer's own mean, so the R² says how well the *pattern* over dimensions is predicted."""
    if isinstance(modules, str) or not modules:
        raise AnatomyKitError(f"modules={modules!r} must be a non-empty list of names from {list(MODULE_PATHS)}")
    return {m: {"residual": neighbour_ridge(residual_norms(model, m), ridge=ridge).r2_pooled,
                "hidden": neighbour_ridge(hidden_norms(model, m), ridge=ridge).r2_pooled} for m in modules}


def permuted_mlp_weights(model: nn.Module, layer: int, perm) -> dict[tuple[int, str], torch.Tensor]:
    """The MLP of ``layer`` with its hidden units reordered by ``perm`` (a permutation of 0 … h−1).

    ``gate`` and ``up`` rows and ``down`` columns move together, so the layer computes exactly the
    same function (up to float rounding); keys as for :func:`anatomy_kit.hf.surgery.substituted`.
    """
    check_layer_index("layer", layer, len(decoder_layers(model)))
    gate, up, down = (layer_module(model, layer, m).weight.detach() for m in ("gate", "up", "down"))
    p = torch.as_tensor(perm, dtype=torch.long)
    if p.dim() != 1 or sorted(p.tolist()) != list(range(gate.shape[0])):
        raise AnatomyKitError(f"perm must be a permutation of 0..{gate.shape[0] - 1} (one entry per hidden unit)")
    return {(layer, "gate"): gate[p].clone(), (layer, "up"): up[p].clone(), (layer, "down"): down[:, p].clone()}
