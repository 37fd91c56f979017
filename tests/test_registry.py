"""The rule registry: fingerprints, the spec round trip, the amendment log and the check every Claim makes."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import fields, is_dataclass

import pytest

from anatomy_kit import stats
from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts import registry as REG
from anatomy_kit.verdicts import specs as SPECS
from anatomy_kit.verdicts.claims import Claim
from anatomy_kit.verdicts.combine import (AllOf, ByConstruction, Condition, EveryOf, NotComparable,
                                         OnePartPerSignal, Precondition, Requires)
from anatomy_kit.verdicts.equivalence import Equivalent
from anatomy_kit.verdicts.magnitude import Magnitude, RankAtMost
from anatomy_kit.verdicts.rules import (BeyondNull, Close, DifferenceSign, IntervalAbove, IntervalBelow,
                                        IntervalContains, RankCorrelation, SetOverlap)

#: One instance of every rule class, with parameters away from their defaults where they have any.
EVERY_RULE = [
    Close(abs_tol=0.5, rel_tol=0.1, partly_factor=3.0, key="a", confidence=0.9),
    IntervalBelow(1.5, 0.9, "sign-flip"), IntervalAbove(-2.0, 0.99, "t"), IntervalContains(0.5, 0.9, None),
    DifferenceSign("negative", 0.9, "sign-flip", ("a", "b")),
    SetOverlap(full=4, partly=2, n_layers=28, key="core", alpha=0.01, null="edge", draws=500, seed=3),
    RankCorrelation("positive", 0.01, 8), BeyondNull("less", 0.01, 0.9),
    Equivalent(margin=0.02, basis="half the paper's gap", value=0.1, confidence=0.95, method="sign-flip"),
    Magnitude(5.0, 50.0, "x", 0.9), RankAtMost(2, item=11, of=28, alpha=0.01, null="edge", draws=200, seed=1),
    NotComparable("another model"), ByConstruction("the schedule fixes it"),
    Requires(IntervalBelow(0.0), 0.25, "held-out R²"),
    Precondition(IntervalBelow(0.0), Condition("model size", "440M", 4.4e8), Condition("corpus", "OpenWebText")),
    OnePartPerSignal(AllOf({"a": RankCorrelation("positive"), "b": RankCorrelation("positive")}), "ρ ≥ 0.95", 0.95),
    AllOf({"first": DifferenceSign(method="t"), "second": AllOf({"inner": Close(abs_tol=float("inf"))})}),
    EveryOf({"model a": Precondition(IntervalAbove(0.0, method="t"), Condition("paired blocks", "saved")),
             "model b": IntervalAbove(0.5, 0.9, "t")}),
]
CORE = SetOverlap(full=3, partly=1, n_layers=28)


def _entry(rule, design=None, role="secondary", scales=None) -> dict:
    """A registry entry's role and forms (``scales``: ``{scale: (rule or None, design)}`` beside smoke)."""
    forms = {"smoke": {"spec": REG.rule_spec(rule), "design": dict(design or {})}}
    for scale, (r, d) in (scales or {}).items():
        forms[scale] = {"design": dict(d)} | ({"spec": REG.rule_spec(r)} if r is not None else {})
    return {"role": role, "forms": forms}


def _fp(entry: dict) -> str:
    return REG.claim_fingerprint(entry["role"], REG._forms("test", entry["forms"]))


def _registry(entries: dict, freeze: bool = False) -> REG.RuleRegistry:
    """A registry from ``{claim: (registered rule, [amendment dicts with a 'rule'])}`` (or ``(entry dict, [...])``),
    fingerprints computed; ``freeze``: frozen with every claim's fingerprint."""
    claims = {}
    for claim, (rule, amendments) in entries.items():
        entry = rule if isinstance(rule, dict) else _entry(rule)
        amended = []
        for a in amendments:
            body = a["entry"] if "entry" in a else _entry(a["rule"], role=entry["role"])
            amended.append({**{k: v for k, v in a.items() if k not in ("rule", "entry")}, **body,
                            "fingerprint": _fp(body)})
        claims[claim] = {**entry, "history": "written after the exploratory data (test)", "fingerprint": _fp(entry),
                         "amendments": amended}
    doc = {"chapter": "ch01_ablation_map", "claims": claims}
    frozen = ({"frozen": {"date": "2026-12-05", "fingerprints": {c: e["fingerprint"] for c, e in claims.items()}},
               "plan": {"seed_offset": 1000, "text": "held out"}} if freeze else None)
    return REG.RuleRegistry.from_docs([doc], frozen)


def _amendment(rule, **kw) -> dict:
    return {"date": "2026-12-06", "what": "the null", "why": "asked for after the numbers", "seen_before": True,
            "rule": rule, **kw}


@pytest.mark.parametrize("rule", EVERY_RULE, ids=lambda r: type(r).__name__)
def test_build_rule_inverts_rule_spec_for_every_rule_class(rule):
    rebuilt = REG.build_rule(REG.rule_spec(rule))
    assert rebuilt == rule and type(rebuilt) is type(rule)
    # through JSON too (the registry is text): tuples come back as tuples, ±inf as floats
    assert REG.build_rule(json.loads(json.dumps(REG.rule_spec(rule)))) == rule


def test_every_rule_class_is_in_the_round_trip():
    classes = {name for name, cls in SPECS._rule_classes().items() if callable(getattr(cls, "decide", None))}
    assert classes == {type(r).__name__ for r in EVERY_RULE}


def test_fingerprint_is_a_sha256_of_the_sorted_canonical_spec():
    spec = REG.rule_spec(IntervalBelow(0.0, 0.95, "t"))
    canonical = '{"params":{"confidence":0.95,"method":"t","threshold":0.0},"rule":"IntervalBelow"}'
    assert REG.fingerprint(spec) == hashlib.sha256(canonical.encode()).hexdigest()[:16]


def test_fingerprint_ignores_dict_order_and_descriptive_text():
    spec = REG.rule_spec(CORE)
    reordered = {"params": dict(reversed(list(spec["params"].items()))), "rule": spec["rule"]}
    assert REG.fingerprint(reordered) == REG.fingerprint(spec) == REG.fingerprint(CORE)
    assert REG.fingerprint(NotComparable("one text")) == REG.fingerprint(NotComparable("another"))
    assert REG.fingerprint(ByConstruction("one")) == REG.fingerprint(ByConstruction("two"))
    assert REG.fingerprint(Requires(CORE, 0.5, "R²")) == REG.fingerprint(Requires(CORE, 0.5, "the held-out R²"))
    assert (REG.fingerprint(Equivalent(margin=0.1, basis="a pilot")) ==
            REG.fingerprint(Equivalent(margin=0.1, basis="chapter 5's spread")))
    # but the class is not text: NotComparable and ByConstruction differ
    assert REG.fingerprint(NotComparable("x")) != REG.fingerprint(ByConstruction("x"))


@pytest.mark.parametrize("rule", [r for r in EVERY_RULE if type(r).__name__ not in ("NotComparable", "ByConstruction")],
                         ids=lambda r: type(r).__name__)
def test_every_verdict_relevant_parameter_changes_the_fingerprint(rule):
    spec = REG.rule_spec(rule)
    skip = {"Requires": ("what",), "Equivalent": ("basis",)}.get(spec["rule"], ())   # text only, by hand
    for name, value in spec["params"].items():
        if name in skip:
            continue
        changed = copy.deepcopy(spec)
        changed["params"][name] = _other(value)
        assert REG.fingerprint(changed) != REG.fingerprint(spec), f"{spec['rule']}.{name}"


def _other(value):
    """A different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return 1
    if REG._is_spec(value):
        return REG.rule_spec(IntervalAbove(7.0))
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else value + value
    raise AssertionError(value)


def test_nested_parts_change_the_fingerprint():
    a = AllOf({"x": DifferenceSign(method="t"), "y": Close(abs_tol=1.0)})
    assert REG.fingerprint(a) != REG.fingerprint(AllOf({"x": DifferenceSign(method="sign-flip"),
                                                        "y": Close(abs_tol=1.0)}))
    assert REG.fingerprint(a) != REG.fingerprint(AllOf({"x": DifferenceSign(method="t")}))


def test_a_changed_rule_without_an_amendment_is_an_error_naming_the_difference():
    reg = _registry({"p1.critical_core": (CORE, [])})
    assert Claim("p1.critical_core", [8, 9, 10, 11], CORE, registry=reg).registry_status == "registered"
    with pytest.raises(AnatomyKitError) as err:
        Claim("p1.critical_core", [8, 9, 10, 11], SetOverlap(full=3, partly=1, n_layers=28, alpha=0.1), registry=reg)
    text = str(err.value)
    assert "'p1.critical_core'" in text and "params.alpha: 0.05 → 0.1" in text and "amendments" in text
    with pytest.raises(AnatomyKitError, match="'p1.l11_rank' has no registered rule"):
        Claim("p1.l11_rank", 1, RankAtMost(1, of=28), registry=reg)


def test_a_hand_edited_registered_entry_is_refused():
    entry = _entry(CORE)
    doc = {"chapter": "ch01_ablation_map", "claims": {"p1.critical_core": {
        **entry, "history": "h", "fingerprint": _fp(entry), "amendments": []}}}
    doc["claims"]["p1.critical_core"]["forms"]["smoke"]["spec"]["params"]["partly"] = 2
    with pytest.raises(AnatomyKitError, match="stored fingerprint .* is not its role's and forms'"):
        REG.RuleRegistry.from_docs([doc])


@pytest.mark.parametrize("change", ["spec", "design", "role", "hour design"])
def test_the_fingerprint_covers_the_rule_the_design_of_every_scale_and_the_role(change):
    base = _entry(CORE, {"n_eval": 8, "draws": 10000}, scales={"hour": (None, {"n_eval": 64, "draws": 10000})})
    other = copy.deepcopy(base)
    if change == "spec":
        other["forms"]["smoke"]["spec"]["params"]["full"] = 4
    elif change == "design":
        other["forms"]["smoke"]["design"]["n_eval"] = 9            # a seed or block count
    elif change == "role":
        other["role"] = "primary"
    else:
        other["forms"]["hour"]["design"]["draws"] = 9999          # a null's draws at another scale
    assert _fp(other) != _fp(base)


def test_a_design_other_than_the_registered_one_is_an_error_and_an_off_plan_run_is_exploratory():
    entry = _entry(DifferenceSign("negative", method="sign-flip"), {"n_seeds": 8, "arms": ["a", "b"]})
    reg = _registry({"p1.growth_val_losses": (entry, [])}, freeze=True)
    d = [-0.1, -0.2, -0.15, -0.3, -0.1, -0.2, -0.25, -0.05]
    good = REG.Design("p1.growth_val_losses", "smoke", {"n_seeds": 8, "arms": ["a", "b"]}, phase="confirmatory")
    c = Claim("p1.growth_val_losses", d, DifferenceSign("negative", method="sign-flip"), registry=reg, design=good)
    assert (c.registry_status, c.phase) == ("registered", "confirmatory")
    # six seeds where eight were registered: the seed count is part of the claim
    six = REG.Design("p1.growth_val_losses", "smoke", {"n_seeds": 6, "arms": ["a", "b"]}, phase="confirmatory")
    with pytest.raises(AnatomyKitError, match="design.n_seeds: 8 → 6"):
        Claim("p1.growth_val_losses", d[:6], DifferenceSign("negative", method="sign-flip"), registry=reg, design=six)
    # another control arm compared
    arms = REG.Design("p1.growth_val_losses", "smoke", {"n_seeds": 8, "arms": ["a", "c"]}, phase="confirmatory")
    with pytest.raises(AnatomyKitError, match="design.arms"):
        Claim("p1.growth_val_losses", d, DifferenceSign("negative", method="sign-flip"), registry=reg, design=arms)
    # the registered design on a run set away from its defaults: judged, but exploratory
    off = REG.Design("p1.growth_val_losses", "smoke", {"n_seeds": 8, "arms": ["a", "b"]}, on_plan=False,
                     off_plan="steps set to 60", phase="confirmatory")
    c = Claim("p1.growth_val_losses", d, DifferenceSign("negative", method="sign-flip"), registry=reg, design=off)
    assert (c.registry_status, c.phase) == ("off plan", "exploratory")
    # exploratory data, or a registry not frozen, never confirm
    explore = REG.Design("p1.growth_val_losses", "smoke", {"n_seeds": 8, "arms": ["a", "b"]}, phase="exploratory")
    assert Claim("p1.growth_val_losses", d, DifferenceSign("negative", method="sign-flip"), registry=reg,
                 design=explore).phase == "exploratory"
    draft = _registry({"p1.growth_val_losses": (entry, [])})
    assert Claim("p1.growth_val_losses", d, DifferenceSign("negative", method="sign-flip"), registry=draft,
                 design=good).phase == "exploratory"


def test_a_frozen_entry_edited_without_an_amendment_is_refused():
    reg = _registry({"p1.critical_core": (CORE, [])}, freeze=True)
    chapters = [{"chapter": "ch01_ablation_map", "claims": {
        cid: {"role": r.role, "history": r.history, "fingerprint": r.fingerprint, "amendments": [],
              "forms": {k: {"spec": f.spec, "design": f.design} for k, f in r.forms.items()}}
        for cid, r in reg.entries.items()}}]
    freeze = {"frozen": {"date": "2026-12-05", "fingerprints": dict(reg.freeze.fingerprints)}, "plan": {"seed_offset": 1}}
    assert REG.RuleRegistry.from_docs(chapters, freeze).freeze.date == "2026-12-05"
    edited = copy.deepcopy(chapters)
    entry = edited[0]["claims"]["p1.critical_core"]
    entry["forms"]["smoke"]["spec"]["params"]["partly"] = 2            # the rule, with a fingerprint to match
    entry["fingerprint"] = REG.claim_fingerprint(entry["role"], REG._forms("x", entry["forms"]))
    with pytest.raises(AnatomyKitError, match="differ from the frozen registry"):
        REG.RuleRegistry.from_docs(edited, freeze)
    added = copy.deepcopy(chapters)
    added[0]["claims"]["p1.l11_rank"] = {**_entry(RankAtMost(1, of=28)), "history": "h", "amendments": [],
                                         "fingerprint": _fp(_entry(RankAtMost(1, of=28)))}
    with pytest.raises(AnatomyKitError, match="cannot be added or removed after the freeze"):
        REG.RuleRegistry.from_docs(added, freeze)


def test_an_amendment_decides_under_both_rules_and_a_stricter_amendment_stands():
    # registered: partly with one shared layer; amended: partly needs two. Ours shares one ({11}) of [8..11]
    # (no null: n_layers None isolates the partly threshold)
    registered, amended = SetOverlap(full=3, partly=1), SetOverlap(full=3, partly=2)
    reg = _registry({"p1.critical_core": (registered, [_amendment(amended)])})
    c = Claim("p1.critical_core", [11, 20, 21, 22], amended, registry=reg)
    assert (c.registry_status, c.registered_verdict, c.amended_verdict) == ("amended", "partly reproduced",
                                                                           "not reproduced")
    assert c.verdict == "not reproduced" and c.standing == "amended"            # stricter: the amendment stands
    assert c.amendment["why"] == "asked for after the numbers" and c.amendment["seen_before"] is True
    assert c.to_dict()["registry"]["registered_verdict"] == "partly reproduced"


def test_an_amendment_that_would_upgrade_leaves_the_registered_verdict_standing():
    registered, amended = SetOverlap(full=3, partly=2), SetOverlap(full=3, partly=1)
    reg = _registry({"p1.critical_core": (registered, [_amendment(amended)])})
    c = Claim("p1.critical_core", [11, 20, 21, 22], amended, registry=reg)
    assert (c.registered_verdict, c.amended_verdict) == ("not reproduced", "partly reproduced")
    assert c.verdict == "not reproduced" and c.standing == "registered"
    assert "at least 2" in c.rule_text                                          # the registered rule's text


def test_an_amendment_written_after_confirmatory_numbers_were_seen_is_exploratory():
    registered, amended = SetOverlap(full=3, partly=1), SetOverlap(full=3, partly=2)
    for seen, phase in ((True, "exploratory"), (False, "confirmatory")):
        reg = _registry({"p1.critical_core": (registered, [_amendment(amended, seen_before=seen)])}, freeze=True)
        design = REG.Design("p1.critical_core", "smoke", {}, phase="confirmatory")
        c = Claim("p1.critical_core", [11, 20, 21, 22], amended, registry=reg, design=design)
        assert c.phase == phase


def test_an_amendment_of_the_statistic_needs_the_registered_statistic():
    registered, amended = IntervalBelow(0.0), IntervalBelow(0.0, method="t")
    reg = _registry({"p1.anti_layers": (registered, [_amendment(amended, statistic_changed=True)])})
    with pytest.raises(AnatomyKitError, match="registered_ours"):
        Claim("p1.anti_layers", [-1.0, -2.0, -1.5], amended, registry=reg)
    # registered on the point −0.5 (below 0: reproduced); the amended t interval of [−1, 2, −1.5] straddles 0
    c = Claim("p1.anti_layers", [-1.0, 2.0, -1.5], amended, registered_ours=-0.5, registry=reg)
    assert (c.registered_verdict, c.amended_verdict, c.verdict) == ("reproduced", "not established",
                                                                   "not established")
    plain = Claim("p1.anti_layers", -0.5, registered, registered_ours=2.0, registry=reg)
    assert (plain.registry_status, plain.verdict, plain.registered_verdict) == ("registered", "reproduced", None)


def test_a_claim_under_a_later_amendment_records_the_earlier_ones():
    first, second = SetOverlap(full=3, partly=1, n_layers=28, alpha=0.1), SetOverlap(full=3, partly=2, n_layers=28)
    reg = _registry({"p1.critical_core": (CORE, [_amendment(first, what="alpha"), _amendment(second, what="partly")])})
    c = Claim("p1.critical_core", [8, 9, 20, 21], second, registry=reg)
    assert c.amendment["what"] == "partly"
    assert [a["what"] for a in c.registered["earlier_amendments"]] == ["alpha"]
    assert Claim("p1.critical_core", [8, 9, 20, 21], first, registry=reg).registered["earlier_amendments"] == []


def test_a_scale_is_judged_against_the_registered_form_of_the_same_scale():
    # smoke: one model, a bare rule; full: one part per model (the registered form and its amendment alike)
    reg_smoke, reg_full = IntervalBelow(0.0), AllOf({"a": IntervalBelow(-0.25), "b": IntervalBelow(-0.25)})
    amd_smoke, amd_full = IntervalBelow(-1.0), AllOf({"a": IntervalBelow(-1.0), "b": IntervalBelow(-1.0)})
    entry = _entry(reg_smoke, {"n": 1}, scales={"full": (reg_full, {"n": 7})})
    amended = _entry(amd_smoke, {"n": 1}, scales={"full": (amd_full, {"n": 7})})
    reg = _registry({"p1.anti_layers": (entry, [{"date": "2026-12-06", "what": "threshold", "why": "seen",
                                                  "seen_before": True, "entry": amended}])})
    full = REG.Design("p1.anti_layers", "full", {"n": 7})
    c = Claim("p1.anti_layers", {"a": -0.1, "b": -2.0}, amd_full, registry=reg, design=full)
    # the registered full form: a = −0.1 is not below −0.25, b is → mixed (the smoke form, 0, would say
    # reproduced); amended: a is not below −1, b is → mixed
    assert (c.registry_status, c.registered_verdict, c.amended_verdict) == ("amended", "mixed", "mixed")
    assert c.registered["scale"] == "full"
    assert Claim("p1.anti_layers", {"a": -0.5, "b": -2.0}, reg_full, registry=reg,
                 design=full).registry_status == "registered"
    # the smoke form at full scale is not the registered one
    with pytest.raises(AnatomyKitError, match="neither the registered form"):
        Claim("p1.anti_layers", -0.5, reg_smoke, registry=reg, design=full)


def test_a_bare_not_comparable_is_a_rule_like_any_other():
    reg = _registry({"p2.val_loss_440m": (DifferenceSign(method="sign-flip"), [])})
    with pytest.raises(AnatomyKitError, match="neither the registered form"):
        Claim("p2.val_loss_440m", None, NotComparable("our model has 0.39M parameters"), registry=reg)
    # a claim registered as not comparable matches itself whatever its text
    reg = _registry({"p1.baseline_ppl": (NotComparable("another text"), [])})
    assert Claim("p1.baseline_ppl", 3.0, NotComparable("other words"), registry=reg).registry_status == "registered"
    # a move to a bare not comparable is an amendment, and a "not reproduced" never stands behind it
    reg = _registry({"p2.val_loss_440m": (DifferenceSign("negative", method="t"),
                                          [_amendment(NotComparable("cannot speak"))])})
    c = Claim("p2.val_loss_440m", [0.2, 0.3, 0.25, 0.1], NotComparable("cannot speak"), registry=reg,
              registered_ours=[0.2, 0.3, 0.25, 0.1])
    assert (c.registered_verdict, c.amended_verdict, c.verdict) == ("not reproduced", "not comparable",
                                                                   "not reproduced")


@pytest.mark.parametrize("registered,amended,stands", [
    ("not established", "reproduced", "registered"), ("not reproduced", "not established", "registered"),
    ("reproduced", "not comparable", "amended"), ("mixed", "partly reproduced", "registered"),
    ("partly reproduced", "mixed", "amended"), ("not comparable", "holds by construction", "amended"),
    ("reproduced", "reproduced", "amended"),
    # "not comparable" and "holds by construction" rank above "not reproduced": moving there never stands
    ("not reproduced", "not comparable", "registered"), ("not reproduced", "holds by construction", "registered"),
    ("not comparable", "not reproduced", "amended"), ("not established", "not comparable", "amended"),
    ("mixed", "not comparable", "amended")])
def test_standing_by_the_declared_order(registered, amended, stands):
    assert REG.standing(registered, amended) == stands


def test_the_favour_order_by_hand():
    f = REG.FAVOUR
    assert f["reproduced"] > f["partly reproduced"] > f["mixed"] > f["not established"] > f["not reproduced"]
    assert f["not comparable"] == f["holds by construction"] == f["not established"] > f["not reproduced"]


def test_the_installed_registry_checks_every_claim_by_default(installed_registry_default):
    core = REG.rule_registry().entries["p1.critical_core"]
    with pytest.raises(AnatomyKitError, match="neither the registered form"):
        Claim("p1.critical_core", [8, 9, 10, 11], SetOverlap(full=3, partly=1, n_layers=28, alpha=0.2))
    spec = core.current[1]["smoke"].spec
    profile = {layer: float(layer % 7) for layer in range(2, 28)}
    assert Claim("p1.critical_core", {"set": [8, 9, 10, 11], "profile": profile},
                 REG.build_rule(spec)).registry_status == "registered"


def test_the_installed_registry_reads_and_every_entry_rebuilds():
    reg = REG.rule_registry()
    assert "p1.critical_core" in reg.entries
    for entry in reg.entries.values():
        assert REG.claim_fingerprint(entry.role, entry.forms) == entry.fingerprint
        for form in entry.forms.values():
            REG.build_rule(form.spec)
        assert "exploratory" in entry.history and "written after" in entry.history.lower()


def test_cli_check_and_show(capsys):
    from anatomy_kit.verdicts.registry_cli import main

    code = main(["check"])
    out = capsys.readouterr().out
    assert "every fingerprint matches" in out
    assert code == (0 if REG.rule_registry().freeze is None or "design problem" not in out else 1)
    assert main(["show", "p1.critical_core"]) == 0
    out = capsys.readouterr().out
    assert "p1.critical_core (ch01_ablation_map)" in out and "history:" in out
    assert main(["register", "x"]) == 2
    assert main(["show", "p9.none"]) == 1


@pytest.mark.book
def test_every_claim_of_the_built_report_matches_the_registry():
    """The built book's report.json: each claim's recorded rule is the registered form of its scale or an
    amendment, and every claim of a default build is on plan."""
    import os

    from conftest import ROOT

    path = ROOT / "build" / "report.json"
    if not path.exists():
        if os.environ.get("ANATOMY_KIT_BOOK_BUILT") == "1":
            pytest.fail(f"{path} is missing: the book build did not produce it")
        pytest.skip(f"{path} not built; run `make book`")
    reg = REG.rule_registry()
    claims = [c for ch in json.loads(path.read_text())["chapters"] for c in ch["claims"]]
    assert claims
    assert {c["id"] for c in claims} == set(reg.entries), "every registered claim is judged, and only those"
    for c in claims:
        entry = reg.entries[c["id"]]
        fp, status = REG.fingerprint(c["rule_spec"]), c["registry"]["status"]
        assert status in ("registered", "amended"), f"{c['id']}: {status} (a default build is on plan)"
        forms = entry.amendments[-1].forms if status == "amended" else entry.forms
        scale = c["design"]["scale"]
        assert fp == REG.fingerprint(forms[scale].spec) and c["design"]["values"] == forms[scale].design
        assert c["role"] == (entry.amendments[-1].role if status == "amended" else entry.role)


def test_a_wrapper_declared_with_conditions_round_trips_and_fingerprints_as_its_rule_and_condition_names(monkeypatch):
    """The shape of a precondition wrapper (``Wrapper(rule, *conditions)``, each condition a name, a text and an
    optional minimum): rebuilt from its spec, and its fingerprint is the wrapped rule's plus the conditions' names
    and minimums, whatever their texts."""
    from dataclasses import dataclass as dc

    @dc(frozen=True)
    class Condition:
        name: str
        needs: str
        minimum: float | None = None

    @dc(frozen=True, init=False)
    class Wrapper:
        rule: object
        conditions: tuple

        def __init__(self, rule, *conditions):
            object.__setattr__(self, "rule", rule)
            object.__setattr__(self, "conditions", tuple(conditions))

        def decide(self, ours, reference):
            return self.rule.decide(ours, reference)

        def describe(self, reference):
            return self.rule.describe(reference)

    classes = {**SPECS._rule_classes(), "Condition": Condition, "Wrapper": Wrapper}
    monkeypatch.setattr(SPECS, "_rule_classes", lambda: classes)
    w = Wrapper(CORE, Condition("model size", "at least 128M parameters", 1.28e8), Condition("corpus", "OpenWebText"))
    assert REG.build_rule(json.loads(json.dumps(REG.rule_spec(w)))) == w
    reworded = Wrapper(CORE, Condition("model size", "128M or more", 1.28e8), Condition("corpus", "the paper's"))
    assert REG.fingerprint(reworded) == REG.fingerprint(w)
    assert REG.fingerprint(Wrapper(CORE, Condition("model size", "x", 2.56e8), Condition("corpus", "y"))) != \
        REG.fingerprint(w)
    assert REG.fingerprint(Wrapper(CORE, Condition("model", "x", 1.28e8), Condition("corpus", "y"))) != \
        REG.fingerprint(w)
    assert REG.fingerprint(Wrapper(IntervalBelow(0.0), *w.conditions)) != REG.fingerprint(w)


def test_a_registered_rule_with_nothing_to_judge_on_this_run_is_not_comparable():
    # registered: every layer's interval below 0; this run measured no layer (an empty mapping), which the
    # rule refuses, so the registered verdict is "not comparable" and the amended rule still decides
    registered, amended = IntervalBelow(0.0), IntervalBelow(0.0, method="t")
    reg = _registry({"p1.anti_layers": (registered, [_amendment(amended, statistic_changed=True)])})
    with pytest.raises(AnatomyKitError):
        registered.decide({}, {"value": 0})
    c = Claim("p1.anti_layers", [-1.0, -2.0, -1.5], amended, registered_ours={}, registry=reg)
    assert c.registered_verdict == "not comparable" and "cannot be decided on this run's data" in c.registered_reason


def test_a_claim_on_data_no_phase_changes_is_never_confirmatory():
    # a pretrained model's weights are the same data in both phases: a frozen rule on them confirms nothing
    entry = _entry(DifferenceSign("negative", method="sign-flip"), {"n_seeds": 8, "arms": ["a", "b"]})
    reg = _registry({"p1.growth_val_losses": (entry, [])}, freeze=True)
    d = [-0.1, -0.2, -0.15, -0.3, -0.1, -0.2, -0.25, -0.05]
    good = REG.Design("p1.growth_val_losses", "smoke", {"n_seeds": 8, "arms": ["a", "b"]}, phase="confirmatory")
    rule = DifferenceSign("negative", method="sign-flip")
    fresh = Claim("p1.growth_val_losses", d, rule, registry=reg, design=good)
    same = Claim("p1.growth_val_losses", d, rule, registry=reg, design=good,
                 same_data_every_phase="the model's weights")
    assert (fresh.phase, same.phase) == ("confirmatory", "exploratory")
    assert same.verdict == fresh.verdict and same.to_dict()["phase"] == "exploratory"
