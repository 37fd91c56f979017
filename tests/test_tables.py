"""Compact claims tables (anatomy_kit.verdicts.tables): numbers to three significant digits, every verdict a
badge colour, text escaped, one line of why, details folded; the same rows from a Claim and from report.json."""

from __future__ import annotations

import json
import re

import pytest

from anatomy_kit.verdicts import tables as T
from anatomy_kit.verdicts.claims import Claim, Magnitude, NotComparable, SetOverlap
from anatomy_kit.verdicts.decision import VERDICT_MEANINGS, VERDICTS
from anatomy_kit.jsonio import write_json
from anatomy_kit.stats import paired_difference


@pytest.mark.parametrize("x, shown", [
    (6.626011316046565e-05, "6.63 × 10⁻⁵"),       # tiny: never 0.0000663 or 6.626011316046565e-05
    (-2.5e-7, "−2.50 × 10⁻⁷"),
    (63419.2, "63,400"),                           # large: rounded, with separators
    (1234.5, "1,230"),
    (999.6, "1,000"),                              # rounding carries into the next decade
    (12.345, "12.3"),
    (-0.0123456, "−0.0123"),                       # a true minus
    (0.5, "0.500"),
    (3.2e9, "3.20 × 10⁹"),
    (0.0, "0"),
    (63419, "63,419"),                             # integers stay exact
    (float("inf"), "∞"),
    (float("-inf"), "−∞"),
    (float("nan"), "NaN"),
])
def test_numbers_have_three_significant_digits(x, shown):
    assert T.number(x) == shown


def test_signed_numbers_and_paper_values():
    assert T.number(0.0123, sign=True) == "+0.0123" and T.number(-5, sign=True) == "−5"
    assert T.paper_text(1.0e7) == "10⁷" and T.paper_text(63419) == "63,419" and T.paper_text(3.449) == "3.449"
    assert T.paper_text({14: -0.6, 17: -0.6}) == "14: −0.6, 17: −0.6"
    assert T.paper_text([8, 9, 10, 11]) == "[8, 9, 10, 11]" and T.paper_text("qualitative") == "qualitative"
    five = {k: 3.4 for k in "abcde"}
    assert T.paper_text(five).endswith("… (+1)")


def test_values_of_the_kits_statistics():
    pc = paired_difference([3.41, 3.42, 3.40], [3.45, 3.44, 3.46], unit="nats/token")
    assert T.value_text(pc) == "Δ = −0.0400 nats/token"
    assert T.value_text(json.loads(json.dumps(pc.to_dict()))) == "Δ = −0.0400 nats/token"   # report.json form
    assert T.value_text(pc.t) == "−0.0400" and T.value_text((0.5, 1234.5)) == "[0.500, 1,230]"
    assert T.value_text({"L14": pc.t}) == "L14: −0.0400" and T.value_text(None) == "—"


def test_every_verdict_has_a_badge_colour_and_a_meaning():
    assert set(T.VERDICT_COLOURS) == set(VERDICTS) == set(VERDICT_MEANINGS)
    assert len({bg for bg, _ in T.VERDICT_COLOURS.values()}) == len(VERDICTS), "two verdicts share a colour"
    for verdict in VERDICTS:
        background, colour = T.VERDICT_COLOURS[verdict]
        assert f"background:{background};color:{colour}" in T.badge_html(verdict)
        assert _contrast(background, colour) >= 4.5, f"{verdict}: badge text is hard to read"


def _contrast(a: str, b: str) -> float:
    def lum(hex_colour):
        rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_one_line_of_why():
    long = "word " * 60
    line = T.one_line(long)
    assert len(line) <= T.SUMMARY_CHARS and line.endswith("…") and "\n" not in line
    assert T.one_line("short\n reason") == "short reason"


def _claims():
    return [Claim("p1.critical_core", [8, 9, 10, 12], SetOverlap(full=3, partly=1, n_layers=28),
                  note="a <script>alert(1)</script> & more"),
            Claim("p1.l11_ablation", 6.626011316046565e-05, Magnitude()),
            Claim("p1.baseline_ppl", 17.3, NotComparable("our text <differs> & so does the model"))]


def test_html_escapes_text_and_folds_the_details():
    html = T.claims_html(_claims(), caption="Beside <the> paper")
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp; more" in html
    assert "Beside &lt;the&gt; paper" in html and "&lt;differs&gt;" in html
    assert "\n\n" not in html, "a blank line would end the HTML block in Markdown"
    assert html.count('<tr class="ak-row">') == 3 and html.count("<details>") == 3
    assert "6.63 × 10⁻⁵" in html and "6.626011316046565e-05" not in html
    rows = re.findall(r'<tr class="ak-row">(.*?)</tr>', html)
    assert all("Reproduced if" not in r for r in rows), "the rule's text belongs in the details, not the row"
    details = re.findall(r"<details>(.*?)</details>", html)
    assert all("<dt>rule</dt>" in d for d in details)
    assert "hypergeometric" in details[0] and "p1.critical_core" in details[0]


def test_rows_from_a_claim_and_from_report_json_agree(tmp_path):
    claims = _claims()
    path = write_json(tmp_path / "claims.json", [c.to_dict() for c in claims])
    from anatomy_kit.manifest import references
    dicts = json.loads(path.read_text())
    for d in dicts:                                  # what build_report adds
        d["paper"] = {k: references()[d["id"]].get(k) for k in ("title", "claim", "value", "unit", "source")}
    for c, d in zip(claims, dicts):
        assert T.claim_row(c) == T.claim_row(d)


def test_near_threshold_and_secondary_readings_are_marked():
    row = {"id": "p1.l11_ablation", "ours": 1.0, "verdict": "not established", "reason": "r", "rule": "the rule",
           "near_threshold": True, "secondary": {"skip": "Δ = +3 %"},
           "paper": {"claim": "c", "value": 63419, "unit": "%", "source": "READ"}}
    html = T.claims_html([row])
    assert "near threshold" in html.split("<details>")[0], "the row itself shows the mark"
    assert "<dt>secondary</dt><dd>skip: Δ = +3 %</dd>" in html and "<dt>near threshold</dt>" in html
    assert "near threshold" not in T.claims_html([dict(row, near_threshold=False)])


def test_verdict_list_shows_each_verdict_once():
    html = T.verdicts_html(_claims())
    assert html.count("ak-badge") == len({c.verdict for c in _claims()})


def test_a_long_unit_is_named_in_the_details_only():
    row = {"id": "p1.l11_ablation", "ours": 2.0, "verdict": "not established", "reason": "r", "rule": "the rule",
           "paper": {"claim": "c", "value": 1, "unit": "rank of L11 (1 = the most damaging layer)", "source": "READ"}}
    html = T.claims_html([row])
    row_html, details = html.split("<details>")
    assert "most damaging" not in row_html and "<dt>unit</dt><dd>rank of L11 (1 = the most damaging layer)" in details
    short = T.claims_html([dict(row, paper=dict(row["paper"], unit="% PPL"))])
    assert '<span class="ak-unit">% PPL</span>' in short.split("<details>")[0]


def test_a_structured_input_shows_as_the_rule_reads_it():
    """A set judged with the map it was picked from shows its layers, a rank from intervals its rank."""
    from anatomy_kit.verdicts.claims import Claim
    from anatomy_kit.verdicts.rules import RankAtMost, SetOverlap
    from anatomy_kit.stats import Interval

    profile = {l: float(v) for l, v in enumerate([50, 9, 8, 7, 1, 2, 3, 4, 30, 20, 40, 60])}
    overlap = Claim("p1.critical_core", {"set": [8, 10, 11], "profile": profile}, SetOverlap(null="edge", draws=500))
    assert overlap.shown == "{8, 10, 11}" and T.claim_row(overlap).ours == "{8, 10, 11}"
    ivs = {l: Interval(v, v - 1, v + 1, 5, 1.0, 4, 0.95) for l, v in profile.items()}
    rank = Claim("p1.l11_rank", ivs, RankAtMost(1, item=11))
    assert T.claim_row(rank).ours == rank.shown and rank.shown.startswith("rank ") and rank.shown.endswith("of 12")
    assert T.claim_row(rank.to_dict()).ours == rank.shown          # the report's rows read the same field


def _positive(cid, verdict="reproduced", **extra):
    return {"id": cid, "ours": 0.5, "verdict": verdict, "reason": "r", "rule": "the rule", **extra}


def test_a_primary_that_fails_holm_is_listed_apart_as_not_claimed():
    from anatomy_kit.verdicts.multiplicity import HolmResult

    claims = [_positive("book.cheap_agree_causal"), _positive("book.cheap_beat_chance"),
              _positive("book.edges_everywhere", "not reproduced")]
    holm = {"book.cheap_agree_causal": HolmResult("primary", 1e-4, 8e-4, 8, True),
            "book.cheap_beat_chance": HolmResult("primary", 0.04, 0.199, 8, False),
            "book.edges_everywhere": {"role": "primary", "survives": None}}
    html = T.verdicts_html(claims, holm)
    lines = html.removeprefix('<ul class="ak-verdicts">').removesuffix("</ul>").split("</li>")
    held = [x for x in lines if ">reproduced</span>" in x and "not claimed" not in x]
    apart = [x for x in lines if "not claimed" in x]
    assert len(held) == 1 and "agree" in held[0].lower() and "chance" not in held[0].lower()
    assert len(apart) == 1 and "chance" in apart[0].lower() and "fails Holm" in apart[0]
    assert ">not reproduced</span>" in html
    # without Holm's results (one chapter alone) every positive claim is listed by its verdict
    assert "not claimed" not in T.verdicts_html(claims)
    # a report.json claim carries its own Holm result; the mapping, when given, takes precedence
    from_report = [dict(c, holm={"role": "primary", "adjusted": 0.199, "survives": False, "why": "w"})
                   if c["id"] == "book.cheap_beat_chance" else c for c in claims]
    assert T.verdicts_html(from_report).count("not claimed") == 1
    assert "not claimed" not in T.verdicts_html(from_report, {"book.cheap_beat_chance": {"survives": True}})
    # a partly reproduced primary that fails is listed apart under its own badge
    partly = [_positive("book.cheap_beat_chance", "partly reproduced")]
    assert ">partly reproduced</span>" in T.verdicts_html(partly, {"book.cheap_beat_chance": {"survives": False}})
    assert "not claimed" in T.verdicts_html(partly, {"book.cheap_beat_chance": {"survives": False}})
