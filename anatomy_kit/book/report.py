"""The reproduction report: every chapter's numbers beside the papers'.

Chapters write ``<build>/metrics/<chapter>.json`` (see :meth:`anatomy_kit.book.run.Run.save_metrics`).
:func:`build_report` gathers them, joins each claim with its reference in
``data_manifest/references.yaml`` (value, unit, source) and writes ``report.json`` and a
Markdown page ``report.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..jsonio import read_json, require_fields, write_json
from ..manifest import references
from ..validate import AnatomyKitError
from .claims import explanation


def _cell(x: Any) -> str:
    """Table-cell text: a ``|`` inside a cell would end it."""
    return (x if isinstance(x, str) else _fmt(x)).replace("|", "\\|")


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:,.4g}"
    if isinstance(x, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in x.items())
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return str(x)


def build_report(build_dir: Path, timings: dict[str, float] | None = None) -> dict:
    """Gather chapter metrics into ``report.json`` and ``report.md`` in ``build_dir``."""
    build_dir = Path(build_dir)
    refs = references()
    chapters = []
    for path in sorted((build_dir / "metrics").glob("*.json")):
        doc = require_fields(read_json(path, what="chapter metrics file"), ("chapter", "run", "claims"),
                             path=path, what="chapter metrics file")
        for claim in doc["claims"]:
            if claim.get("id") not in refs:
                raise AnatomyKitError(f"{path}: claim {claim.get('id')!r} has no entry in data_manifest/references.yaml")
            ref = refs[claim["id"]]
            claim["paper"] = {k: ref.get(k) for k in ("claim", "value", "unit", "source")}
        if timings and doc["chapter"] in timings:
            doc["wall_seconds"] = timings[doc["chapter"]]
        chapters.append(doc)
    report = {"chapters": chapters}
    write_json(build_dir / "report.json", report)
    (build_dir / "report.md").write_text(report_markdown(report))
    return report


def report_markdown(report: dict) -> str:
    """The report as a MyST page: one table of claims per chapter."""
    lines = ["# Reproduction report", "",
             "Each row puts a number this build computed beside the paper's value, with our verdict, the "
             "interval or null model it rests on, and the rule that decided it (tested code in "
             "`anatomy_kit.book.rules`; the rule text is generated from the rule itself). "
             "Paper values come from `data_manifest/references.yaml` (source and certainty in the last "
             "column); they are never used as outputs. Smoke-scale numbers come from a small, real run "
             "on the embedded 4-bit instruct model and CPU; see each chapter for what that scale can show.", ""]
    for doc in report["chapters"]:
        run = doc["run"]
        secs = doc.get("wall_seconds", doc.get("seconds"))
        lines += [f"## {doc['chapter']}", "",
                  f"Scale `{run['scale']}`, model `{run['model']}`, corpus `{run['corpus']}`, "
                  f"seed {run['seed']}; {secs:.0f} s.", "",
                  "| claim | paper | ours | interval or null | verdict | rule; why | source |",
                  "|---|---|---|---|---|---|---|"]
        for c in doc["claims"]:
            p = c["paper"]
            unit = f" {p['unit']}" if p.get("unit") else ""
            spread = "; ".join(str(x) for x in (c.get("interval"), c.get("null")) if x) or "—"
            why = explanation(f"{c['rule']} {c['reason']}" if c.get("rule") else c["reason"], c.get("note"))
            lines.append(f"| {_cell(p['claim'])} | {_cell(p['value'])}{_cell(unit)} | {_cell(c['ours'])} | "
                         f"{_cell(spread)} | **{c['verdict']}** | {_cell(why)} | {_cell(p['source'])} |")
        lines.append("")
    return "\n".join(lines)

