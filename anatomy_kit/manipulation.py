"""Weight manipulation strategies and recovery speed (paper 1, Wietrzykowski 2026).

Chapter 2 (*Anatomy II: weights, manipulation, recovery*) uses this module.

**Manipulation.** Each strategy rewrites the linear weights of one decoder layer ℓ (by
default all seven: q, k, v, o, gate, up, down; the RMSNorm gains are left alone). With W the
layer's own matrix and N the matching matrix of a neighbour layer (``neighbour="previous"``:
ℓ−1, or ℓ+1 for layer 0; ``"next"``: ℓ+1, or ℓ−1 for the last layer; ``"mean"``:
½(W_{ℓ−1} + W_{ℓ+1}), one neighbour at the edges):

=================  ==========================================================================
``zero``           W ← 0. With o and down zero both residual branches vanish: the block is the identity.
``clone``          W ← N.
``blend``          W ← β W + (1 − β) N                        (β = share of the layer's own weights)
``lowrank-blend``  W ← W + (1 − β) [N − W]_r                  ([·]_r: best rank-r approximation, by SVD)
``scale``          W ← α W                                    (α > 0)
=================  ==========================================================================

``lowrank-blend`` moves W towards N only along the top-r singular directions of their
difference: the change has rank ≤ r, and with r = full rank it equals ``blend``. The paper
names the five strategies; their exact definitions are INFERRED (SPECS §1.5). Note that
``scale`` multiplies every matrix of the block, so the attention logits scale by α² and a
SwiGLU MLP's output by about α³.

**Recovery speed.** Add Gaussian noise to one layer, each matrix W getting
ε ~ N(0, (f·std(W))²) with f = ``noise_fraction`` (the paper's "50 % noise" read as f = 0.5),
then fine-tune with AdamW and count optimizer steps until evaluation perplexity is back at or
below the intact model's. 0 steps means the noised model was already no worse;
``None`` means it did not recover within ``max_steps``. Everything is restored afterwards.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from .evaluation import (Batch, PrefixCache, batch_nll_from_layer, capture_prefix, nll_from_layer, nll_full,
                         perplexity)
from .layers import MODULE_PATHS, decoder_layers, layer_module
from .validate import AnatomyKitError, check_choice, check_int, check_layer_index, check_positive
from .weights import MODULES, substituted

__all__ = ["STRATEGIES", "NEIGHBOURS", "neighbour_weight", "low_rank", "manipulated_weights", "manipulated",
           "noise_weights", "noised", "count_recovery_steps", "Recovery", "recovery_speed"]

STRATEGIES = ("zero", "clone", "blend", "lowrank-blend", "scale")
NEIGHBOURS = ("previous", "next", "mean")


def _check_modules(modules: Sequence[str]) -> tuple[str, ...]:
    if isinstance(modules, str) or not modules:
        raise AnatomyKitError(f"modules={modules!r} must be a non-empty list of names from {list(MODULE_PATHS)}")
    for m in modules:
        check_choice("module", m, MODULE_PATHS)
    return tuple(modules)


def neighbour_weight(model: nn.Module, layer: int, module: str, neighbour: str = "previous") -> torch.Tensor:
    """The neighbour matrix N of ``module`` for ``layer`` (see the module docstring); a copy."""
    check_choice("neighbour", neighbour, NEIGHBOURS)
    n = len(decoder_layers(model))
    check_layer_index("layer", layer, n)
    if n < 2:
        raise AnatomyKitError("a neighbour needs a model with at least 2 layers")
    if neighbour == "previous":
        idx = [layer - 1 if layer > 0 else 1]
    elif neighbour == "next":
        idx = [layer + 1 if layer < n - 1 else n - 2]
    else:
        idx = [j for j in (layer - 1, layer + 1) if 0 <= j < n]
    return sum(layer_module(model, j, module).weight.detach() for j in idx) / len(idx)


def low_rank(M: torch.Tensor, rank: int) -> torch.Tensor:
    """Best rank-``rank`` approximation of a matrix (out, in) by truncated SVD (Eckart–Young)."""
    if not isinstance(M, torch.Tensor) or M.dim() != 2:
        raise AnatomyKitError(f"low_rank needs a 2-D matrix, got {getattr(M, 'shape', type(M).__name__)!r}")
    check_int("rank", rank, minimum=1, maximum=min(M.shape))
    U, S, Vh = torch.linalg.svd(M.double(), full_matrices=False)
    return ((U[:, :rank] * S[:rank]) @ Vh[:rank]).to(M.dtype)


def manipulated_weights(model: nn.Module, layer: int, strategy: str, *, modules: Sequence[str] = MODULES,
                        neighbour: str = "previous", beta: float = 0.5, rank: int = 8,
                        alpha: float = 0.9) -> dict[tuple[int, str], torch.Tensor]:
    """The new weights {(layer, module): tensor} that ``strategy`` gives ``layer`` (pure; chapter 2).

    ``beta`` ∈ [0, 1] (blend, lowrank-blend), ``rank`` ≥ 1 (lowrank-blend), ``alpha`` > 0 (scale).
    """
    check_choice("strategy", strategy, STRATEGIES)
    modules = _check_modules(modules)
    check_layer_index("layer", layer, len(decoder_layers(model)))
    check_choice("neighbour", neighbour, NEIGHBOURS)
    if strategy == "scale":
        check_positive("alpha", alpha)
    if strategy in ("blend", "lowrank-blend"):
        try:
            b = float(beta)
        except (TypeError, ValueError):
            raise AnatomyKitError(f"beta={beta!r} must be a number in [0, 1]") from None
        if not 0 <= b <= 1:
            raise AnatomyKitError(f"beta={beta!r} must lie in [0, 1] (the share of the layer's own weights)")
    out = {}
    for m in modules:
        W = layer_module(model, layer, m).weight.detach()
        if strategy == "zero":
            new = torch.zeros_like(W)
        elif strategy == "scale":
            new = float(alpha) * W
        else:
            N = neighbour_weight(model, layer, m, neighbour)
            if strategy == "clone":
                new = N.clone()
            elif strategy == "blend":
                new = float(beta) * W + (1 - float(beta)) * N
            else:
                if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= min(W.shape):
                    raise AnatomyKitError(f"rank={rank!r} must be an integer in 1..{min(W.shape)} "
                                          f"for module {m!r} of shape {tuple(W.shape)}")
                new = W + (1 - float(beta)) * low_rank(N - W, rank)
        out[(layer, m)] = new
    return out


@contextmanager
def manipulated(model: nn.Module, layers: int | Sequence[int], strategy: str, **kwargs) -> Iterator[None]:
    """Context manager: ``strategy`` applied to every layer in ``layers``; restored exactly afterwards.

    All new weights are computed from the *original* model before any is written, so
    manipulating neighbouring layers together never reads an already-manipulated neighbour.
    Keyword arguments as in :func:`manipulated_weights` (chapter 2).
    """
    layers = [layers] if isinstance(layers, int) else list(layers)
    if not layers:
        raise AnatomyKitError("layers is empty; give at least one layer index")
    new: dict[tuple[int, str], torch.Tensor] = {}
    for l in layers:
        new.update(manipulated_weights(model, l, strategy, **kwargs))
    with substituted(model, new):
        yield


# ----------------------------------------------------------------------------- recovery speed


def noise_weights(model: nn.Module, layer: int, fraction: float, *, modules: Sequence[str] = MODULES,
                  seed: int = 0) -> dict[tuple[int, str], torch.Tensor]:
    """W + ε for every module of ``layer``, ε ~ N(0, (fraction · std(W))²) i.i.d. per element (pure)."""
    check_positive("noise_fraction", fraction)
    modules = _check_modules(modules)
    check_layer_index("layer", layer, len(decoder_layers(model)))
    check_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed * 1_000_003 + layer)
    out = {}
    for m in modules:
        W = layer_module(model, layer, m).weight.detach()
        eps = torch.randn(W.shape, generator=g, dtype=torch.float32).to(W.device, W.dtype)
        out[(layer, m)] = W + float(fraction) * float(W.float().std()) * eps
    return out


@contextmanager
def noised(model: nn.Module, layer: int, fraction: float, **kwargs) -> Iterator[None]:
    """Context manager: ``layer`` carries Gaussian noise (see :func:`noise_weights`); restored after."""
    with substituted(model, noise_weights(model, layer, fraction, **kwargs)):
        yield


def count_recovery_steps(evaluate: Callable[[], float], step: Callable[[int], None], baseline: float,
                         max_steps: int) -> tuple[int | None, list[float]]:
    """Evaluate, then alternate ``step(k)`` / evaluate until the value is ≤ ``baseline``.

    Returns (steps, curve): steps = k ≥ 0, the number of ``step`` calls after which the value
    first was ≤ baseline (0: already at the start), or ``None`` if that never happened within
    ``max_steps``; curve = every value evaluated (length steps + 1, or max_steps + 1).
    """
    check_int("max_steps", max_steps, minimum=0)
    curve = [float(evaluate())]
    if curve[0] <= baseline:
        return 0, curve
    for k in range(1, max_steps + 1):
        step(k)
        curve.append(float(evaluate()))
        if not math.isfinite(curve[-1]):
            raise AnatomyKitError(f"evaluation became non-finite ({curve[-1]}) after step {k}; lower lr")
        if curve[-1] <= baseline:
            return k, curve
    return None, curve


@dataclass
class Recovery:
    """Recovery of one noised layer (chapter 2). ``steps`` is ``None`` if it did not recover."""

    layer: int
    noise_fraction: float
    baseline_ppl: float
    noised_ppl: float
    steps: int | None
    max_steps: int
    trainable: str
    lr: float
    curve: list[float] = field(default_factory=list)   # eval PPL after 0, 1, … steps

    @property
    def recovered(self) -> bool:
        return self.steps is not None

    def steps_or(self, value: float) -> float:
        """Steps, or ``value`` (e.g. max_steps + 1 or inf) when the layer did not recover."""
        return float(self.steps) if self.steps is not None else float(value)

    def describe(self) -> str:
        done = f"{self.steps} steps" if self.recovered else f"did not recover within {self.max_steps} steps"
        return (f"L{self.layer}: noised PPL {self.noised_ppl:.2f} (baseline {self.baseline_ppl:.2f}), {done}")

    def to_dict(self) -> dict:
        return asdict(self)


def recovery_speed(model: nn.Module, layer: int, train: PrefixCache | list[Batch], eval_cache: PrefixCache, *,
                   noise_fraction: float = 0.5, max_steps: int = 200, lr: float = 1e-4,
                   trainable: str = "layer", seed: int = 0, modules: Sequence[str] = MODULES,
                   evaluate: Callable[[nn.Module], float] | None = None, progress: bool = False) -> Recovery:
    """Noise ``layer``, fine-tune, count steps until eval PPL ≤ the intact model's (chapter 2).

    Parameters
    ----------
    train: training batches, as a :class:`PrefixCache` of the *intact* model (needed for
        ``trainable="layer"``; a list of batches is captured here) or a list of batches. Step k
        uses batch (k−1) mod len(batches).
    eval_cache: :func:`capture_prefix` of the intact model on the evaluation batches; its
        ``baseline_ppl`` is the target.
    noise_fraction: noise std as a fraction of each matrix's weight std (> 0).
    trainable: ``"layer"``: only the noised layer's parameters train (all of them, norms
        included); layers before it are unchanged, so training and evaluation replay only layers
        ℓ … L−1 from the cached prefix. ``"model"``: every parameter trains, full forwards.
    lr: AdamW learning rate (β = (0.9, 0.999), no weight decay, no schedule, grad-norm clip 1.0).
    evaluate: override the evaluation (a callable model → PPL), e.g. for tests.

    The model is restored exactly afterwards (parameters and ``requires_grad`` flags).
    """
    n = len(decoder_layers(model))
    check_layer_index("layer", layer, n)
    check_positive("noise_fraction", noise_fraction)
    check_positive("lr", lr)
    check_int("max_steps", max_steps, minimum=0)
    check_choice("trainable", trainable, ("layer", "model"))
    if not isinstance(eval_cache, PrefixCache):
        raise AnatomyKitError("eval_cache must be a PrefixCache from evaluation.capture_prefix(model, batches)")
    if isinstance(train, PrefixCache):
        train_cache, train_batches = train, train.batches
    else:
        train_batches = list(train)
        train_cache = None
    if max_steps > 0 and not train_batches:
        raise AnatomyKitError("train holds no batches; give at least one training batch")
    if trainable == "layer" and train_cache is None and max_steps > 0:
        train_cache = capture_prefix(model, train_batches)

    if evaluate is None:
        if trainable == "layer":
            evaluate = lambda m: math.exp(nll_from_layer(m, eval_cache, layer) / eval_cache.n_targets)  # noqa: E731
        else:
            evaluate = lambda m: perplexity(m, eval_cache.batches)  # noqa: E731

    params = list(decoder_layers(model)[layer].parameters()) if trainable == "layer" else list(model.parameters())
    flags = {p: p.requires_grad for p in model.parameters()}
    saved = [p.detach().clone() for p in params]
    was_training = model.training
    try:
        with torch.no_grad():
            for (l, m), value in noise_weights(model, layer, noise_fraction, modules=modules, seed=seed).items():
                layer_module(model, l, m).weight.copy_(value)
        for p in model.parameters():
            p.requires_grad_(False)
        for p in params:
            p.requires_grad_(True)
        model.eval()   # no dropout in Llama-family models; eval mode keeps it that way
        opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), weight_decay=0.0)
        bar = tqdm(total=max_steps, desc=f"recovery L{layer}", disable=not progress, leave=False)

        def step(k: int) -> None:
            i = (k - 1) % len(train_batches)
            with torch.enable_grad():
                nll = (batch_nll_from_layer(model, train_cache, i, layer) if trainable == "layer"
                       else nll_full(model, train_batches[i]))
                loss = nll / train_batches[i].n_targets
                opt.zero_grad(set_to_none=True)
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            bar.update(1)

        steps, curve = count_recovery_steps(lambda: evaluate(model), step, eval_cache.baseline_ppl, max_steps)
        bar.close()
    finally:
        with torch.no_grad():
            for p, old in zip(params, saved):
                p.copy_(old)
                p.grad = None
        for p, f in flags.items():
            p.requires_grad_(f)
        model.train(was_training)
    return Recovery(layer=layer, noise_fraction=float(noise_fraction), baseline_ppl=float(eval_cache.baseline_ppl),
                    noised_ppl=curve[0], steps=steps, max_steps=max_steps, trainable=trainable, lr=float(lr),
                    curve=curve)
