"""Time and memory of each chapter at full scale, *estimated* from FLOP counts (the book's page on running).

For every chapter the dominant computations of its ``full`` defaults are counted in FLOPs
(forward ``2·N + 4·L·T·d`` per token, training three times that, with ``N`` the weights' parameters
and the LM head included; :func:`anatomy_kit.lm.model.training_flops` for the kit's decoder) and
divided by an *assumed* throughput of one reference GPU (an H100 SXM; an H200 computes as fast):
bf16 training at 40 % MFU (the target of ``benchmarks/gpu_check.py``) and float32 inference at
50 % of the float32 peak (the chapters evaluate in float32, without TF32). Peaks are NVIDIA's
data-sheet figures. Memory: float32 weights for inference; for training (:func:`training_memory`)
16 bytes per parameter (float32 weights and gradients, two AdamW moments; under bf16 autocast 2
more for the cached bf16 copies of the weights), what autograd keeps of every layer
(:func:`activation_bytes`: the float32 residual stream that each norm keeps, and the matmul
inputs and outputs in bf16 under autocast — SwiGLU keeps 4 of its hidden width, gate and up, the
SiLU and the product), and the logits' cross-entropy, whose float32 log-softmax and two gradients
of the vocabulary's width are alive at once in the backward pass (12 bytes per token and
vocabulary entry). The kit's training loop drops the logits themselves before the backward pass.
What is not FLOP-bound (chapter 4's geometry on the CPU, data loading) is left out. These are
estimates to plan a run, not measurements (``benchmarks/gpu_check.py`` compares one with
``torch.cuda.max_memory_allocated``); replace the assumed throughput by a measured one
(``--flops`` below, e.g. ``train.flops_per_s`` from gpu_check's JSON). :func:`choose_micro_batch`
turns the memory model into a micro-batch and activation checkpointing that fit a GPU.

    python -m anatomy_kit.lm.estimates            # the table on the running page
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from ..validate import AnatomyKitError, check_choice, check_int

__all__ = ["ModelShape", "HUB_SHAPES", "ASSUMED_FLOPS", "Estimate", "forward_flops", "training_memory",
           "activation_bytes", "MemoryPlan", "choose_micro_batch", "chapter_estimates", "markdown_table", "duration",
           "width_solver_rules", "width_solver_runs", "FULL_SIZES", "pass_flops", "hour_estimates", "hour_estimate",
           "hour_markdown_table"]

H100_BF16, H100_FP32 = 989e12, 67e12      # dense peaks, NVIDIA H100 SXM data sheet
#: assumed sustained FLOP/s of the reference GPU, by kind of work
ASSUMED_FLOPS = {"train-bf16": 0.40 * H100_BF16, "eval-fp32": 0.50 * H100_FP32, "train-fp32": 0.50 * H100_FP32}


@dataclass(frozen=True)
class ModelShape:
    """What the estimates need of a model: parameters (head included once), layers, width, vocabulary,
    and for activations the FFN (hidden width, ``"swiglu"`` or ``"gelu"``), the norm (``"rms"`` or
    ``"layer"``), whether it uses rotary positions, and how many matmuls read each of a layer's two
    norms (the kit's decoder: one fused q|k|v and one fused gate|up; separate q, k, v: 3)."""

    params: float
    n_layers: int
    d_model: int
    vocab: int
    ffn_width: int = 0          # 0: 4·d_model
    ffn: str = "swiglu"
    rope: bool = True
    norm: str = "rms"
    norm_readers: tuple[int, int] = (1, 1)

    @property
    def width(self) -> int:
        """The FFN's hidden width."""
        return self.ffn_width or 4 * self.d_model

    def norm_bytes(self) -> int:
        """Float32 bytes per token that one norm keeps: its input, and RMSNorm (composed of elementwise
        operations in eager PyTorch) also its normalised vector before the gain."""
        return (8 if self.norm == "rms" else 4) * self.d_model


#: The hub models of the chapters' full scale (numbers from their config.json and model cards).
HUB_SHAPES = {name: ModelShape(*shape, norm_readers=(3, 2)) for name, shape in {   # q, k, v; gate, up
    "HuggingFaceTB/SmolLM2-135M": (134.5e6, 30, 576, 49152, 1536),
    "HuggingFaceTB/SmolLM2-1.7B": (1.71e9, 24, 2048, 49152, 8192),
    "meta-llama/Llama-3.2-1B": (1.24e9, 16, 2048, 128256, 8192),
    "meta-llama/Llama-3.2-3B": (3.21e9, 28, 3072, 128256, 8192),
    "meta-llama/Llama-3.1-8B": (8.03e9, 32, 4096, 128256, 14336),
    "google/gemma-2-2b": (2.61e9, 26, 2304, 256000, 9216),
    "google/gemma-2-9b": (9.24e9, 42, 3584, 256000, 14336),
    "google/gemma-3-1b-pt": (1.0e9, 26, 1152, 262144, 6912),
    "mistralai/Mistral-7B-v0.3": (7.25e9, 32, 4096, 32768, 14336),
}.items()}


def forward_flops(m: ModelShape, tokens: float, seq_len: int) -> float:
    """``(2·N + 4·L·T·d)·tokens``: one forward pass (weights and attention scores)."""
    return (2 * m.params + 4 * m.n_layers * seq_len * m.d_model) * tokens


def activation_bytes(m: ModelShape, precision: str = "bf16") -> float:
    """Bytes autograd keeps per token and decoder layer of a pre-norm decoder (the kit's; chapter 5).

    The residual stream is float32 (under bf16 autocast too: the embedding is float32 and adding a
    bf16 branch output to it promotes); each of the two norms keeps float32 vectors
    (:meth:`ModelShape.norm_bytes`: RMSNorm 8·d, LayerNorm 4·d). The matmul inputs and outputs
    take ``a`` bytes per value (2 under bf16 autocast, 4 in float32): the two norms' outputs
    (under autocast each matmul that reads one keeps its own bf16 copy: ``norm_readers``),
    q|k|v (3·d), rotated q and k (2·d, with rotary positions), the attention output, and the
    FFN: SwiGLU keeps gate|up (2·w), SiLU(gate) and the product (4·w in all), a GELU FFN its
    hidden pre- and post-activation (2·w). Checked against the tensors autograd saves
    (tests/test_estimates.py). Hugging Face layers keep somewhat more (e.g. float32 copies
    inside their RMSNorm).
    """
    check_choice("precision", precision, ("bf16", "fp32"))
    a = 2 if precision == "bf16" else 4
    norm_outputs = sum(m.norm_readers) if precision == "bf16" else 2
    attention = (3 + (2 if m.rope else 0) + 1) * m.d_model
    matmul_io = norm_outputs * m.d_model + attention + (4 if m.ffn == "swiglu" else 2) * m.width
    return 2 * m.norm_bytes() + a * matmul_io


def training_memory(m: ModelShape, seq_len: int, batch: int, *, checkpointing: bool = False,
                    precision: str = "bf16") -> float:
    """Peak bytes of one training step with AdamW on a micro-batch of ``batch × seq_len`` tokens (chapter 5).

    ``16·N`` (float32 weights, gradients, two moments) ``+ 2·N`` under bf16 autocast (its cached
    bf16 weights, which the backward pass needs), every layer's :func:`activation_bytes` per
    token, the final norm's vectors and output, and ``12·V`` per token for the cross-entropy's
    backward (its float32 log-softmax, the gradient of that and the gradient of the logits, alive
    at once). With activation checkpointing each layer keeps only its float32 input (4·d), and one
    layer's activations exist at a time (while it is recomputed).
    """
    check_int("seq_len", seq_len, minimum=1)
    check_int("batch", batch, minimum=1)
    a = 2 if check_choice("precision", precision, ("bf16", "fp32")) == "bf16" else 4
    states = (18 if precision == "bf16" else 16) * m.params
    layer = activation_bytes(m, precision)
    layers = (m.n_layers * 4 * m.d_model + layer) if checkpointing else m.n_layers * layer
    head = m.norm_bytes() + a * m.d_model + 12 * m.vocab
    return states + seq_len * batch * (layers + head)


@dataclass(frozen=True)
class MemoryPlan:
    """How a step's ``rows`` are split to fit memory: ``micro_batch × grad_accum`` (= rows per rank ×
    ranks), with or without activation checkpointing; ``estimate_gb`` of ``free_gb`` (``None`` on a CPU).
    Chapter 5."""

    micro_batch: int
    grad_accum: int
    checkpointing: bool
    estimate_gb: float | None = None
    free_gb: float | None = None

    def __str__(self) -> str:
        split = f"micro-batch {self.micro_batch} × {self.grad_accum} accumulation steps"
        ckpt = "with" if self.checkpointing else "without"
        where = ("" if self.free_gb is None else
                 f": an estimated {self.estimate_gb:.0f} GB of the {self.free_gb:.0f} GB free")
        return f"{split}, {ckpt} activation checkpointing{where}"


def choose_micro_batch(m: ModelShape, seq_len: int, rows: int, free_bytes: float | None, *, world_size: int = 1,
                       precision: str = "bf16", headroom: float = 0.85, default: int | None = None) -> MemoryPlan:
    """The largest micro-batch whose :func:`training_memory` fits ``headroom × free_bytes`` (chapter 5).

    ``rows``: the rows of one optimiser step over all ranks (``batch_size × grad_accum``); the
    micro-batch divides ``rows / world_size``, so the step reads the same rows whatever the split.
    Without activation checkpointing if any micro-batch fits, else with it; if not even one row
    fits, a named error. ``free_bytes=None`` (a CPU) keeps the recipe's split: micro-batch
    ``default`` (or ``rows``).
    """
    check_int("rows", rows, minimum=1)
    check_int("world_size", world_size, minimum=1)
    if rows % world_size:
        raise AnatomyKitError(f"rows={rows} per step do not divide over world_size={world_size} ranks")
    per_rank = rows // world_size
    if free_bytes is None:
        micro = check_int("default", default if default is not None else per_rank, minimum=1)
        if per_rank % micro:
            raise AnatomyKitError(f"micro-batch {micro} does not divide the {per_rank} rows per rank and step")
        return MemoryPlan(micro, per_rank // micro, False)
    budget = headroom * float(free_bytes)
    sizes = [b for b in range(per_rank, 0, -1) if per_rank % b == 0]
    for checkpointing in (False, True):
        for b in sizes:
            need = training_memory(m, seq_len, b, checkpointing=checkpointing, precision=precision)
            if need <= budget:
                return MemoryPlan(b, per_rank // b, checkpointing, need / 1e9, free_bytes / 1e9)
    need = training_memory(m, seq_len, 1, checkpointing=True, precision=precision)
    raise AnatomyKitError(f"one row of {seq_len} tokens needs about {need / 1e9:.1f} GB with activation checkpointing, "
                          f"but only {free_bytes / 1e9:.1f} GB are free (× headroom {headroom}); use a GPU with more "
                          "memory, or fsdp=True over several GPUs")


def _preset_config(name: str):
    """The uniform-width decoder of preset ``name`` (every rule has its parameter count)."""
    from ..lm import PRESETS, LMConfig

    P = PRESETS[name]
    return LMConfig(vocab_size=P["vocab_size"], n_layers=P["n_layers"], d_model=P["d_model"], n_heads=P["n_heads"],
                    ffn_widths=[P["mean_width"]] * P["n_layers"], max_seq_len=P["block_size"])


def _preset_shape(name: str) -> ModelShape:
    from ..lm import PRESETS, param_count

    cfg = _preset_config(name)
    return ModelShape(float(param_count(cfg)), cfg.n_layers, cfg.d_model, cfg.vocab_size, PRESETS[name]["mean_width"])


def lm_shape(config) -> ModelShape:
    """The :class:`ModelShape` of a :class:`~anatomy_kit.lm.model.LMConfig` (its mean FFN width; chapter 5)."""
    from ..lm import param_count

    widths = [int(w) for w in config.ffn_widths]
    return ModelShape(float(param_count(config)), config.n_layers, config.d_model, config.vocab_size,
                      round(sum(widths) / len(widths)), config.ffn, True)


@dataclass
class Estimate:
    """One chapter's dominant work at full scale: FLOPs, assumed throughput, hours, peak GPU memory."""

    chapter: str
    work: str
    flops: float
    kind: str
    memory_gb: float

    def hours(self, flops_per_s: float | None = None) -> float:
        return self.flops / (flops_per_s or ASSUMED_FLOPS[self.kind]) / 3600


def duration(hours: float) -> str:
    """``"12 min"``, ``"3.4 h"`` or ``"19 days"``."""
    if hours < 1:
        return f"{max(1, round(hours * 60))} min"
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.0f} days"


#: The full-scale sizes the estimates count (each chapter's ``defaults["full"]``, the dominant sizes only).
FULL_SIZES: dict[str, dict] = {
    "ch01_ablation_map": dict(n_eval=64, block_size=256, strategies=4),
    "ch02_anatomy_weights": dict(block_size=256, recovery_layers=30, recovery_lrs=3, n_trained_draws=3,
                                 recovery_steps=300, train_batch=8, recovery_eval=16),
    "ch03_growth_training": dict(n_layers=12, d_model=256, n_heads=4, ffn_width=469, vocab_size=8192,
                                 block_size=256, batch_size=32, steps=656, n_seeds=5),
    "ch04_geometric_work": dict(models=[k for k in HUB_SHAPES if k.startswith(("meta-", "google/", "mistralai/"))],
                                n_blocks=32, block_size=256, batch_size=8, sensitivity_blocks=16, n_draws=3),
}


def _count(value) -> int:
    """A size that is a count or a list of things (layers, strategies, learning rates)."""
    return len(value) if isinstance(value, (list, tuple)) else int(value)


def _ch01(s: dict) -> Estimate:
    m, L = HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"], 30
    tokens, n_maps = s["n_eval"] * s["block_size"], _count(s["strategies"])
    layer = (m.params - m.vocab * m.d_model) / L
    head = m.vocab * m.d_model
    per_strategy = sum((L - l) * layer + head for l in range(L))       # prefix-cached sweep
    flops = 2 * tokens * (L * layer + head + n_maps * per_strategy)      # capture + the strategies
    cache = 4 * L * tokens * m.d_model                                   # the prefix cache: every layer's input
    return Estimate("ch01_ablation_map", f"{n_maps} ablation maps × 30 layers, {s['n_eval']} × {s['block_size']} "
                    "tokens, prefix-cached", flops, "eval-fp32", (4 * m.params + cache) / 1e9)


def _ch02(s: dict) -> Estimate:
    m, T = HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"], s["block_size"]
    runs = _count(s["recovery_layers"]) * _count(s["recovery_lrs"]) * s["n_trained_draws"]   # layers × lrs × draws
    steps = s["recovery_steps"]
    train = runs * steps * 3 * forward_flops(m, s["train_batch"] * T, T)   # whole model, train_batch blocks a step
    evals = runs * steps * forward_flops(m, s["recovery_eval"] * T, T)      # evaluation after every step
    return Estimate("ch02_anatomy_weights", f"recovery: {runs} runs × {steps} steps ({s['train_batch']} blocks), "
                    "eval each step", train + evals, "train-fp32",
                    training_memory(m, T, s["train_batch"], precision="fp32") / 1e9)


def _ch03(s: dict) -> Estimate:
    from ..lm import LMConfig

    T = s["block_size"]
    m = lm_shape(LMConfig(vocab_size=s["vocab_size"], n_layers=s["n_layers"], d_model=s["d_model"],
                          n_heads=s["n_heads"], ffn_widths=[s["ffn_width"]] * s["n_layers"], max_seq_len=T))
    runs = 4 * s["n_seeds"]                                               # schedules incl. the reference × seeds
    flops = runs * s["steps"] * 3 * forward_flops(m, s["batch_size"] * T, T)
    return Estimate("ch03_growth_training", f"≤ {runs} runs × {s['steps']} steps of {s['batch_size']} × {T} tokens "
                    f"({s['n_layers']} × {s['d_model']} decoder)", flops, "train-fp32",
                    training_memory(m, T, s["batch_size"], precision="fp32") / 1e9)


def _ch04(s: dict) -> Estimate:
    flops, mem, T = 0.0, 0.0, s["block_size"]
    for m in (HUB_SHAPES[k] for k in s["models"]):
        clouds = forward_flops(m, s["n_blocks"] * T, T)
        sensitivity = m.n_layers * s["n_draws"] * forward_flops(m, s["sensitivity_blocks"] * T, T) / 2   # replay from ℓ
        flops += clouds + sensitivity
        mem = max(mem, 4 * m.params + 8 * s["batch_size"] * T * m.vocab)
    return Estimate("ch04_geometric_work", f"{len(s['models'])} models: clouds ({s['n_blocks']} × {T} tokens) + "
                    f"FFN sensitivity ({s['n_draws']} draws per layer)", flops, "eval-fp32", mem / 1e9)


def width_solver_rules() -> list[str]:
    """Chapter 5's allocation rules at full scale: our rule for each row of the paper's 440M table
    (``p2.val_loss_440m`` in data_manifest/references.yaml), then TLM's contrast, the taper reversed."""
    from ..manifest import reference

    return list(reference("p2.val_loss_440m")["rules"].values()) + ["reverse-cosine"]


def width_solver_runs(preset: str = "440M", n_rules: int | None = None) -> dict:
    """Chapter 5's grid at ``preset`` (128M, 256M, 440M): runs (``n_rules``, default
    :func:`width_solver_rules`, × the preset's seeds), tokens and FLOPs per run, and the estimated
    GPU hours per run and days for all runs at the assumed bf16 throughput. The chapter's
    full-scale table and the running page's row both come from here."""
    from ..lm import PRESETS, param_count, training_flops

    check_choice("preset", preset, [k for k in PRESETS if k != "smoke"])
    P, cfg = PRESETS[preset], _preset_config(preset)
    tokens = P["steps"] * P["batch_size"] * P["grad_accum"] * P["block_size"]
    runs = check_int("n_rules", len(width_solver_rules()) if n_rules is None else n_rules, minimum=1) * P["n_seeds"]
    flops = training_flops(cfg, tokens, P["block_size"])
    hours = flops / ASSUMED_FLOPS["train-bf16"] / 3600
    return {"preset": preset, "layers × d": f"{P['n_layers']} × {P['d_model']}", "mean FFN width": P["mean_width"],
            "parameters": param_count(cfg), "tokens per run": tokens, "seeds": P["n_seeds"], "runs": runs,
            "FLOPs per run": flops, "GPU hours per run": hours, "GPU days, all runs": hours * runs / 24}


def _ch05(s: dict) -> Estimate:
    from ..lm import PRESETS, training_flops

    name = s["preset"]
    P = PRESETS[name]
    m, cfg = _preset_shape(name), _preset_config(name)
    steps = s.get("steps", P["steps"])
    tokens = steps * P["batch_size"] * P["grad_accum"] * P["block_size"]
    runs = len(width_solver_rules()) * s.get("n_seeds", P["n_seeds"])   # chapter 5's rules × seeds
    return Estimate("ch05_width_solver", f"{runs} runs of the {name} preset, {tokens / 1e9:.2f}B tokens each",
                    runs * training_flops(cfg, tokens, P["block_size"]), "train-bf16",
                    training_memory(m, P["block_size"], P["batch_size"]) / 1e9)


def _ch06(s: dict | None) -> Estimate:
    from ..growth import recipe as R

    r, ms = R.paper_d256_d384(), R.paper_multistage()
    seeds, key_seeds, widths, chain_steps = 3, 3, ms.ms_widths, ms.ms_total_steps
    if s is not None:                                                     # the hour preset's sizes
        keep = ("n_layers", "d_small", "d_large", "head_dim", "block_size", "vocab_size", "batch_size", "grad_accum",
                "steps_small", "steps_grown")
        r = dataclasses.replace(r, **{k: s[k] for k in keep})
        seeds, key_seeds = s["n_seeds"], max(s["n_seeds"], s["n_key_seeds"])
        widths, chain_steps = tuple(s["ms_widths"]), s["ms_total_steps"]
    tps, T = r.tokens_per_step, r.block_size
    arms = [c for c in R.CONDITIONS if c != "cold"]                      # every grown arm
    key = [c for c in arms if c in r.key_conditions]

    def shape(d: int) -> ModelShape:
        return ModelShape(float(R.param_count(r.config(d))), r.n_layers, d, r.vocab_size, ffn="gelu", rope=False,
                          norm="layer", norm_readers=(3, 1))

    def train(d: int, steps: int) -> float:
        return 3 * forward_flops(shape(d), steps * tps, T)

    grown = (len(key) * key_seeds + (len(arms) - len(key)) * seeds) * train(r.d_large, r.steps_grown)
    small = key_seeds * train(r.d_small, r.steps_small)                   # one small model per seed
    cold = seeds * train(r.d_large, r.steps_small + r.steps_grown)        # the cold start, equal tokens
    chain = train(max(widths), chain_steps)                               # upper bound: all at the last width
    return Estimate("ch06_width_growth", f"{len(arms)} grown arms ({len(key)} key arms × {key_seeds} seeds, the "
                    f"others × {seeds}) + cold start, d{r.d_small} → d{r.d_large}; one {len(widths)}-stage chain",
                    grown + small + cold + chain, "train-bf16",
                    training_memory(shape(max(widths)), T, r.batch_size) / 1e9)


def pass_flops(m: ModelShape, layer_tokens: float, head_tokens: float, seq_len: int) -> float:
    """FLOPs of ``layer_tokens`` tokens through one decoder layer and ``head_tokens`` through the LM head
    (the count of :func:`forward_flops`, split per layer and head; the card's stages)."""
    head_params = m.vocab * m.d_model
    per_layer = 2 * (m.params - head_params) / m.n_layers + 4 * seq_len * m.d_model
    return layer_tokens * per_layer + head_tokens * 2 * head_params


def _card(s: dict, chapter: str = "card_report") -> Estimate:
    from ..card.cost import planned_passes
    from ..card.settings import CardSettings

    m = HUB_SHAPES[s["model"]]
    keep = ("tokens", "block_size", "batch_size", "calibration_tokens", "max_prune", "n_random", "geometry_tokens")
    settings = CardSettings(**{k: s[k] for k in keep})
    passes = planned_passes(m.n_layers, settings)
    flops = sum(pass_flops(m, a, b, s["block_size"]) for a, b in passes.values())
    logits = 4 * s["batch_size"] * s["block_size"] * m.vocab
    work = (f"{'the card (if not cached) + signals' if chapter != 'card_report' else 'the card'}: "
            f"{s['tokens']:,} tokens, K = {s['max_prune']}, {s['n_random']} random sets per k")
    return Estimate(chapter, f"{s['model'].split('/')[-1]}, {work}", flops, "eval-fp32", (4 * m.params + logits) / 1e9)


def chapter_estimates() -> list[Estimate]:
    """The estimates of every chapter at full scale, in book order."""
    from ..lm import PRESETS

    return [_ch01(FULL_SIZES["ch01_ablation_map"]), _ch02(FULL_SIZES["ch02_anatomy_weights"]),
            _ch03(FULL_SIZES["ch03_growth_training"]), _ch04(FULL_SIZES["ch04_geometric_work"]),
            _ch05({"preset": "440M", "n_seeds": PRESETS["440M"]["n_seeds"]}), _ch06(None)]


def hour_estimates() -> list[Estimate]:
    """The estimates of every chapter's hour preset (:data:`anatomy_kit.hour.HOUR_PRESETS`), in book order."""
    from ..hour import HOUR_PRESETS as H

    return [_ch01(H["ch01_ablation_map"]), _ch02(H["ch02_anatomy_weights"]), _ch03(H["ch03_growth_training"]),
            _ch04(H["ch04_geometric_work"]), _ch05(H["ch05_width_solver"]), _ch06(H["ch06_width_growth"]),
            _card(H["card_report"]), _card(H["ch07_synthesis"], "ch07_synthesis")]


def hour_estimate(chapter: str, measured: dict[str, float] | None = None) -> dict:
    """One chapter's hour preset: ``{"chapter", "work", "kind", "flops", "memory_gb", "minutes_assumed",
    "minutes"}``. ``measured``: FLOP/s measured for some kinds of work (:data:`ASSUMED_FLOPS`' keys; e.g.
    ``{"train-bf16": train.flops_per_s}`` from ``benchmarks/gpu_check.py``); ``minutes`` uses the measured
    figure for this chapter's kind when there is one, else the assumption. gpu_check can print, for every
    chapter of :data:`anatomy_kit.hour.HOUR_PRESETS`, the estimate beside its measured throughput."""
    from ..hour import HOUR_PRESETS

    check_choice("chapter", chapter, list(HOUR_PRESETS))
    measured = dict(measured or {})
    for kind, rate in measured.items():
        check_choice("measured kind", kind, list(ASSUMED_FLOPS))
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise AnatomyKitError(f"measured[{kind!r}]={rate!r} must be a number > 0 (FLOP/s)")
    e = next(e for e in hour_estimates() if e.chapter == chapter)
    return {"chapter": chapter, "work": e.work, "kind": e.kind, "flops": e.flops, "memory_gb": e.memory_gb,
            "minutes_assumed": e.hours() * 60, "minutes": e.hours(measured.get(e.kind)) * 60}


def hour_markdown_table() -> str:
    """The running page's table of the hour presets (time and memory estimated, one H100-class GPU)."""
    lines = ["| chapter | dominant work of the hour preset | FLOPs | FLOP/s | time (estimate) "
             "| peak GPU memory, GB (estimate) |", "|---|---|---|---|---|---|"]
    for e in hour_estimates():
        lines.append(f"| `{e.chapter}` | {e.work} | {e.flops:.1e} | {ASSUMED_FLOPS[e.kind]:.1e} ({e.kind}) "
                     f"| {e.hours() * 60:.0f} min | {e.memory_gb:,.1f} |")
    return "\n".join(lines)


def markdown_table(flops_per_s: float | None = None) -> str:
    """The running page's table (``flops_per_s`` replaces every assumed throughput by one measured figure)."""
    lines = ["| chapter | dominant work at full scale | FLOPs | FLOP/s | time on one H100 (estimate) "
             "| peak GPU memory, GB (estimate) |", "|---|---|---|---|---|---|"]
    for e in chapter_estimates():
        rate = flops_per_s or ASSUMED_FLOPS[e.kind]
        label = "measured" if flops_per_s else e.kind
        lines.append(f"| `{e.chapter}` | {e.work} | {e.flops:.1e} | {rate:.1e} ({label}) | {duration(e.hours(flops_per_s))} "
                     f"| {e.memory_gb:,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flops", type=float, default=None, help="a measured FLOP/s to use instead of the assumptions")
    ap.add_argument("--hour", action="store_true", help="the hour presets' table instead of full scale's")
    args = ap.parse_args(argv)
    print(hour_markdown_table() if args.hour else markdown_table(args.flops))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
