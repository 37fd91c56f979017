"""Reading chapter 6's grid: final losses by condition and seed, curves around growth, the paper's
orderings as paired differences, spectra of the trained output projections, what growth preserves.

Chapter 6, *Growing the residual stream*. Every function here reads finished runs (the
:class:`~anatomy_kit.lm.train.TrainResult` of :func:`~anatomy_kit.width_growth.experiment.run_jobs`, the start
files and checkpoints under the grid's root); none trains.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from anatomy_kit.width_growth import srio
from anatomy_kit.width_growth.diagnostics import OutputSpectrum, SpikeHeal, output_spectra, spike_and_heal
from anatomy_kit.width_growth.experiment import GridPaths, arm_seeds, cold_name, grown_name, small_name, stage_name
from anatomy_kit.width_growth.gpt import set_gate
from anatomy_kit.width_growth.recipe import CONDITIONS, GrowthRecipe
from anatomy_kit.width_growth.starts import load_start, start_meta, trained_model
from anatomy_kit.lm.loss import evaluate
from anatomy_kit.stats import PairedComparison, paired_difference
from anatomy_kit.validate import AnatomyKitError

__all__ = ["GrownRun", "run_name", "collect_runs", "final_losses", "paired_vs", "ATTRIBUTION_STEPS", "attribution",
           "paper_orderings", "run_spectra", "preservation", "multistage_curves"]


@dataclass
class GrownRun:
    """One finished run of the single-step grid (``condition`` "cold" for the cold start).

    ``at_growth``: eval loss of the grown model before any training at gate 0 and gate 1 (the
    loss it starts from is the one at its starting gate); ``heal``: spike and recovery measured
    against the small model's final eval loss.
    """

    condition: str
    seed: int
    final_loss: float
    eval_curve: list[tuple[int, float]]
    train_curve: list[tuple[int, float]]
    at_growth: dict[str, float] = field(default_factory=dict)
    heal: SpikeHeal | None = None
    meta: dict = field(default_factory=dict)


def run_name(recipe: GrowthRecipe, condition: str, seed: int) -> str:
    """The checkpoint folder name of a single-step run (``small`` is the small model)."""
    if condition == "small":
        return small_name(recipe, seed)
    if condition == "cold":
        return cold_name(recipe.d_large, recipe.steps_small + recipe.steps_grown, seed)
    return grown_name(condition, seed)


def _start_losses(path, eval_blocks, batch_size: int, eval_batches: int | None, device) -> dict[str, float]:
    model = load_start(path, device)
    return {f"gate {g:g}": evaluate(set_gate(model, g), eval_blocks, batch_size, eval_batches, device=str(device))
            for g in (0.0, 1.0)}


def collect_runs(recipe: GrowthRecipe, seeds: list[int], paths: GridPaths, results: Mapping[str, Any],
                 eval_blocks, *, key_seeds: list[int] | None = None,
                 device: str | torch.device = "cpu") -> dict[str, dict[int, GrownRun]]:
    """``{condition: {seed: GrownRun}}`` for "small", every grown condition and "cold", each on its
    seeds (:func:`~anatomy_kit.width_growth.experiment.arm_seeds`: the key arms on ``key_seeds`` too).

    Every grown start is evaluated at both gates on ``device`` (the run's: at full scale about 1M
    tokens × 2 gates × ~40 starts)."""
    by_arm = arm_seeds(recipe, seeds, key_seeds)
    out: dict[str, dict[int, GrownRun]] = {}
    for cond in ("small", *recipe.conditions):
        for s in by_arm[cond]:
            name = run_name(recipe, cond, s)
            if name not in results or results[name] is None:
                raise AnatomyKitError(f"run {name!r} has no result; train the grid (all shards) first")
            r = results[name]
            run = GrownRun(cond, s, r.final_eval_loss, list(r.eval_curve), list(r.loss_curve))
            if cond not in ("small", "cold"):
                run.at_growth = _start_losses(paths.start(name), eval_blocks, recipe.batch_size,
                                              recipe.eval_batches, device)
                run.meta = start_meta(paths.start(name))[1]
                start_gate = "gate 0" if CONDITIONS[cond].gated else "gate 1"
                before = out["small"][s].final_loss
                run.heal = spike_and_heal([(0, run.at_growth[start_gate]), *run.eval_curve], before)
            out.setdefault(cond, {})[s] = run
    return out


def final_losses(runs: Mapping[str, Mapping[int, GrownRun]]) -> dict[str, dict[int, float]]:
    """``{condition: {seed: final eval loss}}``."""
    return {c: {s: r.final_loss for s, r in by_seed.items()} for c, by_seed in runs.items()}


def paired_vs(final: Mapping[str, Mapping[int, float]], a: str, b: str) -> PairedComparison:
    """``final[a] − final[b]`` seed by seed (nats/token), on the seeds both arms trained."""
    for c in (a, b):
        if c not in final:
            raise AnatomyKitError(f"condition {c!r} has no results; trained: {sorted(final)}")
    shared = set(final[a]) & set(final[b])
    return paired_difference({s: x for s, x in final[a].items() if s in shared},
                             {s: x for s, x in final[b].items() if s in shared}, unit="nats/token")


#: What the full recipe changes against the paper's NRIO, one step at a time (chapter 6): each step's
#: arm minus the arm before it; the three differences add up to the full recipe minus NRIO.
ATTRIBUTION_STEPS = (("untie the head", "nrio", "nrio/untied"),
                     ("fold the norms", "nrio/untied", "srio-so/eps-0"),
                     ("rotate by ε*", "srio-so/eps-0", "srio-so"))


def attribution(final: Mapping[str, Mapping[int, float]]) -> dict[str, PairedComparison]:
    """``{step: (after − before), paired over seeds}`` along :data:`ATTRIBUTION_STEPS` (negative: the
    step lowers the final loss), for the steps whose two arms were trained."""
    return {step: paired_vs(final, after, before) for step, before, after in ATTRIBUTION_STEPS
            if before in final and after in final}


def paper_orderings(reference: Mapping, final: Mapping[str, Mapping[int, float]]) -> dict[str, tuple]:
    """The paper's three orderings of ``p3.d256_d384_losses`` as paired differences of ours.

    ``reference["conditions"]`` maps the paper's rows (srio, nrio, ligo) to our conditions.
    Returns ``{"srio − nrio": (("srio", "nrio"), PairedComparison), …}`` for every pair of rows
    whose conditions were trained; the pair is the ``paper_keys`` that give the paper's sign.
    """
    rows = reference.get("conditions")
    if not isinstance(rows, Mapping):
        raise AnatomyKitError("reference needs a 'conditions' mapping from the paper's rows to our conditions")
    names = list(rows)
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if rows[a] in final and rows[b] in final:
                out[f"{a} − {b}"] = ((a, b), paired_vs(final, rows[a], rows[b]))
    return out


def run_spectra(recipe: GrowthRecipe, paths: GridPaths, conditions: list[str], seeds: list[int],
                rel_tol: float = 1e-6) -> dict[str, dict[int, list[OutputSpectrum]]]:
    """Spectra of ``attn.proj`` and ``mlp.fc2`` of each trained run (grown: after its continuation)."""
    out: dict[str, dict[int, list[OutputSpectrum]]] = {}
    for cond in conditions:
        for s in seeds:
            name = run_name(recipe, cond, s)
            source = (recipe.config(recipe.d_small if cond == "small" else recipe.d_large)
                      if cond in ("small", "cold") else paths.start(name))
            out.setdefault(cond, {})[s] = output_spectra(trained_model(source, paths.run(name)), rel_tol)
    return out


def _max_logit_gap(a, b, x: torch.Tensor) -> float:
    with torch.no_grad():
        return float((a(x) - b(x)).abs().max())


def preservation(small, new_d: int, x: torch.Tensor, cases: list[tuple[str, dict]]) -> list[dict]:
    """Max |logit difference| between ``small`` and each grown model at gate 0 and gate 1.

    ``cases``: ``[(label, keyword arguments of srio.grow), …]``; ``x``: (B, T) token ids. Both
    models run in float64, so 1e-12 means exact and anything above 1e-6 is a real change.
    """
    ref = srio.build_gpt(small.config, {k: v.detach().double().clone() for k, v in small.state_dict().items()})
    ref.eval()
    rows = []
    for label, kw in cases:
        grown = srio.grow(ref, new_d, **kw).eval()
        rows.append({"case": label, **{f"gate {g:g}": _max_logit_gap(set_gate(grown, g), ref, x)
                                        for g in (0.0, 1.0)}})
    return rows


def multistage_curves(recipe: GrowthRecipe, seed: int, results: Mapping[str, Any]) -> dict[str, list]:
    """``{condition or "cold": [(step from the start of the chain, eval loss), …]}`` and the stage
    boundaries under ``"_stages"`` (steps at which each growth happened)."""
    steps = recipe.multistage_steps()
    widths = recipe.ms_widths
    first = results[stage_name(None, 0, widths[0], seed)]
    out: dict[str, list] = {"_stages": [sum(steps[:j]) for j in range(1, len(steps))]}
    for cond in recipe.ms_operators:
        curve, done = list(first.eval_curve), steps[0]
        for j in range(1, len(widths)):
            r = results[stage_name(cond, j, widths[j], seed)]
            curve += [(done + s, v) for s, v in r.eval_curve]
            done += steps[j]
        out[cond] = curve
    out["cold"] = list(results[cold_name(widths[-1], sum(steps), seed)].eval_curve)
    return out
