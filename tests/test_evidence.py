"""A chapter's folded Evidence section holds its claims table, the one statistics rule, the multiplicity note
and the power table, inside one <details> block (closed by default)."""

from __future__ import annotations

import re

from anatomy_kit.book.evidence import EVIDENCE_SUMMARY, evidence_html
from anatomy_kit.book.run import Run
from anatomy_kit.verdicts.claims import Claim
from anatomy_kit.verdicts.rules import DifferenceSign, IntervalBelow
from anatomy_kit.verdicts.statistics_rule import STATISTICS_RULE_TITLE, statistics_rule_items
from anatomy_kit.verdicts.tables import escape
from conftest import registry_of


def test_the_evidence_block_holds_every_part_closed():
    reg = registry_of({"p1.anti_layers": IntervalBelow(0.0, method="t"),
                       "p1.growth_val_losses": DifferenceSign("negative", method="sign-flip")},
                      {"p1.anti_layers": "primary"})
    claims = [Claim("p1.anti_layers", {"L14": [0.1, 0.2, 0.15], "L17": [-0.1, -0.2, -0.3]},
                    IntervalBelow(0.0, method="t"), registry=reg),
              Claim("p1.growth_val_losses", [-0.1, -0.2, -0.1, -0.3, -0.2, -0.1],
                    DifferenceSign("negative", method="sign-flip"), registry=reg)]
    run = Run("ch01_ablation_map", "smoke", "cpu", "embedded", "python-docs", 0, {"n_eval": 3, "block_size": 128}, ".")
    html = evidence_html(run, claims, extra_html="<p>per-layer</p>")
    assert html.startswith('<details class="ak-evidence">') and html.endswith("</details>")
    assert "<details open" not in html and f"<summary>{escape(EVIDENCE_SUMMARY)}</summary>" in html
    assert STATISTICS_RULE_TITLE in html and all(escape(kind) in html for kind, _ in statistics_rule_items())
    assert html.count('<tbody class="ak-claim">') == 2
    assert "Primary claims of this chapter: <code>p1.anti_layers</code>" in html
    # the two marks of the report's Holm column are explained beside the note on multiplicity
    assert "marked <em>(fails Holm)</em> and is not claimed" in html and "marked <em>(—)</em>" in html
    assert 'class="dataframe ak-power"' in html and "<p>per-layer</p>" in html
    table = html.split('class="dataframe ak-power"')[1]
    assert len(re.findall(r"<tr[ >]", table)) == 3                            # the header and one row per claim
