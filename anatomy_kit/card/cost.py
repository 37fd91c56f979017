"""How much computing a card takes: decoder-layer and LM-head passes per stage, and FLOPs on a bigger model.

A stage's work is counted in *layer-tokens* (one token through one decoder layer) and *head-tokens*
(one token through the LM head). :func:`card_passes` counts them exactly from a finished card (its
greedy steps and measured sets say what ran); :func:`planned_passes` predicts them from the settings
alone, for a model not yet measured (random k-sets start, on average, at layer (L − k)/(k + 1); the
other proposals are assumed to do the same). :func:`card_flops` turns either into FLOPs with chapter 1's
count (2 FLOPs per weight and token, plus 4·T·d per layer and token for the attention scores, T the
block size; :mod:`anatomy_kit.lm.estimates`). Layers that a causal edit or a pruned set skips still
run (their output is then replaced), so they count. ``benchmarks/bench_card.py`` uses this to put a
GPU estimate beside the CPU measurements.

Healing (:mod:`.heal`) is counted the same way: :func:`heal_passes` gives one fine-tune's passes
(training forward and backward, three forward passes' worth for a full fine-tune and two for LoRA,
whose frozen weights need no gradient; the evaluations of its schedule), :func:`heal_estimate` the
FLOPs and the time of the control and every healed k, at the rate this card measured on this
machine (:func:`measured_rate`) or, on a GPU, at the assumed training throughput of
:data:`anatomy_kit.lm.estimates.ASSUMED_FLOPS`. :func:`model_shape` reads a loaded Hugging Face
model's :class:`~anatomy_kit.lm.estimates.ModelShape`. Used by the book page *Your model's report card*.
"""

from __future__ import annotations

from ..lm.estimates import ASSUMED_FLOPS, ModelShape, pass_flops
from .causal import CAUSAL_SIGNALS
from .settings import CardSettings
from .work import geometry_blocks

__all__ = ["STAGES", "card_passes", "planned_passes", "card_flops", "model_shape", "measured_rate", "heal_passes",
           "heal_estimate"]

STAGES = ("verification", "capture + cheap signals", "causal sweep", "geometric work", "greedy removal",
          "greedy on calibration halves", "pruned models")


def _common(n_layers: int, block: int, n_eval_tokens: int, geometry_tokens: int, quick: bool) -> dict:
    causal = 0 if quick else len(CAUSAL_SIGNALS) * n_eval_tokens
    return {"verification": (3 * block * n_layers, 3 * block),
            "capture + cheap signals": (n_eval_tokens * n_layers, n_eval_tokens),
            "causal sweep": (causal * sum(n_layers - l for l in range(n_layers)), causal * n_layers),
            "geometric work": (geometry_tokens * n_layers, geometry_tokens)}


def card_passes(doc: dict) -> dict[str, tuple[int, int]]:
    """``{stage: (layer-tokens, head-tokens)}`` of a finished card, counted exactly."""
    s, t, n = doc["settings"], doc["text"], doc["model"]["n_layers"]
    block, eval_tokens = t["block_size"], t["eval_tokens"]
    geo = geometry_blocks(s["geometry_tokens"], block, t["n_eval_blocks"]) * block
    out = _common(n, block, eval_tokens, geo, doc["pruning"] is None)
    if doc["pruning"] is None:
        return out
    calib = t["calibration_tokens"]
    greedy_layers = greedy_heads = 0
    for step in doc["pruning"]["greedy_steps"]:
        candidates = [int(j) for j in step["scores"]]
        greedy_layers += calib * (n + sum(n - j for j in candidates))
        greedy_heads += calib * (1 + len(candidates))
    sets = {tuple(e["layers"]) for e in doc["pruning"]["sets"] if e["k"] >= 2}
    for pool in ("random", "random_interior"):
        sets |= {tuple(r["layers"]) for k, v in doc["pruning"].get(pool, {}).items() if k != "1" for r in v}
    out["greedy removal"] = (greedy_layers, greedy_heads)
    if doc["pruning"].get("calibration_stability"):      # greedy again on each half: as much as once more
        out["greedy on calibration halves"] = (greedy_layers, greedy_heads)
    out["pruned models"] = (eval_tokens * (n + sum(n - min(x) for x in sets)), eval_tokens * (1 + len(sets)))
    return out


def planned_passes(n_layers: int, settings: CardSettings, n_proposals: int = 9) -> dict[str, tuple[float, float]]:
    """``{stage: (layer-tokens, head-tokens)}`` predicted from the settings for an ``n_layers``-layer model.

    ``n_proposals``: distinct non-random sets measured per k ≥ 2 (at most nine methods propose one each).
    """
    s = settings.resolved(n_layers)
    block, eval_tokens = s.block_size, s.n_eval_blocks * s.block_size
    geo = geometry_blocks(s.geometry_tokens, block, s.n_eval_blocks) * block
    out = {k: (float(a), float(b)) for k, (a, b) in _common(n_layers, block, eval_tokens, geo, s.quick).items()}
    if s.quick:
        return out
    calib = s.n_calibration_blocks * block
    greedy_layers = greedy_heads = 0.0
    for k in range(1, s.max_prune + 1):
        left = n_layers - (k - 1)
        greedy_layers += calib * (n_layers + left * (n_layers + 1) / 2)
        greedy_heads += calib * (1 + left)
    sets = [(k, n_proposals + 2 * s.n_random) for k in range(2, s.max_prune + 1)]      # two random pools
    start = sum(m * (n_layers - (n_layers - k) / (k + 1)) for k, m in sets)
    out["greedy removal"] = (greedy_layers, greedy_heads)
    out["greedy on calibration halves"] = (greedy_layers, greedy_heads)
    out["pruned models"] = (eval_tokens * (n_layers + start), eval_tokens * (1 + sum(m for _, m in sets)))
    return out


def card_flops(passes: dict, shape: ModelShape, block_size: int) -> dict[str, float]:
    """FLOPs per stage of ``passes`` on a model of ``shape`` (:func:`anatomy_kit.lm.estimates.pass_flops`;
    ``shape.tied_head`` says whether the input embedding is the head or a lookup table of its own)."""
    return {stage: pass_flops(shape, layer_tokens, head_tokens, block_size)
            for stage, (layer_tokens, head_tokens) in passes.items()}


def model_shape(model) -> ModelShape:
    """The :class:`ModelShape` of a loaded Hugging Face causal LM: its parameters (a tied head once), its
    layers, width, vocabulary, mean FFN width and FFN kind (SwiGLU where its MLP has a gate)."""
    from ..hf.layers import decoder_layers
    from .checks import config_ffn_widths

    config = model.config
    widths = config_ffn_widths(config)
    gated = any("gate" in name for name, _ in decoder_layers(model)[0].named_modules())
    return ModelShape(float(sum(p.numel() for p in model.parameters())), len(decoder_layers(model)),
                      int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0)),
                      int(config.vocab_size), round(sum(widths) / len(widths)) if widths else 0,
                      "swiglu" if gated else "gelu",
                      tied_head=bool(getattr(config, "tie_word_embeddings", True)))


def measured_rate(doc: dict, shape: ModelShape) -> float | None:
    """FLOP/s this card sustained: the FLOPs of its timed stages (:func:`card_passes`) over their wall time;
    ``None`` when the card recorded no timing."""
    timings = doc["provenance"].get("timings") or {}
    flops = card_flops(card_passes(doc), shape, doc["text"]["block_size"])
    timed = [(flops[k], t["wall_s"]) for k, t in timings.items() if k in flops and t.get("wall_s", 0) > 0]
    seconds = sum(t for _, t in timed)
    return sum(f for f, _ in timed) / seconds if timed and seconds > 0 else None


def heal_passes(n_layers: int, *, steps: int, batch_size: int, block_size: int, n_evals: int, eval_tokens: int,
                method: str) -> dict[str, tuple[float, float]]:
    """``{"training": …, "evaluation": …}`` (layer-tokens, head-tokens) of one fine-tune (module docstring).

    Every layer runs forward, a skipped one too (its output is then replaced); training counts
    three forward passes' worth (forward, gradients of activations and of weights) for ``"full"``, two
    for ``"lora"``. ``n_evals``: evaluations on the schedule, step 0 included."""
    factor = {"full": 3, "lora": 2}[method]
    tokens = steps * batch_size * block_size
    return {"training": (factor * tokens * n_layers, factor * tokens),
            "evaluation": (n_evals * eval_tokens * n_layers, n_evals * eval_tokens)}


def heal_estimate(doc: dict, shape: ModelShape, recipe, n_healed: int, *, device_type: str) -> dict:
    """FLOPs and seconds of healing ``n_healed`` pruned models and the control with ``recipe``
    (:class:`.heal.HealRecipe`): on a CPU at :func:`measured_rate`, on a GPU at the assumed training
    throughput (float32 or bfloat16 by the card's dtype). ``seconds`` is ``None`` without a rate."""
    t = doc["text"]
    passes = heal_passes(shape.n_layers, steps=recipe.steps, batch_size=recipe.batch_size,
                         block_size=t["block_size"], n_evals=len(recipe.eval_steps()), eval_tokens=t["eval_tokens"],
                         method=recipe.method)
    per_run = sum(card_flops(passes, shape, t["block_size"]).values())
    if device_type == "cpu":
        rate, where = measured_rate(doc, shape), "the rate this card's own stages ran at on this machine"
    else:
        kind = "train-fp32" if doc["settings"]["dtype"] == "float32" else "train-bf16"
        rate, where = ASSUMED_FLOPS[kind], f"an assumed {ASSUMED_FLOPS[kind] / 1e12:.0f} TFLOP/s ({kind})"
    runs = n_healed + 1
    return {"runs": runs, "flops_per_run": per_run, "flops": per_run * runs, "rate_flops_per_s": rate,
            "rate_from": where, "seconds": None if not rate else per_run * runs / rate}
