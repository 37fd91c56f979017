"""Each chapter's dominant work at full scale and at its hour preset, counted with :mod:`.estimates`.

For every chapter the dominant computations of a scale's sizes are counted in FLOPs and divided by
the assumed throughput of one H100-class GPU (:data:`~.estimates.ASSUMED_FLOPS`: bf16 training at
40 % MFU, float32 evaluation at 50 % of its peak), with the peak GPU memory of the largest step.
Full scale's sizes are :data:`FULL_SIZES` (each chapter's ``defaults["full"]``); the hour presets are
:data:`anatomy_kit.hour.HOUR_PRESETS` (``tests/test_estimates.py`` holds each to 60 minutes and
80 GB). What is not FLOP-bound (chapter 4's geometry on the CPU, data loading) is left out.

    python -m anatomy_kit.book.chapter_costs            # full scale's table on the running page
    python -m anatomy_kit.book.chapter_costs --hour     # the hour presets' table
"""

from __future__ import annotations

import argparse
import dataclasses

from ..validate import AnatomyKitError, check_choice
from ..lm.estimates import (ASSUMED_FLOPS, HUB_SHAPES, Estimate, ModelShape, duration, forward_flops, lm_shape,
                        pass_flops, preset_config, preset_shape, training_memory, width_solver_rules)

__all__ = ["FULL_SIZES", "ch05_key_arms", "chapter_estimates", "hour_estimates", "hour_estimate", "hour_markdown_table",
           "markdown_table"]


#: The full-scale sizes the estimates count (each chapter's ``defaults["full"]``, the dominant sizes only).
FULL_SIZES: dict[str, dict] = {
    "ch01_ablation_map": dict(n_eval=64, block_size=256, strategies=4),
    "ch02_anatomy_weights": dict(block_size=256, recovery_layers=30, recovery_lrs=3, n_trained_draws=3,
                                 recovery_steps=300, train_batch=8, recovery_eval=16),
    "ch03_growth_training": dict(n_layers=12, d_model=256, n_heads=4, ffn_width=469, vocab_size=8192,
                                 block_size=256, batch_size=32, steps=656, n_seeds=8, n_secondary_seeds=6),
    "ch04_geometric_work": dict(models=[k for k in HUB_SHAPES if k.startswith(("meta-", "google/", "mistralai/"))],
                                n_blocks=32, block_size=256, batch_size=8, sensitivity_blocks=16, n_draws=3),
    "ch05_width_solver": dict(preset="440M", n_seeds=6, n_key_seeds=10),
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
    # the four arms that decide a claim run every seed, the five secondary ones the first few; one reference model
    runs = 4 * s["n_seeds"] + 5 * s["n_secondary_seeds"] + 1
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


def ch05_key_arms(scale: str) -> list[str]:
    """The rules chapter 5 trains on ``n_key_seeds`` seeds at ``scale``: the arms of every claim whose registered
    design there names ``n_key_seeds`` (the chapter reads them the same way)."""
    from ..verdicts.registry import rule_registry

    arms: set[str] = set()
    for entry in rule_registry().entries.values():
        forms = entry.current[1]
        if entry.chapter == "ch05_width_solver" and scale in forms and "n_key_seeds" in forms[scale].design:
            arms |= set(forms[scale].design["arms"])
    return sorted(arms)


def _ch05(s: dict, key_arms: int = 0) -> Estimate:
    """``key_arms`` of the rules train on ``max(n_seeds, n_key_seeds)`` seeds, the others on ``n_seeds``."""
    from ..lm import PRESETS, training_flops

    name = s["preset"]
    P = PRESETS[name]
    m, cfg = preset_shape(name), preset_config(name)
    steps = s.get("steps", P["steps"])
    tokens = steps * P["batch_size"] * P["grad_accum"] * P["block_size"]
    seeds = s.get("n_seeds", P["n_seeds"])
    key = max(seeds, s.get("n_key_seeds", seeds))
    runs = (len(width_solver_rules()) - key_arms) * seeds + key_arms * key    # chapter 5's rules × seeds
    return Estimate("ch05_width_solver", f"{runs} runs of the {name} preset ({key_arms} key arms × {key} seeds, "
                    f"the others × {seeds}), {tokens / 1e9:.2f}B tokens each",
                    runs * training_flops(cfg, tokens, P["block_size"]), "train-bf16",
                    training_memory(m, P["block_size"], P["batch_size"]) / 1e9)


def _ch06(s: dict | None) -> Estimate:
    from ..width_growth import recipe as R

    r, ms = R.paper_d256_d384(), R.paper_multistage()
    seeds, key_seeds, widths, chain_steps = 3, 8, ms.ms_widths, ms.ms_total_steps   # chapter 6's full defaults
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
                          norm="layer")                   # one q|k|v matmul and fc1 read the two norms

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
    return [_ch01(FULL_SIZES["ch01_ablation_map"]), _ch02(FULL_SIZES["ch02_anatomy_weights"]),
            _ch03(FULL_SIZES["ch03_growth_training"]), _ch04(FULL_SIZES["ch04_geometric_work"]),
            _ch05(FULL_SIZES["ch05_width_solver"], len(ch05_key_arms("full"))), _ch06(None)]


def hour_estimates() -> list[Estimate]:
    """The estimates of every chapter's hour preset (:data:`anatomy_kit.hour.HOUR_PRESETS`), in book order."""
    from ..hour import HOUR_PRESETS as H

    return [_ch01(H["ch01_ablation_map"]), _ch02(H["ch02_anatomy_weights"]), _ch03(H["ch03_growth_training"]),
            _ch04(H["ch04_geometric_work"]), _ch05(H["ch05_width_solver"], len(ch05_key_arms("hour"))),
            _ch06(H["ch06_width_growth"]),
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
