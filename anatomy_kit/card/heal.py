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
from ..stats import paired_ratio_interval
from ..validate import AnatomyKitError, check_choice, check_int, check_positive
from .errors import CorpusTooShort
from .pruning import pruned
from .text import CardText, card_text

__all__ = ["HEAL_METHODS", "HealRecipe", "HealRun", "BEYOND_INTACT", "heal_reading", "heal_blocks", "step_rows",
           "block_nll", "lora_target_names", "fine_tune", "heal_with_control", "compare_runs", "choose_method",
           "recipe_terms", "share_text", "describe_k", "shared_terms"]

HEAL_METHODS = ("full", "lora")

#: what "gap closed" against the *untuned* intact model means when the healed model beats it
BEYOND_INTACT = ("the healed model is better than the untuned intact one: the fine-tune also adapts the model to "
                 "this text, so this share of the gap closed is not the pruning's alone (read the share against "
                 "the intact model fine-tuned the same way)")


def heal_reading(vs_intact_high: float) -> str | None:
    """A warning for the secondary, untuned comparison when the healed model's whole ΔPPL interval against
    the untuned intact model lies below 0 (``vs_intact_high`` < 0, in %); ``None`` otherwise (an interval
    touching or straddling 0 is silent)."""
    return BEYOND_INTACT if vs_intact_high < 0 else None


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


def lora_target_names(model: nn.Module, keep: Sequence[int], targets: Sequence[str] | None = None) -> list[str]:
    """Full names of the modules LoRA adapts: the linear maps (``nn.Linear``, or GPT-2's ``Conv1D``) inside
    the decoder layers ``keep``, those whose last name part is in ``targets`` (``None``: all of them)."""
    layers = decoder_layers(model)
    by_layer = {id(layer): i for i, layer in enumerate(layers)}
    prefix = {}
    for name, module in model.named_modules():
        if id(module) in by_layer:
            prefix[by_layer[id(module)]] = name
    names, seen = [], set()
    for i in sorted(set(int(x) for x in keep)):
        for sub, module in layers[i].named_modules():
            if sub and _is_linear(module):
                seen.add(sub.rsplit(".", 1)[-1])
                if targets is None or sub.rsplit(".", 1)[-1] in targets:
                    names.append(f"{prefix[i]}.{sub}")
    missing = sorted(set(targets or ()) - seen)
    if missing:
        raise AnatomyKitError(f"lora_targets {missing} name no linear map of the decoder layers; this model's are "
                              f"{sorted(seen)}")
    return names


def _is_linear(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"


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


def _lora_seed(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") & (2**63 - 1)


@contextmanager
def _lora_adapters(model: nn.Module, names: list[str], recipe: HealRecipe) -> Iterator[dict[str, nn.Module]]:
    """peft's LoRA on the modules ``names`` (``{name: LoRA layer}``); removed after the block, the frozen
    weights never written. Each ``A`` is drawn from ``(seed, name)`` as peft draws it (Kaiming-uniform,
    a = √5); each ``B`` starts at 0, so the adapted model starts as the model."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=recipe.lora_rank, lora_alpha=recipe.lora_alpha, lora_dropout=0.0, target_modules=names,
                        bias="none")
    wrapped = get_peft_model(model, config)
    try:
        adapters = {n: m for n, m in model.named_modules() if n in set(names) and hasattr(m, "lora_A")}
        if len(adapters) != len(names):
            raise AnatomyKitError(f"peft adapted {len(adapters)} of the {len(names)} modules asked for")
        with torch.no_grad():
            for name, module in adapters.items():
                a = module.lora_A["default"].weight
                g = torch.Generator().manual_seed(_lora_seed(recipe.seed, name))
                a.copy_(nn.init.kaiming_uniform_(torch.empty(a.shape, dtype=a.dtype), a=math.sqrt(5), generator=g))
                module.lora_B["default"].weight.zero_()
        yield adapters
    finally:
        wrapped.unload()


def _merged_weights(adapters: dict[str, nn.Module]) -> dict[str, torch.Tensor]:
    """``{parameter name: W + ΔW}`` of every adapted weight, on the host (the model is not written)."""
    out = {}
    with torch.no_grad():
        for name, module in adapters.items():
            base = module.get_base_layer()
            delta = module.get_delta_weight("default").to(base.weight.dtype)
            out[f"{name}.weight"] = (base.weight + delta.to(base.weight.device)).to("cpu")
    return out


def _fingerprint(tensors: Sequence[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def fine_tune(model: nn.Module, drop: Sequence[int], train_blocks: torch.Tensor, eval_batches: list[Batch],
              recipe: HealRecipe, *, on_healed: Callable[[nn.Module], None] | None = None,
              progress: bool = False) -> HealRun:
    """Fine-tune the model without ``drop`` by ``recipe`` on ``train_blocks`` (M, T) and score ``eval_batches``
    on the recipe's schedule (module docstring); the model is restored exactly afterwards.

    ``on_healed(model)`` runs once training ends, with the healed weights in place (LoRA merged into them)
    and the dropped layers skipped: e.g. :func:`.exports.save_pruned` of the healed model.
    """
    recipe = recipe.validate()
    n_layers = len(decoder_layers(model))
    drop = sorted({int(x) for x in drop})
    if drop and (drop[0] < 0 or drop[-1] >= n_layers or len(drop) >= n_layers):
        raise AnatomyKitError(f"drop={drop} must name fewer than {n_layers} distinct layers in 0..{n_layers - 1}")
    if not isinstance(train_blocks, torch.Tensor) or train_blocks.dim() != 2 or train_blocks.shape[0] < 1:
        raise AnatomyKitError("train_blocks must be an int64 tensor of shape (M, T) with M ≥ 1")
    keep = [i for i in range(n_layers) if i not in set(drop)]
    device = _input_device(model)
    rows = step_rows(int(train_blocks.shape[0]), recipe.steps, recipe.batch_size, recipe.seed)
    schedule = set(recipe.eval_steps())
    curve, trained = {}, []
    n = block_targets(eval_batches).astype(float)
    was_training = model.training
    start = time.perf_counter()
    _peak_start(device)
    with ExitStack() as stack:
        stack.callback(model.train, was_training)
        stack.enter_context(pruned(model, drop))
        rows_before = block_nll(model, eval_batches)
        curve[0] = float(math.exp(rows_before.sum() / n.sum()))
        stack.enter_context(requires_grad_only(model, []))      # every flag restored by name at the end
        dropped = {id(p) for i in drop for p in decoder_layers(model)[i].parameters()}
        adapters, lora_init = {}, None
        if recipe.method == "full":
            params = {name: p for name, p in model.named_parameters() if id(p) not in dropped}
            stack.enter_context(_restored_after_full(model, params))
            train = list(params.values())
        else:
            adapters = stack.enter_context(_lora_adapters(model, lora_target_names(model, keep, recipe.lora_targets),
                                                          recipe))
            train = [p for m in adapters.values() for p in (m.lora_A["default"].weight, m.lora_B["default"].weight)]
            lora_init = _fingerprint([m.lora_A["default"].weight for m in adapters.values()])
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
        opt.zero_grad(set_to_none=True)
        del opt
        if on_healed is not None:
            if adapters:
                merged = _merged_weights(adapters)
                stack.close()                 # adapters off, flags back: the frozen weights are the model's own
                with pruned(model, drop), swapped(model, merged):
                    on_healed(model)
            else:
                on_healed(model)
    seconds = time.perf_counter() - start
    peak, kind = _peak(device)
    return HealRun(drop=drop, recipe=recipe.to_dict(), curve=curve, rows_before=rows_before, rows_after=rows_after,
                   trainable_parameters=int(sum(p.numel() for p in train)), adapted_modules=len(adapters),
                   data_sha256=_fingerprint(trained), seconds=seconds, peak_memory_mb=peak, memory_kind=kind,
                   lora_init_sha256=lora_init)


def _interval(x) -> dict:
    return {"delta_pct": x.mean, "low": x.low, "high": x.high}


def _share(numerator: np.ndarray, gap: np.ndarray, confidence: float) -> dict:
    """``1 − mean(numerator) / mean(gap)`` with Fieller's interval (unbounded: ``None`` ends)."""
    if float(np.mean(gap)) <= 0:
        return {"share": None, "low": None, "high": None, "bounded": False,
                "why": "pruning did not raise the perplexity here: there is no gap to close"}
    r = paired_ratio_interval(numerator, gap, confidence)
    out = {"share": 1 - r.ratio, "low": 1 - r.high if r.bounded else None, "high": 1 - r.low if r.bounded else None,
           "bounded": r.bounded}
    if not r.bounded:
        out["why"] = "the pruning gap's own interval contains 0 here, so no share can be excluded"
    return out


def compare_runs(control: HealRun, healed: HealRun, n_targets: np.ndarray, confidence: float = 0.95) -> dict:
    """The healed pruned model read against the control (module docstring), paired over the evaluation blocks.

    ``control``: the intact model's run (``drop = []``); ``healed``: the pruned model's, same recipe and
    blocks. Returns JSON-ready numbers: ``vs_control`` (ΔPPL % of the healed pruned against the healed
    intact model), ``gap_closed`` (the share of the pruning gap healing closes, with Fieller's interval),
    ``gap_before`` (the untuned pruned model against the untuned intact one), ``vs_pruned``, and under
    ``untuned`` the secondary reading against the untuned intact model.
    """
    if control.drop:
        raise AnatomyKitError(f"the control is the intact model; it dropped {control.drop}")
    if control.recipe != healed.recipe or control.data_sha256 != healed.data_sha256:
        raise AnatomyKitError("the control and the healed model were not trained alike (recipe or data differ)")
    n = np.asarray(n_targets, float)
    intact, pruned_rows = control.rows_before, healed.rows_before
    healed_intact, healed_pruned = control.rows_after, healed.rows_after
    gap = (pruned_rows - intact) / n
    vs_intact = ppl_change_interval(intact, healed_pruned, n, confidence)
    return {
        "layers": healed.drop,
        "ppl_pruned": healed.curve[0], "ppl_healed": healed.curve[max(healed.curve)],
        "ppl_control": control.curve[max(control.curve)],
        "gap_before": _interval(ppl_change_interval(intact, pruned_rows, n, confidence)),
        "vs_control": _interval(ppl_change_interval(healed_intact, healed_pruned, n, confidence)),
        "gap_closed": _share((healed_pruned - healed_intact) / n, gap, confidence),
        "vs_pruned": _interval(ppl_change_interval(pruned_rows, healed_pruned, n, confidence)),
        "untuned": {"vs_intact": _interval(vs_intact),
                    "gap_closed": _share((healed_pruned - intact) / n, gap, confidence),
                    "reading": heal_reading(vs_intact.high)},
    }


def _differs(control: HealRun, healed: HealRun, n_layers: int) -> list[str]:
    """What the healed model and the control do not share, in words."""
    trains = ("LoRA adapters' parameters" if healed.recipe["method"] == "lora" else "parameters")
    return [f"the healed model runs without layers {healed.drop} (0-based), the control with all {n_layers}",
            f"the healed model trains {healed.trainable_parameters:,} {trains}, the control "
            f"{control.trainable_parameters:,} (nothing of the dropped layers trains)",
            f"they start from different models: perplexity {healed.curve[0]:.4g} pruned, {control.curve[0]:.4g} "
            "intact"]


def shared_terms(control: HealRun, n_train_blocks: int, n_eval_blocks: int) -> list[str]:
    """What the healed models and the control share, in words (heal.json, the command's output, the card)."""
    r = control.recipe
    out = [f"the same {n_train_blocks} training blocks in the same order (seed {r['seed']}; token ids sha256 "
           f"{control.data_sha256[:16]}…)",
           f"{r['steps']} steps of {r['batch_size']} blocks, learning rate {r['lr']:g}, AdamW β = (0.9, 0.999), "
           "no weight decay, grad-norm clip 1",
           f"the method: {'every parameter' if r['method'] == 'full' else 'LoRA'}"
           + (f" (rank {r['lora_rank']}, alpha {r['lora_alpha']:g}, targets "
              f"{'every linear map' if r['lora_targets'] is None else ', '.join(r['lora_targets'])}; each layer's "
              "adapters drawn from the seed and the module's name, so a layer both models have starts alike)"
              if r["method"] == "lora" else ""),
           f"the {n_eval_blocks} evaluation blocks, scored after steps {r['eval_steps']}"]
    return out


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


def share_text(g: dict) -> str:
    """``"62 % [41, 80] (Fieller)"``, or the share and why it has no interval."""
    if g["share"] is None:
        return f"not defined ({g['why']})"
    if not g["bounded"]:
        return f"{100 * g['share']:.0f} % (no interval: {g['why']})"
    return f"{100 * g['share']:.0f} % [{100 * g['low']:.0f}, {100 * g['high']:.0f}] (Fieller)"


def describe_k(k: str, e: dict) -> str:
    """One line per healed k: the comparison with the control first, the untuned one after."""
    v, u = e["vs_control"], e["untuned"]
    share = share_text(e["gap_closed"])
    return (f"healed k={k} {e['layers']}: PPL {e['ppl_pruned']:.4g} → {e['ppl_healed']:.4g}; against the intact "
            f"model healed alike (PPL {e['ppl_control']:.4g}) {v['delta_pct']:+.1f} % [{v['low']:+.1f}, "
            f"{v['high']:+.1f}]; pruning gap closed {share}; secondary, against the untuned intact model: "
            f"{u['vs_intact']['delta_pct']:+.1f} % [{u['vs_intact']['low']:+.1f}, {u['vs_intact']['high']:+.1f}]"
            + (f" ({u['reading']})" if u["reading"] else ""))


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
