"""The report and the compact tables show every amendment with both verdicts and its reason, mark amended
claims, count them in the summary, and put Holm's result beside each positive verdict."""

from __future__ import annotations

import re

from anatomy_kit.book.report import build_report
from anatomy_kit.jsonio import write_json
from anatomy_kit.verdicts import registry as REG
from anatomy_kit.verdicts.claims import Claim
from anatomy_kit.verdicts.combine import NotComparable
from anatomy_kit.verdicts.rules import Close, DifferenceSign, SetOverlap
from anatomy_kit.verdicts.tables import claims_html

REGISTERED, AMENDED = SetOverlap(full=3, partly=2), SetOverlap(full=3, partly=1)
WHY = "asked for by a referee after the overlap had been seen"


def _registry() -> REG.RuleRegistry:
    def forms(rule):
        return {"smoke": {"spec": REG.rule_spec(rule), "design": {}}}

    def entry(rule, role="secondary", amendments=()):
        fp = REG.claim_fingerprint(role, REG._forms("t", forms(rule)))
        return {"role": role, "history": "written after the exploratory smoke data (test)", "forms": forms(rule),
                "fingerprint": fp,
                "amendments": [{"date": "2026-12-06", "what": "partly needs one shared layer", "why": WHY,
                                "seen_before": True, "role": role, "forms": forms(a),
                                "fingerprint": REG.claim_fingerprint(role, REG._forms("t", forms(a)))}
                               for a in amendments]}
    return REG.RuleRegistry.from_docs([{"chapter": "ch01_ablation_map", "claims": {
        "p1.critical_core": entry(REGISTERED, amendments=[AMENDED]),
        "p1.growth_val_losses": entry(DifferenceSign("negative", method="sign-flip"), role="primary"),
        "p1.growth_speedup": entry(Close(rel_tol=0.5), role="primary"),
        "p2.val_loss_440m": entry(NotComparable("we train no 440M model"))}}])


def _claims():
    reg = _registry()
    return [Claim("p1.critical_core", [11, 20, 21, 22], AMENDED, registry=reg),       # registered verdict stands
            Claim("p1.growth_val_losses", [-0.3, -0.1, -0.2, -0.25, -0.15, -0.05],
                  DifferenceSign("negative", method="sign-flip"), registry=reg),     # p = 2/64
            Claim("p1.growth_speedup", 12.0, Close(rel_tol=0.5), registry=reg),      # a band: no test
            Claim("p2.val_loss_440m", None, NotComparable("we train no 440M model"), registry=reg)]


def test_a_chapter_table_shows_both_verdicts_and_the_reason_of_an_amendment():
    html = claims_html(_claims())
    row = html.split('<tbody class="ak-claim">')[1]
    assert 'class="ak-amended"' in row and "not reproduced" in row
    details = re.search(r"<details>.*?</details>", row).group(0)
    assert "under the registered rule</dt><dd>not reproduced" in details
    assert "under the amended rule</dt><dd>partly reproduced" in details
    assert WHY in details and "after confirmatory numbers had been seen" in details
    assert "the registered verdict stands" in details
    assert "rule written</dt><dd>written after the exploratory smoke data" in details
    others = html.split('<tbody class="ak-claim">')[2:]
    assert all('class="ak-amended"' not in r for r in others)
    # primaries are tagged; every row of this unfrozen registry is exploratory
    assert 'class="ak-role"' in others[0] and 'class="ak-role"' not in others[2]
    assert all('class="ak-phase"' in r for r in others)


def test_the_report_counts_primaries_survivors_and_phases(tmp_path):
    run = {"chapter": "ch01_ablation_map", "scale": "smoke", "device": "cpu", "model": "m", "corpus": "c",
           "seed": 0, "sizes": {}}
    write_json(tmp_path / "metrics" / "ch01_ablation_map.json",
               {"chapter": "ch01_ablation_map", "run": run, "claims": [c.to_dict() for c in _claims()]})
    report = build_report(tmp_path)
    claims = {c["id"]: c for c in report["chapters"][0]["claims"]}
    # paper 1's primaries: the sign-flip (p = 2/64) and the band (no p): m = 1 tested part
    assert claims["p1.growth_val_losses"]["holm"]["m"] == 1
    assert claims["p1.growth_val_losses"]["holm"]["survives"] is True
    assert claims["p1.growth_speedup"]["holm"]["adjusted"] is None
    # a reproduced primary without a test cannot survive a correction
    assert claims["p1.growth_speedup"]["holm"]["survives"] is (False if claims["p1.growth_speedup"]["verdict"]
                                                                in ("reproduced", "partly reproduced") else None)
    assert claims["p1.critical_core"]["holm"]["role"] == "secondary"
    summary = (tmp_path / "report.md").read_text().split("\n## ", 1)[0]
    text = re.sub(r"<[^>]+>", "", summary)
    positive = sum(claims[c]["verdict"] in ("reproduced", "partly reproduced")
                   for c in ("p1.growth_val_losses", "p1.growth_speedup"))
    assert f"2 primary claims (at most 3 a family" in text
    assert f"{positive} reproduced or partly, 1 of them surviving the correction" in text
    assert "0 of 4 claims rest on confirmatory data" in text and "1 judged under an amended rule" in text


def test_every_claim_has_a_short_human_title_and_tables_show_it():
    from anatomy_kit.manifest import references

    refs = references()
    long = {k: v.get("title") for k, v in refs.items() if not v.get("title") or len(v["title"]) > 40}
    assert not long, f"titles missing or over 40 characters: {long}"
    html = claims_html(_claims())
    assert refs["p1.critical_core"]["title"].replace("–", "–") in html and ">Critical core<" not in html


def test_the_why_line_reads_as_a_sentence_and_never_nests_intervals():
    from anatomy_kit.verdicts.rules import BeyondNull, IntervalAbove
    from anatomy_kit.verdicts.tables import claim_row

    # chapter 1's importance range: an interval from 35.8 to 2·10⁶ against the rule's 10⁶
    c = Claim("p1.importance_range", (35.8, 2e6), IntervalAbove(1e6))
    assert claim_row(c).summary == ("our interval 35.8 to 2,000,000 reaches both sides of 1,000,000, so it "
                                    "cannot tell")
    osc = Claim("p1.delta_oscillation", (-0.5009, (-0.5012, -0.5004)), BeyondNull("less"))
    row = claim_row(osc)
    assert row.ours == "−0.501 vs null −0.501 to −0.500" and "[" not in row.ours
    assert claim_row(osc.to_dict() | {"paper": {"value": -0.5}}).ours == row.ours      # report.json's lists
