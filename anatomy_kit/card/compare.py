"""Two or more cards side by side, depth normalised to ℓ / (L − 1) (``python -m anatomy_kit card --compare``).

Models of different depth are compared by relative depth: layer ℓ of an L-layer model sits at
``ℓ / (L − 1)`` (0 = first layer, 1 = last). :func:`compare_cards` returns a small document with each
card's profiles on that axis and its headline numbers; :func:`write_comparison` writes
``compare.html`` (self-contained, figures inline) and ``compare.md``. Used by the book page
*Your model's report card*.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ..jsonio import write_json
from ..validate import AnatomyKitError
from .document import Card, load_card
from .figures import _figure, png_bytes

__all__ = ["layer_positions", "compare_cards", "comparison_figure", "write_comparison"]

PROFILES = ("skip", "neighbour-mean", "block_influence", "angular_distance", "update_norm", "work_gw")


def _profile(doc: dict, name: str) -> list[float] | None:
    first = doc["layers"][0]
    if name in first["cheap"]:
        return [e["cheap"][name] for e in doc["layers"]]
    if first["causal"] is not None and name in first["causal"]:
        return [e["causal"][name]["delta_pct"] for e in doc["layers"]]
    return None


def layer_positions(doc: dict) -> tuple[list[int], int]:
    """``(original index of each layer, the original model's layer count)``: a card of a ``--save-pruned``
    folder (its ``anatomy_kit_pruned.json`` recorded as ``model.pruned``) places its layers where they sat
    in the model it was cut from, so a parent and its pruned child line up layer for layer."""
    n, pruned = doc["model"]["n_layers"], doc["model"].get("pruned")
    if not pruned:
        return list(range(n)), n
    dropped, source = set(pruned["dropped_layers"]), int(pruned["source_layers"])
    kept = [l for l in range(source) if l not in dropped]
    if len(kept) != n:
        raise AnatomyKitError(f"the card's {n} layers do not match its pruning record ({source} layers, "
                              f"{len(dropped)} dropped)")
    return kept, source


def compare_cards(cards: list[Card | str | Path]) -> dict:
    """The comparison document of two or more cards (or paths to their ``card.json``)."""
    cards = [c if isinstance(c, Card) else load_card(c) for c in cards]
    if len(cards) < 2:
        raise AnatomyKitError(f"--compare needs two or more cards, got {len(cards)}")
    entries = []
    for c in cards:
        d, n = c.doc, c.n_layers
        original, source = layer_positions(d)
        rec = (d["pruning"] or {}).get("recommended", {})
        entries.append({"model": d["model"]["name"], "n_layers": n, "corpus": d["text"]["corpus"],
                        "baseline_ppl": d["baseline"]["ppl"], "token_sha256": d["text"]["token_sha256"],
                        "depth": [l / (source - 1) if source > 1 else 0.0 for l in original],
                        "original_layers": original,
                        "profiles": {p: _profile(d, p) for p in PROFILES},
                        "greedy": {k: {"layers": [original[l] for l in v["layers"]],
                                       "depth": [original[l] / (source - 1) for l in v["layers"]],
                                       "ppl": v["ppl"]} for k, v in rec.items()},
                        "best": {str(k): min((e for e in (d["pruning"] or {}).get("sets", []) if e["k"] == k),
                                             key=lambda e: e["ppl"]) for k in map(int, rec)}})
    same_text = len({e["token_sha256"] for e in entries}) == 1
    return {"cards": entries, "same_tokens": same_text,
            "note": "depth is ℓ / (L − 1), 0-based layers (a pruned model's layers at their index in the model it "
                    "was cut from); perplexities are comparable across cards only on the "
                    "same token ids" + ("" if same_text else " (these cards were measured on different tokens)")}


def comparison_figure(comparison: dict):
    """One panel per profile, every card on the relative-depth axis."""
    shown = [p for p in PROFILES if any(e["profiles"][p] is not None for e in comparison["cards"])]
    fig, axes = _figure(8, 2.2 * len(shown), rows=max(2, len(shown)))
    for ax, name in zip(axes, shown):
        for e in comparison["cards"]:
            if e["profiles"][name] is not None:
                ax.plot(e["depth"], e["profiles"][name], marker="o", ms=2.5, label=e["model"])
        ax.set_ylabel(name.replace("_", " ") + (" ΔPPL %" if name in ("skip", "neighbour-mean") else ""), fontsize=8)
        if name in ("skip", "neighbour-mean"):
            ax.set_yscale("symlog", linthresh=1.0)
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    axes[len(shown) - 1].set_xlabel("relative depth ℓ / (L − 1)")
    for ax in axes[:len(shown)]:
        ax.legend(fontsize=7)
    axes[0].set_title("Cards compared by relative depth")
    return fig


def write_comparison(comparison: dict, out: str | Path) -> dict[str, Path]:
    """``compare.json``, ``compare.html`` (self-contained) and ``compare.md`` + ``compare.png`` in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    png = png_bytes(comparison_figure(comparison))
    (out / "compare.png").write_bytes(png)
    rows = [(e["model"], e["n_layers"], e["corpus"], f"{e['baseline_ppl']:.4g}",
             "; ".join(f"k={k}: {v['layers']} PPL {v['ppl']:.4g}" for k, v in e["greedy"].items())
             or "— (quick card)",
             "; ".join(f"k={k}: {b['method']} {b['layers']} PPL {b['ppl']:.4g}" for k, b in e["best"].items()) or "—")
            for e in comparison["cards"]]
    head = ("model", "layers", "corpus", "baseline PPL", "greedy drop sets (original 0-based layers), PPL",
            "lowest measured set per k")
    table = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    page = ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Layer cards compared</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto}td,th{border:1px solid #ccc;"
            "padding:2px 6px}table{border-collapse:collapse}img{max-width:100%}</style></head><body>"
            "<h1>Layer cards compared</h1><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + table
            + f"</table><p>{html.escape(comparison['note'])}</p><img alt=\"profiles by relative depth\" "
            f"src=\"data:image/png;base64,{base64.b64encode(png).decode()}\"></body></html>")
    (out / "compare.html").write_text(page, encoding="utf-8")
    md = ["# Layer cards compared", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    md += ["", comparison["note"], "", "![profiles by relative depth](compare.png)", ""]
    (out / "compare.md").write_text("\n".join(md), encoding="utf-8")
    return {"json": write_json(out / "compare.json", comparison), "html": out / "compare.html",
            "markdown": out / "compare.md"}

