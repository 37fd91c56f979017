"""Chapter 7's signal table, agreement matrix, families and decisive pruning test (anatomy_kit.synthesis).

The pruning test is checked on a real tiny Llama and a real card: every measured set's perplexity equals
an independent forward of the model with those layers deleted by hand (tests/test_card_pruning.py's
rebuild), sets the card measured are reused, not re-measured, and the random-set p-values count as
documented.
"""

import json
import math

import numpy as np
import pytest
import torch

from anatomy_kit.card import build_card
from anatomy_kit.card.text import card_text
from anatomy_kit.hf.evaluation import make_batches
from anatomy_kit.synthesis import agreement as agreement_mod
from anatomy_kit.synthesis import pruning as pruning_mod
from anatomy_kit.synthesis import signals as signals_mod
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_forward_rtol, f32_sum_rtol
from test_card_architectures import TINY, corpus, tiny_model, tok  # noqa: F401 (module fixtures, shared)
from test_card_pruning import own_mean_nll, rebuilt


@pytest.fixture(scope="module")
def built(tok, corpus, tmp_path_factory):
    torch.set_num_threads(1)
    model = tiny_model("llama", len(tok), n_layers=6)
    settings = TINY.__class__(**{**TINY.to_dict(), "max_prune": 2})
    cache = tmp_path_factory.mktemp("card-cache")
    report = build_card(model, tokenizer=tok, corpus=corpus, settings=settings, cache_dir=cache, progress=False)
    return model, report, cache


def _table(report):
    return signals_mod.SignalTable("tiny", tuple(signals_mod.card_signals(report.doc)))


def test_card_signals_read_the_card_and_its_costs(built):
    _, report, _ = built
    table = _table(report)
    assert table.n_layers == 6
    assert table.names[:4] == ["skip", "neighbour-mean", "attention only", "MLP only"]
    for s in table.signals:
        assert s.values.shape == (6,) and np.isfinite(s.values).all()
    skip = [l["causal"]["skip"]["delta_pct"] for l in report.doc["layers"]]
    np.testing.assert_array_equal(table["skip"].values, skip)     # copied, not recomputed
    # a causal sweep with the prefix cache: (L + 1)/2 passes per edit, counted exactly from the card
    assert table["skip"].forward_passes == pytest.approx(3.5, rel=1e-12)
    assert table["Block Influence"].forward_passes == pytest.approx(1.0, rel=1e-12)
    assert table["skip"].seconds > 0
    # causal edits measured on the evaluation blocks choose in-sample; the calibration skip does not
    assert table["skip"].chosen_on == "evaluation blocks, loss"
    assert table["Block Influence"].chosen_on == "evaluation blocks, states only"
    calib = table["skip, calibration text"]
    assert calib.chosen_on == "other text" and calib.tokens == report.doc["text"]["calibration_tokens"]
    first = report.doc["pruning"]["greedy_steps"][0]["scores"]
    np.testing.assert_array_equal(calib.values, [first[str(j)] for j in range(6)])


def test_chapter_signals_are_missing_when_absent_or_of_another_model(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "ch02_anatomy_weights.json").write_text(json.dumps(
        {"run": {"model": "other"}, "metrics": {"r2": {}}}))
    got, missing = signals_mod.chapter_signals(tmp_path, "embedded", 6)
    assert got == [] and missing == ["ch01_ablation_map", "ch02_anatomy_weights", "ch04_geometric_work"]


def test_weight_unpredictability_is_undefined_where_chapter_2_has_no_prediction(tmp_path):
    r2 = [None, 0.2, 0.4, 0.6, 0.1, None]
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "ch02_anatomy_weights.json").write_text(json.dumps(
        {"run": {"model": "m"}, "metrics": {"r2": {"q": {"elements_by_layer": r2},
                                                   "k": {"elements_by_layer": [None, 0.4, 0.0, 0.6, 0.3, None]}}}}))
    got, _ = signals_mod.chapter_signals(tmp_path, "m", 6)
    (s,) = got
    assert s.kind == "weights" and s.forward_passes == 0.0
    np.testing.assert_allclose(s.values[1:5], [0.7, 0.8, 0.4, 0.8], rtol=1e-12)
    assert np.isnan(s.values[[0, 5]]).all()


def test_a_table_refuses_mixed_lengths_duplicates_and_unknown_kinds():
    a = signals_mod.Signal("a", "cheap", np.arange(4.0), "x")
    with pytest.raises(AnatomyKitError, match="one length"):
        signals_mod.SignalTable("m", (a, signals_mod.Signal("b", "cheap", np.arange(5.0), "x")))
    with pytest.raises(AnatomyKitError, match="distinct"):
        signals_mod.SignalTable("m", (a, a))
    with pytest.raises(AnatomyKitError, match="kind='psychic'"):
        signals_mod.Signal("c", "psychic", np.arange(4.0), "x")
    with pytest.raises(AnatomyKitError, match="chosen_on='dreams'"):
        signals_mod.Signal("c", "cheap", np.arange(4.0), "x", chosen_on="dreams")
    with pytest.raises(AnatomyKitError, match="no signal 'zz'"):
        signals_mod.SignalTable("m", (a,))["zz"]


def _synthetic_table():
    rng = np.random.default_rng(0)
    base = rng.standard_normal(12)
    kinds = {"c1": ("causal", base), "c2": ("causal", base + 0.05 * rng.standard_normal(12)),
             "g1": ("geometric", -base), "g2": ("geometric", -base + 0.05 * rng.standard_normal(12)),
             "w": ("weights", np.r_[np.nan, rng.standard_normal(10), np.nan])}
    return signals_mod.SignalTable("m", tuple(signals_mod.Signal(n, k, v, "test") for n, (k, v) in kinds.items()))


def test_agreement_matrix_matches_pairwise_spearman_and_skips_undefined_layers():
    from anatomy_kit.stats import spearman

    table = _synthetic_table()
    a = agreement_mod.agreement_matrix(table, n_perm=500, seed=1)
    assert a.rho.shape == (5, 5) and np.allclose(np.diag(a.rho), 1)
    np.testing.assert_allclose(a.rho, a.rho.T)
    x, w = table["c1"].values, table["w"].values
    ref = spearman(x[1:11], w[1:11], n_perm=500, seed=1)
    # the same function on the same ten layers and seed: the same computation, so equal
    assert a.pair("c1", "w").rho == ref.rho and a.pair("c1", "w").p == ref.p and a.n[0, 4] == 10
    assert a.pair("c1", "g1").rho == pytest.approx(-1.0, abs=1e-12)


def test_families_group_what_correlates_and_order_keeps_them_together():
    a = agreement_mod.agreement_matrix(_synthetic_table(), n_perm=200)
    families, order = agreement_mod.signal_families(a)
    as_sets = [set(f) for f in families]
    assert {"c1", "c2"} in as_sets and {"g1", "g2"} in as_sets and {"w"} in as_sets
    names = [a.names[i] for i in order]
    for fam in families:
        idx = sorted(names.index(n) for n in fam)
        assert idx == list(range(idx[0], idx[0] + len(idx)))
    with pytest.raises(AnatomyKitError, match="min_rho=1"):
        agreement_mod.signal_families(a, min_rho=1)


def test_percentiles_family_scores_and_disputed_layers():
    np.testing.assert_allclose(agreement_mod.percentile_ranks(np.array([3.0, 1.0, np.nan, 2.0])),
                               [1.0, 0.0, np.nan, 0.5])
    table = _synthetic_table()
    score = agreement_mod.family_score(table, ["c1", "w"])
    assert np.isfinite(score).all()           # the causal signal covers the layers w does not
    got = agreement_mod.disputed_layers(table, ["c1", "c2"], ["g1", "g2"], top=2)
    worst = np.argsort(-np.abs(agreement_mod.family_score(table, ["c1", "c2"])
                               - agreement_mod.family_score(table, ["g1", "g2"])), kind="stable")[:2]
    assert [d["layer"] for d in got] == sorted(worst.tolist(), key=lambda l: worst.tolist().index(l))
    with pytest.raises(AnatomyKitError, match="at least two"):
        agreement_mod.percentile_ranks(np.array([np.nan, 1.0]))


def test_one_shot_and_random_set_null():
    v = np.array([5.0, 0.1, np.nan, 0.1, 3.0])
    assert pruning_mod.one_shot(v, 2) == (1, 3) and pruning_mod.one_shot(v, 3) == (1, 3, 4)
    with pytest.raises(AnatomyKitError, match="k"):
        pruning_mod.one_shot(v, 5)                      # only four layers are defined
    null = pruning_mod.random_set_null(10.0, [9.0, 10.0, 12.0, 15.0], k=2, exact=False)
    assert null.p == pytest.approx(3 / 5) and null.draws == "random 2-sets"
    exact = pruning_mod.random_set_null(10.0, [9.0, 10.0, 12.0, 15.0], k=1, exact=True)
    assert exact.p == pytest.approx(2 / 4)


def card_eval_batches(report, tok, corpus) -> tuple:
    """``(text, evaluation batches)`` of a built card, cut from the same corpus with the card's own settings."""
    s = report.doc["settings"]
    text = card_text(tok, corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                     n_calibration=s["calibration_tokens"] // s["block_size"])
    return text, make_batches(text.eval_blocks, s["batch_size"])


def card_progress(report, cache) -> dict:
    """The card's saved partial results (``progress.json`` in its cache folder)."""
    return json.loads((cache / report.doc["key"] / "progress.json").read_text())


def test_decisive_test_measures_the_pruned_models_and_reuses_the_cards_sets(built, tok, corpus):
    model, report, cache = built
    text, batches = card_eval_batches(report, tok, corpus)
    progress = card_progress(report, cache)
    known = pruning_mod.card_measurements(progress)
    assert set(map(str, range(6))) <= set(known)            # the card's skip sweep: every single layer
    store = dict(known)
    table = _table(report)
    greedy = [report.pruned_set(k) for k in (1, 2)]
    test = pruning_mod.decisive_test(model, batches, table.values(), max_k=2, n_random=5, seed=0,
                                     given={"greedy": greedy}, store=store)
    assert len(test.random[1]) == 6 and len(test.random[2]) == 5
    card_single = {l["layer"]: l["causal"]["skip"]["ppl"] for l in report.doc["layers"]}
    for r in test.random[1]:
        # read from the card's sweep: the same float64 block NLLs, summed in float64 in perhaps another
        # order (≤ B·2⁻⁵³ relative on the log, B blocks); 1e-12 is far above that and far below any slip
        assert r.ppl == pytest.approx(card_single[r.layers[0]], rel=1e-12)
    ids = text.eval_blocks
    # the kit's prefix-cache replay against a model with the layers deleted: two float32 code paths
    rtol = f32_forward_rtol(6, 32) + f32_sum_rtol(ids.shape[0] * (ids.shape[1] - 1))
    for pset in test.sets:
        assert math.log(pset.ppl) == pytest.approx(own_mean_nll(rebuilt(model, pset.layers), ids), rel=rtol)
        assert pset.low <= pset.delta_pct <= pset.high
        assert pset.null is not None and 0 < pset.null.p <= 1
    assert test.curve("greedy")[-1].layers == tuple(sorted(greedy[-1]))
    assert test.curve("last k")[-1].layers == (4, 5)
    assert math.isfinite(test.mean_log_ppl("skip"))
    with pytest.raises(AnatomyKitError, match="no sets by 'nope'"):
        test.curve("nope")
    with pytest.raises(AnatomyKitError, match="shape"):
        pruning_mod.decisive_test(model, batches, {"bad": np.zeros(5)}, max_k=2, n_random=2)
    with pytest.raises(AnatomyKitError, match="max_k"):
        pruning_mod.decisive_test(model, batches, table.values(), max_k=6, n_random=2)


def test_a_random_set_null_is_judged_and_named_as_random_sets():
    from anatomy_kit.verdicts.rules import BeyondNull

    null = pruning_mod.random_set_null(10.0, [11.0 + i for i in range(39)], k=3, exact=False)
    decision = BeyondNull("less").decide(null, {})
    assert decision.verdict == "reproduced" and null.p == pytest.approx(1 / 40)
    assert "39 random 3-sets" in decision.reason and "shuffles" not in decision.reason
