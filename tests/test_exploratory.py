"""The exploratory verdicts beside the confirmatory ones: the snapshot of an exploratory build, what it refuses,
and how a report and a claims table show it."""

from __future__ import annotations

import copy

import pytest
import yaml

from anatomy_kit.book import exploratory as EX
from anatomy_kit.jsonio import write_json
from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts.tables import claim_row, claims_html


def _report(phase="exploratory", status="registered", scale="smoke"):
    claim = {"id": "p1.l11_rank", "verdict": "not established", "summary": "layer 11: rank 1–3", "p": 0.0059,
             "saw": None, "role": "primary", "registry": {"status": status}}
    other = {"id": "p1.baseline_ppl", "verdict": "not comparable", "summary": "another text", "p": None,
             "saw": "not reproduced: 24.35 vs 22.60", "role": "secondary", "registry": {"status": status}}
    return {"chapters": [{"chapter": "ch01_ablation_map", "run": {"scale": scale, "phase": phase, "seed": 0},
                          "claims": [claim, other]}]}


def test_a_snapshot_keeps_each_claims_verdict_summary_p_what_it_saw_and_role():
    snap = EX.snapshot(_report())["exploratory"]
    assert snap["what"] == EX.RULES_WRITTEN_AFTER and snap["first_seeds"] == [0] and snap["scale"] == "smoke"
    assert snap["claims"]["p1.l11_rank"] == {"chapter": "ch01_ablation_map", "verdict": "not established",
                                             "summary": "layer 11: rank 1–3", "p": 0.0059, "saw": None,
                                             "role": "primary"}
    assert snap["claims"]["p1.baseline_ppl"]["saw"] == "not reproduced: 24.35 vs 22.60"


@pytest.mark.parametrize("kw, match", [({"phase": "confirmatory"}, "phase 'confirmatory'"),
                                       ({"status": "off plan"}, "status 'off plan'"),
                                       ({"scale": "hour"}, "smoke scale")])
def test_a_snapshot_is_only_of_a_default_smoke_build_of_exploratory_data(kw, match):
    with pytest.raises(AnatomyKitError, match=match):
        EX.snapshot(_report(**kw))
    with pytest.raises(AnatomyKitError, match="no claim"):
        EX.snapshot({"chapters": [{"chapter": "x", "run": {"scale": "smoke", "phase": "exploratory"}, "claims": []}]})


def test_the_snapshot_file_round_trips(tmp_path, monkeypatch):
    build = tmp_path / "build"
    write_json(build / "report.json", _report())
    manifest = tmp_path / "manifest"
    manifest.mkdir()
    out = EX.write_snapshot(build, manifest)
    assert out == manifest / EX.FILE and out.read_text().startswith("# The verdicts of the frozen rules")
    monkeypatch.setattr("anatomy_kit.manifest.manifest_dir", lambda: manifest)
    assert EX.exploratory_verdicts()["p1.l11_rank"]["verdict"] == "not established"
    (manifest / EX.FILE).write_text(yaml.safe_dump({"exploratory": {"claims": ["not", "a", "mapping"]}}))
    with pytest.raises(AnatomyKitError, match="must hold exploratory"):
        EX.exploratory_verdicts()
    (manifest / EX.FILE).unlink()
    assert EX.exploratory_verdicts() == {}


def test_attach_puts_the_exploratory_verdict_beside_confirmatory_claims_only():
    entries = EX.snapshot(_report())["exploratory"]["claims"]
    conf = {"id": "p1.l11_rank", "verdict": "reproduced", "summary": "rank 1", "phase": "confirmatory"}
    expl = {"id": "p1.baseline_ppl", "verdict": "not comparable", "summary": "x", "phase": "exploratory"}
    unknown = {"id": "p2.other", "verdict": "reproduced", "summary": "y", "phase": "confirmatory"}
    EX.attach([conf, expl, unknown], entries)
    assert conf["exploratory"]["verdict"] == "not established"
    assert "exploratory" not in expl and "exploratory" not in unknown     # exploratory data need no second verdict
    row = claim_row(conf | {"paper": {"value": 1}})
    assert row.exploratory == "not established: layer 11: rank 1–3"
    html = claims_html([conf | {"paper": {"value": 1}}])
    assert "<dt>exploratory</dt><dd>not established: layer 11: rank 1–3 (the verdict on the exploratory data; " \
           "the rules were written after these data had been seen)" in html


def test_the_report_counts_each_chapters_confirmatory_verdicts_beside_its_exploratory_ones():
    from anatomy_kit.book.report import phase_counts, primaries

    chapters = [{"chapter": "ch01_ablation_map", "claims": [
        {"id": "p1.l11_rank", "verdict": "reproduced", "phase": "confirmatory", "role": "primary",
         "exploratory": {"verdict": "not established"}, "holm": {"adjusted": 0.004, "m": 4, "survives": True}},
        {"id": "p1.anti_layers", "verdict": "not reproduced", "phase": "confirmatory", "role": "primary",
         "exploratory": {"verdict": "not reproduced"}, "holm": {"adjusted": 1e-6, "m": 4, "survives": None}},
        {"id": "p1.baseline_ppl", "verdict": "not comparable", "phase": "exploratory", "role": "secondary"}]},
        {"chapter": "card_report", "claims": []}]
    assert phase_counts(chapters) == {"ch01_ablation_map": {
        "confirmatory": {"reproduced": 1, "not reproduced": 1},
        "exploratory": {"not reproduced": 1, "not established": 1, "not comparable": 1}}}
    assert primaries(chapters) == [
        {"id": "p1.l11_rank", "family": "p1", "verdict": "reproduced", "phase": "confirmatory", "adjusted_p": 0.004,
         "m": 4, "survives": True},
        {"id": "p1.anti_layers", "family": "p1", "verdict": "not reproduced", "phase": "confirmatory",
         "adjusted_p": 1e-6, "m": 4, "survives": None}]
