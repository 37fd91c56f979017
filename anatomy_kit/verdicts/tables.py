"""Compact claims tables a reader takes in at a glance (every chapter's "Beside the paper", the report).

One row per claim: a short label, the paper's value, ours (three significant digits, with its
unit), a verdict badge (colour and word) and one line of why (at most 120 characters). Under the
row a folded ``<details>`` holds everything else: the paper's wording and source, the full rule,
the reason, the interval or null, the note, secondary readings (which never decide) and whether
the verdict sits near its threshold (another machine may flip it).

The HTML is self-contained: badge colours are inline (:data:`VERDICT_COLOURS`, one per verdict of
:data:`~anatomy_kit.verdicts.decision.VERDICTS`), so a table reads the same in a live notebook; the
book's ``_static/anatomy.css`` only fits it to the page column (``table.ak-claims``).
Rows come from :class:`~anatomy_kit.verdicts.claims.Claim` objects (a chapter) or from the claim
dictionaries of ``report.json`` (the report); fields another version of ``Claim`` lacks
(``summary``, ``near_threshold``, ``secondary``) fall back to what is there. How each value reads in its
cell (:func:`~.cell_text.number`, :func:`~.cell_text.paper_text`, :func:`~.cell_text.value_text`,
:func:`~.cell_text.one_line`) is :mod:`.cell_text`'s; those names stay importable from here.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .cell_text import SUMMARY_CHARS, number, one_line, paper_text, value_text
from .decision import VERDICT_MEANINGS, VERDICTS
from .multiplicity import fails_correction

__all__ = ["VERDICT_COLOURS", "SUMMARY_CHARS", "ClaimRow", "number", "paper_text", "value_text", "one_line",
           "claim_row", "escape", "badge_html", "claims_html", "claims_view", "verdicts_html", "verdicts_view"]

#: Badge colours (background, text) per verdict; white text on each background has a contrast of at least 4.5:1.
VERDICT_COLOURS = {
    "reproduced": ("#1a7f37", "#ffffff"),
    "partly reproduced": ("#4d7a16", "#ffffff"),
    "mixed": ("#9a5b00", "#ffffff"),
    "not reproduced": ("#c4232d", "#ffffff"),
    "not established": ("#636c76", "#ffffff"),
    "holds by construction": ("#7d4dcc", "#ffffff"),
    "not comparable": ("#2c5a8c", "#ffffff"),
}
#: Words of claim ids that a label writes as the chapters do.
_ACRONYMS = {"ppl": "PPL", "io": "I/O", "gw": "GW", "ffn": "FFN", "mlp": "MLP", "srio": "SRIO", "nrio": "NRIO",
             "lrio": "LRIO", "mrio": "MRIO", "ligo": "LiGO", "wo": "Wo", "tlm": "TLM"}
#: Units longer than this are named in the folded details only (a row stays short).
UNIT_CHARS = 16


@dataclass(frozen=True)
class ClaimRow:
    """What a compact table shows of one claim (row and details), all as plain text."""
    id: str
    label: str
    paper: str
    paper_unit: str
    ours: str
    ours_unit: str
    verdict: str
    summary: str
    claim: str = ""
    source: str = ""
    rule: str = ""
    reason: str = ""
    interval: str = ""
    null: str = ""
    note: str = ""
    secondary: tuple[str, ...] = ()
    near_threshold: bool = False
    unit: str = ""
    amendment: tuple[tuple[str, str], ...] = ()
    """``(name, text)`` lines of the claim's amendment (empty when its rule is the registered one)."""
    amended: bool = False
    holm: str = ""
    """``"survives Holm"``, ``"fails Holm"``, ``"—"`` (a primary with no test), ``"secondary"`` or ``""``
    (not computed: one chapter alone)."""
    holm_detail: str = ""
    role: str = ""
    """``primary`` or ``secondary`` (the frozen registry's), ``""`` when unknown."""
    phase: str = ""
    """``confirmatory`` or ``exploratory`` (the data the verdict rests on), ``""`` when unknown."""
    saw: str = ""
    """What our run saw where the verdict is "not comparable" although it measured something."""
    history: str = ""
    """The rule's history line (the commits where it was written and changed)."""
    exploratory: str = ""
    """The verdict the frozen rules gave on the exploratory data (rules written after them), beside a confirmatory
    verdict; ``""`` when there is none."""


def _get(claim: Any, key: str, default: Any = None) -> Any:
    if isinstance(claim, Mapping):
        return claim.get(key, default)
    return getattr(claim, key, default)


def _label(claim_id: str, reference: Mapping) -> str:
    """The claim's human title (``title`` in references.yaml), else a label made from its id."""
    if reference.get("title"):
        return str(reference["title"])
    words = claim_id.split(".", 1)[-1].split("_")       # p1.l11_ablation → "L11 ablation"
    words = [f"L{w[1:]}" if re.fullmatch(r"l\d+", w) else _ACRONYMS.get(w, w) for w in words]
    return " ".join([words[0][:1].upper() + words[0][1:]] + words[1:])


def _flat(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_flat(v)}" for k, v in value.items())
    return value_text(value)


def _secondary(claim: Any) -> tuple[str, ...]:
    """Secondary readings as lines ``name: reading`` (never decisive; the rule never saw them)."""
    shown = claim.secondary_text() if hasattr(claim, "secondary_text") else _get(claim, "secondary")
    if not shown:
        return ()
    if isinstance(shown, Mapping):
        return tuple(f"{k}: {_flat(v)}" for k, v in shown.items())
    return tuple(_flat(v) for v in (shown if isinstance(shown, (list, tuple)) else [shown]))


def _reference(claim: Any) -> Mapping:
    """The claim's paper entry: the report's ``paper`` dict, or data_manifest/references.yaml."""
    paper = _get(claim, "paper")
    if isinstance(paper, Mapping) and "value" in paper:
        return paper
    from ..manifest import references

    return references().get(_get(claim, "id"), {"value": paper, "unit": _get(claim, "unit")})


def _registry_fields(claim: Any) -> Mapping:
    """The claim's registry record: ``Claim.to_dict()["registry"]`` or a report.json claim's ``registry``."""
    if isinstance(claim, Mapping):
        return claim.get("registry") or {}
    return {k: getattr(claim, a, None) for k, a in (
        ("status", "registry_status"), ("amendment", "amendment"), ("registered", "registered"),
        ("registered_verdict", "registered_verdict"),
        ("registered_reason", "registered_reason"), ("amended_verdict", "amended_verdict"),
        ("amended_reason", "amended_reason"), ("standing", "standing"))}


def amendment_lines(record: Mapping) -> tuple[tuple[str, str], ...]:
    """What a claim's details show of its registration and amendment: the rule's history (written after the
    exploratory data: the commits), a run off the registered plan, and under an amendment when and what
    changed, why, whether confirmatory numbers had been seen, the verdict under each rule and which stands
    (an amendment may make a verdict stricter, never more favourable)."""
    a, reg = record.get("amendment"), record.get("registered") or {}
    lines: tuple[tuple[str, str], ...] = ()
    if record.get("status") == "off plan":
        lines += (("off plan", "this run is not the registered one (a parameter set away from the scale's "
                               "default): its verdict is exploratory"),)
    if record.get("status") != "amended" or not a:
        return lines
    seen = ("after confirmatory numbers had been seen" if a.get("seen_before")
            else "before any confirmatory number was seen")
    stands = ("the registered verdict stands: an amendment may make a verdict stricter, never more favourable"
              if record.get("standing") == "registered" else "the amended verdict stands (no more favourable)")
    earlier = tuple(("amended earlier", f"{e.get('date')}: {e.get('what')}. Why: {e.get('why')}")
                    for e in reg.get("earlier_amendments") or [])
    return lines + earlier + (
        ("amended", f"{a.get('date')}, {seen}: {a.get('what')}"), ("why amended", str(a.get("why"))),
        ("under the registered rule", f"{record.get('registered_verdict')}: {record.get('registered_reason')}"),
        ("under the amended rule", f"{record.get('amended_verdict')}: {record.get('amended_reason')}"),
        ("verdict shown", stands))


def _exploratory(claim: Any) -> str:
    e = _get(claim, "exploratory")
    if not isinstance(e, Mapping) or not e.get("verdict"):
        return ""
    return f"{e['verdict']}: {e.get('summary') or ''}".rstrip(": ")


def _holm(claim: Any) -> tuple[str, str]:
    h = _get(claim, "holm")
    if not h:
        return "", ""
    h = h.to_dict() if hasattr(h, "to_dict") else h
    if h.get("role") == "secondary":
        p = h.get("p")
        return "secondary", (f"secondary claim, p = {p:.3g} unadjusted" if p is not None else "secondary claim") + \
            f"; {h.get('why')}"
    if h.get("adjusted") is None:
        return "—", f"— {h.get('why')}"
    mark = {True: "survives Holm", False: "fails Holm", None: ""}[h.get("survives")]
    return mark, f"primary claim, adjusted p = {h['adjusted']:.3g}; {h.get('why')}" + (f": {mark}" if mark else "")


def claim_row(claim: Any) -> ClaimRow:
    """A :class:`ClaimRow` from a :class:`~anatomy_kit.verdicts.claims.Claim` or a ``report.json`` claim dict."""
    ref = _reference(claim)
    data = _get(claim, "ours_data", None) if isinstance(claim, Mapping) else None
    ours = data if data is not None else _get(claim, "ours")
    own_unit = getattr(ours, "unit", None) or (ours.get("unit") if isinstance(ours, Mapping) and "sign_flip_p" in ours
                                               else None)
    unit = ref.get("unit") or ""
    reason = _get(claim, "reason") or ""
    ours_text = _get(claim, "shown") or value_text(ours)       # the rule's view of a structured input
    # a Δ carries its own unit; a text or a mapping of Δs may already name it; a long unit goes to the details
    ours_unit = "" if own_unit or isinstance(ours, str) or (unit and unit in ours_text) else unit
    if len(unit) > UNIT_CHARS:
        ours_unit = ""
    # where the rule judges another measure than the paper's (references.yaml ``ours_unit``), ours is labelled
    # with its own unit and the paper's value keeps the paper's
    measured = str(ref.get("ours_unit") or "")
    if measured and not own_unit and not isinstance(ours, str):
        ours_unit = measured
    return ClaimRow(
        id=str(_get(claim, "id")), label=_label(str(_get(claim, "id")), ref),
        paper=paper_text(ref.get("value")),
        paper_unit="" if isinstance(ref.get("value"), str) or ours_unit == unit or len(unit) > UNIT_CHARS else unit,
        ours=ours_text, ours_unit=ours_unit,
        verdict=str(_get(claim, "verdict")), summary=one_line(_get(claim, "summary") or reason),
        claim=str(ref.get("claim") or ""), source=str(ref.get("source") or ""),
        rule=_get(claim, "rule_text") or (_get(claim, "rule") if isinstance(_get(claim, "rule"), str) else "") or "",
        reason=reason, interval=_get(claim, "interval") or "", null=_get(claim, "null") or "",
        note=_get(claim, "note") or "", secondary=_secondary(claim), unit=unit,
        near_threshold=bool(_get(claim, "near_threshold", False)),
        amendment=amendment_lines(record := _registry_fields(claim)), amended=record.get("status") == "amended",
        holm=(holm := _holm(claim))[0], holm_detail=holm[1], role=str(_get(claim, "role") or ""),
        phase=str(_get(claim, "phase") or ""), saw=str(_get(claim, "saw") or ""),
        history=str((record.get("registered") or {}).get("history") or ""),
        exploratory=_exploratory(claim))


def escape(text: Any) -> str:
    """Escaped text on one line (a blank line would end an HTML block inside Markdown)."""
    return html.escape(" ".join(str(text).split()), quote=True)


#: How a claim's details mark the exploratory verdict beside a confirmatory one.
RULES_WRITTEN_AFTER_NOTE = "the verdict on the exploratory data; the rules were written after these data had been seen"

#: The footnote of a claims table that marks a verdict "≈ near threshold".
NEAR_THRESHOLD_NOTE = ("≈ near threshold: the data sit close to the rule's threshold, so another machine, "
                       "thread count or seed may flip that verdict.")


def badge_html(verdict: str, near_threshold: bool = False, *, amended: bool = False, holm: str = "") -> str:
    """The verdict as a coloured badge (its meaning as a tooltip), marked when near its threshold, when its
    rule was amended after registration, and with its result under Holm's correction when known."""
    background, colour = VERDICT_COLOURS.get(verdict, ("#444444", "#ffffff"))
    badge = (f'<span class="ak-badge" style="background:{background};color:{colour}" '
             f'title="{escape(VERDICT_MEANINGS.get(verdict, ""))}">{escape(verdict)}</span>')
    if near_threshold:
        badge += ('<span class="ak-near" title="near its threshold: another machine or seed may flip this '
                  'verdict">≈ near threshold</span>')
    if amended:
        badge += ('<span class="ak-amended" title="the rule was changed after registration: both verdicts and the '
                  'reason are under the row">amended</span>')
    if holm:
        badge += f'<span class="ak-holm" title="Holm\'s correction within the paper\'s claims">{escape(holm)}</span>'
    return badge


def _value_cell(text: str, unit: str) -> str:
    return escape(text) + (f' <span class="ak-unit">{escape(unit)}</span>' if unit else "")


def _details(row: ClaimRow) -> str:
    items = [("paper", f"{row.claim} ({row.source})" if row.source else row.claim), ("unit", row.unit),
             ("rule", row.rule),
             ("why", row.reason), ("interval", row.interval), ("null", row.null), ("note", row.note)]
    items += [("secondary", s) for s in row.secondary]
    if row.saw:
        items.append(("our run saw", row.saw))
    items += list(row.amendment)
    if row.exploratory:
        items.append(("exploratory", f"{row.exploratory} ({RULES_WRITTEN_AFTER_NOTE})"))
    if row.history:
        items.append(("rule written", row.history))
    if row.phase:
        items.append(("data", "confirmatory: seeds and text collected after the rules were frozen"
                      if row.phase == "confirmatory" else "exploratory: the rule was written after these data "
                      "or the run is not the registered one"))
    if row.holm_detail:
        items.append(("multiplicity", row.holm_detail))
    if row.near_threshold:
        items.append(("near threshold", "the data sit close to the rule's threshold: another machine, thread "
                                        "count or seed may flip this verdict"))
    items.append(("id", row.id))
    body = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items if v)
    return f'<details><summary>rule, interval, note</summary><dl class="ak-detail">{body}</dl></details>'


def _tags(row: ClaimRow) -> str:
    """The claim's role and, for exploratory data, a mark: a primary claim is one of its family's at most three
    corrected together; exploratory means the rule was written after these data (or the run is not the
    registered one)."""
    tags = ""
    if row.role == "primary":
        tags += ('<span class="ak-role" title="one of its family\'s primary claims, corrected together by Holm">'
                 "primary</span>")
    if row.phase == "exploratory":
        tags += ('<span class="ak-phase" title="exploratory: the rule was written after these data, or the run is '
                 'not the registered one">exploratory</span>')
    return tags


def claims_html(claims: Iterable[Any], *, caption: str | None = None) -> str:
    """The compact table as one HTML block without blank lines (so Markdown keeps it whole)."""
    rows = [claim_row(c) for c in claims]
    head = "".join(f'<th class="ak-{k}">{k}</th>' for k in ("claim", "paper", "ours", "verdict", "why"))
    parts = ['<table class="ak-claims">' + (f"<caption>{escape(caption)}</caption>" if caption else ""),
             f"<thead><tr>{head}</tr></thead>"]
    for r in rows:
        parts.append(
            '<tbody class="ak-claim"><tr class="ak-row">'
            f'<td class="ak-claim" title="{escape(r.claim)}">{escape(r.label)}{_tags(r)}</td>'
            f'<td class="ak-paper">{_value_cell(r.paper, r.paper_unit)}</td>'
            f'<td class="ak-ours">{_value_cell(r.ours, r.ours_unit)}</td>'
            f'<td class="ak-verdict">{badge_html(r.verdict, r.near_threshold, amended=r.amended, holm=r.holm)}</td>'
            f'<td class="ak-why">{escape(r.summary)}'
            + (f'<br><span class="ak-saw">our run saw: {escape(r.saw)}</span>' if r.saw else "") + '</td></tr>'
            f'<tr class="ak-more"><td colspan="5">{_details(r)}</td></tr></tbody>')
    if any(r.near_threshold for r in rows):   # the mark explained where it appears
        parts.append(f'<tfoot><tr><td colspan="5" class="ak-note">{NEAR_THRESHOLD_NOTE}</td></tr></tfoot>')
    parts.append("</table>")
    return "".join(parts)


def claims_view(claims: Iterable[Any], *, caption: str | None = None):
    """The compact claims table for a notebook cell (every chapter's "Beside the paper")."""
    from IPython.display import HTML

    return HTML(claims_html(claims, caption=caption))


def verdicts_html(claims: Iterable[Any], holm: Mapping[str, Any] | None = None) -> str:
    """One line per verdict that occurs: the badge, then the claims' labels (every chapter's "What we learned").

    A primary that holds before correction but fails Holm's is listed apart, as not claimed: known from a
    ``report.json`` claim's ``holm``, or from ``holm`` (``{claim id: HolmResult or its dict}``, from
    :func:`~.multiplicity.holm_by_family` over the claims' whole family; it takes precedence)."""
    rows = [claim_row(c) for c in claims]

    def fails(row: ClaimRow) -> bool:
        h = (holm or {}).get(row.id)
        if h is None:
            return row.holm == "fails Holm"
        return fails_correction(h)

    lines = []
    for verdict in VERDICTS:
        labels = [r.label for r in rows if r.verdict == verdict and not fails(r)]
        if labels:
            lines.append(f"<li>{badge_html(verdict)} {escape(', '.join(labels))}</li>")
    for verdict in VERDICTS:
        labels = [r.label for r in rows if r.verdict == verdict and fails(r)]
        if labels:
            lines.append(f"<li>{badge_html(verdict, holm='fails Holm')} <em>before correction, not claimed</em>: "
                         f"{escape(', '.join(labels))}</li>")
    return f'<ul class="ak-verdicts">{"".join(lines)}</ul>'


def verdicts_view(claims: Iterable[Any], holm: Mapping[str, Any] | None = None):
    """:func:`verdicts_html` for a notebook cell."""
    from IPython.display import HTML

    return HTML(verdicts_html(claims, holm))
