"""The book's whole verdict table: every claim of chapters 1–6, grouped by what would change its verdict.

Chapters write ``<build>/metrics/<chapter>.json`` with a ``"claims"`` list (records of
:meth:`anatomy_kit.verdicts.claims.Claim.to_dict`), the files the report is built from.
:func:`book_claims` reads every claim of every chapter into a :class:`VerdictRow` and joins it with
its entry of ``data_manifest/references.yaml``, whose declared ``limited_by`` field says the one
thing that would most likely move our verdict (:data:`anatomy_kit.manifest.LIMITED_BY`: more seeds,
the base model, full scale, the paper's text). :func:`verdict_table` lays the rows out grouped in
that order; :func:`verdict_counts` counts verdicts per group.

Used by chapter 7 (*Synthesis*).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..verdicts.decision import VERDICTS, shorten
from ..verdicts.multiplicity import holm_by_family
from ..jsonio import read_json
from ..manifest import LIMITED_BY, references
from ..validate import AnatomyKitError, check_choice

__all__ = ["VerdictRow", "book_claims", "verdict_table", "verdict_counts", "SELF", "LABEL_MAX", "TABLE_COLUMNS"]

#: This chapter's own metrics file, never read back as a chapter of claims.
SELF = "ch07_synthesis.json"
#: Characters of a label made from a reference's ``claim`` (entries with a ``label`` keep it whole).
LABEL_MAX = 72
#: The columns of :func:`verdict_table`, in order.
TABLE_COLUMNS = ("what would change it", "claim", "chapter", "verdict", "why")


@dataclass(frozen=True)
class VerdictRow:
    """One claim of one chapter, as the verdict table shows it.

    ``paper``: the claim id's prefix (``p1``, ``p2``, ``tlm``, ``p3``, …); ``label``: the reference's
    human ``title``, else a short form of its ``claim``; ``summary``: the decision's one line;
    ``limited_by``: one of :data:`~anatomy_kit.manifest.LIMITED_BY`; ``amended``: the claim was judged
    under an amended rule (``registered_verdict``: its verdict under the registered one); ``holm``:
    "survives Holm", "fails Holm", "—" (no test) or "" (not positive) within its paper's claims.
    """
    chapter: str
    id: str
    paper: str
    label: str
    verdict: str
    summary: str
    near_threshold: bool
    limited_by: str
    amended: bool = False
    registered_verdict: str | None = None
    holm: str = ""

    def __post_init__(self) -> None:
        check_choice("verdict", self.verdict, VERDICTS)
        check_choice("limited_by", self.limited_by, LIMITED_BY)
        if not isinstance(self.near_threshold, bool):
            raise AnatomyKitError(f"near_threshold={self.near_threshold!r} must be True or False")

    def to_dict(self) -> dict:
        """JSON-ready: every field by name."""
        return asdict(self)


def _label(entry: dict) -> str:
    """The reference's human ``title``, else its ``claim`` without parentheses, up to a ``;``, shortened."""
    if entry.get("title"):
        return str(entry["title"])
    text = re.sub(r"\s*\([^()]*\)", "", str(entry.get("claim", ""))).split("; ", 1)[0]
    return shorten(text, LABEL_MAX)


def _limited_by(claim_id: str, entry: dict) -> str:
    if "limited_by" not in entry:
        raise AnatomyKitError(f"claim {claim_id!r} has no limited_by in data_manifest/references.yaml; add one "
                              f"of {', '.join(map(repr, LIMITED_BY))} (what would most likely change our verdict)")
    value = entry["limited_by"]
    if value not in LIMITED_BY:
        raise AnatomyKitError(f"claim {claim_id!r}: limited_by={value!r} in data_manifest/references.yaml is not "
                              f"accepted; choose one of {', '.join(map(repr, LIMITED_BY))}")
    return value


def book_claims(metrics_dir: str | Path) -> list[VerdictRow]:
    """Every claim of every chapter metrics file ``metrics_dir/*.json``, in file order then claim order.

    Skips :data:`SELF` and files that hold no ``"claims"`` list. An error names the folder when it
    holds no chapter metrics, and the claim id when references.yaml lacks it or its ``limited_by``.
    """
    folder = Path(metrics_dir)
    if not folder.is_dir():
        raise AnatomyKitError(f"metrics_dir={str(folder)!r} is not a folder; pass the build's metrics folder "
                              "(<build>/metrics), which chapters 1-6 fill when they run")
    refs = references()
    rows: list[VerdictRow] = []
    ps: list[float | None] = []
    for path in sorted(folder.glob("*.json")):
        if path.name == SELF:
            continue
        doc = read_json(path, what="chapter metrics file")
        if not isinstance(doc, dict) or not isinstance(doc.get("claims"), list):
            continue
        chapter = str(doc.get("chapter") or path.stem)
        for claim in doc["claims"]:
            claim_id = claim.get("id") if isinstance(claim, dict) else None
            if claim_id not in refs:
                raise AnatomyKitError(f"{path}: claim {claim_id!r} has no entry in data_manifest/references.yaml")
            entry = refs[claim_id]
            limited_by = _limited_by(claim_id, entry)
            ps.append({k: claim.get(k) for k in ("p", "parts", "role")})
            record = claim.get("registry") or {}
            try:
                rows.append(VerdictRow(chapter=chapter, id=claim_id, paper=claim_id.split(".", 1)[0],
                                       label=_label(entry), verdict=claim.get("verdict"),
                                       summary=shorten(claim.get("summary") or claim.get("reason") or ""),
                                       near_threshold=bool(claim.get("near_threshold")), limited_by=limited_by,
                                       amended=record.get("status") == "amended",
                                       registered_verdict=record.get("registered_verdict")))
            except AnatomyKitError as err:
                raise AnatomyKitError(f"{path}: claim {claim_id!r}: {err}") from None
    if not rows:
        raise AnatomyKitError(f"no chapter metrics with claims in {folder}; run chapters 1-6 first (they write "
                              "<build>/metrics/<chapter>.json)")
    return _with_holm(rows, ps)


def _with_holm(rows: list[VerdictRow], tests: list[dict]) -> list[VerdictRow]:
    """Rows marked by Holm's correction over each family's primaries (:mod:`~anatomy_kit.verdicts.multiplicity`):
    a positive primary "survives Holm" or "fails Holm" ("—" when no part was tested); a secondary claim
    "secondary" (its p unadjusted, never a finding of the family)."""
    holm = holm_by_family([{"id": r.id, "verdict": r.verdict, **t} for r, t in zip(rows, tests)])
    marks = {True: "survives Holm", False: "fails Holm"}

    def mark(r: VerdictRow) -> str:
        h = holm[r.id]
        if h.role == "secondary":
            return "secondary"
        if r.verdict not in ("reproduced", "partly reproduced"):
            return ""
        return marks.get(h.survives, "—") if h.adjusted is not None else "—"

    return [replace(r, holm=mark(r)) for r in rows]


def _check_rows(rows: Iterable[VerdictRow]) -> list[VerdictRow]:
    if isinstance(rows, (str, bytes, dict, VerdictRow)) or not hasattr(rows, "__iter__"):
        raise AnatomyKitError(f"rows={rows!r} is not a list of rows; pass the list book_claims(metrics_dir) returns")
    rows = list(rows)
    if not rows:
        raise AnatomyKitError("rows=[] holds no claims; pass the list book_claims(metrics_dir) returns")
    bad = [r for r in rows if not isinstance(r, VerdictRow)]
    if bad:
        raise AnatomyKitError(f"rows holds {type(bad[0]).__name__} {bad[0]!r}; pass the VerdictRow list "
                              "book_claims(metrics_dir) returns")
    return rows


def _order(row: VerdictRow) -> tuple:
    return LIMITED_BY.index(row.limited_by), row.chapter, row.id


def verdict_table(rows: Iterable[VerdictRow]) -> pd.DataFrame:
    """One row per claim, grouped by what would change it (in :data:`~anatomy_kit.manifest.LIMITED_BY`
    order), sorted within a group by chapter, then claim id. Columns :data:`TABLE_COLUMNS`; the index
    is the claim id. "why" is the decision's summary, marked when the verdict sits near its threshold."""
    rows = sorted(_check_rows(rows), key=_order)
    records = [{"what would change it": r.limited_by, "claim": r.label, "chapter": r.chapter,
                "verdict": r.verdict + (f" ({r.holm})" if r.holm else ""),
                "why": r.summary + (" (near its threshold)" if r.near_threshold else "")
                + (f" Amended rule; under the registered one: {r.registered_verdict}." if r.amended else "")}
               for r in rows]
    return pd.DataFrame(records, columns=list(TABLE_COLUMNS), index=pd.Index([r.id for r in rows], name="id"))


def verdict_counts(rows: Iterable[VerdictRow]) -> dict[str, dict[str, int]]:
    """``{limited_by: {verdict: number of claims}}``: groups and verdicts that occur, in the orders of
    :data:`~anatomy_kit.manifest.LIMITED_BY` and :data:`~anatomy_kit.verdicts.decision.VERDICTS`."""
    rows = _check_rows(rows)
    return {group: {v: n for v in VERDICTS if (n := sum(r.limited_by == group and r.verdict == v for r in rows))}
            for group in LIMITED_BY if any(r.limited_by == group for r in rows)}
