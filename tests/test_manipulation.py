"""Tests of the manipulation strategies and of recovery speed (chapter 2)."""

from __future__ import annotations

import math

import pytest
import torch

from anatomy_kit import anatomy
from anatomy_kit.anatomy import manipulation as M
from anatomy_kit.anatomy import recovery as R
from anatomy_kit.anatomy.predictability import MODULES
from anatomy_kit.hf import evaluation
from anatomy_kit.hf.layers import decoder_layers, layer_module
from anatomy_kit.hf.surgery import noisy_weights
from anatomy_kit.validate import AnatomyKitError

from conftest import tiny_llama


def _tiny():
    """The brief's tiny model: vocab 128, 6 layers, hidden 32, GQA 4:2."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def _batches(n=4, t=16, batch_size=2, seed=1, vocab=128):
    ids = torch.randint(3, vocab, (n, t), generator=torch.Generator().manual_seed(seed))
    return evaluation.make_batches(ids, batch_size)


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _assert_restored(model, before):
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k          # exact: the saved tensors are put back


def _w(model, l, m):
    return layer_module(model, l, m).weight.detach().clone()


def test_zeroing_gives_the_skip_of_both_branches():
    model, batches = _tiny(), _batches()
    before = _state(model)
    with M.manipulated(model, 2, "zero"):
        for m in MODULES:
            assert torch.count_nonzero(layer_module(model, 2, m).weight) == 0
        zeroed = evaluation.perplexity(model, batches)
    _assert_restored(model, before)
    with anatomy.ablated(model, 2, "skip"):
        skipped = evaluation.perplexity(model, batches)
    assert zeroed == skipped    # exact: zero weights give exact zeros, and h + 0 = h: the rest is the same pass


@pytest.mark.parametrize("alpha", [0.5, 0.9, 1.3])
def test_scaling_multiplies_every_weight(alpha):
    model = _tiny()
    before = _state(model)
    old = {m: _w(model, 3, m) for m in MODULES}
    with M.manipulated(model, 3, "scale", alpha=alpha):
        for m in MODULES:
            # exact: the kit computes the same float32 product α·W; the neighbour is untouched
            torch.testing.assert_close(layer_module(model, 3, m).weight, alpha * old[m], rtol=0, atol=0)
        assert torch.equal(layer_module(model, 2, "q").weight, before["model.layers.2.self_attn.q_proj.weight"])
    _assert_restored(model, before)


@pytest.mark.parametrize("neighbour,layer,source", [("previous", 3, [2]), ("next", 3, [4]), ("mean", 3, [2, 4]),
                                                     ("previous", 0, [1]), ("next", 5, [4]), ("mean", 0, [1])])
def test_clone_equals_the_neighbour(neighbour, layer, source):
    model = _tiny()
    before = _state(model)
    with M.manipulated(model, layer, "clone", neighbour=neighbour):
        for m in MODULES:
            expect = sum(_w(model, j, m) for j in source) / len(source)
            torch.testing.assert_close(layer_module(model, layer, m).weight, expect, rtol=0, atol=0)  # same sum / n
    _assert_restored(model, before)


@pytest.mark.parametrize("beta", [0.0, 0.25, 1.0])
def test_blend_formula(beta):
    model = _tiny()
    W, N = _w(model, 2, "gate"), _w(model, 1, "gate")
    with M.manipulated(model, 2, "blend", beta=beta, modules=["gate"]):
        torch.testing.assert_close(layer_module(model, 2, "gate").weight, beta * W + (1 - beta) * N,
                                   rtol=0, atol=0)      # exact: the kit evaluates the same expression
        torch.testing.assert_close(layer_module(model, 2, "up").weight, _w(model, 2, "up"), rtol=0, atol=0)  # untouched


@pytest.mark.parametrize("rank", [1, 3, 8])
def test_low_rank_blend_changes_the_matrix_by_rank_r(rank):
    model = _tiny()
    W, N = _w(model, 4, "down").double(), _w(model, 3, "down").double()
    with M.manipulated(model, 4, "lowrank-blend", beta=0.3, rank=rank, modules=["down"]):
        change = layer_module(model, 4, "down").weight.detach().double() - W
    assert torch.linalg.matrix_rank(change, atol=1e-5).item() == rank
    torch.testing.assert_close(change, 0.7 * M.low_rank(N - W, rank), rtol=0, atol=1e-5)
    # full rank: the low-rank blend is the plain blend
    full = min(W.shape)
    new = M.manipulated_weights(model, 4, "lowrank-blend", beta=0.3, rank=full, modules=["down"])[(4, "down")]
    torch.testing.assert_close(new.double(), 0.3 * W + 0.7 * N, rtol=0, atol=1e-5)
    # Eckart–Young: the rank-r approximation error is the tail of the singular values
    s = torch.linalg.svdvals(N - W)
    err = torch.linalg.norm((N - W) - M.low_rank(N - W, rank))
    assert err.item() == pytest.approx(s[rank:].norm().item(), rel=1e-6)


def test_several_layers_use_original_neighbours_and_restore_on_error():
    model = _tiny()
    before = _state(model)
    w1, w2 = _w(model, 1, "q"), _w(model, 2, "q")
    with pytest.raises(RuntimeError), M.manipulated(model, [2, 3], "clone", neighbour="previous"):
        torch.testing.assert_close(layer_module(model, 2, "q").weight, w1, rtol=0, atol=0)   # a clone is a copy
        torch.testing.assert_close(layer_module(model, 3, "q").weight, w2, rtol=0, atol=0)   # not the cloned layer 2
        raise RuntimeError("inside")
    _assert_restored(model, before)


def test_manipulation_bad_inputs():
    model = _tiny()
    with pytest.raises(AnatomyKitError, match="alpha=0"):
        M.manipulated_weights(model, 1, "scale", alpha=0)
    with pytest.raises(AnatomyKitError, match="alpha=-0.5"):
        M.manipulated_weights(model, 1, "scale", alpha=-0.5)
    with pytest.raises(AnatomyKitError, match="'qkv'"):
        M.manipulated_weights(model, 1, "zero", modules=["qkv"])
    with pytest.raises(AnatomyKitError, match="layer=6"):
        M.manipulated_weights(model, 6, "zero")
    with pytest.raises(AnatomyKitError, match="layer=-1"):
        M.manipulated_weights(model, -1, "zero")
    with pytest.raises(AnatomyKitError, match="'shrink'"):
        M.manipulated_weights(model, 1, "shrink")
    with pytest.raises(AnatomyKitError, match="beta=1.5"):
        M.manipulated_weights(model, 1, "blend", beta=1.5)
    with pytest.raises(AnatomyKitError, match="rank=0"):
        M.manipulated_weights(model, 1, "lowrank-blend", rank=0)
    with pytest.raises(AnatomyKitError, match="rank=99"):
        M.manipulated_weights(model, 1, "lowrank-blend", rank=99)
    with pytest.raises(AnatomyKitError, match="'left'"):
        M.manipulated_weights(model, 1, "clone", neighbour="left")
    with pytest.raises(AnatomyKitError, match="noise_fraction=0"):
        noisy_weights(model, 1, 0)
    with pytest.raises(AnatomyKitError, match="noise_fraction=-1"):
        noisy_weights(model, 1, -1)


def test_noise_has_the_requested_scale_and_is_restored():
    model = tiny_llama(n_layers=6)
    before = _state(model)
    W = _w(model, 2, "up")
    with R.noised(model, 2, 0.5, seed=3):
        eps = layer_module(model, 2, "up").weight.detach() - W
        assert eps.std().item() == pytest.approx(0.5 * W.std().item(), rel=0.1)
        assert torch.equal(layer_module(model, 1, "up").weight, before["model.layers.1.mlp.up_proj.weight"])  # as is
    _assert_restored(model, before)


def test_count_recovery_steps_on_a_known_sequence():
    seq = iter([30.0, 28.0, 25.0, 22.5, 21.0])
    calls = []
    steps, curve = R.count_recovery_steps(lambda: next(seq), calls.append, baseline=22.6, max_steps=10)
    assert steps == 3 and curve == [30.0, 28.0, 25.0, 22.5] and calls == [1, 2, 3]
    steps, curve = R.count_recovery_steps(lambda: 20.0, calls.append, baseline=22.6, max_steps=10)
    assert steps == 0 and curve == [20.0]
    seq = iter([30.0, 29.0, 28.0])
    steps, curve = R.count_recovery_steps(lambda: next(seq), lambda k: None, baseline=22.6, max_steps=2)
    assert steps is None and len(curve) == 3


def test_recovery_with_a_monkeypatched_evaluator_counts_real_optimizer_steps():
    model, batches = _tiny(), _batches()
    cache = evaluation.capture_prefix(model, batches)
    before = _state(model)
    base = cache.baseline_ppl
    values = iter([base * 3, base * 2, base * 1.5, base * 1.01, base * 0.99, base * 0.5])
    seen = []

    def fake_eval(m):
        seen.append(layer_module(m, 2, "v").weight.detach().clone())
        return next(values)

    rec = R.recovery_speed(model, 2, cache, cache, noise_fraction=0.5, max_steps=10, lr=1e-2, evaluate=fake_eval)
    assert rec.steps == 4 and rec.recovered and len(rec.curve) == 5 and rec.noised_ppl == base * 3
    assert all(not torch.equal(a, b) for a, b in zip(seen, seen[1:]))   # every step moved the weights
    _assert_restored(model, before)
    assert all(p.requires_grad for p in model.parameters()) and all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("trainable", ["layer", "model"])
def test_recovery_end_to_end_restores_the_model(trainable):
    model = _tiny()
    train, ev = _batches(seed=2), _batches(seed=3)
    cache = evaluation.capture_prefix(model, ev)
    before = _state(model)
    rec = R.recovery_speed(model, 3, train, cache, noise_fraction=0.5, max_steps=3, lr=1e-2, trainable=trainable)
    assert len(rec.curve) == (rec.steps + 1 if rec.recovered else 4)
    # the first value is the noised model evaluated exactly (prefix replay = full forward: the same layer
    # calls on the same inputs, the same head and sums: bit for bit)
    with R.noised(model, 3, 0.5, seed=0):
        assert rec.noised_ppl == evaluation.perplexity(model, ev)
    assert all(math.isfinite(c) for c in rec.curve)
    _assert_restored(model, before)


def test_noise_free_model_recovers_in_zero_steps():
    model, batches = _tiny(), _batches()
    cache = evaluation.capture_prefix(model, batches)
    layer = 2
    evaluate = lambda: math.exp(evaluation.nll_from_layer(model, cache, layer) / cache.n_targets)  # noqa: E731
    steps, curve = R.count_recovery_steps(evaluate, lambda k: pytest.fail("no step needed"),
                                          baseline=cache.baseline_ppl, max_steps=5)
    assert steps == 0 and curve[0] == cache.baseline_ppl     # replay = the captured pass, bit for bit


def test_recovery_bad_inputs():
    model, batches = _tiny(), _batches()
    cache = evaluation.capture_prefix(model, batches)
    with pytest.raises(AnatomyKitError, match="noise_fraction=-0.5"):
        R.recovery_speed(model, 1, cache, cache, noise_fraction=-0.5)   # 0 is the control run
    with pytest.raises(AnatomyKitError, match="layer=7"):
        R.recovery_speed(model, 7, cache, cache)
    with pytest.raises(AnatomyKitError, match="'all'"):
        R.recovery_speed(model, 1, cache, cache, trainable="all")
    with pytest.raises(AnatomyKitError, match="lr=0"):
        R.recovery_speed(model, 1, cache, cache, lr=0)
    with pytest.raises(AnatomyKitError, match="eval_cache"):
        R.recovery_speed(model, 1, cache, batches)
    assert len(decoder_layers(model)) == 6


def test_count_recovery_steps_full_curve_keeps_stepping():
    seq = iter([30.0, 22.0, 21.0, 25.0])
    calls = []
    steps, curve = R.count_recovery_steps(lambda: next(seq), calls.append, baseline=22.6, max_steps=3,
                                          full_curve=True)
    assert steps == 1 and curve == [30.0, 22.0, 21.0, 25.0] and calls == [1, 2, 3]
    steps, curve = R.count_recovery_steps(lambda: 20.0, calls.append, baseline=22.6, max_steps=2, full_curve=True)
    assert steps == 0 and len(curve) == 3


def test_control_run_trains_the_intact_layer_and_restores():
    model = _tiny()
    train, ev = _batches(seed=2), _batches(seed=3)
    cache = evaluation.capture_prefix(model, ev)
    before = _state(model)
    ctl = R.recovery_speed(model, 3, train, cache, noise_fraction=0.0, max_steps=3, lr=5e-2, full_curve=True)
    assert ctl.noised_ppl == cache.baseline_ppl      # no noise: step 0 is the intact pass, bit for bit
    assert ctl.steps == 0 and len(ctl.curve) == 4 and len(set(ctl.curve[1:])) == 3   # but it trained
    _assert_restored(model, before)


def test_choose_lr_keeps_the_largest_harmless_rate():
    """Fake evaluations: each lr changes the intact PPL by a known amount after its first step."""
    model = _tiny()
    cache = evaluation.capture_prefix(model, _batches(seed=3))
    effect = {1.0: 50.0, 0.1: -5.0, 0.01: 0.5, 0.001: 0.1}     # % change caused by each lr
    runs = []
    orig = R.recovery_speed

    def spy(model, layer, train, eval_cache, *, lr, **kw):
        runs.append((lr, layer))
        calls = iter(range(100))
        kw["evaluate"] = lambda m: cache.baseline_ppl * (1 + effect[lr] / 100 * (next(calls) > 0))
        return orig(model, layer, train, eval_cache, lr=lr, **kw)

    R.recovery_speed = spy
    try:
        choice = R.choose_lr(model, [1, 2], cache, cache, candidates=[0.001, 1.0, 0.1, 0.01], max_steps=2,
                             tolerance_pct=1.0)
        seen, runs[:] = list(runs), []
        none = R.choose_lr(model, [1, 2], cache, cache, candidates=[1.0, 0.1], max_steps=2, tolerance_pct=1.0)
    finally:
        R.recovery_speed = orig
    assert choice.chosen == 0.01 and choice.ok                     # −5 % (adaptation) counts as a change too
    assert seen == [(1.0, 1), (0.1, 1), (0.01, 1), (0.01, 2)]      # a rate is dropped at its first bad layer
    assert choice.max_change_pct == pytest.approx({1.0: 50.0, 0.1: 5.0, 0.01: 0.5})
    assert set(choice.controls[0.01]) == {1, 2} and len(choice.controls[0.01][1].curve) == 3
    assert none.chosen == 0.1 and not none.ok and set(none.controls[0.1]) == {1, 2}
    with pytest.raises(AnatomyKitError, match="candidate"):
        R.choose_lr(model, [1], cache, cache, candidates=[], max_steps=2)


def test_recovery_draws_one_run_per_seed_and_resume(tmp_path):
    from anatomy_kit.store import Store

    model = _tiny()
    train, cache = _batches(seed=2), evaluation.capture_prefix(model, _batches(seed=3))
    store = Store(tmp_path / "r.json")
    runs = R.recovery_draws(model, [2, 4], train, cache, seeds=[0, 1], lr=1e-2, noise_fraction=0.5, max_steps=2,
                            store=store)
    assert set(runs) == {2, 4} and [r.seed for r in runs[2]] == [0, 1]
    assert runs[2][0].noised_ppl != runs[2][1].noised_ppl                   # two noise draws
    assert all(len(r.curve) == 3 for rs in runs.values() for r in rs)        # full curves
    r = runs[4][1]
    assert r.excess_pct(0) == pytest.approx(100 * (r.curve[0] / r.baseline_ppl - 1))
    assert r.excess_pct() == pytest.approx(100 * (r.curve[-1] / r.baseline_ppl - 1))
    assert "recovery/0.01/2/4/1" in store
    orig = R.recovery_speed
    R.recovery_speed = lambda *a, **k: pytest.fail("a stored run was recomputed")
    try:
        again = R.recovery_draws(model, [2, 4], train, cache, seeds=[0, 1], lr=1e-2, max_steps=2,
                                 store=Store(tmp_path / "r.json"))
    finally:
        R.recovery_speed = orig
    assert again[4][1].curve == r.curve     # stored floats, read back


def test_recovery_draws_without_training_measure_only_the_damage():
    model = _tiny()
    train, cache = _batches(seed=2), evaluation.capture_prefix(model, _batches(seed=3))
    zero = R.recovery_draws(model, [3], train, cache, seeds=[0, 1, 2], lr=1e-2, max_steps=0, noise_fraction=0.5)
    trained = R.recovery_draws(model, [3], train, cache, seeds=[1], lr=1e-2, max_steps=2, noise_fraction=0.5)
    assert [len(r.curve) for r in zero[3]] == [1, 1, 1]
    assert zero[3][1].curve[0] == trained[3][0].curve[0]   # same draw, same evaluation: bit for bit



@pytest.mark.parametrize("shape", [(40, 12), (12, 40)])
def test_low_rank_equals_the_truncated_svd_on_tall_and_wide_matrices(shape):
    g = torch.Generator().manual_seed(6)
    A = torch.randn(shape, generator=g, dtype=torch.float64) * torch.logspace(0, -3, shape[1], dtype=torch.float64)
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    for rank in (1, 4, min(shape)):
        want = (U[:, :rank] * S[:rank]) @ Vh[:rank]
        # float64: the top eigenvectors of AᵀA (or AAᵀ) are the top singular vectors to ~u·σ1²/(σr² − σr+1²);
        # with these well-separated singular values the two approximations agree far below 1e-10·σ1
        torch.testing.assert_close(M.low_rank(A, rank), want, rtol=0, atol=1e-10 * float(S[0]))
    assert M.low_rank(A.float(), 2).dtype == torch.float32
