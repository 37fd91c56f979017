""""What held up": the box every chapter opens with, generated from the build's report so it cannot drift.

For one chapter's claims (``report.json``), in plain words: which of the papers' claims held at this scale
(a primary only if it also survives Holm's correction over its family), which did not, which this scale
cannot decide and what it saw there, and the provenance of the paper's numbers (``references.yaml``'s
``provenance``); the book's own questions are counted apart from the papers'. :func:`held_up_markdown`
writes the box; :mod:`.pages` writes one file per chapter into ``book/_generated/held_up/`` when the book is
built, and each chapter includes its file right after its learning goals.
"""

from __future__ import annotations

from typing import Iterable

from ..manifest import provenance, references
from ..verdicts.multiplicity import fails_correction, family

__all__ = ["held_up_markdown", "held_up_groups", "BOOK_FAMILY"]

BOOK_FAMILY = "book"
_HOLDS = ("reproduced", "partly reproduced")


def _title(claim: dict) -> str:
    ref = references().get(claim["id"], {})
    return str(ref.get("title") or claim["id"])


def held_up_groups(claims: Iterable[dict]) -> dict[str, list[tuple[dict, str]]]:
    """``{group: [(claim, words)]}``: ``held`` (reproduced), ``partly held`` (partly reproduced), ``held, not
    claimed`` (a primary that fails Holm), ``did not hold``, ``mixed``, ``cannot decide`` (not established, not
    comparable, holds by construction) — each claim once, with a few words of why."""
    groups: dict[str, list[tuple[dict, str]]] = {k: [] for k in ("held", "partly held", "held, not claimed",
                                                                 "did not hold", "mixed", "cannot decide")}
    for c in claims:
        v, holm, saw = c["verdict"], c.get("holm") or {}, c.get("saw")
        if v in _HOLDS and c.get("role") == "primary" and fails_correction(holm):
            groups["held, not claimed"].append((c, f"{v}, but it fails Holm's correction over its family"))
        elif v in _HOLDS:
            groups["held" if v == "reproduced" else "partly held"].append(
                (c, (c.get("summary") or v if v != "reproduced" else v)
                 + (", a secondary claim" if c.get("role") == "secondary" else "")))
        elif v == "not reproduced":
            groups["did not hold"].append((c, c.get("summary") or ""))
        elif v == "mixed":
            groups["mixed"].append((c, c.get("summary") or ""))
        else:
            why = {"not comparable": "our setting or design cannot speak to it",
                   "not established": "our interval cannot tell",
                   "holds by construction": "it holds by how the experiment is built, so it is no evidence"}[v]
            groups["cannot decide"].append((c, why + (f"; our run saw: {saw}" if saw else "")))
    return groups


_LABELS = {"held": "Held", "partly held": "Held in part", "held, not claimed": "Held here but not claimed",
           "did not hold": "Did not hold", "mixed": "Mixed", "cannot decide": "This scale cannot decide"}


def _lines(groups: dict[str, list[tuple[dict, str]]]) -> list[str]:
    """One line per group: the claims' titles only (the box stays short on the learner's path)."""
    return [f"- **{_LABELS[key]}**: " + "; ".join(f"*{_title(c)}*" for c, _ in items) + "."
            for key, items in groups.items() if items]


def _why(groups: dict[str, list[tuple[dict, str]]]) -> list[str]:
    """The folded part: each claim's few words of why (what the run saw where this scale cannot decide)."""
    return [f"- *{_title(c)}* ({_LABELS[key].lower()}): {words}" for key, items in groups.items()
            for c, words in items if words]


def held_up_markdown(chapter_doc: dict | None, chapter_title: str = "") -> str:
    """The box for one chapter's metrics (``None``: the chapter has not run in this build)."""
    if chapter_doc is None:
        return (":::{admonition} What held up\n:class: note\nThis build did not run the chapter; the "
                "{doc}`report <report>` lists the verdicts of the chapters that did.\n:::\n")
    claims = chapter_doc.get("claims") or []
    if not claims:
        return ""
    papers = [c for c in claims if family(c["id"]) != BOOK_FAMILY]
    own = [c for c in claims if family(c["id"]) == BOOK_FAMILY]
    phase = {c.get("phase") for c in claims}
    data = ("confirmatory data (seeds and text collected after the rules were frozen)" if phase == {"confirmatory"}
            else "exploratory data (the rules were written after these data had been seen)" if phase == {"exploratory"}
            else "confirmatory and exploratory data")
    lines = ["::::{admonition} What held up at this scale", ":class: note", ""]
    why: list[str] = []
    if papers:
        held = sum(c["verdict"] == "reproduced" for c in papers)
        part = sum(c["verdict"] == "partly reproduced" for c in papers)
        lines += [f"Of the papers' {len(papers)} claims tested here, {held} held"
                  + (f" and {part} held in part" if part else "") + f" on {data}:", ""]
        lines += _lines(held_up_groups(papers))
        why += _why(held_up_groups(papers))
    if own:
        lines += ["", f"The book's own {len(own)} question{'s' * (len(own) != 1)} (no paper states them):", ""]
        lines += _lines(held_up_groups(own))
        why += _why(held_up_groups(own))
    fams = list(dict.fromkeys(family(c["id"]) for c in claims))
    notes = [provenance()[f] for f in fams if f in provenance()]
    folded = why + (["", "*Where the papers' numbers come from*: " + " ".join(notes)] if notes else [])
    if folded:
        lines += ["", ":::{dropdown} Why, claim by claim, and where the papers' numbers come from", *folded, ":::"]
    lines += ["", "Every claim's rule, interval, test and power: the Evidence section at the end.", "::::", ""]
    return "\n".join(lines)
