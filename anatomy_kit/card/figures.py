"""The card's figures, drawn from its JSON document alone (matplotlib, Agg; the book page *Your model's report card*).

Each function takes a card document and returns a ``matplotlib`` figure (``None`` where the card has
nothing to show, e.g. the causal panel of a quick card); :func:`png_bytes` turns one into PNG bytes for
the self-contained HTML. Axes are labelled with units; layer indices are 0-based.
"""

from __future__ import annotations

import functools
import io

import numpy as np

__all__ = ["png_bytes", "causal_figure", "cheap_figure", "angular_figure", "agreement_figure", "pruning_figure",
           "widths_figure", "FIGURES"]

_CAUSAL_COLOURS = {"neighbour-mean": "C0", "skip": "C3", "attention": "C2", "mlp": "C1"}


@functools.lru_cache(maxsize=None)
def _figure_class():
    """``Figure`` with a PNG repr, so a notebook shows it with or without pyplot's inline display."""
    from matplotlib.figure import Figure

    class CardFigure(Figure):
        def _repr_png_(self) -> bytes:
            return png_bytes(self, dpi=self.dpi)

    return CardFigure


def _figure(width: float, height: float, rows: int = 1):
    """A figure and its axes without pyplot (no backend is chosen or switched; it shows itself in a notebook)."""
    fig = _figure_class()(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(rows, 1, squeeze=False)[:, 0] if rows > 1 else fig.subplots()


def png_bytes(fig, dpi: int = 110) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _mark_flags(ax, doc: dict) -> None:
    """Shade every flagged layer (a cheap signal would prune it, skipping it is harmful) and say so in the legend."""
    flagged = [e["layer"] for e in doc["layers"] if e["flags"]]
    for i, layer in enumerate(flagged):
        ax.axvspan(layer - 0.45, layer + 0.45, color="#f4c0c0", zorder=0,
                   label="flagged: a cheap signal would prune it, skipping it is harmful" if i == 0 else None)


def causal_figure(doc: dict):
    """ΔPPL % of each causal edit per layer with its interval (symmetric-log axis)."""
    if doc["layers"][0]["causal"] is None:
        return None
    fig, ax = _figure(9, 3.6)
    layers = np.array([e["layer"] for e in doc["layers"]])
    for i, kind in enumerate(_CAUSAL_COLOURS):
        c = [e["causal"][kind] for e in doc["layers"]]
        mid = np.array([x["delta_pct"] for x in c])
        err = np.array([[m - x["low"] for m, x in zip(mid, c)], [x["high"] - m for m, x in zip(mid, c)]])
        ax.errorbar(layers + (i - 1.5) * 0.12, mid, yerr=err, fmt="o", ms=3, lw=1, capsize=2,
                    color=_CAUSAL_COLOURS[kind], label=kind)
    ax.axhline(0, color="grey", lw=0.8)
    _mark_flags(ax, doc)
    ax.set_yscale("symlog", linthresh=1.0)
    lowest = min(e["causal"][k]["low"] for e in doc["layers"] for k in _CAUSAL_COLOURS)
    ax.set_ylim(bottom=min(-1.0, 1.3 * lowest))          # no empty negative range when nothing helps
    ax.set_xlabel("layer ℓ (0-based)")
    ax.set_ylabel("ΔPPL when taken out (%)")
    ax.set_title("Causal signals, 95 % t intervals paired over evaluation blocks")
    ax.legend(ncol=4, fontsize=8)
    return fig


def cheap_figure(doc: dict):
    """The cheap signals per layer, each divided by its median over layers (log axis: edge layers are often
    ten times the rest)."""
    fig, ax = _figure(9, 3.2)
    layers = [e["layer"] for e in doc["layers"]]
    for name in doc["layers"][0]["cheap"]:
        v = np.array([e["cheap"][name] for e in doc["layers"]], dtype=float)
        mid = np.median(v[v > 0]) if (v > 0).any() else 1.0
        ax.plot(layers, np.where(v > 0, v / mid, np.nan), marker="o", ms=3, label=name.replace("_", " "))
    _mark_flags(ax, doc)
    ax.set_yscale("log")
    ax.set_xlabel("layer ℓ (0-based)")
    ax.set_ylabel("signal / its median over layers")
    ax.set_title("Cheap signals (low: the layer changes little)")
    ax.legend(ncol=3, fontsize=8)
    return fig


def angular_figure(doc: dict):
    """PruneMe's angular distance d(ℓ, n) between the states entering layers ℓ and ℓ + n."""
    m = np.array([[np.nan if x is None else x for x in row] for row in doc["angular"]["matrix"]], dtype=float)
    fig, ax = _figure(9, 0.35 * m.shape[1] + 1.6)
    im = ax.imshow(m.T, aspect="auto", origin="lower", cmap="viridis",
                   extent=(-0.5, m.shape[0] - 0.5, 0.5, m.shape[1] + 0.5))
    for b in doc["angular"]["best_blocks"]:
        ax.plot(b["start"], b["n"], "r*", ms=7)
    ax.set_xlabel("first layer of the block ℓ (0-based)")
    ax.set_ylabel("block length n (layers)")
    ax.set_title("Angular distance arccos(cos)/π, all tokens (red: the best block of each length)")
    fig.colorbar(im, ax=ax, label="angular distance (1 = opposite)")
    return fig


def agreement_figure(doc: dict):
    """Spearman ρ between every pair of signals."""
    names = doc["agreement"]["signals"]
    rho = np.eye(len(names))
    for pair in doc["agreement"]["spearman"]:
        i, j = names.index(pair["a"]), names.index(pair["b"])
        rho[i, j] = rho[j, i] = np.nan if pair["rho"] is None else pair["rho"]
    fig, ax = _figure(0.6 * len(names) + 3, 0.5 * len(names) + 2)
    im = ax.imshow(rho, vmin=-1, vmax=1, cmap="RdBu_r")
    labels = [n.replace("_", " ") for n in names]
    ax.set_xticks(range(len(names)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), labels, fontsize=8)
    for i in range(len(names)):
        for j in range(len(names)):
            if np.isfinite(rho[i, j]):
                ax.text(j, i, f"{rho[i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_title("Rank agreement between signals (Spearman ρ over layers)")
    fig.colorbar(im, ax=ax, label="Spearman ρ (1)")
    return fig


def pruning_figure(doc: dict):
    """Measured perplexity of every proposed set against k, with its interval; random k-sets from all layers
    (grey) and from the interior (light blue). The axis stops at three times the worst greedy set; sets
    beyond it sit on the top edge as triangles."""
    if doc["pruning"] is None:
        return None
    import matplotlib

    fig, ax = _figure(9, 4.5)
    base = doc["baseline"]["ppl"]
    top = 3 * max(e["ppl"] for e in doc["pruning"]["sets"] if e["method"] == "greedy")
    pools = (("random", "0.6", "random k-sets, all layers"),
             ("random_interior", "#9ecae1", "random k-sets, interior layers"))
    for pool, colour, label in pools:
        for i, (k, sets) in enumerate(sorted(doc["pruning"].get(pool, {}).items())):
            ppl = np.minimum([s["ppl"] for s in sets], top)
            offset = -0.3 if pool == "random" else 0.3
            ax.plot(np.full(len(ppl), int(k) + offset) + np.linspace(-0.08, 0.08, len(ppl)), ppl, ".",
                    color=colour, ms=4, label=label if i == 0 else None)
    methods = doc["pruning"]["methods"]
    colours = matplotlib.colormaps["tab10"]
    for i, method in enumerate(methods):
        rows = sorted((e for e in doc["pruning"]["sets"] if e["method"] == method), key=lambda e: e["k"])
        k = np.array([e["k"] for e in rows]) + (i - len(methods) / 2) * 0.03
        ppl = np.array([e["ppl"] for e in rows])
        # the ΔPPL interval paired over blocks, drawn on the perplexity axis around the intact model's
        low = base * (1 + np.array([e["low"] for e in rows]) / 100)
        high = base * (1 + np.array([e["high"] for e in rows]) / 100)
        style = {"lw": 2.2, "color": "k", "zorder": 5} if method == "greedy" else {"lw": 1, "color": colours(i % 10)}
        shown = ppl <= top
        ax.errorbar(k[shown], ppl[shown], yerr=[np.clip(ppl - low, 0, None)[shown],
                                                np.clip(np.minimum(high, top) - ppl, 0, None)[shown]],
                    marker="o", ms=3, capsize=2, label=method.replace("_", " "), **style)
        if (~shown).any():
            ax.plot(k[~shown], np.full((~shown).sum(), top), "^", color=style["color"], ms=5)
    ax.axhline(base, color="grey", ls="--", lw=0.8, label="intact model")
    ax.set_yscale("log")
    lowest = min([base] + [e["ppl"] for e in doc["pruning"]["sets"]]
                 + [r["ppl"] for pool, _, _ in pools for v in doc["pruning"].get(pool, {}).values() for r in v])
    ax.set_ylim(0.9 * lowest, top * 1.05)
    ax.set_xticks(range(1, doc["pruning"]["max_k"] + 1))
    ax.set_xlabel("layers removed k")
    ax.set_ylabel("perplexity on the evaluation blocks")
    ax.set_title("Pruned models, measured (95 % intervals; ▲: beyond the axis)")
    ax.legend(ncol=3, fontsize=7)
    return fig


def widths_figure(doc: dict):
    """Today's FFN widths beside the solver's suggestion under the budget."""
    w = doc["widths"]
    layers = np.arange(len(w["today"]))
    fig, ax = _figure(9, 3.2)
    ax.bar(layers - 0.2, w["today"], width=0.4, color="0.7", label="today")
    ax.bar(layers + 0.2, w["suggested"], width=0.4, color="C0",
           label=f"suggested ({100 * w['budget_fraction']:.0f} % of today's FFN parameters)")
    ax.set_xlabel("layer ℓ (0-based)")
    ax.set_ylabel("FFN width (units)")
    ax.set_title(f"Chapter 5's solver on the {w['profile'].replace('_', ' ')} profile, multiples of {w['multiple']}")
    ax.legend(fontsize=8)
    return fig


#: (anchor, caption, function) of every figure, in page order.
FIGURES = (("causal", "Causal signals per layer", causal_figure),
           ("cheap", "Cheap signals per layer", cheap_figure),
           ("angular", "Angular distance between layer states", angular_figure),
           ("agreement", "Agreement between signals", agreement_figure),
           ("pruning", "Pruned models, measured", pruning_figure),
           ("widths", "FFN widths", widths_figure))
