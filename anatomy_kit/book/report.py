"""The reproduction report: every chapter's numbers beside the papers' (the book's last page).

Chapters write ``<build>/metrics/<chapter>.json`` (see :meth:`anatomy_kit.book.run.Run.save_metrics`).
:func:`build_report` gathers them, joins each claim with its reference in
``data_manifest/references.yaml`` (value, unit, source) and writes ``report.json`` (every detail,
for machines) and the MyST page ``report.md``: first a summary that fits one screen (the run and
its environment, a matrix of claims by verdict per paper, one line per paper of what is
established), then each chapter's compact claims table (:mod:`.tables`) with the rule, interval
and note of each claim folded under its row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..jsonio import read_json, require_fields, write_json
from ..manifest import references
from ..validate import AnatomyKitError
from .chapters import chapter_manifest
from .exploratory import attach
from ..verdicts.decision import VERDICTS
from ..verdicts.multiplicity import HOLM_ALPHA, MAX_PRIMARIES, fails_correction, holm_by_family
from ..verdicts.tables import VERDICT_COLOURS, badge_html, claim_row, claims_html, escape

__all__ = ["PAPERS", "build_report", "report_markdown", "verdict_matrix", "environment_line", "phase_counts",
           "registry_line", "primaries"]

#: Claim-id prefixes in the order the summary lists them, with the paper's short name; a prefix
#: not listed here (a chapter's own claims) is shown under its own name after these.
PAPERS = {
    "p1": "Paper 1: anatomy of SmolLM2",
    "p2": "Paper 2: geometric work, widths",
    "tlm": "Tapered Language Models (TLM)",
    "p3": "Paper 3: width growth (SRIO)",
    "book": "The book's own questions (chapter 7)",
}
#: Environment fields the header names, in this order, with their label (others follow by name).
_ENV_LABELS = {"cpu_capability": "CPU kernels", "cpu_kernels": "CPU kernels", "threads": "threads",
               "num_threads": "threads", "torch_threads": "threads", "torch": "torch",
               "transformers": "transformers", "python": "Python", "machine": "machine", "cuda": "CUDA",
               "cuda_device": "GPU", "device": "device"}
_HOLDS = ("reproduced", "partly reproduced")


def build_report(build_dir: Path, timings: dict[str, float] | None = None) -> dict:
    """Gather chapter metrics into ``report.json`` and ``report.md`` in ``build_dir`` (the book build)."""
    build_dir = Path(build_dir)
    refs = references()
    chapters = []
    for path in sorted((build_dir / "metrics").glob("*.json")):
        doc = require_fields(read_json(path, what="chapter metrics file"), ("chapter", "run", "claims"),
                             path=path, what="chapter metrics file")
        _mark_decidable(doc)
        for claim in doc["claims"]:
            if claim.get("id") not in refs:
                raise AnatomyKitError(f"{path}: claim {claim.get('id')!r} has no entry in data_manifest/references.yaml")
            ref = refs[claim["id"]]
            claim["paper"] = {k: ref.get(k) for k in ("title", "claim", "value", "unit", "source")}
        if timings and doc["chapter"] in timings:
            doc["wall_seconds"] = timings[doc["chapter"]]
        chapters.append(doc)
    holm = holm_by_family(_claims(chapters))
    for claim in _claims(chapters):
        claim["holm"] = holm[claim["id"]].to_dict()
    attach(_claims(chapters))
    report = {"chapters": chapters, "environment": _environments(chapters),
              "verdicts_by_paper": verdict_matrix(chapters), "phase_counts": phase_counts(chapters),
              "primaries": primaries(chapters)}
    write_json(build_dir / "report.json", report)
    (build_dir / "report.md").write_text(report_markdown(report))
    return report


def _mark_decidable(doc: dict) -> None:
    """Each claim's ``decidable_at`` (smoke / hour / full / beyond full / not modelled), from the chapter's power
    table (:mod:`.power`: its own intervals at this scale against the hour preset)."""
    from ..hour import HOUR_PRESETS
    from .power import decidable_at, power_rows

    if doc["chapter"] in HOUR_PRESETS:
        for claim, row in zip(doc["claims"], power_rows(doc)):
            claim["decidable_at"] = decidable_at(row)


def _decidable_line(claims: list[dict]) -> str:
    """One Markdown line under a chapter's claims: the smallest scale that decides each claim."""
    by: dict[str, list[str]] = {}
    for c in claims:
        if "decidable_at" in c:
            by.setdefault(c["decidable_at"], []).append(c["id"])
    if not by:
        return ""
    parts = "; ".join(f"**{k}**: {', '.join(f'`{i}`' for i in v)}" for k, v in by.items())
    return f"Decidable at ({{ref}}`the power tables <running-hour>`): {parts}."


def _claims(chapters: Iterable[dict]) -> list[dict]:
    return [c for doc in chapters for c in doc["claims"]]


def _paper(claim_id: str) -> str:
    return claim_id.split(".", 1)[0]


def _papers(claims: list[dict]) -> list[str]:
    seen = list(dict.fromkeys(_paper(c["id"]) for c in claims))
    return [p for p in PAPERS if p in seen] + [p for p in seen if p not in PAPERS]


def verdict_matrix(chapters: Iterable[dict]) -> dict[str, dict[str, int]]:
    """``{paper prefix: {verdict: number of claims}}`` over every chapter (verdicts that occur)."""
    claims = _claims(chapters)
    return {p: {v: n for v in VERDICTS if (n := sum(_paper(c["id"]) == p and c["verdict"] == v for c in claims))}
            for p in _papers(claims)}


def phase_counts(chapters: Iterable[dict]) -> dict[str, dict[str, dict[str, int]]]:
    """``{chapter: {"confirmatory": {verdict: n}, "exploratory": {verdict: n}}}``: each chapter's verdicts on the
    confirmatory data beside the frozen rules' verdicts on the exploratory data (the snapshot attached to each
    claim, or the claim's own verdict where its data are exploratory)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for doc in chapters:
        counts: dict[str, dict[str, int]] = {"confirmatory": {}, "exploratory": {}}
        for c in doc["claims"]:
            if c.get("phase") == "confirmatory":
                counts["confirmatory"][c["verdict"]] = counts["confirmatory"].get(c["verdict"], 0) + 1
                seen = (c.get("exploratory") or {}).get("verdict")
            else:
                seen = c["verdict"]
            if seen:
                counts["exploratory"][seen] = counts["exploratory"].get(seen, 0) + 1
        if doc["claims"]:
            out[doc["chapter"]] = {k: {v: n[v] for v in VERDICTS if v in n} for k, n in counts.items()}
    return out


def primaries(chapters: Iterable[dict]) -> list[dict]:
    """Every primary claim with its family, verdict, phase and Holm's result (adjusted p, m, survives)."""
    return [{"id": c["id"], "family": _paper(c["id"]), "verdict": c["verdict"], "phase": c.get("phase"),
             "adjusted_p": (c.get("holm") or {}).get("adjusted"), "m": (c.get("holm") or {}).get("m"),
             "survives": (c.get("holm") or {}).get("survives")}
            for c in _claims(chapters) if c.get("role") == "primary"]


def _phase_html(counts: dict[str, dict[str, dict[str, int]]], titles: dict[str, str]) -> str:
    """A folded table: per chapter, the confirmatory verdict counts beside the exploratory ones."""
    def cell(n: dict[str, int]) -> str:
        return escape(", ".join(f"{k} {v}" for k, v in n.items()) or "—")

    rows = "".join(f"<tr><td>{escape(titles.get(ch, ch))}</td><td>{cell(c['confirmatory'])}</td>"
                   f"<td>{cell(c['exploratory'])}</td></tr>" for ch, c in counts.items())
    return ('<details class="ak-phases"><summary>Confirmatory beside exploratory, per chapter (the exploratory '
            "verdicts: rules written after those data)</summary><table><thead><tr><th>chapter</th><th>confirmatory "
            f"data</th><th>exploratory data</th></tr></thead><tbody>{rows}</tbody></table></details>")


def _primaries_html(rows: list[dict]) -> str:
    """One line per primary claim: its verdict and Holm's adjusted p within its family, folded (the paragraph above
    it counts them, so the summary stays one screen)."""
    items = []
    for r in rows:
        adj = "no tested part" if r["adjusted_p"] is None else f"adjusted p = {r['adjusted_p']:.3g} (m = {r['m']})"
        mark = {True: ", survives", False: ", fails the correction", None: ""}[r["survives"]]
        items.append(f"<li><code>{escape(r['id'])}</code>: {escape(r['verdict'])}; {escape(adj)}{mark}</li>")
    return (f'<details class="ak-primaries"><summary>Each primary claim with its adjusted p</summary>'
            f'<ul>{"".join(items)}</ul></details>' if items else "")


def _environments(chapters: list[dict]) -> dict[str, list]:
    """``{field: [distinct values over the chapters]}`` of the chapters' ``environment`` (flattened)."""
    out: dict[str, list] = {}
    for doc in chapters:
        for key, value in _flatten(doc.get("environment") or {}).items():
            if value not in out.setdefault(key, []):
                out[key].append(value)
    return out


def _flatten(env: dict, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in env.items():
        if isinstance(v, dict):
            flat.update(_flatten(v, f"{prefix}{k}."))
        else:
            flat[f"{prefix}{k}"] = v
    return flat


def environment_line(environment: dict[str, list]) -> str:
    """``CPU kernels AVX2 · threads 2 · torch 2.13.0 · …`` (values that differ between chapters joined by ``/``)."""
    def label(key: str) -> str:
        return _ENV_LABELS.get(key.rsplit(".", 1)[-1], key)

    order = list(dict.fromkeys(k for k in _ENV_LABELS if k in environment)) + \
        [k for k in environment if k not in _ENV_LABELS]
    parts, named = [], set()
    for key in order:
        if label(key) in named:
            continue
        named.add(label(key))
        values = " / ".join("yes" if v is True else "no" if v is False else str(v) for v in environment[key])
        parts.append(f"{label(key)} {values}")
    return " · ".join(parts)


def _run_line(chapters: list[dict]) -> str:
    runs = [d["run"] for d in chapters]

    def distinct(key: str) -> str:
        return " / ".join(dict.fromkeys(str(r.get(key)) for r in runs))

    seconds = sum(d.get("wall_seconds", d.get("seconds")) or 0 for d in chapters)
    n = len(chapters)
    return (f"{n} chapter{'s' * (n != 1)} at scale {distinct('scale')}, device {distinct('device')}: model "
            f"{distinct('model')}, corpus {distinct('corpus')}, seed {distinct('seed')}; {seconds:,.0f} s in all.")


def _matrix_html(matrix: dict[str, dict[str, int]]) -> str:
    used = [v for v in VERDICTS if any(v in row for row in matrix.values())]
    head = "".join(f"<th>{badge_html(v)}</th>" for v in used)
    rows = []
    for paper, counts in matrix.items():
        cells = "".join(
            f'<td class="ak-count" style="background:{VERDICT_COLOURS[v][0]};color:{VERDICT_COLOURS[v][1]}">'
            f"{counts[v]}</td>" if counts.get(v) else '<td class="ak-count ak-zero">·</td>' for v in used)
        rows.append(f'<tr><th scope="row">{escape(PAPERS.get(paper, paper))}</th>{cells}'
                    f'<td class="ak-count">{sum(counts.values())}</td></tr>')
    return (f'<table class="ak-matrix"><thead><tr><th>claims by verdict</th>{head}<th>all</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _established_html(claims: list[dict]) -> str:
    """One line per paper: what holds (primaries that survive Holm's correction), what holds in part, what holds as
    a secondary claim (unadjusted p; a claim without a role is secondary), what holds but fails Holm (not claimed),
    what does not hold, what is mixed (by the rules), or nothing."""
    items = []
    for paper in _papers(claims):
        mine = [c for c in claims if _paper(c["id"]) == paper]
        rows = [claim_row(c) for c in mine]
        primary = [c.get("role") == "primary" for c in mine]
        # a primary that fails Holm's correction is not claimed: never listed as holding
        failed = [fails_correction(c.get("holm")) and p for c, p in zip(mine, primary)]
        kept = [(r, p) for r, p, f in zip(rows, primary, failed) if not f]
        groups = [("holds", [r.label for r, p in kept if r.verdict == "reproduced" and p]),
                  ("holds in part", [r.label + ("" if p else " (secondary)") for r, p in kept
                                     if r.verdict == "partly reproduced"]),
                  ("holds, secondary", [r.label for r, p in kept if r.verdict == "reproduced" and not p]),
                  ("holds here but fails Holm, not claimed",
                   [r.label for r, f in zip(rows, failed) if r.verdict in _HOLDS and f]),
                  ("does not hold", [r.label for r in rows if r.verdict == "not reproduced"]),
                  ("mixed", [r.label for r in rows if r.verdict == "mixed"])]
        text = "; ".join(f"<em>{name}</em>: {escape(_shortlist(labels))}" for name, labels in groups if labels)
        near = sum(r.near_threshold for r in rows)
        text = text or "nothing established at this scale"
        if near:
            text += f' <span class="ak-near">≈ {near} near threshold</span>'
        items.append(f"<li><strong>{escape(PAPERS.get(paper, paper))}</strong>: {text}</li>")
    return f'<ul class="ak-established">{"".join(items)}</ul>'


def _registry_html(claims: list[dict], chapters: list[dict] | None = None) -> str:
    """One paragraph: the primary claims (at most three a family, corrected together by Holm) and how many of
    them hold and survive; how many claims rest on confirmatory data; how many were judged under an amendment."""
    primaries = [c for c in claims if c.get("role") == "primary"]
    positive = [c for c in primaries if c["verdict"] in _HOLDS]
    survive = sum(bool((c.get("holm") or {}).get("survives")) for c in positive)
    confirmatory = sum(c.get("phase") == "confirmatory" for c in claims)
    amended = sum((c.get("registry") or {}).get("status") == "amended" for c in claims)
    text = (f"<strong>{len(primaries)}</strong> primary claims (at most {MAX_PRIMARIES} a family, corrected "
            f"together by Holm at α = {HOLM_ALPHA:g}): <strong>{len(positive)}</strong> reproduced or partly, "
            f"<strong>{survive}</strong> of them surviving the correction; the other {len(claims) - len(primaries)} "
            f"claims are secondary (unadjusted p). <strong>{confirmatory}</strong> of {len(claims)} claims rest on "
            "confirmatory data (seeds and text collected after the rules were frozen), "
            f"{len(claims) - confirmatory} on exploratory data; {amended} judged under an amended rule."
            + (f" {registry_line(chapters)}" if chapters else ""))
    return f'<p class="ak-registry">{text}</p>'


def registry_line(chapters: list[dict]) -> str:
    """Which registry the chapters ran under, from their metrics' ``registry`` stamp
    (:func:`anatomy_kit.manifest.registry_stamp`): one stamp for all, or the chapters grouped by stamp; metrics
    written before builds recorded it say "no registry stamp recorded"."""
    groups: dict[tuple, list[str]] = {}
    for doc in chapters:
        stamp = doc.get("registry") or {}
        groups.setdefault((stamp.get("frozen"), stamp.get("freeze_sha256")), []).append(doc["chapter"])

    def says(key: tuple) -> str:
        frozen, sha = key
        if sha is None and frozen is None:
            return "no registry stamp recorded"
        return ((f"the registry frozen on {frozen}" if frozen else "a draft registry (not frozen)")
                + (f", freeze.yaml sha256 {sha[:16]}…" if sha else ""))

    if len(groups) == 1:
        return f"Every chapter ran under {says(next(iter(groups)))}."
    return "The chapters ran under different registries: " + "; ".join(
        f"{', '.join(names)}: {says(key)}" for key, names in groups.items()) + "."


def _shortlist(labels: list[str], most: int = 6) -> str:
    """Distinct labels, at most ``most`` of them, so that a paper's line stays short."""
    labels = list(dict.fromkeys(labels))
    return ", ".join(labels[:most]) + (f", … (+{len(labels) - most})" if len(labels) > most else "")


def _chapter_titles() -> dict[str, str]:
    try:
        return {c["id"]: c["title"] for c in chapter_manifest()}
    except AnatomyKitError:                       # an installed wheel without the chapters
        return {}


#: What the report says under a page that judges no paper claim (the report card), instead of an empty table.
NO_CLAIMS = "This page judges no claim of the papers: it measures the layers of a model of one's choice."


def _folded_table(claims: list[dict]) -> str:
    """A chapter's claims table, folded under a line that counts its verdicts (the page stays scannable; the
    summary above says what holds)."""
    counts = {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}
    line = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    return (f'<details class="ak-chapter-claims"><summary>{len(claims)} claims: {escape(line)}</summary>'
            f"{claims_html(claims)}</details>")


def report_markdown(report: dict) -> str:
    """The report as a MyST page: the summary (one screen), then one compact claims table per chapter."""
    chapters = report["chapters"]
    claims = _claims(chapters)
    env = report.get("environment") or _environments(chapters)
    matrix = report.get("verdicts_by_paper") or verdict_matrix(chapters)
    header = escape(_run_line(chapters)) + (f"<br>{escape(environment_line(env))}" if env else "")
    lines = ["(report-page)=", "# Reproduction report", "",
             f'<div class="ak-summary"><p class="ak-run">{header}</p>{_matrix_html(matrix)}'
             f"{_established_html(claims)}</div>", "",
             # how the claims were corrected and which data decided them, right below the one-screen summary
             f'<div class="ak-registry">{_registry_html(claims, chapters)}'
             f"{_primaries_html(report.get('primaries') or primaries(chapters))}"
             f"{_phase_html(report.get('phase_counts') or phase_counts(chapters), _chapter_titles())}</div>", "",
             "Each row below puts our number beside the paper's, with the verdict its declared rule gave and "
             "one line of why; open *rule, interval, note* under a row for the rule, the interval or null model "
             "it rests on and the paper's wording and source ({ref}`glossary-page` explains the verdict words). "
             "Paper values come from `data_manifest/references.yaml` and are never used as outputs; `report.json` "
             "keeps every number.", ""]
    titles = _chapter_titles()
    varying = {k for k, values in env.items() if len(values) > 1}      # the header shows the shared ones
    for doc in chapters:
        run = doc["run"]
        secs = doc.get("wall_seconds", doc.get("seconds"))
        own = {k: v for k, v in _environments([doc]).items() if k in varying}
        env_text = environment_line(own) if own else ""
        run_text = (f"{doc['chapter']}: scale {run['scale']}, model {run['model']}, corpus {run['corpus']}, "
                    f"seed {run['seed']}" + (f"; {secs:,.0f} s" if secs is not None else "")
                    + (f"; {env_text}" if env_text else ""))
        lines += [f"## {titles.get(doc['chapter'], doc['chapter'])}", "",
                  f'<p class="ak-run">{escape(run_text)}</p>', "",
                  _folded_table(doc["claims"]) if doc["claims"] else NO_CLAIMS, ""]
        if doc["claims"]:
            lines += [_decidable_line(doc["claims"]), ""]
    return "\n".join(lines)
