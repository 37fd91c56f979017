"""Chapter 7's harder chance and its one-signal rule (anatomy_kit.synthesis): random sets drawn from the
interior layers by position alone (every interior set when there are few, the measured ones reused),
each edge layer judged alone against its model's layers, and signals that are one ranking in two names
merged into one part. Expected values are worked by hand; the pruned perplexities come from an
independent forward of the tiny model with the layers deleted (tests/test_card_pruning.py's rebuild)."""

import math

import numpy as np
import pytest

from anatomy_kit.synthesis import agreement as agreement_mod
from anatomy_kit.synthesis import depth as depth_mod
from anatomy_kit.synthesis import pruning as pruning_mod
from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts.rules import BeyondNull

from conftest import f32_forward_rtol, f32_sum_rtol
from test_card_architectures import corpus, tok  # noqa: F401 (module fixtures, shared)
from test_card_pruning import own_mean_nll, rebuilt
from test_synthesis_signals import _table, built, card_eval_batches, card_progress  # noqa: F401 (fixture)


@pytest.mark.parametrize("n, share, expected", [(30, 0.1, range(3, 27)), (10, 0.1, range(1, 9)),
                                                (6, 0.1, range(1, 5)), (30, 0.0, range(1, 29)),
                                                (20, 0.1, range(2, 18)), (21, 0.1, range(3, 18))])
def test_interior_layers_by_hand(n, share, expected):
    # ⌈0.1·20⌉ = 2 exactly, ⌈0.1·21⌉ = 3; at least one layer leaves at each end even at share 0
    assert pruning_mod.interior_layers(n, share) == tuple(expected)


def test_interior_layers_bad_inputs():
    with pytest.raises(AnatomyKitError, match="edge_share"):
        pruning_mod.interior_layers(10, 0.5)
    with pytest.raises(AnatomyKitError, match="no interior"):
        pruning_mod.interior_layers(3, 0.4)


def test_every_interior_set_when_there_are_no_more_than_asked():
    sets, exact = pruning_mod.position_null_sets(6, 2, 6, seed=0)        # C(4, 2) = 6 ≤ 6: all of them
    assert exact and sets == ((1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4))
    sets, exact = pruning_mod.position_null_sets(6, 2, 5, seed=0)        # 6 > 5: five drawn
    assert not exact and len(set(sets)) == 5 and all(set(s) <= {1, 2, 3, 4} for s in sets)


def test_measured_interior_sets_come_first_and_edge_sets_never():
    measured = [(0, 5, 6), (3, 4, 5), (29, 10, 11), (12, 10, 11), (3, 4, 5), (1, 2)]
    sets, exact = pruning_mod.position_null_sets(30, 3, 99, seed=1, measured=measured)
    assert not exact and len(sets) == len(set(sets)) == 99
    assert sets[:2] == ((3, 4, 5), (10, 11, 12))                        # reused, in order, once each
    assert all(len(s) == 3 and 3 <= min(s) and max(s) <= 26 for s in sets)
    assert sets == pruning_mod.position_null_sets(30, 3, 99, seed=1, measured=measured)[0]
    assert sets[2:] != pruning_mod.position_null_sets(30, 3, 99, seed=2, measured=measured)[0][2:]


def test_the_position_null_measures_interior_sets_and_reuses_the_store(built, tok, corpus):
    model, report, cache = built
    text, batches = card_eval_batches(report, tok, corpus)
    store = dict(pruning_mod.card_measurements(card_progress(report, cache)))
    test = pruning_mod.decisive_test(model, batches, _table(report).values(), max_k=2, n_random=5, seed=0,
                                     store=store)
    nulls = pruning_mod.position_null(model, batches, test, ["skip", "Block Influence"], k=2, n_sets=99,
                                      store=store)
    ids = text.eval_blocks
    rtol = f32_forward_rtol(6, 32) + f32_sum_rtol(ids.shape[0] * (ids.shape[1] - 1))
    pool = {p: math.exp(own_mean_nll(rebuilt(model, p), ids)) for p in
            ((1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4))}          # the six interior 2-sets of 6 layers
    for name, null in nulls.items():
        ours = test.curve(name)[-1]
        assert null.n_perm == 6
        assert sorted(null.null.tolist()) == pytest.approx(sorted(pool.values()), rel=rtol)
        count = sum(v <= ours.ppl * (1 + rtol) for v in pool.values())
        inside = set(ours.layers) <= {1, 2, 3, 4}
        assert null.p == pytest.approx(count / 6 if inside else (1 + count) / 7)
        assert null.method == ("exact" if inside else "monte carlo")
    # a stored set is read, never measured again: a planted value comes back as it is
    planted = dict(store, **{pruning_mod.set_key((1, 2)): [0.0] * len(store[pruning_mod.set_key((1, 2))])})
    again = pruning_mod.position_null(model, batches, test, ["skip"], k=2, n_sets=99, store=planted)
    assert min(again["skip"].null) == pytest.approx(1.0)                 # exp(0 / tokens)
    with pytest.raises(AnatomyKitError, match="no 3-set"):
        pruning_mod.position_null(model, batches, test, ["skip"], k=3, store=store)


def test_a_99_set_null_can_reach_0_01_and_19_sets_cannot_reach_0_04():
    best = pruning_mod.random_set_null(1.0, [2.0 + i for i in range(99)], k=3, exact=False)
    assert best.p == pytest.approx(0.01) and BeyondNull("less", alpha=0.05).decide(best, {}).verdict == "reproduced"
    # a Monte Carlo p exactly at α decides nothing (the next draw could move it either side)
    assert BeyondNull("less", alpha=0.01).decide(best, {}).verdict == "not established"
    few = pruning_mod.random_set_null(1.0, [2.0 + i for i in range(19)], k=3, exact=False)
    assert BeyondNull("less", alpha=0.04).decide(few, {}).verdict == "not comparable"   # floor 1/20


def _agreement(names, rho):
    r = np.array(rho, dtype=float)
    return agreement_mod.Agreement(tuple(names), r, np.zeros_like(r), np.full(r.shape, 30),
                                   np.full(r.shape, "permutation"))


@pytest.mark.parametrize("rho, expected", [(0.95, [["a", "b"], ["c"]]), (0.9499, [["a"], ["b"], ["c"]]),
                                           (float("nan"), [["a"], ["b"], ["c"]])])
def test_same_signal_groups_at_the_declared_rho(rho, expected):
    agree = _agreement("abc", [[1, rho, 0.1], [rho, 1, 0.2], [0.1, 0.2, 1]])
    sets = {"a": [(1,), (1, 2)], "b": [(3,), (3, 4)], "c": [(5,), (5, 6)]}
    assert agreement_mod.same_signal_groups("abc", sets, agree) == expected


def test_same_sets_at_every_k_merge_whatever_rho_and_groups_close_transitively():
    agree = _agreement("abcd", [[1, 0.1, 0.96, 0], [0.1, 1, 0, 0], [0.96, 0, 1, 0], [0, 0, 0, 1]])
    sets = {"a": [(1,), (1, 2)], "b": [(2,), (1, 2)], "c": [(7,), (7, 8)], "d": [(2,), (2, 1)]}
    # b and d: the same set at every k (order inside a set does not matter); a and c: ρ = 0.96
    assert agreement_mod.same_signal_groups("abcd", sets, agree) == [["a", "c"], ["b", "d"]]
    sets["d"] = [(2,), (2, 3)]                          # one k differs: no longer one signal
    assert agreement_mod.same_signal_groups("abcd", sets, agree) == [["a", "c"], ["b"], ["d"]]
    chain = _agreement("abc", [[1, 0.97, 0.5], [0.97, 1, 0.96], [0.5, 0.96, 1]])
    assert agreement_mod.same_signal_groups("abc", {n: [(i,)] for i, n in enumerate("abc")}, chain) == \
        [["a", "b", "c"]]
    with pytest.raises(AnatomyKitError, match="one-shot sets"):
        agreement_mod.same_signal_groups("ab", {"a": [(1,)]}, chain)


def test_one_edge_layer_alone_against_its_models_layers():
    values = [5.0, 1.0, 2.0, 3.0, 4.0, 0.5]            # percentiles 1, 0.2, 0.4, 0.6, 0.8, 0
    first, last = depth_mod.layer_importance(values, 0), depth_mod.layer_importance(values, -1)
    assert first.observed == 1.0 and first.p == pytest.approx(1 / 6) and first.n_perm == 6
    assert last.observed == 0.0 and last.p == 1.0
    assert depth_mod.layer_importance(values, 4).p == pytest.approx(2 / 6)
    assert BeyondNull("greater").decide(first, {}).verdict == "not comparable"        # 1/6 > 0.05
    deep = np.arange(20.0)[::-1]                       # layer 0 the most important of 20: p = 1/20
    assert BeyondNull("greater").decide(depth_mod.layer_importance(deep, 0), {}).verdict == "reproduced"
    assert BeyondNull("greater").decide(depth_mod.layer_importance(deep, -1), {}).verdict == "not reproduced"
    with pytest.raises(AnatomyKitError, match="layer"):
        depth_mod.layer_importance(values, 6)


def test_one_part_per_signal_counts_a_merged_group_once():
    from anatomy_kit.verdicts.rules import AllOf, OnePartPerSignal

    agree = _agreement(["BI", "angular", "update"], [[1, 0.993, 0.2], [0.993, 1, 0.1], [0.2, 0.1, 1]])
    sets = {"BI": [(5,)], "angular": [(9,)], "update": [(7,)]}
    groups = agreement_mod.same_signal_groups(["BI", "angular", "update"], sets, agree)
    assert groups == [["BI", "angular"], ["update"]]
    good = pruning_mod.random_set_null(1.0, [2.0 + i for i in range(99)], k=3, exact=False)     # p = 0.01
    bad = pruning_mod.random_set_null(50.0, [2.0 + i for i in range(99)], k=3, exact=False)     # p = 0.5
    rule = OnePartPerSignal(AllOf({n: BeyondNull("less") for n in ("BI", "angular", "update")}),
                            "the same one-shot sets at every k, or ρ ≥ 0.95", 0.95)
    # two copies that hold and one signal that does not: one holds, one does not, so partly, not 2 of 3
    d = rule.decide({"groups": groups, "value": {"BI": good, "angular": good, "update": bad}}, {})
    assert d.verdict == "partly reproduced" and "BI and angular are one signal, counted once" in d.reason
    assert "1 of 2 counted parts reproduced" in d.reason
    apart = rule.decide({"groups": [["BI"], ["angular"], ["update"]],
                         "value": {"BI": good, "angular": good, "update": bad}}, {})
    assert "2 of 3 counted parts reproduced" in apart.reason
    # the group is judged by its first member's value alone
    first_bad = rule.decide({"groups": [["update", "BI"], ["angular"]],
                             "value": {"BI": good, "angular": good, "update": bad}}, {})
    assert "update = BI: not established" in first_bad.reason
    with pytest.raises(AnatomyKitError, match="exactly once"):
        rule.decide({"groups": [["BI"], ["update"]], "value": {"BI": good, "angular": good, "update": bad}}, {})
    with pytest.raises(AnatomyKitError, match="AllOf"):
        OnePartPerSignal(BeyondNull("less"), "x", 0.95)
