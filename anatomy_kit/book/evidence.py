"""Every chapter's folded Evidence section: the claims table, the one statistics rule, the power table and the
note on multiplicity, in one ``<details>`` block, so that the learner's path stays free of the verdict machinery.

:func:`evidence_html` builds it from the chapter's :class:`~anatomy_kit.book.run.Run` and its
:class:`~anatomy_kit.verdicts.claims.Claim` list; :func:`evidence_view` shows it in a notebook cell. The
report page (``report.md``) keeps the full view of every chapter.
"""

from __future__ import annotations

from typing import Any

from ..verdicts.multiplicity import HOLM_ALPHA, MAX_PRIMARIES
from ..verdicts.statistics_rule import STATISTICS_RULE_TITLE, statistics_rule_items
from ..verdicts.tables import claims_html, escape

__all__ = ["evidence_html", "evidence_view", "EVIDENCE_SUMMARY"]

EVIDENCE_SUMMARY = "Evidence: every claim's verdict, rule, interval, test and power"


def _rule_html() -> str:
    items = "".join(f"<li><strong>{escape(kind)}</strong>: {escape(how)}</li>" for kind, how in statistics_rule_items())
    return f'<p class="ak-rule-title"><strong>{escape(STATISTICS_RULE_TITLE)}</strong></p><ul>{items}</ul>'


def _multiplicity_html(claims: list[Any]) -> str:
    primaries = [c for c in claims if getattr(c, "role", None) == "primary"]
    names = ", ".join(f"<code>{escape(c.id)}</code>" for c in primaries) or "none"
    return (f"<p>Primary claims of this chapter: {names}. Holm's correction runs over each family's primaries "
            f"(at most {MAX_PRIMARIES} a family, α = {HOLM_ALPHA:g}), which may span chapters, so the adjusted p "
            "of each is on the report page; the p values here are unadjusted. There a primary claim that holds but "
            "fails the correction is marked <em>(fails Holm)</em> and is not claimed, and a primary claim that no test "
            "decided is marked <em>(—)</em>. Every other claim is secondary.</p>")


def evidence_html(run: Any, claims: list[Any], *, extra_html: str = "") -> str:
    """One folded block: the statistics rule, the claims table, the multiplicity note, the power table (from the
    claims' own intervals) and ``extra_html`` (a chapter's own detail, e.g. per-layer intervals)."""
    from .power import ASSUMPTIONS, power_frame

    doc = {"chapter": run.chapter, "run": {"sizes": run.sizes}, "claims": [c.to_dict() for c in claims]}
    power = power_frame(doc).to_html(index=False, border=0, classes="ak-power", escape=True)
    return (f'<details class="ak-evidence"><summary>{escape(EVIDENCE_SUMMARY)}</summary>'
            f"{_rule_html()}{claims_html(claims)}{_multiplicity_html(claims)}"
            f'<p class="ak-power-note">{escape(ASSUMPTIONS)}</p>{power}{extra_html}</details>')


def evidence_view(run: Any, claims: list[Any], *, extra_html: str = ""):
    """:func:`evidence_html` for a notebook cell."""
    from IPython.display import HTML

    return HTML(evidence_html(run, claims, extra_html=extra_html))
