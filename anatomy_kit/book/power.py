"""Which scale can decide each claim: a power analysis computed from a chapter's own smoke metrics.

For every claim in ``metrics/<chapter>.json`` the table reads what its rule compares (the
``rule_spec``: a threshold, a margin, bands around the paper's value, the sign of a paired
difference) and the interval the smoke run measured (``ours_data``: point estimate, interval, the
number ``n`` of units: evaluation blocks or paired seeds). The per-unit spread is recovered from the
interval itself, ``sd = h·√n / t`` with ``h`` the half-width on the side facing the nearest boundary,
on the scale where the interval is symmetric (the statistic, its log, or ``log(1 + x/100)`` for a
percent change), so a changed interval or ``n`` in the metrics changes the table. Then
:func:`anatomy_kit.verdicts.power.units_needed` gives the fewest units at which the rule decides with
80 % power *if the true value were the smoke point estimate* (the sign-flip floor included for
paired seeds), and the hour preset's units (:data:`anatomy_kit.hour.HOUR_PRESETS`) give its
half-width and power.

**Assumptions, stated on every table**: the effect is the smoke point estimate; the per-unit spread
does not grow at the hour's model (alternative: it doubles, and the units needed are about four
times as many, shown in the table); evaluation blocks of another length are worth their tokens
(per-token variance unchanged). A claim that smoke cannot compare (``NotComparable`` or a failed
precondition) is decidable at hour when the hour preset runs the full scale's model, corpus and
architecture, else only at full. Rules on sets, ranks and null models are not modelled (their
row says what decides them).

**A boundary decides only where crossing it decides the rule**: before counting units, the rule is
asked what it would say of an interval shrunk to the smoke estimate. Where even that decides nothing
(a magnitude whose estimate lies between a rule's bands, when no band there gives a verdict), no
number of units decides it: the row says "never" (:func:`decidable_at`). An interval with an infinite
end (a ratio whose denominator's interval reaches 0) carries no spread that more units would shrink
to a finite end: its row is not modelled and says so. A **primary** claim must survive Holm's
correction over its family's tested parts (:mod:`anatomy_kit.verdicts.multiplicity`): its units are
counted at the level α / m (Holm's worst step), m read from the frozen registry.

This module builds the rows and renders the table; the spread of an interval is read in
:mod:`anatomy_kit.book.power_spread`, what a rule decides (its boundaries, the distance at which its verdict
changes, a primary's family) in :mod:`anatomy_kit.book.power_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..validate import AnatomyKitError, check_choice
from ..verdicts import power as P
from .power_rules import _boundaries, _decides_at, _deciding_distance, _family_size
from .power_spread import _infinite_end, _intervals, scale_of, spread

__all__ = ["UNITS", "FULL_UNITS", "DECIDED", "PowerRow", "power_rows", "power_frame", "power_markdown",
           "decidable_at", "ASSUMPTIONS", "power_view", "markdown_table", "COLUMNS", "spread", "scale_of",
           "units_text", "fmt"]

ASSUMPTIONS = (f"Needed: the fewest units at which the claim's rule decides with {100 * P.POWER:.0f} % power if the "
               "truth were the smoke point estimate, with the smoke run's per-unit spread; in brackets if that "
               "spread doubles at the larger model. Blocks count by their tokens.")

#: chapter → the sizes that count a claim's units, tried in order: (size, unit word); "blocks" are
#: ``tokens // block_size`` where the chapter sizes its text in tokens.
UNITS: dict[str, list[tuple[str, str]]] = {
    "ch01_ablation_map": [("n_eval", "blocks")],
    "ch02_anatomy_weights": [("n_eval", "blocks"), ("n_trained_draws", "draws"), ("recovery_eval", "blocks")],
    "ch03_growth_training": [("n_seeds", "seeds"), ("n_eval", "blocks")],
    "ch04_geometric_work": [("n_blocks", "blocks"), ("sensitivity_blocks", "blocks"), ("n_draws", "draws")],
    "ch05_width_solver": [("n_seeds", "seeds"), ("n_key_seeds", "seeds")],
    "ch06_width_growth": [("n_seeds", "seeds"), ("n_key_seeds", "seeds"), ("llm_blocks", "blocks")],
    "card_report": [("tokens", "blocks")],
    "ch07_synthesis": [("tokens", "blocks")],
}

_SMOL = "HuggingFaceTB/SmolLM2-135M"
#: The full scale's model, corpus, architecture and unit counts (each chapter's ``defaults["full"]``;
#: ``tests/test_power_table.py`` checks them against the chapters).
FULL_UNITS: dict[str, dict] = {
    "ch01_ablation_map": dict(model=_SMOL, corpus="fineweb-edu", n_eval=64, block_size=256),
    "ch02_anatomy_weights": dict(model=_SMOL, corpus="fineweb-edu", n_eval=64, block_size=256, n_trained_draws=3,
                                 recovery_eval=16),
    "ch03_growth_training": dict(model=_SMOL, corpus="fineweb-edu", n_layers=12, d_model=256, n_seeds=8,
                                 n_eval=256, block_size=256),
    "ch04_geometric_work": dict(corpus="openwebtext", n_blocks=32, sensitivity_blocks=16, n_draws=3,
                                block_size=256),
    "ch05_width_solver": dict(model="meta-llama/Llama-3.2-1B", corpus="openwebtext", preset="440M", n_seeds=6,
                              n_key_seeds=10),
    "ch06_width_growth": dict(model=_SMOL, corpus="openwebtext", n_layers=8, d_small=256, d_large=384, n_seeds=3,
                              n_key_seeds=8, llm_blocks=64, block_size=256, llm_block_size=512),
    "card_report": dict(model=_SMOL, corpus="fineweb-edu", tokens=16384, block_size=256, n_random=19),
    "ch07_synthesis": dict(model=_SMOL, corpus="fineweb-edu", tokens=16384, block_size=256),
}
_ARCHITECTURE = ("model", "corpus", "preset", "n_layers", "d_model", "d_small", "d_large")
#: verdicts that already decide a claim
DECIDED = ("reproduced", "partly reproduced", "not reproduced", "mixed")
DECIDABLE = ("yes", "only at full", "no", "never", "not modelled")
#: What a row says when the smoke estimate lies where the rule decides nothing.
NEVER = "never: at the smoke estimate the rule decides nothing, whatever the units"


@dataclass(frozen=True)
class PowerRow:
    """One claim's line: what decides it, the units needed (and if the spread doubles), what the hour
    preset gives, and whether the hour can decide it (:data:`DECIDABLE`)."""

    claim: str
    verdict: str
    decides: str
    needed: str
    hour_gives: str
    decidable: str
    needed_n: int | None = None
    hour_n: int | None = None


def _unit_count(chapter: str, sizes: dict, smoke_n: int) -> tuple[str, str, float] | None:
    """``(size name, unit word, scale)`` of the size whose smoke value is ``smoke_n`` (``tokens`` counts
    blocks); ``None`` if no size of the chapter counts it."""
    for name, word in UNITS.get(chapter, []):
        value = sizes.get(name)
        if name == "tokens" and value is not None:
            value = value // sizes["block_size"]
        if value == smoke_n:
            return name, word, 1.0
    return None


def _length(name: str) -> str:
    return "llm_block_size" if name == "llm_blocks" else "block_size"


def _shown(name: str, word: str, sizes: dict) -> str:
    """The hour's units as the preset states them (blocks with their length)."""
    value = sizes[name] // sizes["block_size"] if name == "tokens" else sizes[name]
    return f"{value:,} blocks of {sizes[_length(name)]} tokens" if word == "blocks" else f"{value:,} {word}"


def _count_at(name: str, word: str, sizes: dict, smoke_sizes: dict) -> float | None:
    """Units at another scale, in smoke units (a block counts by its tokens)."""
    if name not in sizes:
        return None
    value = sizes[name] // sizes["block_size"] if name == "tokens" else sizes[name]
    if word == "blocks":
        length = _length(name)
        if length in sizes and length in smoke_sizes:
            value = value * sizes[length] / smoke_sizes[length]
    return float(value)


def _same_setting(hour: dict, full: dict) -> bool:
    return all(hour.get(k) == full[k] for k in _ARCHITECTURE if k in full)


def _short(text: str, width: int = 140) -> str:
    return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + " …"


def units_text(n: int | None, word: str) -> str:
    return f"{n:,} {word}" if n is not None else "beyond 100,000"


def fmt(x: float) -> str:
    return f"{x:,.3g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _all_of(chapter: str, claim: dict, spec: dict, data: Any, smoke: dict, hour: dict, full: dict) -> PowerRow:
    """A claim whose rule combines parts: the row of its hardest modelled part."""
    cid, parts = claim["id"], [(name, s) for name, s in spec["params"]["parts"]]
    rows = [_row(chapter, {**claim, "rule_spec": s, "ours_data": (data or {}).get(name), "id": f"{cid}: {name}"},
                 smoke, hour, full) for name, s in parts]
    modelled = [r for r in rows if r.decidable != "not modelled"]
    if not modelled:
        return PowerRow(cid, claim["verdict"], "all of: " + ", ".join(n for n, _ in parts), "—", "—", "not modelled")
    worst = max(modelled, key=lambda r: (r.needed_n is None, r.needed_n or 0))
    return PowerRow(cid, claim["verdict"], f"all of its parts; hardest: {worst.claim.split(': ', 1)[-1]} — "
                    f"{worst.decides}", worst.needed, worst.hour_gives, worst.decidable, worst.needed_n, worst.hour_n)


def _inner_rule(spec: dict, data: Any) -> tuple[str, dict, Any]:
    """``(what the precondition needs, the rule that decides, its data)``: the rule a ``Requires`` or
    ``Precondition`` wraps, on the value inside, else ``spec`` and ``data`` themselves."""
    precondition = ""
    if spec["rule"] == "Requires":
        precondition = f"needs {spec['params'].get('what', 'a precondition')} ≥ {spec['params'].get('minimum')}; "
        spec, data = spec["params"]["rule"], (data or {}).get("value") if isinstance(data, dict) else None
    if spec["rule"] == "Precondition":
        # met, the rule inside decides on the value inside; unmet, the verdict is not comparable (in _row)
        spec, data = spec["params"]["rule"], (data or {}).get("value") if isinstance(data, dict) else None
    return precondition, spec, data


def _hardest(chapter: str, claim: dict, spec: dict, data: Any, boundaries: list[float], method: str,
             confidence: float, level: float, smoke: dict) -> tuple | None:
    """``(name, units needed, units needed if the spread doubles, sd, n, unit, scale)`` of the claim's interval
    that needs the most units at the level ``level``; ``None`` if no interval has a usable spread."""
    worst = None
    for name, iv in _intervals(data):
        got = spread(iv, boundaries, confidence)
        if got is None:
            continue
        d, sd, n, scale = got
        d = _deciding_distance(spec, claim, scale, confidence, method, d)
        unit = _unit_count(chapter, smoke, n)
        need = P.units_needed(d, sd, method=method, confidence=level, max_n=100_000)
        need2 = P.units_needed(d, 2 * sd, method=method, confidence=level, max_n=100_000)
        key = (need is None, need or 0)
        if worst is None or key > worst[0]:
            worst = (key, name, need, need2, sd, n, unit, scale)
    return None if worst is None else worst[1:]


def _row(chapter: str, claim: dict, smoke: dict, hour: dict, full: dict) -> PowerRow:
    cid, verdict, spec = claim["id"], claim["verdict"], claim.get("rule_spec") or {"rule": "?", "params": {}}
    same = _same_setting(hour, full)
    precondition, spec, data = _inner_rule(spec, claim.get("ours_data"))
    if spec["rule"] in ("AllOf", "EveryOf"):       # every part must hold either way: its hardest part decides
        return _all_of(chapter, claim, spec, data, smoke, hour, full)
    if spec["rule"] == "NotComparable" or verdict == "not comparable":
        why = spec["params"].get("why") or claim.get("reason") or ""
        return PowerRow(cid, verdict, _short(f"{precondition}precondition: {why}"), "the full scale's setting",
                        "the full scale's model, corpus and architecture" if same else "a smaller setting",
                        "yes" if same else "only at full")
    bounds = _boundaries(spec, claim)
    if bounds is None:
        return PowerRow(cid, verdict, f"{spec['rule']} (sets, ranks or a null model)", "—", "—", "not modelled")
    boundaries, what, method = bounds
    confidence = float(spec["params"].get("confidence") or 0.95)
    m_family = _family_size(cid) if claim.get("role") == "primary" else None
    level = confidence if not m_family else 1 - (1 - confidence) / m_family
    infinite = [name or "its interval" for name, iv in _intervals(data) if _infinite_end(iv)]
    if infinite:
        return PowerRow(cid, verdict, f"{what}: {', '.join(infinite)} has an infinite end (a ratio whose "
                        "denominator's interval reaches 0); more units do not make it finite", "—", "—",
                        "not modelled")
    never = [name or "the estimate" for name, iv in _intervals(data) if not _decides_at(spec, claim, iv, confidence)]
    if never:
        return PowerRow(cid, verdict, f"{what}; {', '.join(never)}: {NEVER}", "—", "—", "never")
    worst = _hardest(chapter, claim, spec, data, boundaries, method, confidence, level, smoke)
    if worst is None:
        return PowerRow(cid, verdict, f"{what} (no interval with n in the metrics)", "—", "—", "not modelled")
    name, need, need2, sd, n, unit, (m, fwd, inv) = worst
    label = f"{what}, {method} over {unit[1] if unit else 'units'}" + (f" (hardest: {name})" if name else "")
    if m_family:
        label += f"; a primary: at α / {m_family} (Holm over its family's {m_family} tested parts)"
    if unit is None:
        return PowerRow(cid, verdict, label, f"{need} (n = {n} is fixed by the design)", "the same n",
                        "not modelled", need, n)
    size, word, _ = unit
    hour_n = _count_at(size, word, hour, smoke)
    shown = _shown(size, word, hour)
    if word == "blocks":
        word = f"blocks of {smoke[_length(size)]} tokens"
    full_n = _count_at(size, word, full, smoke) if size in full else None
    needed = f"{units_text(need, word)} ({units_text(need2, word)})"
    if hour_n is None or hour_n < 2:
        return PowerRow(cid, verdict, label, needed, "—", "no", need)
    hn = int(hour_n)
    hw = P.half_width(sd, hn, confidence)
    lo, hi = inv(m - hw), inv(m + hw)
    gives = f"{shown}: [{fmt(lo)}, {fmt(hi)}] around the smoke estimate"
    if need is not None and hn >= need:
        ok = "yes"
    elif need is not None and full_n is not None and full_n >= need:
        ok = "only at full"
    else:
        ok = "no"
    return PowerRow(cid, verdict, f"{precondition}{label}", needed, gives, ok, need, hn)


def power_rows(doc: dict, hour: dict | None = None, full: dict | None = None) -> list[PowerRow]:
    """One :class:`PowerRow` per claim of a chapter's metrics ``doc`` (``hour``, ``full``: the sizes to
    compare with; default the chapter's hour preset and :data:`FULL_UNITS`)."""
    from ..hour import HOUR_PRESETS

    try:
        chapter, smoke, claims = doc["chapter"], doc["run"]["sizes"], doc["claims"]
    except (KeyError, TypeError) as err:
        raise AnatomyKitError(f"not a chapter's metrics document (missing {err}); expected metrics/<chapter>.json "
                              "as Run.save_metrics writes it") from None
    check_choice("chapter", chapter, sorted(HOUR_PRESETS))
    hour = dict(HOUR_PRESETS[chapter] if hour is None else hour)
    full = dict(FULL_UNITS[chapter] if full is None else full)
    return [_row(chapter, c, smoke, hour, full) for c in claims]


def decidable_at(row: PowerRow) -> str:
    """``smoke`` (already decided), ``hour``, ``full``, ``beyond full``, ``never`` (no number of units decides
    the rule at the smoke estimate) or ``not modelled``."""
    if row.verdict in DECIDED:
        return "smoke"
    return {"yes": "hour", "only at full": "full", "no": "beyond full", "never": "never"}.get(row.decidable,
                                                                                           "not modelled")


COLUMNS = {"claim": "claim", "decides": "what decides it", "needed": "needed (spread × 2)",
            "hour_gives": "hour gives", "decidable": "decidable at hour"}


def power_frame(doc: dict):
    """The chapter's table as a pandas DataFrame (the columns of :data:`COLUMNS`)."""
    import pandas as pd

    rows = [{v: getattr(r, k) for k, v in COLUMNS.items()} for r in power_rows(doc)]
    return pd.DataFrame(rows, columns=list(COLUMNS.values()))


def power_view(run, claims: list):
    """A chapter's table right after its claims (``run``: its :class:`~anatomy_kit.book.run.Run`;
    ``claims``: its :class:`~anatomy_kit.verdicts.claims.Claim` list), from the claims' own intervals."""
    doc = {"chapter": run.chapter, "run": {"sizes": run.sizes}, "claims": [c.to_dict() for c in claims]}
    return power_frame(doc).style.hide(axis="index").set_caption(ASSUMPTIONS)


def markdown_table(rows: list[PowerRow]) -> str:
    """Power rows as a Markdown table (the running page)."""
    head = "| " + " | ".join(COLUMNS.values()) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    return head + "".join("| " + " | ".join(str(getattr(r, k)).replace("|", "/") for k in COLUMNS) + " |\n"
                          for r in rows)


def power_markdown(doc: dict) -> str:
    """The chapter's table in Markdown (the running page)."""
    return markdown_table(power_rows(doc))
