"""Model shapes and training recipes of chapter 5, by name (a data table).

``smoke`` runs on 2 CPU cores inside the book build (6 seeds per rule, so that a comparison can decide
alone; 120 steps, about one pass over its training blocks, to afford them); the others are OUR configurations for
paper 2's 128M/256M/440M OpenWebText runs (the paper's own shapes, token budgets and learning
rates were not available): GPT-2 BPE, SwiGLU width ≈ 8/3·d rounded to a multiple of 256,
context 1024, 0.5M-token batches, Chinchilla-style 20 tokens per parameter, 3/3/5 seeds as in
the paper. ``debug`` is the full presets' recipe (GPT-2 tokenizer and vocabulary, bf16 on a GPU,
gradient accumulation) at toy size: the full-scale code path in seconds (CI runs it on stand-ins).
``hour`` is the same recipe at the size one GPU trains in the hour of ``scale="hour"``
(:mod:`anatomy_kit.hour`: a 28M-parameter core, 8 paired seeds per rule, 10 for the primary claims' arms).
"""

from __future__ import annotations

__all__ = ["PRESETS", "PRESET_FIELDS"]

PRESET_FIELDS = ("n_layers", "d_model", "n_heads", "mean_width", "multiple", "block_size", "tokenizer", "vocab_size",
                 "batch_size", "grad_accum", "steps", "lr", "warmup", "n_seeds", "precision", "n_train", "n_eval")

# fmt: off
_TABLE = {
    #         L   d     H   w̄     mult ctx   tokenizer V      bs  acc steps  lr    warm seeds prec    n_train    n_eval
    "smoke": (6,  64,   4,  192,  32,  64,   "bpe",    1024,  16, 1,  120,   6e-3, 24,  6,    "fp32", 1800,      128),
    "debug": (2,  64,   4,  128,  32,  64,   "gpt2",   50304, 4,  2,  6,     3e-3, 1,   2,    "bf16", 64,        8),
    "hour":  (8,  512,  8,  1536, 256, 512,  "gpt2",   50304, 32, 2,  1500,  1e-3, 100, 8,    "bf16", 1_000_000, 512),
    "128M":  (12, 768,  12, 2048, 256, 1024, "gpt2",   50304, 32, 16, 4800,  6e-4, 100, 3,    "bf16", 2_500_000, 512),
    "256M":  (16, 1024, 16, 2816, 256, 1024, "gpt2",   50304, 32, 16, 9800,  4e-4, 200, 3,    "bf16", 5_000_000, 512),
    "440M":  (24, 1152, 18, 3072, 256, 1024, "gpt2",   50304, 32, 16, 16800, 3e-4, 300, 5,    "bf16", 8_600_000, 512),
}
# fmt: on

#: ``PRESETS[name]`` is a dict keyed by :data:`PRESET_FIELDS`.
PRESETS: dict[str, dict] = {name: dict(zip(PRESET_FIELDS, row)) for name, row in _TABLE.items()}
