"""Every wrapper rule forwards everything: AllOf, EveryOf, OnePartPerSignal, Precondition and Requires, against
rules whose decisions are fixed by hand, so each expected field is written out here, never computed by the kit."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts.combine import (COMBINATION_TEXT, EVERY_TEXT, AllOf, ByConstruction, Condition, EveryOf,
                                          NotComparable, OnePartPerSignal, Precondition, Requires)
from anatomy_kit.verdicts.decision import Decision

REF = {"value": 1.0}


@dataclass
class Fixed:
    """A rule that returns one fixed decision and records what it was asked."""
    decision: Decision
    text: str = "fixed rule"
    asked: list = field(default_factory=list)

    def decide(self, ours, reference):
        self.asked.append((ours, reference))
        return self.decision

    def describe(self, reference):
        self.asked.append(("describe", reference))
        return self.text


class Refuses:
    """A rule that cannot judge the value it is given."""

    def decide(self, ours, reference):
        raise AnatomyKitError("cannot judge this")

    def describe(self, reference):
        return "refuses"


FULL = Decision("reproduced", "inner reason", interval="I", null="N", summary="S", near_threshold=False,
                shown="SH", p=0.03, parts=(("a", "reproduced", 0.03),), saw="W")


# --- Precondition and Requires ---------------------------------------------------------------------------------

def test_a_met_precondition_forwards_every_field_of_its_rule():
    rule = Fixed(FULL)
    pre = Precondition(rule, Condition("size", "at least 5 layers", 5), Condition("corpus", "the paper's"))
    got = pre.decide({"conditions": {"size": 10, "corpus": (True, "fineweb")}, "value": "V"}, REF)
    assert got == Decision("reproduced", "conditions met (size 10, corpus fineweb); inner reason", "I", "N", "S",
                           False, "SH", p=0.03, parts=(("a", "reproduced", 0.03),), saw="W")
    assert rule.asked == [("V", REF)]                   # the rule gets the value and the reference


def test_a_met_precondition_shortens_the_reason_when_its_rule_gives_no_summary_and_ors_near():
    inner = Decision("not established", "a long reason", near_threshold=True)
    got = Precondition(Fixed(inner), Condition("size", "big", 5)).decide({"conditions": {"size": 10}, "value": 1},
                                                                         REF)
    assert got.summary == "a long reason" and got.near_threshold is True
    # a condition at its minimum is near, though the rule is not
    got = Precondition(Fixed(FULL), Condition("size", "big", 5)).decide({"conditions": {"size": 5}, "value": 1},
                                                                        REF)
    assert got.near_threshold is True and got.verdict == "reproduced"
    # a yes/no condition is never near; what it says defaults to yes
    got = Precondition(Fixed(FULL), Condition("corpus", "the paper's")).decide(
        {"conditions": {"corpus": True}, "value": 1}, REF)
    assert got.near_threshold is False and got.reason.startswith("conditions met (corpus yes); ")


def test_an_unmet_precondition_names_every_unmet_condition_and_what_the_rule_saw():
    pre = Precondition(Fixed(FULL), Condition("size", "at least 5 layers", 5), Condition("corpus", "the paper's"),
                       Condition("seeds", "eight", 8))
    got = pre.decide({"conditions": {"size": 4, "corpus": False, "seeds": 8}, "value": "V"}, REF)
    assert got == Decision(
        "not comparable",
        "size: ours 4, the claim needs at least 5 layers (≥ 5); corpus: ours no, the claim needs the paper's: our "
        "run cannot speak to the claim. What our run saw, not judged: reproduced: S",
        summary="not met: size 4; corpus no; cannot speak to the claim", near_threshold=True, saw="reproduced: S")
    # seeds at its minimum (8) is met but near: the verdict could flip on another machine


def test_an_unmet_precondition_saw_falls_back_to_the_reason_and_is_none_without_a_judgeable_value():
    pre = Precondition(Fixed(Decision("not reproduced", "why not")), Condition("corpus", "the paper's"))
    got = pre.decide({"conditions": {"corpus": (False, "python docs")}, "value": 1}, REF)
    assert got.saw == "not reproduced: why not" and got.reason.endswith("What our run saw, not judged: "
                                                                         "not reproduced: why not")
    assert got.summary == "not met: corpus python docs; cannot speak to the claim"
    assert got.near_threshold is False
    for value, rule in ((None, Fixed(FULL)), (1, Refuses())):
        got = Precondition(rule, Condition("corpus", "the paper's")).decide(
            {"conditions": {"corpus": False}, "value": value}, REF)
        assert got.saw is None and got.reason == ("corpus: ours no, the claim needs the paper's: our run cannot "
                                                  "speak to the claim")


def test_precondition_describes_its_conditions_then_its_rule():
    rule = Fixed(FULL, text="inner text")
    pre = Precondition(rule, Condition("size", "big", 5), Condition("corpus", "the paper's"))
    assert pre.describe(REF) == ("Not comparable unless our run meets every condition (size: big (≥ 5); corpus: "
                                 "the paper's); then: inner text")
    assert rule.asked == [("describe", REF)]


@pytest.mark.parametrize("ours", [None, {"conditions": {"size": 1}}, {"conditions": {"other": 1}, "value": 1},
                                  {"conditions": [1], "value": 1}, {"conditions": {"size": 1}, "value": 1, "x": 2}])
def test_precondition_refuses_ours_without_exactly_its_conditions(ours):
    with pytest.raises(AnatomyKitError, match=r"^Precondition needs ours as \{\"conditions\": \{name: value\} for "
                                              r"exactly \['size'\]"):
        Precondition(Fixed(FULL), Condition("size", "big", 5)).decide(ours, REF)


def test_precondition_and_condition_refuse_what_they_cannot_use():
    with pytest.raises(AnatomyKitError, match="^Precondition needs a rule to apply, got 3$"):
        Precondition(3, Condition("a", "b"))
    with pytest.raises(AnatomyKitError, match=r"^Precondition needs at least one Condition, got \(\)$"):
        Precondition(Fixed(FULL))
    with pytest.raises(AnatomyKitError, match=r"^Precondition condition names must differ, got \['a', 'a'\]$"):
        Precondition(Fixed(FULL), Condition("a", "b"), Condition("a", "c"))
    with pytest.raises(AnatomyKitError, match="^Condition needs `needs`: a few words, got ' '$"):
        Condition("a", " ")
    with pytest.raises(AnatomyKitError, match="^minimum of 'a'=nan must be a finite number$"):
        Condition("a", "b", float("nan"))
    with pytest.raises(AnatomyKitError, match=r"^condition 'a' is a yes/no: pass True/False or \(met, 'what ours "
                                              r"is'\), got 1$"):
        Condition("a", "b").judge(1)
    with pytest.raises(AnatomyKitError, match="^a='x' must be a finite number$"):
        Condition("a", "b", 1).judge("x")


def test_condition_judges_at_just_below_and_just_above_its_minimum():
    c = Condition("steps", "enough", 100)
    assert c.judge(100)[:2] == (True, "100") and c.judge(99.999)[0] is False and c.judge(100.001)[0] is True
    assert c.judge(1000) == (True, "1000", False) and c.judge(100)[2] is True
    assert c.text() == "steps: enough (≥ 100)" and Condition("a", "b").text() == "a: b"
    assert Condition("a", "b").judge((False, "")) == (False, "no", False)
    assert Condition("a", "b").judge((True, "it is")) == (True, "it is", False)


def test_requires_is_a_precondition_on_one_number():
    rule = Fixed(FULL)
    req = Requires(rule, 0.5, "held-out R²")
    got = req.decide({"precondition": 0.9, "value": "V"}, REF)
    assert got.reason == "conditions met (held-out R² 0.9); inner reason" and got.p == 0.03 and got.parts == FULL.parts
    assert rule.asked == [("V", REF)]
    low = req.decide({"precondition": 0.1, "value": None}, REF)
    assert low.verdict == "not comparable" and low.reason.startswith(
        "held-out R²: ours 0.1, the claim needs at least 0.5 (≥ 0.5)")
    assert req.describe(REF) == ("Not comparable unless our run meets every condition (held-out R²: at least 0.5 "
                                 "(≥ 0.5)); then: fixed rule")
    with pytest.raises(AnatomyKitError, match=r"^Requires needs ours as \{\"precondition\": number, \"value\": what "
                                              r"the rule judges\}$"):
        req.decide({"precondition": 1}, REF)
    with pytest.raises(AnatomyKitError, match="^Requires needs `what`: a few words naming the precondition$"):
        Requires(rule, 0.5, " ")
    with pytest.raises(AnatomyKitError, match="^minimum=inf must be a finite number$"):
        Requires(rule, float("inf"), "x")


# --- AllOf and EveryOf -------------------------------------------------------------------------------------------

def _parts():
    return {"x": Fixed(Decision("reproduced", "rx", interval="Ix", null="Nx", near_threshold=True, p=0.01,
                                parts=(("k1", "reproduced", 0.01), ("k2", "reproduced", 0.004)))),
            "y": Fixed(Decision("not established", "ry", null="Ny", p=0.2)),
            "z": Fixed(Decision("holds by construction", "rz", interval="Iz", near_threshold=True))}


def test_all_of_joins_its_parts_and_leaves_the_built_ones_out_of_the_count():
    parts = _parts()
    got = AllOf(parts).decide({"x": 1, "y": 2, "z": 3}, REF)
    assert got == Decision(
        "partly reproduced",
        "1 of 2 counted parts reproduced; 1 holds by construction (not counted): x: reproduced (rx); "
        "y: not established (ry); z: holds by construction (rz)",
        "x: Ix; z: Iz", "x: Nx; y: Ny", "3 parts: 1 reproduced, 1 not established, 1 holds by construction",
        True, p=0.2, parts=(("x: k1", "reproduced", 0.01), ("x: k2", "reproduced", 0.004),
                            ("y", "not established", 0.2)))
    assert [a for a, _ in parts["x"].asked] == [1] and parts["z"].asked == [(3, REF)]
    # near only through a counted part: a built part near its threshold does not count
    quiet = dict(parts, x=Fixed(Decision("reproduced", "rx", p=0.01)))
    assert AllOf(quiet).decide({"x": 1, "y": 2, "z": 3}, REF).near_threshold is False


def test_all_of_with_one_part_and_two_built_parts_counts_in_the_singular_and_plural():
    one = AllOf({"x": Fixed(Decision("reproduced", "rx"))}).decide({"x": 1}, REF)
    assert one.summary == "1 part: 1 reproduced" and one.interval is None and one.null is None and one.p is None
    assert one.reason == "1 of 1 counted parts reproduced: x: reproduced (rx)"
    built = {"a": ByConstruction("by design"), "b": ByConstruction("also"), "c": Fixed(Decision("reproduced", "r"))}
    got = AllOf(built).decide({"a": 0, "b": 0, "c": 0}, REF)
    assert got.reason.startswith("1 of 1 counted parts reproduced; 2 hold by construction (not counted): ")


def test_all_of_describes_each_part_with_the_reference_it_is_given():
    parts = {"x": Fixed(FULL, text="tx"), "y": Fixed(FULL, text="ty")}
    assert AllOf(parts).describe(REF) == f"All of 2 parts: (x) tx (y) ty {COMBINATION_TEXT}"
    assert parts["x"].asked == [("describe", REF)]
    assert EveryOf(parts).describe(REF) == f"Every one of 2 parts: (x) tx (y) ty {EVERY_TEXT}"


def test_every_of_names_the_members_that_decide_and_forwards_intervals_nulls_and_near():
    members = {"m1": Fixed(Decision("reproduced", "r1", interval="I1", p=0.01)),
               "m2": Fixed(Decision("mixed", "r2", null="N2", near_threshold=True, p=0.3)),
               "m3": Fixed(Decision("not reproduced", "r3", p=0.9)),
               "m4": Fixed(Decision("not comparable", "r4"))}
    got = EveryOf(members).decide({"m1": 0, "m2": 0, "m3": 0, "m4": 0}, REF)
    assert got == Decision(
        "not reproduced",
        "every part must hold; 1 of 4 do: m1: reproduced (r1); m2: not reproduced (r2); m3: not reproduced (r3); "
        "m4: not comparable (r4)",
        "m1: I1", "m2: N2", "4 parts: 1 reproduced, 2 not reproduced, 1 not comparable; not reproduced: m2, m3",
        True, p=None, parts=(("m1", "reproduced", 0.01), ("m2", "not reproduced", 0.3),
                             ("m3", "not reproduced", 0.9), ("m4", "not comparable", None)))


def test_every_of_reproduced_names_no_member_and_undecided_members_are_named():
    held = EveryOf({"a": Fixed(Decision("reproduced", "r", p=0.01)), "b": Fixed(Decision("reproduced", "r", p=0.02))})
    got = held.decide({"a": 0, "b": 0}, REF)
    assert (got.verdict, got.summary, got.p, got.near_threshold) == ("reproduced", "2 parts: 2 reproduced", 0.02,
                                                                    False)
    assert got.reason.startswith("every part must hold; 2 of 2 do: ")
    open_ = EveryOf({"a": Fixed(Decision("reproduced", "r")), "b": Fixed(Decision("partly reproduced", "r"))})
    got = open_.decide({"a": 0, "b": 0}, REF)
    assert (got.verdict, got.summary) == ("not established", "2 parts: 1 reproduced, 1 not established; "
                                                             "not established: b")
    none = EveryOf({"a": NotComparable("no"), "b": NotComparable("no")}).decide({"a": 0, "b": 0}, REF)
    assert (none.verdict, none.summary) == ("not comparable", "2 parts: 2 not comparable; not comparable: a, b")


def test_all_of_refuses_what_is_not_a_mapping_of_rules():
    with pytest.raises(AnatomyKitError, match=r"^AllOf needs a non-empty mapping \{part name: rule\}$"):
        AllOf({})
    with pytest.raises(AnatomyKitError, match=r"^AllOf needs a non-empty mapping \{part name: rule\}$"):
        AllOf([("x", Fixed(FULL))])

    class DecidesOnly:
        def decide(self, ours, reference):
            return FULL

    with pytest.raises(AnatomyKitError, match=r"^AllOf parts \['b'\] are not rules \(each needs decide and "
                                              r"describe\)$"):
        AllOf({"a": Fixed(FULL), "b": DecidesOnly()})
    with pytest.raises(AnatomyKitError, match=r"^EveryOf needs ours as a mapping with exactly the parts \['a'\]$"):
        EveryOf({"a": Fixed(FULL)}).decide({"b": 1}, REF)


# --- OnePartPerSignal ---------------------------------------------------------------------------------------------

def test_a_group_is_judged_once_by_its_first_members_rule_and_value():
    rules = {"a": Fixed(Decision("not reproduced", "ra", p=0.9)), "b": Fixed(Decision("reproduced", "rb", p=0.01)),
             "c": Fixed(Decision("reproduced", "rc", p=0.02))}
    one = OnePartPerSignal(AllOf(rules), "the same sets", 0.95)
    got = one.decide({"groups": [["b", "a"], ["c"]], "value": {"a": "va", "b": "vb", "c": "vc"}}, REF)
    assert rules["a"].asked == [] and rules["b"].asked == [("vb", REF)] and rules["c"].asked == [("vc", REF)]
    assert got.verdict == "reproduced" and got.p == 0.02
    assert got.reason == ("b and a are one signal, counted once: 2 of 2 counted parts reproduced: "
                          "b = a: reproduced (rb); c: reproduced (rc)")
    assert got.parts == (("b = a", "reproduced", 0.01), ("c", "reproduced", 0.02))
    alone = one.decide({"groups": [["a"], ["b"], ["c"]], "value": {"a": 1, "b": 2, "c": 3}}, REF)
    assert alone.verdict == "mixed"
    assert alone.reason.startswith("2 of 3 counted parts reproduced: a: not reproduced (ra); ")
    assert one.describe(REF) == ("Signals that are one (the same sets; ρ ≥ 0.95) count as one part, judged by the "
                                 f"first of them. All of 3 parts: (a) fixed rule (b) fixed rule (c) fixed rule "
                                 f"{COMBINATION_TEXT}")


@pytest.mark.parametrize("groups", [[["a"]], [["a"], ["b"], ["a"]], [["a", "b"], []], [["a"], ["x"]]])
def test_groups_must_hold_every_part_once(groups):
    one = OnePartPerSignal(AllOf({"a": Fixed(FULL), "b": Fixed(FULL)}), "same", 0.9)
    with pytest.raises(AnatomyKitError, match=r"^the groups .* must hold every part \['a', 'b'\] exactly once$"):
        one.decide({"groups": groups, "value": {"a": 1, "b": 2}}, REF)


def test_one_part_per_signal_refuses_bad_construction_and_input():
    with pytest.raises(AnatomyKitError, match="^OnePartPerSignal needs an AllOf over signals, got 3$"):
        OnePartPerSignal(3, "same", 0.9)
    with pytest.raises(AnatomyKitError, match="^OnePartPerSignal needs `same`: the rule that makes two signals one$"):
        OnePartPerSignal(AllOf({"a": Fixed(FULL)}), "  ", 0.9)
    with pytest.raises(AnatomyKitError, match="^min_rho=nan must be a finite number$"):
        OnePartPerSignal(AllOf({"a": Fixed(FULL)}), "same", float("nan"))
    one = OnePartPerSignal(AllOf({"a": Fixed(FULL)}), "same", 0.9)
    for ours in ({"groups": [["a"]]}, [["a"]], {"groups": [["a"]], "value": {}, "x": 1}):
        with pytest.raises(AnatomyKitError, match=r'^OnePartPerSignal needs ours as \{"groups": \[\[names\]\], '
                                                  r'"value": \{name: value\}\}$'):
            one.decide(ours, REF)


# --- NotComparable and ByConstruction -------------------------------------------------------------------------------

def test_not_comparable_and_by_construction_say_why_whatever_ours():
    assert NotComparable("other text").decide(123, REF) == Decision("not comparable", "other text",
                                                                    summary="other text")
    assert ByConstruction("fixed by the schedule").decide(None, REF) == Decision(
        "holds by construction", "fixed by the schedule", summary="by construction: fixed by the schedule")
    assert NotComparable("x").describe(REF) == ("Not comparable, whatever our number: our setting cannot test the "
                                                "claim (the reason follows).")
    assert ByConstruction("x").describe(REF) == (
        "Holds by construction, whatever our number: the experiment is built so that it holds (the reason follows), "
        "so it is no evidence for the claim and never counts towards reproduced.")
    with pytest.raises(AnatomyKitError, match="^NotComparable needs a one-sentence why$"):
        NotComparable(" ")
    with pytest.raises(AnatomyKitError, match="^ByConstruction needs a one-sentence why: how the construction makes "
                                              "it hold$"):
        ByConstruction("")


def test_every_wrapper_hands_its_rules_the_reference_and_the_value_it_was_given():
    x = Fixed(FULL, text="tx")
    EveryOf({"x": x}).describe(REF)
    EveryOf({"x": x}).decide({"x": "vx"}, REF)
    assert x.asked == [("describe", REF), ("vx", REF)]
    a = Fixed(FULL)
    OnePartPerSignal(AllOf({"a": a}), "same", 0.9).describe(REF)
    assert a.asked == [("describe", REF)]
    r = Fixed(FULL)
    Requires(r, 0.5, "R²").describe(REF)
    assert r.asked == [("describe", REF)]
    # an unmet precondition still shows what the rule says of the run's own value
    s = Fixed(FULL)
    Precondition(s, Condition("corpus", "the paper's")).decide({"conditions": {"corpus": False}, "value": "V"}, REF)
    assert s.asked == [("V", REF)]


def test_two_merged_groups_are_both_named():
    rules = {n: Fixed(Decision("reproduced", f"r{n}")) for n in "abcd"}
    got = OnePartPerSignal(AllOf(rules), "same", 0.9).decide(
        {"groups": [["a", "b"], ["c", "d"]], "value": {n: 0 for n in "abcd"}}, REF)
    assert got.reason.startswith("a and b are one signal, counted once; c and d are one signal, counted once: "
                                 "2 of 2 counted parts reproduced: a = b: reproduced (ra); c = d: reproduced (rc)")
