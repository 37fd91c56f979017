"""Weight surgery: change parameters for the length of a ``with`` block, then restore them exactly.

One mechanism serves every chapter that edits a model: :func:`swapped` puts new tensors in the
place of named parameters by *swapping their storage* (``param.data = new``) and gives every
parameter its original storage back afterwards, also when the block raises. Restoration is
therefore bit-exact and free, and training inside the block (recovery, chapter 2) writes into
the swapped-in tensors, never into the originals. The other functions here compute the new
tensors (pure functions of the model; nothing is written):

- :func:`neighbour_mean` – ½(W_{ℓ−1} + W_{ℓ+1}) of every parameter of layer ℓ (edges copy their
  one neighbour): chapter 1's ablation, chapter 2's ``mean`` neighbour;
- :func:`neighbour_weight` – one module's weight in the previous, next or mean neighbour;
- :func:`noisy_weights` – W + ε, ε ~ N(0, (f·std W)²) for chapter 2's recovery speed;
- :func:`cloned_layer` – a copy of another layer's parameters plus stated noise, for growth
  training (chapter 3); :func:`clone_layer` writes it permanently.

Keys: :func:`swapped` takes full parameter names (as in ``model.named_parameters()``);
:func:`substituted` takes ``(layer, module)`` pairs with the short module names of
:data:`anatomy_kit.hf.layers.MODULE_PATHS`. Introduced in chapter 1 (*The ablation map*).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Mapping, Sequence

import torch
from torch import nn

from ..validate import AnatomyKitError, check_choice, check_finite, check_int, check_layer_index, check_positive
from .layers import MODULE_PATHS, decoder_layers, layer_module

__all__ = ["NEIGHBOURS", "layer_parameter_names", "swapped", "substituted", "neighbour_indices", "neighbour_mean",
           "neighbour_weight", "noisy_weights", "cloned_layer", "clone_layer", "requires_grad_only"]

NEIGHBOURS = ("previous", "next", "mean")


def layer_parameter_names(model: nn.Module, layer: int) -> dict[str, str]:
    """``{name inside the layer: full parameter name}`` for decoder layer ``layer``."""
    layers = decoder_layers(model)
    check_layer_index("layer", layer, len(layers))
    target = layers[layer]
    prefix = next((n for n, m in model.named_modules() if m is target), None)
    if prefix is None:  # pragma: no cover - decoder_layers returns modules of the model
        raise AnatomyKitError(f"layer {layer} is not a submodule of {type(model).__name__}")
    return {n: f"{prefix}.{n}" if prefix else n for n, _ in target.named_parameters()}


@contextmanager
def swapped(model: nn.Module, new: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """Inside the block the parameters named in ``new`` hold those tensors; restored exactly after.

    ``new`` maps full parameter names to tensors of the parameter's shape (cast to its dtype and
    device). A tensor that already is some parameter's storage, or is not contiguous, is cloned
    first, so two parameters never share memory. Raises :class:`AnatomyKitError` naming an unknown
    parameter, a wrong shape or a non-finite value; nothing is changed then.
    """
    params = dict(model.named_parameters())
    targets = []
    for name, value in new.items():
        if name not in params:
            raise AnatomyKitError(f"{type(model).__name__} has no parameter {name!r}")
        p = params[name]
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(p.shape):
            raise AnatomyKitError(f"replacement for {name} has shape {tuple(getattr(value, 'shape', ()))}; "
                                  f"the parameter has shape {tuple(p.shape)}")
        if not torch.isfinite(value.sum()):        # a cheap screen; check_finite counts the bad values
            check_finite(f"replacement for {name}", value)
        targets.append((p, value))
    owned = {p.data_ptr() for p in params.values()}
    originals = [p.data for p, _ in targets]
    try:
        with torch.no_grad():
            for p, value in targets:
                value = value.detach().to(p.device, p.dtype)
                if value.data_ptr() in owned or not value.is_contiguous():
                    value = value.clone(memory_format=torch.contiguous_format)
                p.data = value
        yield
    finally:
        for (p, _), old in zip(targets, originals):
            p.data = old


def _weight_name(model: nn.Module, layer: int, module: str) -> str:
    check_choice("module", module, MODULE_PATHS)
    return layer_parameter_names(model, layer)[f"{MODULE_PATHS[module]}.weight"]


@contextmanager
def substituted(model: nn.Module, new: Mapping[tuple[int, str], torch.Tensor]) -> Iterator[None]:
    """:func:`swapped` keyed by ``(layer, module short name)``: the weight of that ``nn.Linear`` (chapter 2)."""
    with swapped(model, {_weight_name(model, l, m): v for (l, m), v in new.items()}):
        yield


def neighbour_indices(n_layers: int, layer: int, which: str = "mean") -> list[int]:
    """The layers whose weights stand in for ``layer``: previous, next, or both ("mean").

    Edge convention (ours; paper 1 does not say): at the first and last layer, where one side is
    missing, every choice falls back to the one neighbour there is.
    """
    check_choice("neighbour", which, NEIGHBOURS)
    check_layer_index("layer", layer, n_layers)
    if n_layers < 2:
        raise AnatomyKitError("a neighbour needs a model with at least 2 layers")
    both = [j for j in (layer - 1, layer + 1) if 0 <= j < n_layers]
    if which == "mean" or len(both) == 1:
        return both
    return [layer - 1] if which == "previous" else [layer + 1]


def neighbour_mean(model: nn.Module, layer: int, which: str = "mean") -> dict[str, torch.Tensor]:
    """Every parameter of ``layer`` as the mean over its neighbours; keys are full parameter names.

    Each mean is formed on ``layer``'s own device (a model split over GPUs by ``device_map`` may
    hold a neighbour on another).
    """
    n = len(decoder_layers(model))
    idx = neighbour_indices(n, layer, which)
    params = dict(model.named_parameters())
    sources = [layer_parameter_names(model, j) for j in idx]
    return {full: sum(params[s[rel]].detach().to(params[full].device) for s in sources) / len(sources)
            for rel, full in layer_parameter_names(model, layer).items()}


def neighbour_weight(model: nn.Module, layer: int, module: str, which: str = "previous") -> torch.Tensor:
    """The neighbour matrix N of ``module`` for ``layer`` (see :func:`neighbour_indices`); a new tensor."""
    idx = neighbour_indices(len(decoder_layers(model)), layer, which)
    device = layer_module(model, layer, module).weight.device          # a neighbour may sit on another GPU
    return sum(layer_module(model, j, module).weight.detach().to(device) for j in idx) / len(idx)


def noisy_weights(model: nn.Module, layer: int, fraction: float, *, modules: Sequence[str] = tuple(MODULE_PATHS),
                  seed: int = 0) -> dict[tuple[int, str], torch.Tensor]:
    """W + ε for every module of ``layer``, ε ~ N(0, (fraction · std(W))²) i.i.d. per element (pure)."""
    check_positive("noise_fraction", fraction)
    check_layer_index("layer", layer, len(decoder_layers(model)))
    check_int("seed", seed, minimum=0)
    if isinstance(modules, str) or not modules:
        raise AnatomyKitError(f"modules={modules!r} must be a non-empty list of names from {list(MODULE_PATHS)}")
    g = torch.Generator().manual_seed(seed * 1_000_003 + layer)
    out = {}
    for m in modules:
        W = layer_module(model, layer, m).weight.detach()
        eps = torch.randn(W.shape, generator=g, dtype=torch.float32).to(W.device, W.dtype)
        out[(layer, m)] = W + float(fraction) * float(W.float().std()) * eps
    return out


def cloned_layer(model: nn.Module, source: int, target: int, *, noise_std: float = 0.0,
                 seed: int = 0) -> dict[str, torch.Tensor]:
    """Layer ``target``'s parameters as a copy of layer ``source``'s plus N(0, noise_std²) (pure; chapter 3).

    ``noise_std`` is *relative*: each tensor P gets ε ~ N(0, (noise_std · std P)²) (for a tensor of
    equal entries, such as norm gains at 1, the absolute ``noise_std`` is used). Noise is drawn
    from a generator seeded by ``(seed, target)``, so a clone is reproducible. Keys are the full
    parameter names of the *target* layer.
    """
    layers = decoder_layers(model)
    check_layer_index("source", source, len(layers))
    check_layer_index("target", target, len(layers))
    check_positive("noise_std", noise_std, allow_zero=True)
    check_int("seed", seed, minimum=0)
    params = dict(model.named_parameters())
    src, dst = layer_parameter_names(model, source), layer_parameter_names(model, target)
    if set(src) != set(dst) or any(params[src[k]].shape != params[dst[k]].shape for k in src):
        raise AnatomyKitError(f"layers {source} and {target} differ in shape; only equal layers can be cloned")
    g = torch.Generator().manual_seed(seed * 1_000_003 + target)
    out = {}
    for rel, name in dst.items():
        value = params[src[rel]].detach().clone()
        if noise_std > 0:
            scale = float(value.float().std()) if value.numel() > 1 else 0.0
            scale = scale if scale > 0 else 1.0
            eps = torch.randn(value.shape, generator=g, dtype=torch.float32).to(value.device, value.dtype)
            value = value + noise_std * scale * eps
        out[name] = value
    return out


@torch.no_grad()
def clone_layer(model: nn.Module, source: int, target: int, *, noise_std: float = 0.0, seed: int = 0) -> None:
    """Overwrite layer ``target`` with :func:`cloned_layer` (permanent; chapter 3)."""
    params = dict(model.named_parameters())
    for name, value in cloned_layer(model, source, target, noise_std=noise_std, seed=seed).items():
        params[name].copy_(value)


@contextmanager
def requires_grad_only(model: nn.Module, params: Sequence[nn.Parameter]) -> Iterator[None]:
    """Inside the block only ``params`` require gradients; every flag is restored afterwards (chapter 3).

    Flags are restored by parameter *name* on the parameters the model holds at the end, so they
    come back also when the block replaced the parameter objects (FSDP's ``fully_shard`` swaps
    every parameter for a sharded one).
    """
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    chosen = {id(p) for p in params}
    try:
        for p in model.parameters():
            p.requires_grad_(id(p) in chosen)
        yield
    finally:
        for n, p in model.named_parameters():
            if n in flags:
                p.requires_grad_(flags[n])
