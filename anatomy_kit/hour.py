"""The ``hour`` scale: each chapter's preset for one GPU-hour (one H100/H200-class GPU, < 80 GB).

Between ``smoke`` (two CPU cores, minutes, the embedded 4-bit instruct model and the Python docs)
and ``full`` (the papers' own sizes, up to GPU-weeks) a reader with a GPU for an hour on a
JupyterHub can run ``scale="hour"``: the papers' models and corpora where a claim is about them
(the base ``HuggingFaceTB/SmolLM2-135M``, FineWeb-Edu, OpenWebText, chapter 4's seven models), and
as many blocks, seeds and steps as the hour affords. The sizes below were chosen with the power
analysis of :mod:`anatomy_kit.book.power` (what each claim needs) and checked against the time and
memory model of :mod:`anatomy_kit.lm.estimates` (:func:`anatomy_kit.book.chapter_costs.hour_estimates`;
``tests/test_estimates.py`` holds every chapter to ≤ 60 minutes and < 80 GB). Every chapter's
``defaults["hour"]`` is ``HOUR_PRESETS[chapter]``; the estimates read the same dicts, so the page on
running and the chapters cannot disagree.
"""

from __future__ import annotations

from .manifest import reference
from .validate import check_choice

__all__ = ["HOUR_PRESETS", "HOUR_MINUTES", "HOUR_MEMORY_GB", "hour_preset"]

#: The limits every hour preset is held to by the estimates.
HOUR_MINUTES, HOUR_MEMORY_GB = 60.0, 80.0

_CH04_MODELS = ["meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.1-8B",
                "google/gemma-2-2b", "google/gemma-2-9b", "google/gemma-3-1b-pt", "mistralai/Mistral-7B-v0.3"]
_SMOL = "HuggingFaceTB/SmolLM2-135M"
# chapter 3's short run gets the paper's share of the budget: growth's steps over uniform's in its table
_HALF = reference("p1.growth_half_budget_steps")["value"]
_PAPER_HALF_FRACTION = _HALF["growth"] / _HALF["uniform"]
_CARD_MODEL = "HuggingFaceTB/SmolLM2-1.7B"

HOUR_PRESETS: dict[str, dict] = {
    "ch01_ablation_map": dict(model=_SMOL, corpus="fineweb-edu", n_eval=512, block_size=256, batch_size=16,
                              strategies=["neighbour-mean", "skip", "zero-mlp", "zero-attn"]),
    "ch02_anatomy_weights": dict(
        model=_SMOL, corpus="fineweb-edu", n_eval=128, block_size=256, batch_size=16, ridge=1e-3,
        n_shuffles=1000, substitution_counts=[1, 2, 3, 4, 6, 9, 12, 16], n_random_orders=5, n_manipulated=4,
        n_redundant=9, blend_beta=0.5, blend_rank=32, alphas=[0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.05, 1.1, 1.2, 1.5],
        recovery_layers=list(range(2, 30, 3)), recovery_steps=300, recovery_lrs=[1e-4], lr_tolerance=1.0,
        noise_fraction=0.5, n_noise_draws=6, n_trained_draws=3, n_train=2400, train_batch=8, recovery_eval=16,
        train_whole_model=True),
    "ch03_growth_training": dict(
        model=_SMOL, corpus="fineweb-edu", n_layers=12, d_model=256, n_heads=4, ffn_width=469, vocab_size=8192,
        block_size=256, batch_size=32, steps=656, lr=3e-3, n_seeds=16, n_secondary_seeds=16, reference_steps=328,
        half_fraction=_PAPER_HALF_FRACTION, clone_noise=0.05, anti_scale=0.9, max_anti=2, eval_every=41, n_eval=256,
        ablation_blocks=64, n_documents=20000, processes=1, timing_repeats=5),
    "ch04_geometric_work": dict(model=_CH04_MODELS[0], corpus="openwebtext", models=_CH04_MODELS, n_tokens=1024,
                                n_blocks=32, block_size=256, batch_size=8, sampling="uniform", radius=0.9,
                                noise_scale=0.5, sensitivity_blocks=16, n_draws=3, n_jobs=8),
    "ch05_width_solver": dict(model="meta-llama/Llama-3.2-1B", corpus="openwebtext", preset="hour",
                              n_seeds=8, n_key_seeds=10, steps=1500, processes=1, lower_frac=0.25,
                              upper_frac=2.5, exponents="intrinsic-dimension", rate_scale=1.0,
                              n_documents=100_000, profile_tokens=1024),
    "ch06_width_growth": dict(
        model=_SMOL, corpus="openwebtext", n_layers=8, d_small=256, d_large=384, head_dim=64, block_size=256,
        tokenizer="gpt2", vocab_size=50257, batch_size=64, grad_accum=2, steps_small=1200, steps_grown=1200,
        gate_tokens=10_000_000, lr=9e-4, warmup_steps=100, learn_steps=100, eval_every=100, eval_batches=16,
        n_seeds=2, n_key_seeds=8, ms_widths=[320, 448, 640], ms_total_steps=3000,
        ms_seeds=1, processes=1, n_train=400_000, n_eval=512, n_documents=200_000, llm_hidden=768,
        llm_eps=[0.0, 0.25, 0.5, 0.75, 1.0], llm_blocks=64, llm_block_size=512),
    "card_report": dict(model=_CARD_MODEL, corpus="fineweb-edu", tokens=32768, block_size=256, batch_size=8,
                        calibration_tokens=4096, max_prune=7, n_random=49, geometry_tokens=256, ffn_budget=0.75),
    "ch07_synthesis": dict(model=_CARD_MODEL, corpus="fineweb-edu", tokens=32768, block_size=256, batch_size=8,
                           calibration_tokens=4096, max_prune=7, n_random=49, geometry_tokens=256,
                           ffn_budget=0.75, n_null=99, n_perm=10_000, n_interior=200),
}


def hour_preset(chapter: str) -> dict:
    """A copy of chapter ``chapter``'s hour preset (chapter 5 adds its ``rules`` and chapter 6 its ``conditions``,
    every arm: lists they define)."""
    check_choice("chapter", chapter, sorted(HOUR_PRESETS))
    return {k: (list(v) if isinstance(v, list) else v) for k, v in HOUR_PRESETS[chapter].items()}
