"""The exploratory verdicts, kept beside the confirmatory ones (the report and every claims table).

Every rule of this book was written after the exploratory smoke data had been seen; only the
confirmatory run (seeds no earlier run used, held-out text, after the freeze) can confirm. What the
exploratory data said is still worth showing, marked for what it is: ``data_manifest/exploratory.yaml``
holds, per claim, the verdict the frozen rules gave on the exploratory data (a smoke build run with
``phase="exploratory"`` just before the freeze), written once by
``python -m anatomy_kit exploratory-snapshot --build-dir BUILD`` and committed with the freeze.
:func:`exploratory_verdicts` reads it; :func:`attach` puts each claim's entry beside its confirmatory
verdict in ``report.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..jsonio import read_json
from ..validate import AnatomyKitError

__all__ = ["FILE", "snapshot", "write_snapshot", "exploratory_verdicts", "attach", "RULES_WRITTEN_AFTER"]

FILE = "exploratory.yaml"
#: How every table marks an exploratory verdict.
RULES_WRITTEN_AFTER = "exploratory data: the rules were written after these data had been seen"


def snapshot(report: dict) -> dict:
    """``{"exploratory": {"build": ..., "claims": {id: {verdict, summary, p, saw, role}}}}`` from a build's
    ``report.json``, which must be a default smoke build of exploratory data (every claim on plan)."""
    claims: dict[str, dict] = {}
    seeds, scales = set(), set()
    for doc in report.get("chapters", []):
        run = doc.get("run") or {}
        scales.add(run.get("scale"))
        seeds.add(run.get("seed"))
        if run.get("phase") != "exploratory":
            raise AnatomyKitError(f"{doc.get('chapter')}: phase {run.get('phase')!r}; the snapshot is of exploratory "
                                  "data (reproduce with -p phase=exploratory)")
        for c in doc.get("claims", []):
            status = (c.get("registry") or {}).get("status")
            if status not in ("registered", "amended"):
                raise AnatomyKitError(f"claim {c.get('id')}: registry status {status!r}; the snapshot needs a default "
                                      "build (every claim on its registered plan)")
            claims[c["id"]] = {"chapter": doc["chapter"], "verdict": c["verdict"], "summary": c.get("summary"),
                               "p": c.get("p"), "saw": c.get("saw"), "role": c.get("role")}
    if scales != {"smoke"}:
        raise AnatomyKitError(f"the snapshot is of the smoke scale; this build ran {sorted(map(str, scales))}")
    if not claims:
        raise AnatomyKitError("the build's report holds no claim")
    return {"exploratory": {"what": RULES_WRITTEN_AFTER, "scale": "smoke", "first_seeds": sorted(seeds),
                            "claims": claims}}


def write_snapshot(build_dir: str | Path, manifest: str | Path) -> Path:
    """Write :func:`snapshot` of ``build_dir/report.json`` to ``manifest/exploratory.yaml``."""
    report = read_json(Path(build_dir) / "report.json", what="the build's report")
    out = Path(manifest) / FILE
    header = ("# The verdicts of the frozen rules on the exploratory smoke data (anatomy_kit.book.exploratory):\n"
              "# written by `python -m anatomy_kit exploratory-snapshot` from a build of the exploratory data\n"
              "# (the seeds and text every run used before the freeze) under the rules as frozen;\n"
              "# shown beside the confirmatory verdicts, marked: the rules were written after these data.\n")
    out.write_text(header + yaml.safe_dump(snapshot(report), sort_keys=False, allow_unicode=True, width=110),
                   encoding="utf-8")
    return out


def exploratory_verdicts() -> dict[str, dict]:
    """``{claim id: entry}`` of ``data_manifest/exploratory.yaml`` (``{}`` when there is none yet)."""
    from ..manifest import manifest_dir

    path = manifest_dir() / FILE
    if not path.is_file():
        return {}
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    claims = (doc.get("exploratory") or {}).get("claims")
    if not isinstance(claims, dict):
        raise AnatomyKitError(f"{path} must hold exploratory: {{claims: {{id: entry}}}}")
    return claims


def attach(claims: list[dict], entries: dict[str, Any] | None = None) -> None:
    """Put each claim's exploratory entry (``claim["exploratory"]``) beside its verdict, where one exists and the
    claim's own data are not exploratory themselves."""
    entries = exploratory_verdicts() if entries is None else entries
    for c in claims:
        if c.get("phase") == "confirmatory" and c.get("id") in entries:
            c["exploratory"] = dict(entries[c["id"]])
