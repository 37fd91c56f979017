"""The report page (anatomy_kit.book.report): a summary first (run, environment, claims by verdict per
paper, what is established), then one compact table per chapter with the rules folded; report.json
keeps every detail."""

from __future__ import annotations

import json
import re

from anatomy_kit.verdicts.claims import Claim, Magnitude, NotComparable, SetOverlap
from anatomy_kit.book.report import PAPERS, build_report, environment_line, report_markdown, verdict_matrix
from anatomy_kit.jsonio import write_json

ENV = {"python": "3.11.2", "torch": "2.13.0", "transformers": "4.57.1", "cpu_capability": "AVX2", "threads": 2,
       "cuda": False}


def _metrics(tmp_path, chapter, claims, env=ENV, seconds=12.0):
    run = {"chapter": chapter, "scale": "smoke", "device": "cpu", "model": "embedded", "corpus": "python-docs",
           "seed": 0, "sizes": {}}
    write_json(tmp_path / "metrics" / f"{chapter}.json",
               {"chapter": chapter, "run": run, "seconds": seconds, "environment": env, "metrics": {},
                "claims": [c.to_dict() for c in claims]})


def _two_chapters(tmp_path):
    _metrics(tmp_path, "ch01_ablation_map", [
        Claim("p1.critical_core", [8, 9, 10, 12], SetOverlap(full=3, partly=1, n_layers=28),
              note="our four <b>most</b> important"),
        Claim("p1.l11_ablation", 6.626011316046565e-05, Magnitude()),
        Claim("p1.baseline_ppl", 17.3, NotComparable("our text differs"))])
    _metrics(tmp_path, "ch05_width_solver", [
        Claim("tlm.cosine_taper", 1.0, NotComparable("smoke-scale widths"))],
        env=dict(ENV, threads=4))
    return build_report(tmp_path, {"ch01_ablation_map": 100.0})


def test_the_report_starts_with_a_summary(tmp_path):
    report = _two_chapters(tmp_path)
    md = (tmp_path / "report.md").read_text()
    summary = md.split("\n## ", 1)[0]
    assert summary.lstrip().startswith("(report-page)=\n# Reproduction report")
    assert 'class="ak-summary"' in summary and 'class="ak-matrix"' in summary
    assert "CPU kernels AVX2" in summary and "threads 2 / 4" in summary and "transformers 4.57.1" in summary
    assert PAPERS["p1"] in summary and PAPERS["tlm"] in summary and PAPERS["p2"] not in summary
    assert ("<em>holds, secondary</em>: Layers 8–11 are the critical core" in summary   # a secondary claim
            and "<em>does not hold</em>: Averaging away L11 costs +63,419 % PPL" in summary)
    assert report["verdicts_by_paper"] == {"p1": {"reproduced": 1, "not reproduced": 1, "not comparable": 1},
                                           "tlm": {"not comparable": 1}}
    assert report["environment"]["threads"] == [2, 4]


def test_rules_are_folded_and_details_are_kept(tmp_path):
    report = _two_chapters(tmp_path)
    md = (tmp_path / "report.md").read_text()
    rule = report["chapters"][0]["claims"][0]["rule"]
    assert rule.startswith("Reproduced if") and md.count("Reproduced if") == 2      # two claims' rules, once each
    outside = re.sub(r"<details>.*?</details>", "", md, flags=re.S)
    assert "Reproduced if" not in outside, "the rule text belongs in the folded details"
    assert "| claim |" not in md and "6.626011316046565e-05" not in md and "6.63 × 10⁻⁵" in md
    assert "&lt;b&gt;most&lt;/b&gt;" in md and "<b>most</b>" not in md
    assert md.count('<tr class="ak-row">') == 4 and "## The ablation map" in md
    ch05 = next(line for line in md.splitlines() if line.startswith('<p class="ak-run">ch05_width_solver'))
    assert ch05.endswith("; threads 4</p>") and "transformers" not in ch05, "only what differs from the header"
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved == report
    claim = saved["chapters"][0]["claims"][0]
    assert {"rule", "reason", "ours_data", "note", "paper", "summary", "near_threshold"} <= set(claim)


def test_every_html_block_survives_markdown(tmp_path):
    _two_chapters(tmp_path)
    md = (tmp_path / "report.md").read_text()
    for block in re.findall(r"^<(?:div|table).*$", md, flags=re.M):
        assert block.endswith(("</div>", "</table>")), "an HTML block must be one line (a blank line ends it)"


def test_a_new_prefix_and_near_threshold_claims_are_shown():
    claim = {"id": "syn.wider_is_better", "ours": 0.4, "verdict": "not established", "reason": "straddles 0",
             "rule": "Reproduced if …", "near_threshold": True,
             "paper": {"claim": "c", "value": 0.5, "unit": "nats", "source": "ours"}}
    old = dict(claim, id="p1.l11_ablation", near_threshold=False, verdict="reproduced")
    doc = {"chapter": "ch07_synthesis", "run": {"scale": "smoke", "model": "m", "corpus": "c", "seed": 0},
           "claims": [claim, old]}
    matrix = verdict_matrix([doc])
    assert list(matrix) == ["p1", "syn"] and matrix["syn"] == {"not established": 1}
    md = report_markdown({"chapters": [doc]})
    summary = md.split("\n## ", 1)[0]
    assert "syn" in summary and "≈ 1 near threshold" in summary and "nothing established at this scale" in summary
    assert "≈ near threshold" in md.split("\n## ", 1)[1]


def test_environment_line_names_known_fields_first():
    line = environment_line({"python": ["3.11"], "cpu_capability": ["AVX512"], "threads": [2], "extra": ["x"]})
    assert line == "CPU kernels AVX512 · threads 2 · Python 3.11 · extra x"


def test_a_primary_that_fails_holm_is_never_listed_as_holding(tmp_path):
    from anatomy_kit.book.report import _established_html

    report = _two_chapters(tmp_path)
    claims = [dict(c) for ch in report["chapters"] for c in ch["claims"]]
    core = next(c for c in claims if c["id"] == "p1.critical_core")
    assert core["verdict"] == "reproduced"
    core.update(role="primary", holm={"survives": False, "adjusted": 0.2})
    html = _established_html(claims)
    assert "<em>holds</em>: Layers 8–11" not in html
    assert "<em>holds here but fails Holm, not claimed</em>: Layers 8–11 are the critical core" in html
    core.update(holm={"survives": True, "adjusted": 0.01})
    assert "<em>holds</em>: Layers 8–11 are the critical core" in _established_html(claims)


def test_the_summary_separates_primaries_secondaries_and_claims_held_in_part(tmp_path):
    from anatomy_kit.book.report import _established_html

    report = _two_chapters(tmp_path)
    claims = [dict(c) for ch in report["chapters"] for c in ch["claims"]]
    core = next(c for c in claims if c["id"] == "p1.critical_core")
    l11 = next(c for c in claims if c["id"] == "p1.l11_ablation")

    def line(html):
        return html.removeprefix('<ul class="ak-established"><li>').split("</li>")[0]

    # a reproduced secondary (its own role, from the registry) is listed as secondary, never as holding
    assert core["role"] == "secondary"
    html = line(_established_html(claims))
    assert "<em>holds, secondary</em>: Layers 8–11 are the critical core" in html and "<em>holds</em>:" not in html
    # a claim without a role is secondary, as Holm's correction treats it
    html = line(_established_html([{k: v for k, v in c.items() if k != "role"} for c in claims]))
    assert "<em>holds, secondary</em>: Layers 8–11" in html
    # partly reproduced: held in part, a secondary one marked so, a primary not
    l11.update(verdict="partly reproduced")
    html = line(_established_html(claims))
    assert "<em>holds in part</em>: Averaging away L11 costs +63,419 % PPL (secondary)" in html
    l11.update(role="primary", holm={"survives": True, "adjusted": 0.01})
    html = line(_established_html(claims))
    assert "<em>holds in part</em>: Averaging away L11 costs +63,419 % PPL;" in html and "(secondary)" not in html
    # a partly reproduced primary failing Holm is not claimed, and not held in part
    l11.update(holm={"survives": False, "adjusted": 0.2})
    html = line(_established_html(claims))
    assert "holds in part" not in html
    assert "<em>holds here but fails Holm, not claimed</em>: Averaging away L11 costs +63,419 % PPL" in html
    # a reproduced primary that survives holds, listed before the secondaries
    core.update(role="primary", holm={"survives": True, "adjusted": 0.01})
    html = line(_established_html(claims))
    assert html.index("<em>holds</em>: Layers 8–11") < html.index("<em>holds here but fails Holm")
