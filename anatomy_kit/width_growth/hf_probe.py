"""SRIO on a pretrained Llama-family model: perplexity of the grown model at each gate and ε (chapter 6).

Chapter 6, *Growing the residual stream*, section "On a real pretrained model". ``llama_sweep``
grows a ``LlamaForCausalLM`` (the embedded SmolLM2) with :func:`~anatomy_kit.width_growth.hf_grow.grow_llama`
once per (expansion, ε) case and measures the perplexity of the same evaluation batches at every
gate value, beside the small model's. No training: this shows what the operator itself
preserves on RMSNorm, where chapter 6 derives that after folding the gains SRIO(ε) computes what
NRIO computes at every gate (perplexity flat in ε).
"""

from __future__ import annotations

import gc
import time

from anatomy_kit.width_growth.hf_grow import grow_llama
from anatomy_kit.width_growth.srio import check_eps
from anatomy_kit.hf.evaluation import perplexity
from anatomy_kit.validate import AnatomyKitError

__all__ = ["llama_sweep"]


def _check_cases(cases, gates) -> tuple[list[tuple[str, float]], list[float]]:
    if not cases or not gates:
        raise AnatomyKitError("cases (list of (expansion, eps)) and gates (list of numbers in [0, 1]) must be non-empty")
    out = []
    for case in cases:
        if not (isinstance(case, (tuple, list)) and len(case) == 2):
            raise AnatomyKitError(f"case {case!r} must be a pair (expansion, eps)")
        out.append((str(case[0]), check_eps(case[1])))
    for g in gates:
        if not isinstance(g, (int, float)) or not 0.0 <= float(g) <= 1.0:
            raise AnatomyKitError(f"gate={g!r} must be a number in [0, 1]")
    return out, [float(g) for g in gates]


def llama_sweep(model, batches, new_hidden: int, cases, gates=(0.0, 1.0)) -> dict:
    """Perplexity of the small model and of each grown one; ``batches`` from ``hf.evaluation.make_batches``.

    ``cases``: ``[(expansion, ε), …]``; ``gates``: the gate values to measure each grown model at.
    Returns ``{"small": ppl, "rows": [{"expansion", "eps", "gate", "ppl", "grow_s"}, …]}``.
    """
    cases, gates = _check_cases(cases, gates)
    out = {"small": perplexity(model, batches), "rows": []}
    for expansion, eps in cases:
        t0 = time.perf_counter()
        grown = grow_llama(model, new_hidden, eps, expansion)
        grow_s = time.perf_counter() - t0
        for g in gates:
            grown.growth_gate.set(g)
            out["rows"].append({"expansion": expansion, "eps": eps, "gate": g, "ppl": perplexity(grown, batches),
                                "grow_s": grow_s})
        del grown
        gc.collect()
    return out
