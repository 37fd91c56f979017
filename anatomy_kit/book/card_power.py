"""What a report card's pruning panel can separate, and how much text would separate more (the card page).

For each k ≥ 2: greedy's ΔPPL against the last k's (their t intervals over evaluation blocks apart,
the blocks needed with 80 % power from the card's own intervals, :mod:`.power`'s reading of an
interval), and greedy against the random k-sets (a Monte Carlo p floor). Rows are
:class:`~.power.PowerRow`, so the running page shows them like a chapter's.
"""

from __future__ import annotations

import math

from ..validate import AnatomyKitError
from ..verdicts.power import half_width, units_needed
from .power import COLUMNS, FULL_UNITS, PowerRow, fmt, scale_of, spread, units_text

__all__ = ["card_power_rows", "card_power_view"]


def card_power_rows(card: dict, hour: dict | None = None, full: dict | None = None) -> list[PowerRow]:
    """What a card's pruning panel can separate (the card page): for each k ≥ 2, greedy's ΔPPL against the
    last k's (the two t intervals over evaluation blocks apart; their spreads added as if unpaired, which
    overstates the paired spread when blocks agree), and greedy against the random k-sets (a Monte Carlo p
    of ``n`` random sets is at least ``1/(n + 1)``, so p ≤ 0.05 needs ``n ≥ 19``). ``card``: a card
    document (``Card.doc``); ``hour``/``full``: the card page's sizes (default its hour preset and
    :data:`FULL_UNITS`)."""
    from ..hour import HOUR_PRESETS

    try:
        text, settings, pruning = card["text"], card["settings"], card["pruning"]
    except (KeyError, TypeError) as err:
        raise AnatomyKitError(f"not a card document (missing {err}); pass Card.doc") from None
    hour = dict(HOUR_PRESETS["card_report"] if hour is None else hour)
    full = dict(FULL_UNITS["card_report"] if full is None else full)
    if pruning is None:
        return []
    n, length, confidence = text["n_eval_blocks"], text["block_size"], float(settings.get("confidence", 0.95))
    word = f"blocks of {length} tokens"
    hour_n = hour["tokens"] // hour["block_size"] * hour["block_size"] / length
    full_n = full["tokens"] // full["block_size"] * full["block_size"] / length
    shown = f"{hour['tokens'] // hour['block_size']:,} blocks of {hour['block_size']} tokens"
    sets = {(e["method"], e["k"]): e for e in pruning["sets"]}
    alpha = 1 - confidence
    floor_n = math.ceil(1 / alpha - 1 - 1e-9)
    rows = []
    for k in range(2, int(pruning["max_k"]) + 1):
        g, last = sets.get(("greedy", k)), sets.get(("last_k", k))
        if g is None or last is None:
            continue
        g_iv = {"mean": g["delta_pct"], "low": g["low"], "high": g["high"], "n": n}
        l_iv = {"mean": last["delta_pct"], "low": last["low"], "high": last["high"], "n": n}
        scale = scale_of(g_iv)
        a, b = spread(g_iv, [last["delta_pct"]], confidence, scale), spread(l_iv, [g["delta_pct"]], confidence,
                                                                                  scale)
        if a is None or b is None:
            continue
        sd = math.hypot(a[1], b[1])
        need = units_needed(a[0], sd, confidence=confidence, max_n=100_000)
        need2 = units_needed(a[0], 2 * sd, confidence=confidence, max_n=100_000)
        ok = ("yes" if need is not None and hour_n >= need else
              "only at full" if need is not None and full_n >= need else "no")
        hw = half_width(sd, max(2, int(hour_n)), confidence)
        rows.append(PowerRow(f"greedy vs last-{k}", "—", f"ΔPPL of greedy's {k}-set vs the last {k} "
                             "(t intervals over blocks apart)", f"{units_text(need, word)} ({units_text(need2, word)})",
                             f"{shown}: the difference's half-width {fmt(hw)} (on the intervals' own scale)", ok, need, int(hour_n)))
        n_random = len(pruning["random"].get(str(k), []))
        rows.append(PowerRow(f"greedy vs random {k}-sets", "—", f"Monte Carlo p ≤ {alpha:g} against random "
                             f"{k}-sets (this card: {n_random}, p ≥ {1 / (n_random + 1):.2g})",
                             f"{floor_n} random sets", f"{hour['n_random']} random sets",
                             "yes" if hour["n_random"] >= floor_n else
                             "only at full" if full.get("n_random", 0) >= floor_n else "no", floor_n,
                             hour["n_random"]))
    return rows


def card_power_view(card: dict):
    """:func:`card_power_rows` as a table for the card page."""
    import pandas as pd

    rows = [{v: getattr(r, k) for k, v in COLUMNS.items()} for r in card_power_rows(card)]
    return pd.DataFrame(rows, columns=list(COLUMNS.values())).style.hide(axis="index")
