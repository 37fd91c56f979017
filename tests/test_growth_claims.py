"""Chapter 3's registered claims: the primary loss claim is one tested part whose design survives Holm over the
paper's four tested primary parts, every sign-flip design counts the seeds its arms run, and the loss ratio,
not comparable on our data, still shows what the run saw against the paper's 4.7."""

from __future__ import annotations

import pytest

from anatomy_kit.manifest import reference
from anatomy_kit.verdicts import registry as REG
from anatomy_kit.verdicts.designs import part_count, smallest_attainable_p
from anatomy_kit.verdicts.multiplicity import design_can_survive

CHAPTER = "ch03_growth_training"
#: the tested parts of paper 1's primaries: p1.l11_rank (1), p1.anti_layers (2: L14, L17), p1.growth_val_losses (1)
P1_TESTED_PARTS = 4


def _form(claim: str, scale: str = "smoke") -> REG.Form:
    entry = REG.rule_registry().entries[claim]
    assert entry.chapter == CHAPTER
    return entry.current[1][scale]


@pytest.mark.parametrize("scale, seeds", [("smoke", 8), ("hour", 16), ("full", 8)])
def test_the_primary_loss_claim_is_one_sign_test_that_survives_holm_over_four_parts(scale, seeds):
    entry = REG.rule_registry().entries["p1.growth_val_losses"]
    form = _form("p1.growth_val_losses", scale)
    assert entry.current[0] == "primary"
    # one part: the sign of growth − uniform at equal steps (the 4.7× is a claim of its own)
    assert form.spec["rule"] == "DifferenceSign" and form.spec["params"]["method"] == "sign-flip"
    assert form.spec["params"]["paper_keys"] == ["growth", "uniform"] and part_count(form.design) == 1
    assert form.design["arms"] == ["growth (a)", "uniform"]
    assert form.design["n_seeds"] == form.design["units"] == seeds
    # by hand: every seed of one sign is 2 of 2ⁿ sign patterns, two-sided
    assert smallest_attainable_p(form.design) == 2 / 2 ** seeds
    assert 2 / 2 ** seeds * P1_TESTED_PARTS <= 0.05
    assert design_can_survive(smallest_attainable_p(form.design), P1_TESTED_PARTS)


def test_seven_seeds_would_not_survive_four_tested_parts():
    # the boundary the primary's eight seeds clear: 4 · 2/128 = 0.0625 > 0.05, 4 · 2/256 = 0.031
    assert not design_can_survive(smallest_attainable_p({"test": "sign-flip", "units": 7}), P1_TESTED_PARTS)
    assert design_can_survive(smallest_attainable_p({"test": "sign-flip", "units": 8}), P1_TESTED_PARTS)


CLAIMS = ["p1.growth_val_losses", "p1.growth_val_loss_ratio", "p1.growth_half_budget_steps", "p1.growth_speedup",
          "p1.growth_cost_reduction", "p1.growth_importance_order"]


@pytest.mark.parametrize("claim", CLAIMS)
@pytest.mark.parametrize("scale", ["smoke", "hour", "full"])
def test_every_claim_has_a_design_at_every_scale_whose_units_are_its_arms_seeds(claim, scale):
    design = _form(claim, scale).design
    assert len(design["arms"]) == 2 and design["test"] in ("sign-flip", "none")
    if design["test"] == "sign-flip":
        # a paired sign-flip test has as many units as the seeds both arms run, and can decide at α alone
        assert design["units"] == design["n_seeds"] >= 6
        assert smallest_attainable_p(design) <= 0.05


def test_the_importance_order_is_decided_against_the_edge_inward_control():
    assert _form("p1.growth_importance_order").design["arms"] == ["growth (a)", "edge-inward (a)"]
    assert _form("p1.growth_half_budget_steps").design["arms"] == ["growth (a), half budget", "uniform"]


def _ratio(value, met=False):
    rule = REG.build_rule(_form("p1.growth_val_loss_ratio").spec)
    name = rule.conditions[0].name
    return rule.decide({"conditions": {name: (met, "held-out text")}, "value": value},
                       reference("p1.growth_val_loss_ratio"))


def test_the_loss_ratio_is_not_comparable_on_our_data_and_shows_what_the_run_saw():
    assert reference("p1.growth_val_loss_ratio")["value"] == 4.7
    got = _ratio((1.03, 1.06))
    # the bands by hand: 4.7 ± 0.25 · 4.7 = [3.525, 5.875]; partly ± 2 · 1.175 = [2.35, 7.05]; 1.06 < 2.35
    assert got.verdict == "not comparable"
    assert got.saw.startswith("not reproduced") and "2.35" in got.saw
    assert _ratio(None).saw is None


TOL = 0.25 * 4.7                                  # the inner band's half-width; the partly band's is 2 · TOL


@pytest.mark.parametrize("value, verdict", [
    ((4.7 - TOL, 4.7 + TOL), "reproduced"),       # at the inner band's ends, 3.525 and 5.875
    ((3.52, 5.0), "partly reproduced"),           # just below its lower end: within the partly band
    ((4.0, 5.88), "partly reproduced"),           # just above its upper end
    ((4.7 - 2 * TOL, 4.7 + 2 * TOL), "partly reproduced"),   # at the partly band's ends, 2.35 and 7.05
    ((2.34, 3.0), "not established"),             # just across its lower end
    ((2.0, 2.349), "not reproduced"),             # wholly below it
    ((7.06, 9.0), "not reproduced"),              # wholly above it
])
def test_the_loss_ratio_bands_where_the_precondition_is_met(value, verdict):
    assert _ratio(value, met=True).verdict == verdict
    assert _ratio(value, met=False).verdict == "not comparable"


@pytest.mark.parametrize("deltas, verdict, p", [
    ([-0.2, -0.1, -0.3, -0.15, -0.25, -0.05, -0.2, -0.1], "reproduced", 2 / 256),
    ([0.2, 0.1, 0.3, 0.15, 0.25, 0.05, 0.2, 0.1], "not reproduced", 2 / 256),
    # one seed against, small: 4 of the 256 sign patterns have a mean at least as far from 0 → p = 4/256
    ([-0.2, -0.1, -0.3, -0.15, -0.25, 0.01, -0.2, -0.1], "reproduced", 4 / 256),
    ([-0.2, 0.2, -0.3, 0.3, -0.1, 0.1, -0.05, 0.05], "not established", 1.0),
])
def test_the_primary_decides_by_the_sign_of_its_eight_paired_seeds(deltas, verdict, p):
    rule = REG.build_rule(_form("p1.growth_val_losses").spec)
    got = rule.decide(deltas, reference("p1.growth_val_losses"))
    assert got.verdict == verdict and got.p == pytest.approx(p, rel=1e-12)


def test_the_cost_estimate_counts_every_arm_at_the_seeds_it_runs():
    import re

    from anatomy_kit.book import chapter_costs as C
    from chapter_defaults import full_defaults

    base = dict(C.FULL_SIZES[CHAPTER])
    full = full_defaults(CHAPTER)
    assert (base["n_seeds"], base["n_secondary_seeds"]) == (full["n_seeds"], full["n_secondary_seeds"])

    def runs(**kw):
        return int(re.search(r"≤ (\d+) runs", C._ch03({**base, **kw}).work).group(1))

    # four deciding arms × 8 seeds, five secondary arms × 6 seeds, one reference model
    assert runs() == 4 * 8 + 5 * 6 + 1 == 63
    assert runs(n_seeds=9) == 67 and runs(n_secondary_seeds=7) == 68
    assert C._ch03({**base, "n_seeds": 9}).flops == pytest.approx(C._ch03(base).flops * 67 / 63, rel=1e-12)
