"""The one FLOP and memory model: time and memory of a computation, *estimated* from FLOP counts.

Computations are counted in FLOPs
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
:func:`fine_tune_memory` applies the same model to fine-tuning a pretrained model in its own
dtype, every parameter (AdamW's states in the weights' dtype) or LoRA adapters
(:func:`lora_parameters`; the frozen weights once, the adapters and their AdamW states in
float32): the card's healing (:mod:`anatomy_kit.card.heal`) chooses between the two with it.
:mod:`anatomy_kit.book.chapter_costs` counts each chapter's dominant work with it, at full scale and
at the hour presets (the page on running).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..validate import AnatomyKitError, check_choice, check_int

__all__ = ["ModelShape", "HUB_SHAPES", "ASSUMED_SHARE", "ASSUMED_FLOPS", "ADAMW_STATE_BYTES", "AUTOCAST_COPY_BYTES",
           "Estimate", "forward_flops", "training_memory", "LORA_TARGETS", "lora_parameters", "fine_tune_memory",
           "activation_bytes", "MemoryPlan", "choose_micro_batch", "duration", "width_solver_rules",
           "width_solver_runs", "pass_flops", "preset_config", "preset_shape", "lm_shape"]

H100_BF16, H100_FP32 = 989e12, 67e12      # dense peaks, NVIDIA H100 SXM data sheet
#: assumed share of the reference GPU's data-sheet peak that each kind of work sustains
ASSUMED_SHARE = {"train-bf16": 0.40, "eval-fp32": 0.50, "train-fp32": 0.50}
#: assumed sustained FLOP/s of the reference GPU, by kind of work
ASSUMED_FLOPS = {kind: share * (H100_BF16 if kind.endswith("bf16") else H100_FP32)
                 for kind, share in ASSUMED_SHARE.items()}
#: bytes per trained parameter: float32 weights, gradients and two AdamW moments; bf16 autocast's
#: cached weight copies add :data:`AUTOCAST_COPY_BYTES`
ADAMW_STATE_BYTES, AUTOCAST_COPY_BYTES = 16, 2


@dataclass(frozen=True)
class ModelShape:
    """What the estimates need of a model: parameters (head included once), layers, width, vocabulary,
    and for activations the FFN (hidden width, ``"swiglu"`` or ``"gelu"``), the norm (``"rms"`` or
    ``"layer"``), whether it uses rotary positions, how many matmuls read each of a layer's two
    norms (the kit's decoder: one fused q|k|v and one fused gate|up; separate q, k, v: 3), and whether
    the LM head is the embedding table (``tied_head``; an untied model's ``params`` hold both tables)."""

    params: float
    n_layers: int
    d_model: int
    vocab: int
    ffn_width: int = 0          # 0: 4·d_model
    ffn: str = "swiglu"
    rope: bool = True
    norm: str = "rms"
    norm_readers: tuple[int, int] = (1, 1)
    tied_head: bool = True

    @property
    def width(self) -> int:
        """The FFN's hidden width."""
        return self.ffn_width or 4 * self.d_model

    def norm_bytes(self) -> int:
        """Float32 bytes per token that one norm keeps: its input, and RMSNorm (composed of elementwise
        operations in eager PyTorch) also its normalised vector before the gain."""
        return (8 if self.norm == "rms" else 4) * self.d_model


#: The hub models whose config.json says ``tie_word_embeddings: false`` (their head is a second table).
UNTIED_HEADS = frozenset({"meta-llama/Llama-3.1-8B", "mistralai/Mistral-7B-v0.3"})
#: The hub models of the chapters' full scale (numbers from their config.json and model cards).
HUB_SHAPES = {name: ModelShape(*shape, norm_readers=(3, 2), tied_head=name not in UNTIED_HEADS)  # q, k, v; gate, up
              for name, shape in {
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
    check_choice("precision", precision, ("bf16", "fp32"))
    states = (ADAMW_STATE_BYTES + (AUTOCAST_COPY_BYTES if precision == "bf16" else 0)) * m.params
    return states + _step_activations(m, seq_len, batch, checkpointing, precision)


def _step_activations(m: ModelShape, seq_len: int, batch: int, checkpointing: bool, precision: str,
                      extra_per_layer: float = 0.0) -> float:
    """What one training step keeps for its backward pass, in bytes (:func:`training_memory`)."""
    check_int("seq_len", seq_len, minimum=1)
    check_int("batch", batch, minimum=1)
    a = 2 if check_choice("precision", precision, ("bf16", "fp32")) == "bf16" else 4
    layer = activation_bytes(m, precision) + extra_per_layer
    layers = (m.n_layers * 4 * m.d_model + layer) if checkpointing else m.n_layers * layer
    head = m.norm_bytes() + a * m.d_model + 12 * m.vocab
    return seq_len * batch * (layers + head)


#: the linear maps of a decoder layer that LoRA may adapt, as (input, output) widths in units of the
#: model width d and the FFN width w (a GELU FFN has no gate); k and v are counted at width d, an
#: upper bound for grouped-query attention, whose k and v are narrower
LORA_TARGETS = {"q": ("d", "d"), "k": ("d", "d"), "v": ("d", "d"), "o": ("d", "d"),
                "gate": ("d", "w"), "up": ("d", "w"), "down": ("w", "d")}


def lora_parameters(m: ModelShape, rank: int, targets=tuple(LORA_TARGETS)) -> float:
    """Parameters LoRA adds: ``rank · (in + out)`` for every adapted matrix of every layer (``targets``
    among :data:`LORA_TARGETS`; ``gate`` only where the FFN is SwiGLU)."""
    check_int("rank", rank, minimum=1)
    widths = {"d": m.d_model, "w": m.width}
    per_layer = 0
    for name in targets:
        check_choice("LoRA target", name, tuple(LORA_TARGETS))
        if name == "gate" and m.ffn != "swiglu":
            continue
        a, b = LORA_TARGETS[name]
        per_layer += rank * (widths[a] + widths[b])
    return float(per_layer * m.n_layers)


def fine_tune_memory(m: ModelShape, seq_len: int, batch: int, *, method: str = "full", weight_bytes: int = 4,
                     lora_rank: int = 16, lora_targets=tuple(LORA_TARGETS), checkpointing: bool = False) -> float:
    """Peak bytes of one AdamW step fine-tuning a pretrained model held in ``weight_bytes`` per weight.

    ``"full"``: every parameter trains and AdamW keeps its states in the weights' dtype (weights,
    gradients, two moments: ``4 · weight_bytes`` per parameter, :data:`ADAMW_STATE_BYTES` in
    float32). ``"lora"``: the weights are frozen (``weight_bytes`` each) and the adapters of
    :func:`lora_parameters` train in float32 (:data:`ADAMW_STATE_BYTES` each); each adapted matrix
    keeps its ``rank`` intermediate values per token for the backward pass. Activations as in
    :func:`training_memory`, float32 (``"fp32"``) for 4-byte weights and ``"bf16"`` otherwise (a
    model held in bfloat16 keeps its residual stream in bfloat16, so this errs high).
    """
    check_choice("method", method, ("full", "lora"))
    check_choice("weight_bytes", weight_bytes, (2, 4))
    precision = "fp32" if weight_bytes == 4 else "bf16"
    if method == "full":
        return 4 * weight_bytes * m.params + _step_activations(m, seq_len, batch, checkpointing, precision)
    adapters = lora_parameters(m, lora_rank, lora_targets)
    n_adapted = sum(1 for t in lora_targets if not (t == "gate" and m.ffn != "swiglu"))
    extra = n_adapted * lora_rank * weight_bytes          # each adapter's rank-wide intermediate, per token
    return (weight_bytes * m.params + ADAMW_STATE_BYTES * adapters
            + _step_activations(m, seq_len, batch, checkpointing, precision, extra))


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


def preset_config(name: str):
    """The uniform-width decoder of preset ``name`` (every rule has its parameter count)."""
    from ..lm import PRESETS, LMConfig

    P = PRESETS[name]
    return LMConfig(vocab_size=P["vocab_size"], n_layers=P["n_layers"], d_model=P["d_model"], n_heads=P["n_heads"],
                    ffn_widths=[P["mean_width"]] * P["n_layers"], max_seq_len=P["block_size"])


def preset_shape(name: str) -> ModelShape:
    from ..lm import PRESETS, param_count

    cfg = preset_config(name)
    return ModelShape(float(param_count(cfg)), cfg.n_layers, cfg.d_model, cfg.vocab_size, PRESETS[name]["mean_width"])


def lm_shape(config) -> ModelShape:
    """The :class:`ModelShape` of a :class:`~anatomy_kit.lm.model.LMConfig` (its mean FFN width; chapter 5)."""
    from ..lm import param_count

    widths = [int(w) for w in config.ffn_widths]
    return ModelShape(float(param_count(config)), config.n_layers, config.d_model, config.vocab_size,
                      round(sum(widths) / len(widths)), config.ffn, True)


@dataclass
class Estimate:
    """One chapter's dominant work at a scale: FLOPs, assumed throughput, hours, peak GPU memory."""

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
    P, cfg = PRESETS[preset], preset_config(preset)
    tokens = P["steps"] * P["batch_size"] * P["grad_accum"] * P["block_size"]
    runs = check_int("n_rules", len(width_solver_rules()) if n_rules is None else n_rules, minimum=1) * P["n_seeds"]
    flops = training_flops(cfg, tokens, P["block_size"])
    hours = flops / ASSUMED_FLOPS["train-bf16"] / 3600
    return {"preset": preset, "layers × d": f"{P['n_layers']} × {P['d_model']}", "mean FFN width": P["mean_width"],
            "parameters": param_count(cfg), "tokens per run": tokens, "seeds": P["n_seeds"], "runs": runs,
            "FLOPs per run": flops, "GPU hours per run": hours, "GPU days, all runs": hours * runs / 24}


def pass_flops(m: ModelShape, layer_tokens: float, head_tokens: float, seq_len: int) -> float:
    """FLOPs of ``layer_tokens`` tokens through one decoder layer and ``head_tokens`` through the LM head
    (the count of :func:`forward_flops`, split per layer and head; the card's stages). An untied model's
    input embedding is a lookup (no FLOPs), so it is taken out of the layers' share with the head."""
    head_params = m.vocab * m.d_model
    tables = head_params if m.tied_head else 2 * head_params
    per_layer = 2 * (m.params - tables) / m.n_layers + 4 * seq_len * m.d_model
    return layer_tokens * per_layer + head_tokens * 2 * head_params
