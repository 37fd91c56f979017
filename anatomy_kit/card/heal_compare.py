"""Healing read against its control: the healed pruned model beside the equally tuned intact one, paired over
evaluation blocks (the share of the pruning gap closed, with Fieller's interval), and the words the card prints
for it (:mod:`.heal` runs the fine-tunes)."""

from __future__ import annotations

import numpy as np

from ..anatomy.blockwise import ppl_change_interval
from ..ratio_interval import paired_ratio_interval
from ..validate import AnatomyKitError


__all__ = ["BEYOND_INTACT", "heal_reading", "compare_runs", "shared_terms", "share_text", "describe_k"]


#: what "gap closed" against the *untuned* intact model means when the healed model beats it
BEYOND_INTACT = ("the healed model is better than the untuned intact one: the fine-tune also adapts the model to "
                 "this text, so this share of the gap closed is not the pruning's alone (read the share against "
                 "the intact model fine-tuned the same way)")


def heal_reading(vs_intact_high: float) -> str | None:
    """A warning for the secondary, untuned comparison when the healed model's whole ΔPPL interval against
    the untuned intact model lies below 0 (``vs_intact_high`` < 0, in %); ``None`` otherwise (an interval
    touching or straddling 0 is silent)."""
    return BEYOND_INTACT if vs_intact_high < 0 else None


def _interval(x) -> dict:
    return {"delta_pct": x.mean, "low": x.low, "high": x.high}


def _share(numerator: np.ndarray, gap: np.ndarray, confidence: float) -> dict:
    """``1 − mean(numerator) / mean(gap)`` with Fieller's interval (unbounded: ``None`` ends)."""
    if float(np.mean(gap)) <= 0:
        return {"share": None, "low": None, "high": None, "bounded": False,
                "why": "pruning did not raise the perplexity here: there is no gap to close"}
    r = paired_ratio_interval(numerator, gap, confidence)
    out = {"share": 1 - r.ratio, "low": 1 - r.high if r.bounded else None, "high": 1 - r.low if r.bounded else None,
           "bounded": r.bounded}
    if not r.bounded:
        out["why"] = "the pruning gap's own interval contains 0 here, so no share can be excluded"
    return out


def compare_runs(control: HealRun, healed: HealRun, n_targets: np.ndarray, confidence: float = 0.95) -> dict:
    """The healed pruned model read against the control (module docstring), paired over the evaluation blocks.

    ``control``: the intact model's run (``drop = []``); ``healed``: the pruned model's, same recipe and
    blocks. Returns JSON-ready numbers: ``vs_control`` (ΔPPL % of the healed pruned against the healed
    intact model), ``gap_closed`` (the share of the pruning gap healing closes, with Fieller's interval),
    ``gap_before`` (the untuned pruned model against the untuned intact one), ``vs_pruned``, and under
    ``untuned`` the secondary reading against the untuned intact model.
    """
    if control.drop:
        raise AnatomyKitError(f"the control is the intact model; it dropped {control.drop}")
    if control.recipe != healed.recipe or control.data_sha256 != healed.data_sha256:
        raise AnatomyKitError("the control and the healed model were not trained alike (recipe or data differ)")
    n = np.asarray(n_targets, float)
    intact, pruned_rows = control.rows_before, healed.rows_before
    healed_intact, healed_pruned = control.rows_after, healed.rows_after
    gap = (pruned_rows - intact) / n
    vs_intact = ppl_change_interval(intact, healed_pruned, n, confidence)
    return {
        "layers": healed.drop,
        "ppl_pruned": healed.curve[0], "ppl_healed": healed.curve[max(healed.curve)],
        "ppl_control": control.curve[max(control.curve)],
        "gap_before": _interval(ppl_change_interval(intact, pruned_rows, n, confidence)),
        "vs_control": _interval(ppl_change_interval(healed_intact, healed_pruned, n, confidence)),
        "gap_closed": _share((healed_pruned - healed_intact) / n, gap, confidence),
        "vs_pruned": _interval(ppl_change_interval(pruned_rows, healed_pruned, n, confidence)),
        "untuned": {"vs_intact": _interval(vs_intact),
                    "gap_closed": _share((healed_pruned - intact) / n, gap, confidence),
                    "reading": heal_reading(vs_intact.high)},
    }


def _differs(control: HealRun, healed: HealRun, n_layers: int) -> list[str]:
    """What the healed model and the control do not share, in words."""
    trains = ("LoRA adapters' parameters" if healed.recipe["method"] == "lora" else "parameters")
    return [f"the healed model runs without layers {healed.drop} (0-based), the control with all {n_layers}",
            f"the healed model trains {healed.trainable_parameters:,} {trains}, the control "
            f"{control.trainable_parameters:,} (nothing of the dropped layers trains)",
            f"they start from different models: perplexity {healed.curve[0]:.4g} pruned, {control.curve[0]:.4g} "
            "intact"]


def shared_terms(control: HealRun, n_train_blocks: int, n_eval_blocks: int) -> list[str]:
    """What the healed models and the control share, in words (heal.json, the command's output, the card)."""
    r = control.recipe
    out = [f"the same {n_train_blocks} training blocks in the same order (seed {r['seed']}; token ids sha256 "
           f"{control.data_sha256[:16]}…)",
           f"{r['steps']} steps of {r['batch_size']} blocks, learning rate {r['lr']:g}, AdamW β = (0.9, 0.999), "
           "no weight decay, grad-norm clip 1",
           f"the method: {'every parameter' if r['method'] == 'full' else 'LoRA'}"
           + (f" (rank {r['lora_rank']}, alpha {r['lora_alpha']:g}, targets "
              f"{'every linear map' if r['lora_targets'] is None else ', '.join(r['lora_targets'])}; each layer's "
              "adapters drawn from the seed and the module's name, so a layer both models have starts alike)"
              if r["method"] == "lora" else ""),
           f"the {n_eval_blocks} evaluation blocks, scored after steps {r['eval_steps']}"]
    return out


def share_text(g: dict) -> str:
    """``"62 % [41, 80] (Fieller)"``, or the share and why it has no interval."""
    if g["share"] is None:
        return f"not defined ({g['why']})"
    if not g["bounded"]:
        return f"{100 * g['share']:.0f} % (no interval: {g['why']})"
    return f"{100 * g['share']:.0f} % [{100 * g['low']:.0f}, {100 * g['high']:.0f}] (Fieller)"


def describe_k(k: str, e: dict) -> str:
    """One line per healed k: the comparison with the control first, the untuned one after."""
    v, u = e["vs_control"], e["untuned"]
    share = share_text(e["gap_closed"])
    return (f"healed k={k} {e['layers']}: PPL {e['ppl_pruned']:.4g} → {e['ppl_healed']:.4g}; against the intact "
            f"model healed alike (PPL {e['ppl_control']:.4g}) {v['delta_pct']:+.1f} % [{v['low']:+.1f}, "
            f"{v['high']:+.1f}]; pruning gap closed {share}; secondary, against the untuned intact model: "
            f"{u['vs_intact']['delta_pct']:+.1f} % [{u['vs_intact']['low']:+.1f}, {u['vs_intact']['high']:+.1f}]"
            + (f" ({u['reading']})" if u["reading"] else ""))
