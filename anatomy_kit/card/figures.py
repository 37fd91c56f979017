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
#: Every figure is at most the book's column wide (7.5 inches at 100 dpi: 748 px), so its text is shown at
#: its own size; no text is smaller than 9 pt.
WIDTH = 7.4
SMALLEST_FONT = 9
_FLAG_NOTE = "shaded: flagged, a cheap signal would prune the layer and skipping it is harmful"


@functools.lru_cache(maxsize=None)
def _figure_class():
    """``Figure`` with a PNG repr, so a notebook shows it with or without pyplot's inline display."""
    from matplotlib.figure import Figure

    class CardFigure(Figure):
        def _repr_png_(self) -> bytes:
            return png_bytes(self, dpi=self.dpi)

    return CardFigure


def _figure(width: float, height: float, rows: int = 1, sharex: bool = False):
    """A figure and its axes without pyplot (no backend is chosen or switched; it shows itself in a notebook)."""
    fig = _figure_class()(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(rows, 1, squeeze=False, sharex=sharex)[:, 0] if rows > 1 else fig.subplots()


def _layer_axis(ax, label: str = "layer ℓ (0-based)", axis: str = "x") -> None:
    """Whole numbers only on an axis that counts layers."""
    from matplotlib.ticker import MaxNLocator

    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))
    getattr(ax, f"set_{axis}label")(label)


def _legend_below(fig, axes, ncol: int = 2) -> None:
    """One legend for all panels, under them (never over the data); each label once."""
    seen = {}
    for ax in np.atleast_1d(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=ncol, frameon=False,
               fontsize=SMALLEST_FONT)


def png_bytes(fig, dpi: int = 110) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _mark_flags(ax, doc: dict) -> bool:
    """Shade every flagged layer (a cheap signal would prune it, skipping it is harmful); whether any is."""
    flagged = [e["layer"] for e in doc["layers"] if e["flags"]]
    for layer in flagged:
        ax.axvspan(layer - 0.45, layer + 0.45, color="#f4c0c0", zorder=0)
    return bool(flagged)


def _title(fig, title: str, flagged: bool) -> None:
    """The figure's title, with a line on the shading where layers are flagged (the legend keeps to the data)."""
    fig.suptitle(title + (f"\n({_FLAG_NOTE})" if flagged else ""), fontsize=11)


def causal_figure(doc: dict):
    """ΔPPL % of each causal edit per layer with its interval (symmetric-log axis); two panels of two edits:
    the whole layer (skip, neighbour-mean) above, one sub-block (attention, mlp) below."""
    if doc["layers"][0]["causal"] is None:
        return None
    fig, axes = _figure(WIDTH, 6.4, rows=2, sharex=True)
    layers = np.array([e["layer"] for e in doc["layers"]])
    lowest = min(e["causal"][k]["low"] for e in doc["layers"] for k in _CAUSAL_COLOURS)
    panels = (("the whole layer", ("skip", "neighbour-mean")), ("one sub-block dropped", ("attention", "mlp")))
    for ax, (title, kinds) in zip(axes, panels):
        for i, kind in enumerate(kinds):
            c = [e["causal"][kind] for e in doc["layers"]]
            mid = np.array([x["delta_pct"] for x in c])
            err = np.array([[m - x["low"] for m, x in zip(mid, c)], [x["high"] - m for m, x in zip(mid, c)]])
            ax.errorbar(layers + (i - 0.5) * 0.25, mid, yerr=err, fmt="o", ms=3.5, lw=1, capsize=2,
                        color=_CAUSAL_COLOURS[kind], label=kind)
        ax.axhline(0, color="grey", lw=0.8)
        flagged = _mark_flags(ax, doc)
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(bottom=min(-1.0, 1.3 * lowest))          # no empty negative range when nothing helps
        ax.set_ylabel("ΔPPL taken out (%)")
        ax.set_title(title, fontsize=10)
    _layer_axis(axes[-1])
    _title(fig, "Causal signals, 95 % t intervals paired over evaluation blocks", flagged)
    _legend_below(fig, axes, ncol=4)
    return fig


def cheap_figure(doc: dict):
    """The cheap signals per layer, each divided by its median over layers (log axis: edge layers are often
    ten times the rest); the residual stream's signals above, chapter 4's work of the FFN below."""
    layers = [e["layer"] for e in doc["layers"]]
    names = list(doc["layers"][0]["cheap"])
    groups = [g for g in ([n for n in names if not n.startswith("work")], [n for n in names if n.startswith("work")])
              if g]
    fig, axes = _figure(WIDTH, 2.6 * len(groups) + 1.0, rows=len(groups), sharex=True)
    axes = np.atleast_1d(axes)
    for ax, group, title in zip(axes, groups, ("the residual stream", "the FFN's work (chapter 4)")):
        for name in group:
            v = np.array([e["cheap"][name] for e in doc["layers"]], dtype=float)
            mid = np.median(v[v > 0]) if (v > 0).any() else 1.0
            ax.plot(layers, np.where(v > 0, v / mid, np.nan), marker="o", ms=3, label=name.replace("_", " "),
                    color=f"C{names.index(name)}")
        flagged = _mark_flags(ax, doc)
        ax.set_yscale("log")
        ax.set_ylabel("signal / median")
        ax.set_title(title if len(groups) > 1 else None, fontsize=10)
    _layer_axis(axes[-1])
    _title(fig, "Cheap signals (low: the layer changes little)", flagged)
    _legend_below(fig, axes, ncol=3)
    return fig


def angular_figure(doc: dict):
    """PruneMe's angular distance d(ℓ, n) between the states entering layers ℓ and ℓ + n."""
    m = np.array([[np.nan if x is None else x for x in row] for row in doc["angular"]["matrix"]], dtype=float)
    fig, ax = _figure(WIDTH, 0.35 * m.shape[1] + 1.9)
    im = ax.imshow(m.T, aspect="auto", origin="lower", cmap="viridis",
                   extent=(-0.5, m.shape[0] - 0.5, 0.5, m.shape[1] + 0.5))
    for b in doc["angular"]["best_blocks"]:
        ax.plot(b["start"], b["n"], "r*", ms=8)
    _layer_axis(ax, "first layer of the block ℓ (0-based)")
    _layer_axis(ax, "block length n (layers)", axis="y")
    ax.set_title("Angular distance arccos(cos)/π, all tokens\n(red ★: the best block of each length)", fontsize=11)
    fig.colorbar(im, ax=ax, label="angular distance (1 = opposite)")
    return fig


def agreement_figure(doc: dict):
    """Spearman ρ between every pair of signals."""
    names = doc["agreement"]["signals"]
    rho = np.eye(len(names))
    for pair in doc["agreement"]["spearman"]:
        i, j = names.index(pair["a"]), names.index(pair["b"])
        rho[i, j] = rho[j, i] = np.nan if pair["rho"] is None else pair["rho"]
    n = len(names)
    fig, ax = _figure(min(WIDTH, 0.55 * n + 2.6), min(WIDTH, 0.5 * n + 2.3))
    im = ax.imshow(rho, vmin=-1, vmax=1, cmap="RdBu_r")
    labels = [n.replace("_", " ") for n in names]
    ax.set_xticks(range(n), labels, rotation=45, ha="right", fontsize=SMALLEST_FONT)
    ax.set_yticks(range(n), labels, fontsize=SMALLEST_FONT)
    for i in range(n):
        for j in range(n):
            if np.isfinite(rho[i, j]):
                ax.text(j, i, f"{rho[i, j]:.2f}".replace("0.", ".").replace("-", "−"), ha="center", va="center",
                        fontsize=SMALLEST_FONT, color="white" if abs(rho[i, j]) > 0.6 else "black")
    ax.set_title("Rank agreement between signals\n(Spearman ρ over layers)", fontsize=11)
    fig.colorbar(im, ax=ax, label="Spearman ρ (1)", shrink=0.8)
    return fig


#: The pruning figure's lower panel: the sets a one-pass signal proposes; the upper one holds the rest (greedy, the
#: calibration skip, the last k). Greedy is drawn in both, as the card's recommendation to compare with.
_ONE_PASS = ("block_influence", "angular_distance", "update_norm", "prune_me_block", "work_gw", "work_shift")


def pruning_figure(doc: dict):
    """Measured perplexity of every proposed set against k, with its interval; random k-sets from all layers
    (grey) and from the interior (light blue). Two panels: greedy and the baselines above, the one-pass signals'
    sets below (with greedy again). The axis stops at three times the worst greedy set; sets beyond it sit on the
    top edge as triangles."""
    if doc["pruning"] is None:
        return None
    import matplotlib

    base = doc["baseline"]["ppl"]
    top = 3 * max(e["ppl"] for e in doc["pruning"]["sets"] if e["method"] == "greedy")
    pools = (("random", "0.6", "random k-sets, all layers"),
             ("random_interior", "#9ecae1", "random k-sets, interior layers"))
    methods = doc["pruning"]["methods"]
    colours = matplotlib.colormaps["tab10"]
    panels = (("greedy and the baselines", [m for m in methods if m not in _ONE_PASS]),
              ("one-pass signals' sets (greedy again in black)", ["greedy"] + [m for m in methods if m in _ONE_PASS]))
    fig, axes = _figure(WIDTH, 8.6, rows=2, sharex=True)
    lowest = min([base] + [e["ppl"] for e in doc["pruning"]["sets"]]
                 + [r["ppl"] for pool, _, _ in pools for v in doc["pruning"].get(pool, {}).values() for r in v])
    for ax, (title, shown_methods) in zip(axes, panels):
        for pool, colour, label in pools:
            for i, (k, sets) in enumerate(sorted(doc["pruning"].get(pool, {}).items())):
                ppl = np.minimum([s["ppl"] for s in sets], top)
                offset = -0.3 if pool == "random" else 0.3
                ax.plot(np.full(len(ppl), int(k) + offset) + np.linspace(-0.08, 0.08, len(ppl)), ppl, ".",
                        color=colour, ms=5, label=label if i == 0 else None)
        for i, method in enumerate(shown_methods):
            rows = sorted((e for e in doc["pruning"]["sets"] if e["method"] == method), key=lambda e: e["k"])
            k = np.array([e["k"] for e in rows]) + (i - len(shown_methods) / 2) * 0.05
            ppl = np.array([e["ppl"] for e in rows])
            # the ΔPPL interval paired over blocks, drawn on the perplexity axis around the intact model's
            low = base * (1 + np.array([e["low"] for e in rows]) / 100)
            high = base * (1 + np.array([e["high"] for e in rows]) / 100)
            style = ({"lw": 2.2, "color": "k", "zorder": 5} if method == "greedy"
                     else {"lw": 1.2, "color": colours(methods.index(method) % 10)})
            shown = ppl <= top
            ax.errorbar(k[shown], ppl[shown], yerr=[np.clip(ppl - low, 0, None)[shown],
                                                    np.clip(np.minimum(high, top) - ppl, 0, None)[shown]],
                        marker="o", ms=3.5, capsize=2, label=method.replace("_", " "), **style)
            if (~shown).any():
                ax.plot(k[~shown], np.full((~shown).sum(), top), "^", color=style["color"], ms=6)
        ax.axhline(base, color="grey", ls="--", lw=0.8, label="intact model")
        ax.set_yscale("log")
        ax.set_ylim(0.9 * lowest, top * 1.05)
        ax.set_ylabel("perplexity, evaluation blocks")
        ax.set_title(title, fontsize=10)
    axes[-1].set_xticks(range(1, doc["pruning"]["max_k"] + 1))
    axes[-1].set_xlabel("layers removed k")
    fig.suptitle("Pruned models, measured (95 % intervals; ▲: beyond the axis)", fontsize=11)
    _legend_below(fig, axes, ncol=3)
    return fig


def widths_figure(doc: dict):
    """Today's FFN widths beside the solver's suggestion under the budget."""
    w = doc["widths"]
    layers = np.arange(len(w["today"]))
    fig, ax = _figure(WIDTH, 3.6)
    ax.bar(layers - 0.2, w["today"], width=0.4, color="0.7", label="today")
    ax.bar(layers + 0.2, w["suggested"], width=0.4, color="C0",
           label=f"suggested ({100 * w['budget_fraction']:.0f} % of today's FFN parameters)")
    _layer_axis(ax)
    ax.set_ylabel("FFN width (units)")
    ax.set_title(f"Chapter 5's solver on the {w['profile'].replace('_', ' ')} profile, multiples of {w['multiple']}",
                 fontsize=11)
    _legend_below(fig, ax, ncol=2)
    return fig


#: (anchor, caption, function) of every figure, in page order.
FIGURES = (("causal", "Causal signals per layer", causal_figure),
           ("cheap", "Cheap signals per layer", cheap_figure),
           ("angular", "Angular distance between layer states", angular_figure),
           ("agreement", "Agreement between signals", agreement_figure),
           ("pruning", "Pruned models, measured", pruning_figure),
           ("widths", "FFN widths", widths_figure))
