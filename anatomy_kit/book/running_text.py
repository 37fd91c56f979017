"""The running page's paragraphs that state the kit's own constants (book page *Running the book*).

Each function returns one Markdown paragraph whose numbers are read from the module that uses them
(:mod:`anatomy_kit.hour`, :mod:`anatomy_kit.lm.estimates`, :mod:`anatomy_kit.verdicts`), so the page
cannot drift from the code; :func:`anatomy_kit.book.pages.write_generated` writes them into
``book/_generated/`` and the page includes them.
"""

from __future__ import annotations

from ..hour import HOUR_MEMORY_GB, HOUR_MINUTES
from ..lm.estimates import ADAMW_STATE_BYTES, ASSUMED_SHARE, AUTOCAST_COPY_BYTES, H100_BF16, H100_FP32
from ..verdicts.decision import NEAR_FRACTION, sign_flip_floor
from ..verdicts.multiplicity import HOLM_ALPHA
from ..verdicts.power import POWER

__all__ = ["RUNNING_PARTS", "fewest_seeds", "hour_scope_markdown", "scale_rule_markdown", "near_threshold_markdown",
           "estimate_assumptions_markdown"]


def _pct(share: float) -> str:
    """0.4 → "40 %" (the book's spacing)."""
    return f"{100 * share:.0f} %"


def hour_scope_markdown() -> str:
    """What the ``hour`` scale promises: its time and memory bound and the throughput it assumes."""
    return (
        "Three scales run the same code. **smoke** teaches on a laptop; **full** is the papers' own size "
        "and needs GPUs for days; **hour** is for a GPU lent for an hour (a JupyterHub, a cloud notebook): "
        "each chapter's `hour` preset (`anatomy_kit.hour`) runs the papers' models and corpora where a claim "
        "is about them, with as many evaluation blocks, seeds and steps as one H100/H200-class GPU affords in "
        f"at most {HOUR_MINUTES:.0f} minutes and under {HOUR_MEMORY_GB:.0f} GB, by the estimates of "
        f"{{ref}}`running-estimates` (bf16 training at {_pct(ASSUMED_SHARE['train-bf16'])} MFU, float32 "
        f"evaluation at {_pct(ASSUMED_SHARE['eval-fp32'])} of its peak, both assumed; `benchmarks/gpu_check.py` "
        "prints the hour estimates beside the throughput it measures). The claims each scale can decide come "
        "from the power tables below, computed from this build's smoke metrics.\n")


def fewest_seeds(alpha: float = HOLM_ALPHA) -> int:
    """The fewest paired seeds whose exact two-sided sign-flip test can reach ``alpha`` (its floor is 2/2ⁿ)."""
    return next(n for n in range(1, 64) if sign_flip_floor(n) <= alpha)


def scale_rule_markdown() -> str:
    """How the power tables decide which scale can decide a claim."""
    return (
        "**Which scale decides each claim.** For every claim the table reads its rule (a threshold, a "
        "margin, bands around the paper's value, the sign of a paired difference) and the interval the smoke "
        "run measured, recovers the spread of one evaluation block or one paired seed from that interval, and "
        f"finds the fewest blocks or seeds at which the rule decides with {_pct(POWER)} power if the truth "
        "were the smoke estimate (`anatomy_kit.verdicts.power`: for paired seeds the exact sign-flip test, "
        f"whose $n$ seeds cannot give p below $2/2^n$, so at least {fewest_seeds()} are needed at the "
        f"{_pct(HOLM_ALPHA)} level). The spread at the hour's larger model is unknown: the tables assume it "
        "does not grow, and show in brackets what is needed if it doubles. A claim that smoke cannot compare "
        "(another model, another text, too few training steps) is decidable at hour where the hour preset "
        "runs the full scale's model, corpus and architecture. Each chapter shows its own table after its "
        "claims.\n")


def near_threshold_markdown() -> str:
    """When a verdict is marked as near its threshold (another kernel path or one more seed may flip it)."""
    return (
        "The book's verdicts are decided on intervals over seeds or evaluation blocks, whose widths are far "
        "larger than that, except where an interval's end lies within "
        f"{_pct(NEAR_FRACTION)} of the interval's width of the threshold that decides the verdict: such a "
        "verdict carries a mark in its claims table and in the report (another machine, or one more seed, may "
        "flip it). The tests hold on every path: CI runs the unit tests twice, on the machine's own path and "
        "on a second one.\n")


def estimate_assumptions_markdown() -> str:
    """What the time and memory estimates assume (throughput and bytes per trained parameter)."""
    return (
        "The table gives **estimates**, not measurements: the FLOPs of each chapter's dominant computation "
        "at its full defaults, divided by an *assumed* throughput of one H100 SXM (bf16 training at "
        f"{_pct(ASSUMED_SHARE['train-bf16'])} of its {H100_BF16 / 1e12:.0f} TFLOP/s peak, float32 evaluation "
        f"and fine-tuning at {_pct(ASSUMED_SHARE['eval-fp32'])} of its {H100_FP32 / 1e12:.0f} TFLOP/s float32 "
        "peak; NVIDIA's data-sheet figures), and the GPU memory of the largest step (float32 weights; "
        f"{ADAMW_STATE_BYTES} bytes per trained parameter for weights, gradients and AdamW moments, "
        f"{AUTOCAST_COPY_BYTES} more for autocast's bf16 copies; what autograd keeps of each layer — a "
        "float32 residual stream, bf16 matmul inputs and outputs, SwiGLU's four hidden-width tensors — and "
        "cross-entropy's float32 log-softmax and its gradients). CPU-side work (chapter 4's optimal-transport "
        "and topology computations, tokenising a corpus) is not included.\n")


#: generated file name → the function that writes it
RUNNING_PARTS = {"hour_scope.md": hour_scope_markdown, "scale_rule.md": scale_rule_markdown,
                 "near_threshold.md": near_threshold_markdown, "estimate_assumptions.md": estimate_assumptions_markdown}
