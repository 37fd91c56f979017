"""Time and memory of each chapter at full scale, *estimated* from FLOP counts (the book's page on running).

For every chapter the dominant computations of its ``full`` defaults are counted in FLOPs
(forward ``2·N + 4·L·T·d`` per token, training three times that, with ``N`` the weights' parameters
and the LM head included; :func:`anatomy_kit.lm.model.training_flops` for the kit's decoder) and
divided by an *assumed* throughput of one reference GPU (an H100 SXM; an H200 computes as fast):
bf16 training at 40 % MFU (the target of ``benchmarks/gpu_check.py``) and float32 inference at
50 % of the float32 peak (the chapters evaluate in float32, without TF32). Peaks are NVIDIA's
data-sheet figures. Memory: float32 weights for inference; 16 bytes per parameter for training
(float32 weights and gradients, two AdamW moments) plus bf16 activations, ``34·T·b·d`` bytes per
layer (Korthikanti et al. 2022, without the attention-score term a fused attention kernel does
not store) and the logits. What is not FLOP-bound (chapter 4's geometry on the CPU, data
loading) is left out. These are estimates to plan a run, not measurements; replace the assumed
throughput by a measured one (``--flops`` below, e.g. ``train.flops_per_s`` from gpu_check's JSON).

    python -m anatomy_kit.book.estimates            # the table on the running page
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

__all__ = ["ModelShape", "HUB_SHAPES", "ASSUMED_FLOPS", "Estimate", "forward_flops", "training_memory",
           "chapter_estimates", "markdown_table", "duration"]

H100_BF16, H100_FP32 = 989e12, 67e12      # dense peaks, NVIDIA H100 SXM data sheet
#: assumed sustained FLOP/s of the reference GPU, by kind of work
ASSUMED_FLOPS = {"train-bf16": 0.40 * H100_BF16, "eval-fp32": 0.50 * H100_FP32, "train-fp32": 0.50 * H100_FP32}


@dataclass(frozen=True)
class ModelShape:
    """What the estimates need of a model: parameters (head included once), layers, width, vocabulary."""

    params: float
    n_layers: int
    d_model: int
    vocab: int


#: The hub models of the chapters' full scale (numbers from their config.json and model cards).
HUB_SHAPES = {
    "HuggingFaceTB/SmolLM2-135M": ModelShape(134.5e6, 30, 576, 49152),
    "meta-llama/Llama-3.2-1B": ModelShape(1.24e9, 16, 2048, 128256),
    "meta-llama/Llama-3.2-3B": ModelShape(3.21e9, 28, 3072, 128256),
    "meta-llama/Llama-3.1-8B": ModelShape(8.03e9, 32, 4096, 128256),
    "google/gemma-2-2b": ModelShape(2.61e9, 26, 2304, 256000),
    "google/gemma-2-9b": ModelShape(9.24e9, 42, 3584, 256000),
    "google/gemma-3-1b-pt": ModelShape(1.0e9, 26, 1152, 262144),
    "mistralai/Mistral-7B-v0.3": ModelShape(7.25e9, 32, 4096, 32768),
}


def forward_flops(m: ModelShape, tokens: float, seq_len: int) -> float:
    """``(2·N + 4·L·T·d)·tokens``: one forward pass (weights and attention scores)."""
    return (2 * m.params + 4 * m.n_layers * seq_len * m.d_model) * tokens


def training_memory(m: ModelShape, seq_len: int, batch: int, *, checkpointing: bool = False) -> float:
    """Bytes to train with AdamW: 16 per parameter, bf16 activations of one micro-batch, float32 logits twice."""
    per_layer = (2 if checkpointing else 34) * seq_len * batch * m.d_model
    recompute = 34 * seq_len * batch * m.d_model if checkpointing else 0
    return 16 * m.params + m.n_layers * per_layer + recompute + 8 * seq_len * batch * m.vocab


def _preset_config(name: str):
    """The uniform-width decoder of preset ``name`` (every rule has its parameter count)."""
    from ..lm import PRESETS, LMConfig

    P = PRESETS[name]
    return LMConfig(vocab_size=P["vocab_size"], n_layers=P["n_layers"], d_model=P["d_model"], n_heads=P["n_heads"],
                    ffn_widths=[P["mean_width"]] * P["n_layers"], max_seq_len=P["block_size"])


def _preset_shape(name: str) -> ModelShape:
    from ..lm import param_count

    cfg = _preset_config(name)
    return ModelShape(float(param_count(cfg)), cfg.n_layers, cfg.d_model, cfg.vocab_size)


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


def _ch01() -> Estimate:
    m, tokens, L = HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"], 64 * 256, 30
    layer = (m.params - m.vocab * m.d_model) / L
    head = m.vocab * m.d_model
    per_strategy = sum((L - l) * layer + head for l in range(L))       # prefix-cached sweep
    flops = 2 * tokens * (L * layer + head + 4 * per_strategy)           # capture + 4 strategies
    cache = 4 * L * tokens * m.d_model                                   # the prefix cache: every layer's input
    return Estimate("ch01_ablation_map", "4 ablation maps × 30 layers, 64 × 256 tokens, prefix-cached", flops,
                    "eval-fp32", (4 * m.params + cache) / 1e9)


def _ch02() -> Estimate:
    m, T = HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"], 256
    runs = 30 * 3 * 3                                                     # layers × learning rates × noise draws
    train = runs * 300 * 3 * forward_flops(m, 8 * T, T)                   # 300 steps of 8 blocks, whole model
    evals = runs * 300 * forward_flops(m, 16 * T, T)                      # evaluation after every step
    return Estimate("ch02_anatomy_weights", "recovery: 270 runs × 300 steps (8 blocks), eval each step",
                    train + evals, "train-fp32", training_memory(m, T, 8) / 1e9)


def _ch03() -> Estimate:
    m, T = ModelShape(9.6e6, 12, 256, 8192), 256
    runs = 4 * 5                                                          # schedules incl. the reference × seeds
    flops = runs * 656 * 3 * forward_flops(m, 32 * T, T)
    return Estimate("ch03_growth_training", "≤ 20 runs × 656 steps of 32 × 256 tokens (12 × 256 decoder)", flops,
                    "train-fp32", training_memory(m, T, 32) / 1e9)


def _ch04() -> Estimate:
    flops, mem = 0.0, 0.0
    for m in (HUB_SHAPES[k] for k in HUB_SHAPES if not k.startswith("HuggingFaceTB/")):
        clouds = forward_flops(m, 32 * 256, 256)
        sensitivity = m.n_layers * 3 * forward_flops(m, 16 * 256, 256) / 2   # replay from layer ℓ, 3 draws
        flops += clouds + sensitivity
        mem = max(mem, 4 * m.params + 8 * 8 * 256 * m.vocab)
    return Estimate("ch04_geometric_work", "7 models: clouds (32 × 256 tokens) + FFN sensitivity (3 draws per layer)",
                    flops, "eval-fp32", mem / 1e9)


def _ch05() -> Estimate:
    from ..lm import PRESETS, training_flops

    P = PRESETS["440M"]
    m, cfg = _preset_shape("440M"), _preset_config("440M")
    tokens = P["steps"] * P["batch_size"] * P["grad_accum"] * P["block_size"]
    runs = 5 * P["n_seeds"]                                               # the paper's five rules × seeds
    return Estimate("ch05_width_solver", f"{runs} runs of the 440M preset, {tokens / 1e9:.1f}B tokens each",
                    runs * training_flops(cfg, tokens, P["block_size"]), "train-bf16",
                    training_memory(m, P["block_size"], P["batch_size"]) / 1e9)


def _ch06() -> Estimate:
    from ..growth import recipe as R

    r = R.paper_d256_d384()
    ms = R.paper_multistage()
    tps, T, seeds = r.tokens_per_step, r.block_size, 3

    def shape(d: int) -> ModelShape:
        return ModelShape(float(R.param_count(r.config(d))), r.n_layers, d, r.vocab_size)

    def train(d: int, steps: int) -> float:
        return 3 * forward_flops(shape(d), steps * tps, T)

    arms = len(R.CONDITIONS) - 1                                          # every arm but the cold start
    per_seed = (train(r.d_small, r.steps_small) + arms * train(r.d_large, r.steps_grown)
                + train(r.d_large, r.steps_small + r.steps_grown))        # the cold start, equal tokens
    chain = train(max(ms.ms_widths), ms.ms_total_steps)                   # upper bound: all at the last width
    return Estimate("ch06_width_growth", f"{seeds} seeds × ({arms} grown arms + cold start), d{r.d_small} → "
                    f"d{r.d_large}; one {len(ms.ms_widths)}-stage chain", seeds * per_seed + chain, "train-bf16",
                    training_memory(shape(max(ms.ms_widths)), T, r.batch_size) / 1e9)


def chapter_estimates() -> list[Estimate]:
    """The estimates of every chapter, in book order."""
    return [_ch01(), _ch02(), _ch03(), _ch04(), _ch05(), _ch06()]


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
    args = ap.parse_args(argv)
    print(markdown_table(args.flops))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
