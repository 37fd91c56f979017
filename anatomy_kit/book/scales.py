"""The running page's tables of the three scales (smoke, hour, full), computed while the book is built.

:func:`scales_markdown`: time, hardware, data and the claims each scale can decide (from the power
tables of :mod:`.power` over the build's smoke metrics); :func:`running_power_markdown`: every
chapter's power table and the card page's pruning rows. :mod:`.pages` writes both into
``book/_generated/``.
"""

from __future__ import annotations

from pathlib import Path

from ..jsonio import read_json
from .card_power import card_power_rows
from .power import ASSUMPTIONS, decidable_at, markdown_table, power_markdown, power_rows

__all__ = ["scale_counts", "running_power_markdown", "scales_markdown"]


def _build_docs(build_dir: str | Path) -> dict[str, dict | None]:
    """``{chapter: its metrics document or None}`` of ``<build_dir>/metrics``, in book order."""
    from ..hour import HOUR_PRESETS

    metrics = Path(build_dir) / "metrics"
    return {c: (read_json(metrics / f"{c}.json", what=f"{c} metrics") if (metrics / f"{c}.json").exists() else None)
            for c in HOUR_PRESETS}


def scale_counts(build_dir: str | Path) -> dict[str, int]:
    """How many claims of the build's metrics each scale is the smallest to decide (:func:`decidable_at`)."""
    counts = {"smoke": 0, "hour": 0, "full": 0, "beyond full": 0, "never": 0, "not modelled": 0}
    for doc in _build_docs(build_dir).values():
        for r in power_rows(doc) if doc else []:
            counts[decidable_at(r)] += 1
    return counts


def running_power_markdown(build_dir: str | Path) -> str:
    """Every chapter's table from ``<build_dir>/metrics`` (the running page), with the counts per scale."""
    parts = []
    for chapter, doc in _build_docs(build_dir).items():
        parts.append(f"**`{chapter}`**: no smoke metrics in this build.\n" if doc is None else
                     f"**`{chapter}`** (smoke run of this build)\n\n{power_markdown(doc)}")
    parts.append(_card_markdown(build_dir))
    total = " · ".join(f"{k}: {v}" for k, v in scale_counts(build_dir).items())
    return f"{ASSUMPTIONS}\n\nClaims by the smallest scale that decides them: {total}.\n\n" + "\n".join(parts)


def _card_markdown(build_dir: str | Path) -> str:
    """The card page's pruning table from the build's smoke card (``<build_dir>/card``, the embedded model)."""
    from ..card.document import cached_cards

    folder = Path(build_dir) / "card"
    cards = cached_cards(folder, model="embedded") if folder.is_dir() else []
    if not cards:
        return "**`card_report`** (pruning): no smoke card in this build.\n"
    return ("**`card_report`** (pruning: what the card can separate; smoke card of this build)\n\n"
            + markdown_table(card_power_rows(cards[0].doc)))


def scales_markdown(build_dir: str | Path) -> str:
    """The running page's table of the three scales: time, hardware, data, claims each can decide
    (cumulative: what smoke decides, hour decides too), all computed."""
    from ..hour import HOUR_MINUTES, HOUR_PRESETS
    from .chapter_costs import chapter_estimates, hour_estimates
    from ..lm.estimates import duration
    from .chapters import chapter_manifest

    smoke_s = sum(c["budget_s"] for c in chapter_manifest())
    hour = hour_estimates()
    full = chapter_estimates()
    counts = scale_counts(build_dir)
    total = sum(counts.values())
    by = {"smoke": counts["smoke"], "hour": counts["smoke"] + counts["hour"]}
    by["full"] = by["hour"] + counts["full"]
    models = sorted({m for p in HOUR_PRESETS.values() for m in p.get("models", [p["model"]])})
    corpora = sorted({p["corpus"] for p in HOUR_PRESETS.values()})
    rows = [("smoke", f"{smoke_s / 60:.0f} min (the chapters' budgets)", "2 CPU cores",
             "the embedded SmolLM2-135M-Instruct (4-bit, from the package index) and the Python docs"),
            ("hour", f"≤ {HOUR_MINUTES:.0f} min a chapter, {sum(e.hours() for e in hour) * 60:.0f} min in all "
                     "(estimate)", "one H100/H200-class GPU, < 80 GB",
             f"{len(models)} hub models ({', '.join(m.split('/')[-1] for m in models)}); {', '.join(corpora)}"),
            ("full", f"{duration(sum(e.hours() for e in full))} in all (estimate; chapter 5 alone "
                     f"{duration(max(e.hours() for e in full))})", "GPUs for days to weeks",
             "the papers' models and corpora (the hub reachable or its cache filled)")]
    lines = ["| scale | time | hardware | data needed | claims it can decide (of the build's "
             f"{total}) |", "|---|---|---|---|---|"]
    lines += [f"| `{name}` | {t} | {hw} | {data} | {by[name]} |" for name, t, hw, data in rows]
    note = (f"{counts['beyond full']} need more than full scale gives, {counts['never']} can never be decided where "
            "the smoke estimate lies (the rule decides nothing there, whatever the units), and "
            f"{counts['not modelled']} are decided by sets, ranks or null models that the power analysis does not "
            "model, or rest on an interval with an infinite end.")
    return "\n".join(lines) + "\n\n" + note + "\n"
