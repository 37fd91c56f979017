"""Recovery speed (paper 1, Wietrzykowski 2026; chapter 2).

Add Gaussian noise to one layer, each matrix W getting
ε ~ N(0, (f·std(W))²) with f = ``noise_fraction`` (the paper's "50 % noise" read as f = 0.5),
then fine-tune with AdamW and count optimizer steps until evaluation perplexity is back at or
below the intact model's. 0 steps means the noised model was already no worse;
``None`` means it did not recover within ``max_steps``. Everything is restored afterwards.

The noise is :func:`anatomy_kit.hf.surgery.noisy_weights`; the noised and trained parameters are
swapped in with :func:`anatomy_kit.hf.surgery.swapped`, so the model is restored exactly.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

import torch
from torch import nn

from ..hf.evaluation import Batch, PrefixCache, batch_nll_from_layer, capture_prefix, nll_from_layer, nll_full, perplexity
from ..hf.layers import MODULE_PATHS, decoder_layers
from ..hf.surgery import layer_parameter_names, noisy_weights, requires_grad_only, substituted, swapped
from ..progress import progress_bar
from ..validate import AnatomyKitError, check_choice, check_int, check_layer_index, check_positive
from .predictability import MODULES

__all__ = ["noised", "count_recovery_steps", "Recovery", "recovery_speed", "LearningRateChoice", "choose_lr",
           "recovery_draws"]


@contextmanager
def noised(model: nn.Module, layer: int, fraction: float, **kwargs) -> Iterator[None]:
    """Context manager: ``layer`` carries Gaussian noise (:func:`~anatomy_kit.hf.surgery.noisy_weights`); restored after."""
    with substituted(model, noisy_weights(model, layer, fraction, **kwargs)):
        yield


def count_recovery_steps(evaluate: Callable[[], float], step: Callable[[int], None], baseline: float,
                         max_steps: int, *, full_curve: bool = False) -> tuple[int | None, list[float]]:
    """Evaluate, then alternate ``step(k)`` / evaluate until the value is ≤ ``baseline``.

    Returns (steps, curve): steps = k ≥ 0, the number of ``step`` calls after which the value
    first was ≤ baseline (0: already at the start), or ``None`` if that never happened within
    ``max_steps``; curve = every value evaluated (length steps + 1, or max_steps + 1). With
    ``full_curve`` all ``max_steps`` steps run whatever happens (a control run, or a curve that
    may recover and then degrade), and ``steps`` is still the first k at or below the baseline.
    """
    check_int("max_steps", max_steps, minimum=0)
    curve = [float(evaluate())]
    steps = 0 if curve[0] <= baseline else None
    for k in range(1, max_steps + 1):
        if steps is not None and not full_curve:
            break
        step(k)
        curve.append(float(evaluate()))
        if not math.isfinite(curve[-1]):
            raise AnatomyKitError(f"evaluation became non-finite ({curve[-1]}) after step {k}; lower lr")
        if steps is None and curve[-1] <= baseline:
            steps = k
    return steps, curve


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
    seed: int = 0                                       # the noise draw

    def excess_pct(self, step: int | None = None) -> float:
        """100 · (PPL / PPL_intact − 1) after ``step`` steps (default: the last one evaluated)."""
        value = self.curve[-1] if step is None else self.curve[check_int("step", step, minimum=0,
                                                                         maximum=len(self.curve) - 1)]
        return 100.0 * (value / self.baseline_ppl - 1)

    @property
    def recovered(self) -> bool:
        return self.steps is not None

    def steps_or(self, value: float) -> float:
        """Steps, or ``value`` (e.g. max_steps + 1 or inf) when the layer did not recover."""
        return float(self.steps) if self.steps is not None else float(value)

    def effective_steps(self) -> float:
        """Steps to recover, extended past the cap for layers that did not recover (chapter 2).

        A recovered layer gives its step count. One that did not recover within ``max_steps``
        gives ``max_steps + log(PPL_last/PPL_base) / log(PPL_first/PPL_base)``: the cap plus the
        share of its excess (in log perplexity) still left, so "barely moved" ranks above "almost
        there". A layer whose noise did no harm (first value at the baseline) gives ``max_steps + 1``.
        """
        if self.recovered:
            return float(self.steps)
        first = math.log(self.curve[0] / self.baseline_ppl)
        last = math.log(self.curve[-1] / self.baseline_ppl)
        return self.max_steps + (last / first if first > 0 else 1.0)

    def describe(self) -> str:
        done = f"{self.steps} steps" if self.recovered else f"did not recover within {self.max_steps} steps"
        return (f"L{self.layer}: noised PPL {self.noised_ppl:.2f} (baseline {self.baseline_ppl:.2f}), {done}")

    def to_dict(self) -> dict:
        return asdict(self)


def recovery_speed(model: nn.Module, layer: int, train: PrefixCache | list[Batch], eval_cache: PrefixCache, *,
                   noise_fraction: float = 0.5, max_steps: int = 200, lr: float = 1e-4,
                   trainable: str = "layer", seed: int = 0, modules: Sequence[str] = MODULES,
                   evaluate: Callable[[nn.Module], float] | None = None, progress: bool = False,
                   full_curve: bool = False) -> Recovery:
    """Noise ``layer``, fine-tune, count steps until eval PPL ≤ the intact model's (chapter 2).

    Parameters
    ----------
    train: training batches, as a :class:`PrefixCache` of the *intact* model (needed for
        ``trainable="layer"``; a list of batches is captured here) or a list of batches. Step k
        uses batch (k−1) mod len(batches).
    eval_cache: :func:`capture_prefix` of the intact model on the evaluation batches; its
        ``baseline_ppl`` is the target.
    noise_fraction: noise std as a fraction of each matrix's weight std (≥ 0; 0 is the *control*:
        the same fine-tuning of the intact layer, which shows what the recipe alone does).
    trainable: ``"layer"``: only the noised layer's parameters train (all of them, norms
        included); layers before it are unchanged, so training and evaluation replay only layers
        ℓ … L−1 from the cached prefix. ``"model"``: every parameter trains, full forwards.
    lr: AdamW learning rate (β = (0.9, 0.999), no weight decay, no schedule, grad-norm clip 1.0).
    evaluate: override the evaluation (a callable model → PPL), e.g. for tests.
    full_curve: run all ``max_steps`` steps even after recovering (see :func:`count_recovery_steps`).

    The model is restored exactly afterwards (parameters and ``requires_grad`` flags): every
    trainable parameter is swapped for a copy (:func:`~anatomy_kit.hf.surgery.swapped`), noised or
    not, so training never writes into the original storage.
    """
    check_layer_index("layer", layer, len(decoder_layers(model)))
    check_positive("noise_fraction", noise_fraction, allow_zero=True)
    check_positive("lr", lr)
    check_int("max_steps", max_steps, minimum=0)
    check_choice("trainable", trainable, ("layer", "model"))
    if not isinstance(eval_cache, PrefixCache):
        raise AnatomyKitError("eval_cache must be a PrefixCache from evaluation.capture_prefix(model, batches)")
    train_cache, train_batches = (train, train.batches) if isinstance(train, PrefixCache) else (None, list(train))
    if max_steps > 0 and not train_batches:
        raise AnatomyKitError("train holds no batches; give at least one training batch")
    if trainable == "layer" and train_cache is None and max_steps > 0:
        train_cache = capture_prefix(model, train_batches)
    if evaluate is None:
        evaluate = ((lambda m: math.exp(nll_from_layer(m, eval_cache, layer) / eval_cache.n_targets))
                    if trainable == "layer" else (lambda m: perplexity(m, eval_cache.batches)))
    params, copies = _trainable_copies(model, layer, trainable, noise_fraction, modules, seed)
    was_training = model.training
    try:
        with swapped(model, copies), requires_grad_only(model, list(params.values())):
            model.eval()   # no dropout in Llama-family models; eval mode keeps it that way
            step = _fine_tune_step(model, layer, list(params.values()), train_cache, train_batches, lr, trainable,
                                   progress, max_steps)
            steps, curve = count_recovery_steps(lambda: evaluate(model), step, eval_cache.baseline_ppl, max_steps,
                                                full_curve=full_curve)
            step.close()
    finally:
        for p in params.values():
            p.grad = None
        model.train(was_training)
    return Recovery(layer=layer, noise_fraction=float(noise_fraction), baseline_ppl=float(eval_cache.baseline_ppl),
                    noised_ppl=curve[0], steps=steps, max_steps=max_steps, trainable=trainable, lr=float(lr),
                    curve=curve, seed=int(seed))


@dataclass
class LearningRateChoice:
    """The largest learning rate whose control runs leave the intact model intact (chapter 2).

    ``controls[lr][layer]`` is the no-noise :class:`Recovery` run (the recipe alone) of that layer;
    ``max_change_pct[lr]`` the largest |PPL / PPL_intact − 1| in % over its steps and layers (a
    recipe that *improves* the eval text by adapting to the corpus moves the model too);
    ``chosen`` the largest lr with ``max_change_pct ≤ tolerance_pct`` (``ok``), or the smallest
    candidate when none qualifies (``ok = False``). An lr is abandoned at its first failing layer,
    so ``controls`` may hold fewer layers for rejected rates.
    """

    chosen: float
    ok: bool
    tolerance_pct: float
    max_change_pct: dict[float, float]
    controls: dict[float, dict[int, Recovery]]


def _max_change(r: Recovery) -> float:
    return max(abs(100 * (c / r.baseline_ppl - 1)) for c in r.curve)


def choose_lr(model: nn.Module, layers: Sequence[int], train, eval_cache: PrefixCache, *, candidates: Sequence[float],
              max_steps: int, tolerance_pct: float = 1.0, store=None, **kwargs) -> LearningRateChoice:
    """Run the recipe without noise (:func:`recovery_speed` with ``noise_fraction=0``, all
    ``max_steps`` steps) from the largest candidate lr down; keep the first lr whose control curve
    stays within ``tolerance_pct`` % of the intact perplexity at every step on every layer (chapter 2).

    ``store`` (dict-like) keeps each control run under ``"control/<lr>/<layer>"``; other keyword
    arguments go to :func:`recovery_speed` (``trainable``, ``evaluate`` …).
    """
    if not candidates or not layers:
        raise AnatomyKitError("choose_lr needs at least one candidate learning rate and one layer")
    lrs = sorted({check_positive("lr", c) for c in candidates}, reverse=True)
    check_positive("tolerance_pct", tolerance_pct, allow_zero=True)
    controls: dict[float, dict[int, Recovery]] = {}
    change: dict[float, float] = {}
    for lr in lrs:
        controls[lr] = {}
        for layer in layers:
            key = f"control/{lr:g}/{layer}"
            if store is not None and key in store:
                r = Recovery(**store[key])
            else:
                r = recovery_speed(model, layer, train, eval_cache, noise_fraction=0.0, max_steps=max_steps,
                                   lr=lr, full_curve=True, **kwargs)
                if store is not None:
                    store[key] = r.to_dict()
            controls[lr][layer] = r
            change[lr] = max(change.get(lr, 0.0), _max_change(r))
            if change[lr] > tolerance_pct:
                break
        if change[lr] <= tolerance_pct:
            return LearningRateChoice(lr, True, float(tolerance_pct), change, controls)
    last = lrs[-1]
    for layer in layers:       # the fallback still needs a control curve on every layer
        if layer not in controls[last]:
            controls[last][layer] = recovery_speed(model, layer, train, eval_cache, noise_fraction=0.0,
                                                   max_steps=max_steps, lr=last, full_curve=True, **kwargs)
    return LearningRateChoice(last, False, float(tolerance_pct), change, controls)


def recovery_draws(model: nn.Module, layers: Sequence[int], train, eval_cache: PrefixCache, *, seeds: Sequence[int],
                   lr: float, max_steps: int, store=None, **kwargs) -> dict[int, list[Recovery]]:
    """:func:`recovery_speed` of every layer for every noise seed (one noise draw each), full curves.

    Returns ``{layer: [Recovery per seed]}``; ``store`` keeps each run under
    ``"recovery/<lr>/<max_steps>/<layer>/<seed>"``. ``max_steps=0`` measures only the damage right
    after the noise (no training; cheap, so it can use more draws). Keyword arguments go to
    :func:`recovery_speed` (chapter 2).
    """
    if not seeds or not layers:
        raise AnatomyKitError("recovery_draws needs at least one layer and one noise seed")
    out: dict[int, list[Recovery]] = {}
    for layer in layers:
        out[layer] = []
        for seed in seeds:
            key = f"recovery/{lr:g}/{max_steps}/{layer}/{seed}"
            if store is not None and key in store:
                out[layer].append(Recovery(**store[key]))
                continue
            r = recovery_speed(model, layer, train, eval_cache, lr=lr, seed=seed, max_steps=max_steps,
                               full_curve=True, **kwargs)
            out[layer].append(r)
            if store is not None:
                store[key] = r.to_dict()
    return out


def _trainable_copies(model, layer, trainable, noise_fraction, modules, seed):
    """The parameters that train, and the copies swapped in for them (noised where ``noise_fraction`` > 0)."""
    names = set(layer_parameter_names(model, layer).values()) if trainable == "layer" else None
    params = {n: p for n, p in model.named_parameters() if names is None or n in names}
    copies = {n: p.detach().clone() for n, p in params.items()}
    if noise_fraction > 0:
        for (l, m), value in noisy_weights(model, layer, noise_fraction, modules=modules, seed=seed).items():
            copies[_weight_name(model, l, m)] = value
    return params, copies


def _weight_name(model: nn.Module, layer: int, module: str) -> str:
    return layer_parameter_names(model, layer)[f"{MODULE_PATHS[module]}.weight"]


class _fine_tune_step:
    """One AdamW step on training batch (k−1) mod n: the callable :func:`count_recovery_steps` drives."""

    def __init__(self, model, layer, params, train_cache, train_batches, lr, trainable, progress, max_steps):
        self.model, self.layer, self.params = model, layer, params
        self.cache, self.batches, self.trainable = train_cache, train_batches, trainable
        self.opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), weight_decay=0.0)
        self.bar = progress_bar(total=max_steps, desc=f"recovery L{layer}", enabled=progress)

    def __call__(self, k: int) -> None:
        i = (k - 1) % len(self.batches)
        with torch.enable_grad():
            nll = (batch_nll_from_layer(self.model, self.cache, i, self.layer) if self.trainable == "layer"
                   else nll_full(self.model, self.batches[i]))
            loss = nll / self.batches[i].n_targets
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
