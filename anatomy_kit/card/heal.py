"""Healing, measured against a control: how much of a pruned model's perplexity gap a short fine-tune closes.

Pruned models are used after a short fine-tune (PruneMe heals with QLoRA). A fine-tune on the card's
text does two things at once: it repairs what pruning broke, and it adapts the model to that text
(on the embedded SmolLM2 at k = 3, 40 steps took the pruned model 30 % *below* the untuned intact
one). So the card fine-tunes the intact model the same way, the **control**, and reads healing
against it:

- :class:`HealRecipe` says how a model is fine-tuned: ``method`` (``"full"``: every parameter of the
  model except those of the dropped layers; ``"lora"``: LoRA adapters through ``peft`` on the linear
  maps of the kept decoder layers, the weights frozen), ``steps``, ``batch_size``, ``lr``, ``seed``,
  the evaluation schedule (:meth:`HealRecipe.eval_steps`: step 0, ``evals`` points spread over the
  run, always the last) and LoRA's rank, alpha and target modules.
- :func:`step_rows` is the training data: a seeded permutation of the training blocks
  (:func:`heal_blocks`), step ``k`` reading the next ``batch_size`` rows (wrapping around).
- :func:`fine_tune` runs one recipe on the model without ``drop`` (``drop = ()``: the intact model,
  the control) with AdamW (β = (0.9, 0.999), no weight decay, grad-norm clip 1: chapter 2's recovery
  recipe) and restores the model exactly afterwards (full: every trained parameter copied back from
  a host copy; LoRA: the adapters removed, the frozen weights never written). LoRA's ``A`` matrices
  are drawn per module from ``(seed, module name)``, so the healed and the control run start every
  layer they both have from the same adapters.
- :func:`heal_with_control` runs the control once and each pruned model with the same recipe and
  blocks; :func:`compare_runs` reads them, paired over the evaluation blocks: the healed pruned
  model against the healed intact model (ΔPPL with its t interval), and the share of the pruning
  gap that healing closes, ``1 − (ℓ_HP − ℓ_HI) / (ℓ_P − ℓ_I)`` (ℓ the mean NLL per token of the
  untuned intact model I, the untuned pruned model P, and their healed versions), with Fieller's
  interval (:func:`anatomy_kit.stats.paired_ratio_interval`). The same reading against the *untuned*
  intact model stays as a secondary line (it mixes repair with adaptation; :func:`heal_reading`).

:func:`heal_blocks` gives the training blocks: ``steps × batch_size`` blocks of the corpus's
calibration half (never a document of the evaluation half), so each step sees fresh text. Healing
on the card's 512 calibration tokens alone overfits them within a few steps (on the embedded
SmolLM2 at k = 3 the perplexity fell from 35.3 to 31.2 in two steps and then rose to 305 by step 40).
:func:`choose_method` picks ``"full"`` where a full fine-tune fits the device by the kit's memory
model (:func:`anatomy_kit.lm.estimates.fine_tune_memory`) and LoRA otherwise.
Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import hashlib
import math
import time
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from ..anatomy.blockwise import block_nll_full, block_targets, ppl_change_interval
from ..hf.evaluation import Batch, make_batches, nll_full
from ..hf.layers import decoder_layers
from ..hf.surgery import requires_grad_only, swapped
from ..progress import progress_bar
from ..validate import AnatomyKitError, check_choice, check_int, check_positive
from .errors import CorpusTooShort
from .pruning import pruned
from .text import CardText, card_text
from .heal_compare import (BEYOND_INTACT, _differs, _interval, compare_runs, describe_k, heal_reading, share_text,
                           shared_terms)
from .heal_lora import _lora_adapters, _merged_weights, lora_target_names

__all__ = ["HEAL_METHODS", "HealRecipe", "HealRun", "BEYOND_INTACT", "heal_reading", "heal_blocks", "step_rows",
           "block_nll", "lora_target_names", "fine_tune", "heal_with_control", "compare_runs", "choose_method",
           "recipe_terms", "share_text", "describe_k", "shared_terms"]

HEAL_METHODS = ("full", "lora")


@dataclass(frozen=True)
class HealRecipe:
    """How a model is fine-tuned (module docstring); the healed model and its control share one recipe.

    ``lora_targets``: the module names (their last part, e.g. ``"q_proj"``) LoRA adapts inside each
    kept decoder layer; ``None``: every linear map of the layer (:func:`lora_target_names`).
    ``evals``: evaluations after step 0 (``steps`` evaluates after every step).
    """

    method: str = "full"
    steps: int = 40
    batch_size: int = 4
    lr: float = 1e-4
    seed: int = 0
    evals: int = 4
    lora_rank: int = 16
    lora_alpha: float = 32.0
    lora_targets: tuple[str, ...] | None = None

    def validate(self) -> "HealRecipe":
        check_choice("method", self.method, HEAL_METHODS)
        check_int("steps", self.steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_positive("lr", self.lr)
        check_int("seed", self.seed, minimum=0)
        check_int("evals", self.evals, minimum=1)
        check_int("lora_rank", self.lora_rank, minimum=1)
        check_positive("lora_alpha", self.lora_alpha)
        if self.lora_targets is not None and (not self.lora_targets or not all(
                isinstance(t, str) and t and "." not in t for t in self.lora_targets)):
            raise AnatomyKitError(f"lora_targets={self.lora_targets!r}: give module names such as 'q_proj', "
                                  "'v_proj' (the last part of the name, no dots), or None for every linear map")
        return self

    def eval_steps(self) -> list[int]:
        """The steps after which the evaluation blocks are scored: 0, ``evals`` points spread evenly
        over the run (rounded), always the last."""
        points = {0, self.steps} | {round(self.steps * i / self.evals) for i in range(1, self.evals)}
        return sorted(p for p in points if 0 <= p <= self.steps)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["lora_targets"] = None if self.lora_targets is None else list(self.lora_targets)
        out["eval_steps"] = self.eval_steps()
        if self.method != "lora":
            for key in ("lora_rank", "lora_alpha", "lora_targets"):
                out.pop(key)
        return out


def recipe_terms(recipe: HealRecipe) -> str:
    """The recipe in words, for the card and the healed model's README."""
    how = ("every parameter trains (the dropped layers' excepted)" if recipe.method == "full" else
           f"LoRA through peft (rank {recipe.lora_rank}, alpha {recipe.lora_alpha:g}, on "
           f"{'every linear map' if recipe.lora_targets is None else ', '.join(recipe.lora_targets)} of each kept "
           "decoder layer; the weights frozen)")
    return (f"{recipe.steps} AdamW steps of {recipe.batch_size} blocks, lr {recipe.lr:g}, β = (0.9, 0.999), "
            f"no weight decay, grad-norm clip 1, seed {recipe.seed}; {how}")


def heal_blocks(tokenizer, text: CardText, *, steps: int, batch_size: int) -> tuple[torch.Tensor, str]:
    """``(blocks (M, block_size) int64, what they are)``: the healing text beside the card's ``text``,
    ``steps × batch_size`` blocks of the calibration half (at least the card's own calibration blocks);
    fewer, then repeated by the steps, where the corpus's calibration half holds fewer."""
    check_int("steps", steps, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    sizes = dict(block_size=text.block_size, n_eval=int(text.eval_blocks.shape[0]))
    n_card = int(text.calibration_blocks.shape[0])
    try:
        blocks = card_text(tokenizer, text.corpus, **sizes, split=text.split,
                           n_calibration=max(n_card, steps * batch_size)).calibration_blocks
    except CorpusTooShort:          # a short calibration half: all of it (the steps then repeat blocks)
        blocks = card_text(tokenizer, text.corpus, **sizes, split=text.split,
                           n_calibration=max(n_card, text.available_calibration)).calibration_blocks
    n = int(blocks.shape[0])
    fresh = "each step a fresh batch" if n >= steps * batch_size else f"repeated after {n // batch_size} steps"
    return blocks, f"{n} blocks of the calibration half ({n * text.block_size:,} tokens; {fresh})"


def step_rows(n_blocks: int, steps: int, batch_size: int, seed: int) -> torch.Tensor:
    """``(steps, batch_size)`` int64: the training blocks of every step, a permutation of the ``n_blocks``
    drawn from ``seed`` read in order, ``batch_size`` rows a step, wrapping around when it runs out."""
    check_int("n_blocks", n_blocks, minimum=1)
    check_int("steps", steps, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    order = torch.randperm(n_blocks, generator=torch.Generator().manual_seed(int(seed)))
    return order[torch.arange(steps * batch_size) % n_blocks].reshape(steps, batch_size)


@torch.no_grad()
def block_nll(model: nn.Module, batches: list[Batch]) -> np.ndarray:
    """Summed next-token NLL of every block of ``batches`` (B,), float64, through the whole model."""
    return block_nll_full(model, batches)


def _input_device(model: nn.Module) -> torch.device:
    """Where the token ids go: the input embedding's device (the first device of a split model)."""
    return model.get_input_embeddings().weight.device


@dataclass
class HealRun:
    """One fine-tune (:func:`fine_tune`): ``curve`` ``{step: PPL}`` on the evaluation blocks, the per-block
    summed NLL before and after (``rows_before``, ``rows_after``, (B,)), the parameters trained, the
    training data's fingerprint (sha256 of the token ids in the order trained), time and peak memory."""

    drop: list[int]
    recipe: dict
    curve: dict[int, float]
    rows_before: np.ndarray
    rows_after: np.ndarray
    trainable_parameters: int
    adapted_modules: int
    data_sha256: str
    seconds: float
    peak_memory_mb: float | None
    memory_kind: str
    lora_init_sha256: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("rows_before", "rows_after", "extra")}
        out["curve"] = {str(k): v for k, v in self.curve.items()}
        out["ppl_before"], out["ppl_after"] = self.curve[min(self.curve)], self.curve[max(self.curve)]
        return out


def _peak_start(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> tuple[float | None, str]:
    """Peak memory of the run in MB: CUDA's ``max_memory_allocated`` on a GPU, the process's peak resident
    memory on a CPU (which includes everything the process held before, the card's own work too)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "CUDA max_memory_allocated"
    from .cache import peak_rss_mb

    return peak_rss_mb(), "peak RSS of the process"


@contextmanager
def _restored_after_full(model: nn.Module, params: dict[str, nn.Parameter]) -> Iterator[None]:
    """Every parameter of ``params`` is copied to the host first and copied back after the block."""
    saved = {name: p.detach().to("cpu", copy=True) for name, p in params.items()}
    try:
        yield
    finally:
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(saved[name])
                p.grad = None


def _fingerprint(tensors: Sequence[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def _checked_drop(drop: Sequence[int], n_layers: int, train_blocks: torch.Tensor) -> list[int]:
    """The dropped layers, sorted and distinct, after checking them and the training blocks' shape."""
    drop = sorted({int(x) for x in drop})
    if drop and (drop[0] < 0 or drop[-1] >= n_layers or len(drop) >= n_layers):
        raise AnatomyKitError(f"drop={drop} must name fewer than {n_layers} distinct layers in 0..{n_layers - 1}")
    if not isinstance(train_blocks, torch.Tensor) or train_blocks.dim() != 2 or train_blocks.shape[0] < 1:
        raise AnatomyKitError("train_blocks must be an int64 tensor of shape (M, T) with M ≥ 1")
    return drop


def _trainable(model: nn.Module, stack: ExitStack, recipe: HealRecipe, drop: list[int], keep: list[int]):
    """``(parameters to train, LoRA adapters by name ({} for a full fine-tune), the adapters' starting
    fingerprint or None)``; what it changes on the model is undone when ``stack`` closes."""
    if recipe.method == "full":
        dropped = {id(p) for i in drop for p in decoder_layers(model)[i].parameters()}
        params = {name: p for name, p in model.named_parameters() if id(p) not in dropped}
        stack.enter_context(_restored_after_full(model, params))
        return list(params.values()), {}, None
    adapters = stack.enter_context(_lora_adapters(model, lora_target_names(model, keep, recipe.lora_targets), recipe))
    train = [p for m in adapters.values() for p in (m.lora_A["default"].weight, m.lora_B["default"].weight)]
    return train, adapters, _fingerprint([m.lora_A["default"].weight for m in adapters.values()])


def _call_healed(model: nn.Module, drop: list[int], adapters: dict, stack: ExitStack,
                 on_healed: Callable[[nn.Module], None]) -> None:
    """Run ``on_healed`` with the healed weights in place: LoRA merged into the frozen weights (the adapters
    removed first), the dropped layers skipped."""
    if not adapters:
        on_healed(model)
        return
    merged = _merged_weights(adapters)
    stack.close()                 # adapters off, flags back: the frozen weights are the model's own
    with pruned(model, drop), swapped(model, merged):
        on_healed(model)


def fine_tune(model: nn.Module, drop: Sequence[int], train_blocks: torch.Tensor, eval_batches: list[Batch],
              recipe: HealRecipe, *, on_healed: Callable[[nn.Module], None] | None = None,
              progress: bool = False) -> HealRun:
    """Fine-tune the model without ``drop`` by ``recipe`` on ``train_blocks`` (M, T), scoring ``eval_batches`` on
    the recipe's schedule; the model is restored exactly afterwards. ``on_healed(model)``: see :func:`_call_healed`
    (e.g. :func:`.exports.save_pruned` of the healed model)."""
    recipe = recipe.validate()
    n_layers = len(decoder_layers(model))
    drop = _checked_drop(drop, n_layers, train_blocks)
    keep = [i for i in range(n_layers) if i not in set(drop)]
    device = _input_device(model)
    rows = step_rows(int(train_blocks.shape[0]), recipe.steps, recipe.batch_size, recipe.seed)
    schedule = set(recipe.eval_steps())
    curve, trained = {}, []
    n = block_targets(eval_batches).astype(float)
    start = time.perf_counter()
    _peak_start(device)
    with ExitStack() as stack:
        stack.callback(model.train, model.training)
        stack.enter_context(pruned(model, drop))
        rows_before = block_nll(model, eval_batches)
        curve[0] = float(math.exp(rows_before.sum() / n.sum()))
        stack.enter_context(requires_grad_only(model, []))      # every flag restored by name at the end
        train, adapters, lora_init = _trainable(model, stack, recipe, drop, keep)
        chosen = {id(p) for p in train}
        for p in model.parameters():
            p.requires_grad_(id(p) in chosen)
        model.eval()            # no dropout: the fine-tune is deterministic given the recipe
        # a model split over devices (device_map) steps and clips tensor by tensor (foreach=False), each on its
        # own device; on one device PyTorch's default (fused per-device lists)
        foreach = None if len({p.device for p in train}) == 1 else False
        opt = torch.optim.AdamW(train, lr=recipe.lr, betas=(0.9, 0.999), weight_decay=0.0, foreach=foreach)
        bar = progress_bar(total=recipe.steps, desc=f"heal {recipe.method}, drop {drop or 'none'}", enabled=progress)
        rows_after = rows_before
        for k in range(1, recipe.steps + 1):
            (batch,) = make_batches(train_blocks[rows[k - 1]], recipe.batch_size, device)
            trained.append(batch.input_ids)
            with torch.enable_grad():
                loss = nll_full(model, batch) / batch.n_targets
                opt.zero_grad(set_to_none=True)
                loss.backward()
            torch.nn.utils.clip_grad_norm_(train, 1.0, foreach=foreach)
            opt.step()
            bar.update(1)
            if k in schedule:
                rows_after = block_nll(model, eval_batches)
                curve[k] = float(math.exp(rows_after.sum() / n.sum()))
                if not math.isfinite(curve[k]):
                    raise AnatomyKitError(f"the evaluation became non-finite ({curve[k]}) after step {k}; lower lr")
        bar.close()
        opt.zero_grad(set_to_none=True)       # no gradient stays on the model's parameters
        del opt
        if on_healed is not None:
            _call_healed(model, drop, adapters, stack, on_healed)
    seconds = time.perf_counter() - start
    peak, kind = _peak(device)
    return HealRun(drop=drop, recipe=recipe.to_dict(), curve=curve, rows_before=rows_before, rows_after=rows_after,
                   trainable_parameters=int(sum(p.numel() for p in train)), adapted_modules=len(adapters),
                   data_sha256=_fingerprint(trained), seconds=seconds, peak_memory_mb=peak, memory_kind=kind,
                   lora_init_sha256=lora_init)


def heal_with_control(model: nn.Module, drops: dict[str, Sequence[int]], train_blocks: torch.Tensor,
                      eval_batches: list[Batch], recipe: HealRecipe, *, confidence: float = 0.95,
                      on_healed: dict[str, Callable[[nn.Module], None]] | None = None, progress: bool = False,
                      report: Callable[[str], None] | None = None) -> dict:
    """The control (the intact model under ``recipe``) once, then each pruned model of ``drops``
    ``{k: layers}`` under the same recipe and blocks; ``{"control": …, "shared": […], "by_k": {k: …}}``."""
    if not drops:
        raise AnatomyKitError("drops is empty: give at least one pruned set to heal")
    n = block_targets(eval_batches).astype(float)
    n_layers = len(decoder_layers(model))
    control = fine_tune(model, (), train_blocks, eval_batches, recipe, progress=progress)
    if report:
        report(f"control (the intact model, same recipe): PPL {control.curve[0]:.4g} → "
               f"{control.curve[max(control.curve)]:.4g} in {control.seconds:.0f} s")
    out = {"control": {**control.to_dict(),
                       "vs_untuned": _interval(ppl_change_interval(control.rows_before, control.rows_after, n,
                                                                   confidence))},
           "shared": shared_terms(control, int(train_blocks.shape[0]), len(n)), "by_k": {}}
    for k, drop in drops.items():
        run = fine_tune(model, drop, train_blocks, eval_batches, recipe, progress=progress,
                        on_healed=(on_healed or {}).get(k))
        out["by_k"][k] = {**compare_runs(control, run, n, confidence), "run": run.to_dict(),
                          "differs": _differs(control, run, n_layers)}
        if report:
            report(describe_k(k, out["by_k"][k]))
    return out


def choose_method(asked: str, shape, *, block_size: int, batch_size: int, weight_bytes: int, free_bytes: float | None,
                  on_host: bool, lora_rank: int = 16, headroom: float = 0.85) -> dict:
    """``{"method", "why", "full_gb", "lora_gb", "free_gb"}``: ``asked`` (``"full"``, ``"lora"`` or
    ``"auto"``) resolved by :func:`anatomy_kit.lm.estimates.fine_tune_memory` of ``shape``.

    ``auto``: a full fine-tune where what it needs beyond the weights already loaded (gradients, AdamW's
    two moments, activations; on the host also the copy that restores the model) fits ``headroom ×
    free_bytes``; LoRA otherwise. Unknown free memory (``None``) keeps the full fine-tune.
    """
    from ..lm.estimates import fine_tune_memory

    check_choice("heal method", asked, (*HEAL_METHODS, "auto"))
    loaded = weight_bytes * shape.params
    need = {m: fine_tune_memory(shape, block_size, batch_size, method=m, weight_bytes=weight_bytes,
                                lora_rank=lora_rank) for m in HEAL_METHODS}
    extra_full = need["full"] - loaded + (loaded if on_host else 0)
    out = {"asked": asked, "full_gb": need["full"] / 1e9, "lora_gb": need["lora"] / 1e9,
           "free_gb": None if free_bytes is None else free_bytes / 1e9}
    if asked != "auto":
        return {**out, "method": asked, "why": f"--heal-method {asked}"}
    if free_bytes is None or extra_full <= headroom * free_bytes:
        why = ("free memory unknown" if free_bytes is None else
               f"a full fine-tune needs about {extra_full / 1e9:.1f} GB beyond the loaded weights, within "
               f"{headroom:.0%} of the {free_bytes / 1e9:.1f} GB free")
        return {**out, "method": "full", "why": why}
    return {**out, "method": "lora", "why": f"a full fine-tune needs about {extra_full / 1e9:.1f} GB beyond the loaded "
                                           f"weights, more than {headroom:.0%} of the {free_bytes / 1e9:.1f} GB free"}
