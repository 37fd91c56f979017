"""The power table: its numbers come from the stored intervals, its decisions at the boundary, its setting checks."""

from __future__ import annotations

import copy
import json
import math
import re

import pytest
from scipy import stats as sps

from anatomy_kit.book import power as BP
from anatomy_kit.book.card_power import card_power_rows
from anatomy_kit.hour import HOUR_PRESETS
from anatomy_kit.validate import AnatomyKitError
from chapter_defaults import full_defaults
from conftest import ROOT

SMOKE = {"n_eval": 5, "block_size": 128}
SETTING = {"model": "HuggingFaceTB/SmolLM2-135M", "corpus": "fineweb-edu", "block_size": 128}


def _interval(mean, low, high, n=5):
    return {"mean": mean, "low": low, "high": high, "n": n, "sd": None, "df": n - 1, "confidence": 0.95,
            "method": "t"}


def _claim(data, rule="IntervalAbove", verdict="not established", **params):
    params = {"threshold": 0.0, "confidence": 0.95, "method": "t", **params}
    return {"id": "p1.x", "verdict": verdict, "ours_data": data, "paper": None, "reason": "",
            "rule_spec": {"rule": rule, "params": params}}


def _doc(*claims, chapter="ch01_ablation_map", sizes=SMOKE):
    return {"chapter": chapter, "run": {"sizes": dict(sizes)}, "claims": list(claims)}


def _needed_by_hand(distance, sd, confidence=0.95, power=0.8):
    """The first n whose non-central t power reaches 80 %, by a plain loop (independent of the bisection)."""
    for n in range(2, 10_000):
        crit = sps.t.ppf(1 - (1 - confidence) / 2, n - 1)
        if sps.nct.sf(crit, n - 1, distance * math.sqrt(n) / sd) >= power:
            return n
    raise AssertionError("not reached")


def test_the_spread_and_the_units_needed_come_from_the_stored_interval():
    h, n = 0.8, 5                                            # mean 1, threshold 0, half-width 0.8 over 5 blocks
    row = BP.power_rows(_doc(_claim(_interval(1.0, 1.0 - h, 1.0 + h, n))), hour={**SETTING, "n_eval": 64},
                        full={**SETTING, "n_eval": 64})[0]
    sd = h * math.sqrt(n) / sps.t.ppf(0.975, n - 1)
    assert row.needed_n == _needed_by_hand(1.0, sd)
    assert row.needed.startswith(f"{row.needed_n} blocks of 128 tokens (")
    assert f"({_needed_by_hand(1.0, 2 * sd)} blocks" in row.needed      # the alternative: the spread doubles
    # the hour's half-width: t·sd/√64 around the smoke estimate
    hw = sps.t.ppf(0.975, 63) * sd / 8
    assert f"[{1 - hw:,.3g}, {1 + hw:,.3g}]" in row.hour_gives


def test_changing_a_stored_spread_or_n_changes_the_table():
    base = BP.power_rows(_doc(_claim(_interval(1.0, 0.2, 1.8))))[0]
    wider = BP.power_rows(_doc(_claim(_interval(1.0, 0.0, 2.0))))[0]
    more = BP.power_rows(_doc(_claim(_interval(1.0, 0.2, 1.8, n=9)), sizes={"n_eval": 9, "block_size": 128}))[0]
    assert wider.needed_n > base.needed_n                     # a wider interval at the same n: more blocks
    assert more.needed_n > base.needed_n                      # the same width from more blocks: a larger spread
    assert wider.hour_gives != base.hour_gives


def test_the_real_smoke_metrics_drive_the_table(tmp_path):
    doc = json.loads((ROOT / "tests" / "data" / "power_ch03_claims.json").read_text())
    rows = {r.claim: r for r in BP.power_rows(doc)}
    changed = copy.deepcopy(doc)
    iv = next(c for c in changed["claims"] if c["id"] == "p1.growth_speedup")["ours_data"]
    iv["low"], iv["high"] = iv["mean"] - 2 * (iv["mean"] - iv["low"]), iv["mean"] + 2 * (iv["high"] - iv["mean"])
    again = {r.claim: r for r in BP.power_rows(changed)}
    assert again["p1.growth_speedup"].needed_n > rows["p1.growth_speedup"].needed_n
    assert again["p1.growth_val_losses"] == rows["p1.growth_val_losses"]


def test_paired_seeds_respect_the_sign_flip_floor():
    tiny = _interval(-1.0, -1.01, -0.99, n=6)                  # a huge effect: the floor decides, 6 seeds
    row = BP.power_rows(_doc(_claim(tiny, rule="DifferenceSign", expected="negative", method="sign-flip"),
                             chapter="ch03_growth_training", sizes={"n_seeds": 6}),
                        hour={**SETTING, "n_seeds": 6}, full={**SETTING, "n_seeds": 6})[0]
    assert row.needed_n == 6 and row.decidable == "yes" and "seeds" in row.needed
    t_row = BP.power_rows(_doc(_claim(tiny, rule="DifferenceSign", expected="negative", method="t"),
                               chapter="ch03_growth_training", sizes={"n_seeds": 6}))[0]
    assert t_row.needed_n == 2                                  # a t interval has no such floor


@pytest.mark.parametrize("hour_blocks, full_blocks, expected", [
    (0, 0, "yes"),             # the hour gives exactly what is needed
    (-1, 0, "only at full"),   # one block short, full has enough
    (-1, -1, "no"),            # neither has enough
])
def test_decidable_at_hour_on_its_boundary(hour_blocks, full_blocks, expected):
    claim = _claim(_interval(1.0, 0.2, 1.8))
    need = BP.power_rows(_doc(claim))[0].needed_n
    row = BP.power_rows(_doc(claim), hour={**SETTING, "n_eval": need + hour_blocks},
                        full={**SETTING, "n_eval": need + full_blocks})[0]
    assert row.decidable == expected


def test_blocks_count_by_their_tokens():
    claim = _claim(_interval(1.0, 0.2, 1.8))
    need = BP.power_rows(_doc(claim))[0].needed_n
    half = math.ceil(need / 2)                                # blocks twice as long: half as many suffice
    row = BP.power_rows(_doc(claim), hour={**SETTING, "n_eval": half, "block_size": 256},
                        full={**SETTING, "n_eval": 1})[0]
    assert row.decidable == "yes" and row.hour_n == 2 * half          # in blocks of the smoke length
    assert BP.power_rows(_doc(claim), hour={**SETTING, "n_eval": half - 1, "block_size": 256},
                         full={**SETTING, "n_eval": 1})[0].decidable == "no"


def test_a_ratio_interval_is_read_on_its_log_scale():
    # symmetric in log(1 + x/100): [100·(e^(m−h) − 1), 100·(e^(m+h) − 1)]
    m, h = math.log1p(20.0), 1.0
    iv = _interval(100 * math.expm1(m), 100 * math.expm1(m - h), 100 * math.expm1(m + h))
    row = BP.power_rows(_doc(_claim(iv, threshold=0.0)))[0]
    sd = h * math.sqrt(5) / sps.t.ppf(0.975, 4)
    assert row.needed_n == _needed_by_hand(m, sd)


def test_preconditions_are_decidable_where_the_hour_runs_the_full_setting():
    claim = {**_claim(None, rule="NotComparable", verdict="not comparable"), "rule_spec": {
        "rule": "NotComparable", "params": {"why": "our model differs"}}}
    assert BP.power_rows(_doc(claim), hour=dict(SETTING), full=dict(SETTING))[0].decidable == "yes"
    other = {**SETTING, "model": "embedded"}
    assert BP.power_rows(_doc(claim), hour=other, full=dict(SETTING))[0].decidable == "only at full"


def test_a_met_precondition_is_modelled_by_the_rule_inside_it_and_an_unmet_one_by_the_setting():
    tiny = _interval(-1.0, -1.01, -0.99, n=6)
    bare = _claim(tiny, rule="DifferenceSign", expected="negative", method="sign-flip")
    inner = bare["rule_spec"]
    wrapped = {**bare, "ours_data": {"conditions": {"rule trained": True}, "value": tiny},
               "rule_spec": {"rule": "Precondition", "params": {"rule": inner, "conditions": [
                   {"rule": "Condition", "params": {"name": "rule trained", "needs": "it", "minimum": None}}]}}}
    kw = dict(chapter="ch03_growth_training", sizes={"n_seeds": 6})
    sizes = dict(hour={**SETTING, "n_seeds": 6}, full={**SETTING, "n_seeds": 6})
    want = BP.power_rows(_doc(bare, **kw), **sizes)[0]
    got = BP.power_rows(_doc(wrapped, **kw), **sizes)[0]
    assert (got.needed_n, got.decidable, got.decides) == (want.needed_n, "yes", want.decides) and want.needed_n == 6
    unmet = BP.power_rows(_doc({**wrapped, "verdict": "not comparable", "reason": "rule trained: no"}, **kw),
                          **sizes)[0]
    assert unmet.decides.startswith("precondition: rule trained: no") and unmet.needed == "the full scale's setting"


def test_decidable_at_names_the_smallest_scale():
    rows = BP.power_rows(_doc(_claim(_interval(1.0, 0.2, 1.8), verdict="reproduced"),
                              _claim(_interval(1.0, 0.2, 1.8))))
    assert [BP.decidable_at(r) for r in rows] == ["smoke", "hour"]


def test_bad_documents_are_named():
    with pytest.raises(AnatomyKitError, match="metrics"):
        BP.power_rows({"claims": []})
    with pytest.raises(AnatomyKitError, match="chapter"):
        BP.power_rows(_doc(chapter="ch99"))


def test_the_running_page_collects_every_chapter(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "ch01_ablation_map.json").write_text(json.dumps(_doc(_claim(_interval(1.0, 0.2, 1.8)))))
    from anatomy_kit.book.scales import running_power_markdown

    text = running_power_markdown(tmp_path)
    assert "**`ch01_ablation_map`** (smoke run of this build)" in text and "| p1.x |" in text
    assert "**`ch02_anatomy_weights`**: no smoke metrics in this build." in text
    assert "hour: 1" in text


def test_the_full_units_are_the_chapters_full_defaults():
    for chapter, units in BP.FULL_UNITS.items():
        full = full_defaults(chapter)
        assert {k: full[k] for k in units} == units, chapter


def test_every_chapter_has_a_unit_rule_and_the_hour_preset_names_its_sizes():
    for chapter, units in BP.UNITS.items():
        for size, _ in units:
            assert size in HOUR_PRESETS[chapter], (chapter, size)
    assert set(BP.UNITS) == set(HOUR_PRESETS) == set(BP.FULL_UNITS)
    assert all(re.fullmatch(r"[a-z0-9_]+", c) for c in BP.UNITS)


def test_the_report_names_the_scale_that_decides_each_claim(tmp_path):
    from anatomy_kit.book.report import build_report

    doc = json.loads((ROOT / "tests" / "data" / "power_ch03_claims.json").read_text())
    doc["run"].update(scale="smoke", model="embedded", corpus="python-docs", seed=0, device="cpu")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "ch03_growth_training.json").write_text(json.dumps(doc))
    report = build_report(tmp_path)
    got = {c["id"]: c["decidable_at"] for c in report["chapters"][0]["claims"]}
    expected = {r.claim: BP.decidable_at(r) for r in BP.power_rows(doc)}
    assert got == expected and got["p1.growth_val_loss_ratio"] == "hour"     # not comparable at smoke
    assert got["p1.growth_speedup"] == "smoke"                                # reproduced at smoke
    line = next(l for l in (tmp_path / "report.md").read_text().splitlines() if l.startswith("Decidable at"))
    assert "**hour**: `p1.growth_val_loss_ratio`" in line


def test_a_chapter_shows_the_table_of_its_own_claims(tmp_path):
    """The chapter cell: a Run and real Claims (rule-decided) give the same rows as their saved metrics."""
    import numpy as np

    from anatomy_kit.book.run import Run
    from anatomy_kit.stats import paired_t_interval
    from anatomy_kit.verdicts.claims import Claim
    from anatomy_kit.verdicts.rules import IntervalBelow

    x = np.array([5.0, 3.0, 4.0, 6.0, 2.0])                           # 5 blocks, all above 0
    ci = paired_t_interval(x)
    claim = Claim("p1.anti_layers", {"L14": ci}, IntervalBelow(0.0, method="t"))
    run = Run("ch01_ablation_map", "smoke", "cpu", "embedded", "python-docs", 0, dict(SMOKE), tmp_path)
    html = BP.power_view(run, [claim]).to_html()
    row = BP.power_rows(_doc(claim.to_dict()))[0]
    # the spread recovered from the interval is the blocks' own standard deviation
    assert row.claim == "p1.anti_layers" and row.needed_n == _needed_by_hand(x.mean(), x.std(ddof=1))
    assert row.decidable == "yes"
    assert "p1.anti_layers" in html and "decidable at hour" in html and BP.ASSUMPTIONS in html


def _card(greedy, last, n_random=4, n=4):
    sets = [{"method": "greedy", "k": 2, "delta_pct": greedy[0], "low": greedy[1], "high": greedy[2]},
            {"method": "last_k", "k": 2, "delta_pct": last[0], "low": last[1], "high": last[2]}]
    return {"text": {"n_eval_blocks": n, "block_size": 64}, "settings": {"confidence": 0.95},
            "pruning": {"max_k": 2, "sets": sets, "random": {"2": [{}] * n_random}}}


def test_the_card_rows_separate_greedy_from_last_k_and_from_random_sets():
    hour = {"tokens": 64 * 100, "block_size": 64, "n_random": 19}
    full = {"tokens": 64 * 1000, "block_size": 64, "n_random": 19}
    card = _card((1.0, 0.5, 1.5), (3.0, 2.0, 4.0))             # linear, symmetric; half-widths 0.5 and 1.0
    vs_last, vs_random = card_power_rows(card, hour, full)
    t = sps.t.ppf(0.975, 3)
    sd = math.hypot(0.5 * 2 / t, 1.0 * 2 / t)                  # h·√n/t of each, added as if unpaired
    assert vs_last.needed_n == _needed_by_hand(2.0, sd) and vs_last.decidable == "yes"
    assert "p ≥ 0.2" in vs_random.decides                        # four random sets: 1/5
    assert vs_random.needed_n == 19 and vs_random.decidable == "yes"
    assert card_power_rows(card, {**hour, "n_random": 18}, full)[1].decidable == "only at full"
    assert card_power_rows(card, {**hour, "n_random": 18}, {**full, "n_random": 4})[1].decidable == "no"
    short = {**hour, "tokens": 64 * (vs_last.needed_n - 1)}
    assert card_power_rows(card, short, full)[0].decidable == "only at full"
    assert card_power_rows({**card, "pruning": None}, hour, full) == []


def test_a_magnitude_estimate_on_a_band_edge_is_never_decidable():
    # paper 63,419; bands ×10 (6,342 … 634,190) and ×100 (634.19 … 6,341,900). An estimate exactly on the ×100 edge
    # gives "not established" to any interval around it, however narrow: no n decides it
    spec = {"rule": "Magnitude", "params": {"within_factor": 10.0, "partly_factor": 100.0, "key": None,
                                            "confidence": 0.95}}
    edge = _claim(_interval(634.19, 300.0, 968.38)) | {"paper": 63419.0, "rule_spec": spec}
    row = BP.power_rows(_doc(edge))[0]
    assert (row.decidable, row.needed, BP.decidable_at(row)) == ("never", "—", "never")
    assert BP.NEVER in row.decides
    # an estimate between the ×100 and ×10 bands is decidable since the rule has its partly band (an interval
    # shrunk inside the ×100 band is partly reproduced), and so is one inside the ×10 band
    between = _claim(_interval(2381.0, 743.0, 7201.0)) | {"paper": 63419.0, "rule_spec": spec}
    assert BP.power_rows(_doc(between))[0].decidable != "never"
    inside = _claim(_interval(30000.0, 9000.0, 51000.0)) | {"paper": 63419.0, "rule_spec": spec}
    assert BP.power_rows(_doc(inside))[0].decidable != "never"


def test_an_interval_with_an_infinite_end_is_not_modelled_and_says_why():
    infinite = _claim({"mean": 470.4, "low": 35.8, "high": None, "n": 5, "method": "t", "confidence": 0.95},
                      threshold=1e6)
    row = BP.power_rows(_doc(infinite))[0]
    assert row.decidable == "not modelled" and "infinite end" in row.decides and row.needed == "—"
    # the same interval with a finite end is counted as before
    finite = _claim(_interval(470.4, 35.8, 905.0), threshold=1e6)
    assert BP.power_rows(_doc(finite))[0].needed != "—"


def test_a_primary_claims_units_are_counted_at_alpha_over_its_family(monkeypatch):
    h, n = 0.8, 5
    sd = h * math.sqrt(n) / sps.t.ppf(0.975, n - 1)
    monkeypatch.setattr(BP, "_family_size", lambda cid: 4)
    primary = _claim(_interval(1.0, 1.0 - h, 1.0 + h, n)) | {"role": "primary"}
    secondary = _claim(_interval(1.0, 1.0 - h, 1.0 + h, n)) | {"role": "secondary"}
    rows = BP.power_rows(_doc(primary, secondary), hour={**SETTING, "n_eval": 64}, full={**SETTING, "n_eval": 64})
    assert rows[1].needed_n == _needed_by_hand(1.0, sd)
    assert rows[0].needed_n == _needed_by_hand(1.0, sd, confidence=1 - 0.05 / 4) > rows[1].needed_n
    assert "α / 4" in rows[0].decides


def test_only_a_boundary_whose_crossing_changes_the_verdict_counts():
    # Close around the paper's 10: reproduced within ±1, partly within ±3. Our 11.4 is partly; the nearest listed
    # boundary, 11, only separates reproduced from partly, which an interval around 11.4 never needs to cross:
    # the verdict changes where the interval reaches 13, 1.6 away (by hand), so the units are those for 1.6
    spec = {"rule": "Close", "params": {"abs_tol": 1.0, "rel_tol": None, "partly_factor": 3.0, "key": None,
                                        "confidence": 0.95}}
    h, n = 1.0, 5
    claim = _claim(_interval(11.4, 11.4 - h, 11.4 + h, n)) | {"paper": 10.0, "rule_spec": spec}
    row = BP.power_rows(_doc(claim), hour={**SETTING, "n_eval": 64}, full={**SETTING, "n_eval": 64})[0]
    sd = h * math.sqrt(n) / sps.t.ppf(0.975, n - 1)
    assert row.needed_n == _needed_by_hand(1.6, sd)
    assert row.needed_n < _needed_by_hand(0.4, sd)             # not the 0.4 to the nearest listed boundary


def test_a_claim_about_every_member_is_read_as_its_hardest_part():
    """EveryOf needs every part, as AllOf does: the row is its hardest modelled part's (the same numbers as
    that part alone would give), never the 'sets, ranks or a null model' row of a rule it cannot read."""
    easy, hard = _interval(1.0, 0.5, 1.5), _interval(1.0, 0.1, 1.9)
    part = {"rule": "IntervalAbove", "params": {"threshold": 0.0, "confidence": 0.95, "method": "t"}}
    sizes = dict(hour={**SETTING, "n_eval": 64}, full={**SETTING, "n_eval": 64})
    every = _claim({"a": easy, "b": hard}, rule="EveryOf")
    every["rule_spec"] = {"rule": "EveryOf", "params": {"parts": [["a", part], ["b", part]]}}
    row = BP.power_rows(_doc(every), **sizes)[0]
    alone = BP.power_rows(_doc(_claim(hard)), **sizes)[0]
    assert row.needed_n == alone.needed_n and row.decides.startswith("all of its parts; hardest: b")
