"""Designs that can decide: the smallest attainable p of every declared test, the design check over a
registry (primaries per family, Holm's first step, Monte Carlo draws that could land on α), the chapters'
defaults against the registered designs, and a run's design and phase."""

from __future__ import annotations

import math

import pytest

from anatomy_kit.book import run as RUN
from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts import registry as REG
from anatomy_kit.verdicts.designs import design_problems, smallest_attainable_p, part_count
from anatomy_kit.verdicts.rules import DifferenceSign, IntervalBelow


@pytest.mark.parametrize("design, floor", [
    ({"test": "sign-flip", "units": 8}, 2 / 256), ({"test": "sign-flip", "units": 6}, 1 / 32),
    ({"test": "t", "units": 3}, 0.0), ({"test": "permutation-exact", "units": 2024}, 1 / 2024),
    ({"test": "monte-carlo", "units": 10000}, 1 / 10001), ({"test": "spearman-exact", "units": 6}, 2 / 720),
    ({"test": "floor", "floor": 0.0123}, 0.0123), ({"test": "none"}, None)])
def test_smallest_attainable_p_by_hand(design, floor):
    got = smallest_attainable_p(design)
    assert got == (None if floor is None else pytest.approx(floor, rel=1e-15))


@pytest.mark.parametrize("design, match", [({"test": "bootstrap", "units": 8}, "test='bootstrap'"),
                                           ({"test": "sign-flip", "units": 0}, "units=0"),
                                           ({"test": "sign-flip"}, "units=None"),
                                           ({"test": "floor", "floor": 1.5}, "floor=1.5"),
                                           ({"test": "sign-flip", "units": True}, "units=True")])
def test_a_bad_design_is_named(design, match):
    with pytest.raises(AnatomyKitError, match=match):
        smallest_attainable_p(design, "p1.x")


def test_tested_parts_default_and_errors():
    assert part_count({"test": "t"}) == 1 and part_count({"parts": 3}) == 3
    with pytest.raises(AnatomyKitError, match="parts=0"):
        part_count({"parts": 0})


def _registry(designs: dict, roles: dict):
    claims = {}
    for cid, design in designs.items():
        forms = {"smoke": {"spec": REG.rule_spec(IntervalBelow(0.0, method="t")), "design": design}}
        role = roles.get(cid, "secondary")
        claims[cid] = {"role": role, "history": "h", "forms": forms, "amendments": [],
                       "fingerprint": REG.claim_fingerprint(role, REG._forms(cid, forms))}
    return REG.RuleRegistry.from_docs([{"chapter": "test", "claims": claims}])


def test_eight_seeds_survive_a_family_of_three_and_six_seeds_do_not():
    eight = {"test": "sign-flip", "units": 8}
    reg = _registry({f"p1.{k}": eight for k in "abc"}, {f"p1.{k}": "primary" for k in "abc"})
    assert design_problems(reg) == []
    six = {"test": "sign-flip", "units": 6}
    reg = _registry({"p1.a": six, "p1.b": six}, {"p1.a": "primary", "p1.b": "primary"})
    problems = design_problems(reg)
    # 2/64 · 2 = 0.0625 > 0.05, for each of the two
    assert len(problems) == 2 and all("0.0312 × 2 tested parts" in p for p in problems)
    # one part more counts: 7 seeds (2/128) with two parts and one single claim: m = 3, 0.0469 ≤ 0.05
    seven2 = {"test": "sign-flip", "units": 7, "parts": 2}
    reg = _registry({"p1.a": seven2, "p1.b": {"test": "t", "units": 3}}, {"p1.a": "primary", "p1.b": "primary"})
    assert design_problems(reg) == []
    # and with a fourth tested part, 4 · 2/128 = 0.0625 > 0.05
    reg = _registry({"p1.a": seven2, "p1.b": {"test": "t", "units": 3, "parts": 2}},
                    {"p1.a": "primary", "p1.b": "primary"})
    assert any("× 4 tested parts" in p for p in design_problems(reg))


def test_families_are_counted_apart_and_secondaries_need_only_alpha():
    six = {"test": "sign-flip", "units": 6}
    reg = _registry({"p1.a": six, "p2.a": six, "p3.s": {"test": "sign-flip", "units": 5}},
                    {"p1.a": "primary", "p2.a": "primary"})
    problems = design_problems(reg)
    # each family alone: 1/32 · 1 ≤ 0.05; the secondary with 5 seeds: 1/16 > 0.05
    assert problems == ["p3.s: its smallest attainable p 0.0625 > α = 0.05: the design cannot decide"]


def test_more_than_three_primaries_and_a_primary_without_a_test_are_problems():
    t = {"test": "t", "units": 5}
    reg = _registry({f"p2.{k}": t for k in "abcd"} | {"p3.band": {"test": "none"}},
                    {**{f"p2.{k}": "primary" for k in "abcd"}, "p3.band": "primary"})
    problems = design_problems(reg)
    assert any("family p2 names 4 primary claims" in p for p in problems)
    assert any(p.startswith("p3.band: a primary claim needs a test") for p in problems)


@pytest.mark.parametrize("draws, flagged", [(19, True), (99, True), (9999, True), (10000, False), (100, False)])
def test_monte_carlo_draws_that_could_give_p_equal_to_alpha_are_flagged(draws, flagged):
    reg = _registry({"book.x": {"test": "monte-carlo", "units": draws}}, {})
    # (1 + k)/(1 + draws) = 0.05 has a whole k exactly when 0.05·(1 + draws) is whole
    assert float(0.05 * (1 + draws)).is_integer() is flagged
    assert any("exactly" in p for p in design_problems(reg)) is flagged


def test_the_frozen_registry_has_no_design_that_cannot_decide():
    reg = REG.rule_registry()
    assert design_problems(reg) == [] or reg.freeze is None, design_problems(reg)
    if reg.freeze is not None:
        for scale in ("hour", "full"):
            # larger scales are registered too; they can only add units
            assert design_problems(reg, scale) == [], scale


def test_every_registered_design_names_the_chapter_defaults_it_depends_on():
    """A seed, block or draw count changed in a chapter's defaults without an amendment fails here."""
    from chapter_defaults import scale_defaults

    reg = REG.rule_registry()
    checked = 0
    for cid, entry in sorted(reg.entries.items()):
        _, forms = entry.current
        for scale, form in forms.items():
            defaults = scale_defaults(entry.chapter, scale)
            for key, value in form.design.items():
                if key in defaults:
                    got = REG._design_value(defaults[key])
                    assert got == value, (f"{cid} at {scale}: the chapter's default {key}={got!r}, the registered "
                                          f"design {value!r}: a changed design is an amendment")
                    checked += 1
    assert checked > 0 or reg.freeze is None


def _defaults():
    return {"smoke": dict(model="embedded", corpus="python-docs", n_seeds=8, steps=100, processes=2),
            "hour": dict(model="embedded", corpus="python-docs", n_seeds=8, steps=400, processes=1),
            "full": dict(model="embedded", corpus="python-docs", n_seeds=6, steps=900, processes=1)}


@pytest.fixture
def one_claim(monkeypatch):
    forms = {"smoke": {"spec": REG.rule_spec(DifferenceSign("negative", method="sign-flip")),
                       "design": {"n_seeds": 8, "steps": 100, "arms": ["a", "b"], "test": "sign-flip", "units": 8}},
             "hour": {"design": {"n_seeds": 8, "steps": 400, "arms": ["a", "b"], "test": "sign-flip", "units": 8}}}
    entry = {"role": "primary", "history": "h", "forms": forms, "amendments": [],
             "fingerprint": REG.claim_fingerprint("primary", REG._forms("x", forms))}
    doc = {"chapter": "ch03_growth_training", "claims": {"p1.growth_val_losses": entry}}
    frozen = {"frozen": {"date": "2026-12-05", "fingerprints": {"p1.growth_val_losses": entry["fingerprint"]}},
              "plan": {"seed_offset": 1000, "text": "held out"}}
    state = {"frozen": True}

    def registry():
        return REG.RuleRegistry.from_docs([doc], frozen if state["frozen"] else None)

    monkeypatch.setattr(REG, "rule_registry", registry)
    return state


def test_a_run_at_its_defaults_gets_the_registered_design_on_plan(one_claim, tmp_path):
    run = RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=_defaults(),
                          build_dir=tmp_path)
    d = run.design("p1.growth_val_losses")
    assert (d.scale, d.on_plan, d["arms"], d.phase) == ("smoke", True, ["a", "b"], RUN.DEFAULT_PHASE)
    # device and worker counts keep a run on its plan
    run = RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=_defaults(),
                          build_dir=tmp_path, processes=1)
    assert run.overrides == () and run.design("p1.growth_val_losses").on_plan


@pytest.mark.parametrize("kw, name", [({"steps": 60}, "steps"), ({"seed": 3}, "seed"), ({"model": "x/y"}, "model")])
def test_a_parameter_set_away_from_its_default_takes_the_run_off_plan(one_claim, tmp_path, kw, name, monkeypatch):
    monkeypatch.setattr("anatomy_kit.hf.models.check_model_name", lambda m: m)
    run = RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=_defaults(),
                          build_dir=tmp_path, **kw)
    assert name in run.overrides
    d = run.design("p1.growth_val_losses")
    assert d.on_plan is False and name in d.off_plan


def test_a_default_that_differs_from_the_registered_design_is_an_error(one_claim, tmp_path):
    changed = _defaults()
    changed["smoke"]["n_seeds"] = 6
    run = RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=changed, build_dir=tmp_path)
    with pytest.raises(AnatomyKitError, match="n_seeds: run 6, registered 8"):
        run.design("p1.growth_val_losses")
    with pytest.raises(AnatomyKitError, match="no registered design at scale 'full'"):
        RUN.resolve_run("ch03_growth_training", scale="full", device="cpu", defaults=_defaults(),
                        build_dir=tmp_path).design("p1.growth_val_losses")
    with pytest.raises(AnatomyKitError, match="not in the rule registry"):
        run.design("p1.l11_rank")


def test_the_confirmatory_phase_starts_at_the_plans_seed_offset_and_needs_the_freeze(one_claim, tmp_path):
    run = RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=_defaults(),
                          build_dir=tmp_path, phase="confirmatory", seed=0)
    assert (run.phase, run.seed, run.overrides) == ("confirmatory", 1000, ())
    assert run.design("p1.growth_val_losses").phase == "confirmatory"
    explore = RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=_defaults(),
                              build_dir=tmp_path, phase="exploratory")
    assert explore.seed == 0 and explore.key != run.key              # another phase, another checkpoint
    one_claim["frozen"] = False
    with pytest.raises(AnatomyKitError, match="not frozen yet"):
        RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=_defaults(),
                        build_dir=tmp_path, phase="confirmatory")
    with pytest.raises(AnatomyKitError, match="phase='final' is not accepted"):
        RUN.resolve_run("ch03_growth_training", scale="smoke", device="cpu", defaults=_defaults(),
                        build_dir=tmp_path, phase="final")
