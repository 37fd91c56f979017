"""Growth Transformer training (chapter 3): schedules, phases through train(), clones, anti-layers, costs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from anatomy_kit.phased_training import cost, curriculum as C, phases as P, schedule_figure as F, sources
from anatomy_kit.lm import LMConfig, build_lm, load_trained
from anatomy_kit.lm.train import TrainConfig, batch_indices, train

VOCAB = 29


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """Every test in this module runs on one torch thread (see conftest.one_torch_thread)."""


def tiny(n_layers=4) -> LMConfig:
    return LMConfig(vocab_size=VOCAB, n_layers=n_layers, d_model=16, n_heads=2, ffn_widths=[24] * n_layers,
                    max_seq_len=8)


def toy_blocks():
    g = torch.Generator().manual_seed(5)
    start = torch.randint(0, VOCAB, (40, 1), generator=g)
    seq = (start + torch.arange(9)) % VOCAB        # a learnable toy stream (count up by one)
    return seq[:32], seq[32:]


@pytest.fixture(scope="module")
def blocks():
    return toy_blocks()


def base(**kw) -> TrainConfig:
    d = dict(steps=1, batch_size=4, lr=1e-2, seed=1, progress=False, checkpoint_every=1)
    d.update(kw)
    return TrainConfig(**d)


def three_phase(n_layers=4, anti=()) -> P.GrowthSchedule:
    """Phase a: layer 1; phase b: layers 1, 2 (2 enters as a clone of 1); phase c: every other layer."""
    rest = tuple(l for l in range(n_layers) if l not in anti)
    return P.GrowthSchedule(n_layers, (
        P.Phase("a", (1,), 0, 3, 1e-2, (), interface=False),
        P.Phase("b", (1, 2), 3, 6, 1e-2, ((2, 1),)),
        P.Phase("c", rest, 6, 9, 5e-3)), 9, anti_layers=anti, clone_noise=0.1)


def state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ------------------------------------------------------------------ frozen layers, clones, anti-layers

def test_frozen_layers_do_not_change_during_a_phase_bitwise(blocks, tmp_path):
    sched, model = three_phase(), build_lm(tiny(), 0)
    C.run_schedule(model, sched, *blocks, base(), checkpoint_dir=tmp_path)
    before = state(build_lm(tiny(), 0))
    for i, ph in enumerate(sched.phases):
        probe = build_lm(tiny(), 0)
        probe.load_state_dict(before)
        C.enter_phase(probe, sched, i, seed=1)             # the phase's start state
        start = state(probe)
        after = state(load_trained(build_lm(tiny(), 0), C.phase_dir(tmp_path, sched, i)))
        prefixes = tuple(f"layers.{l}." for l in ph.layers) + (("embed.", "norm.") if ph.interface else ())
        trains = {k for k in start if k.startswith(prefixes)}   # stated here, not asked of the kit
        frozen = [k for k in start if k not in trains]
        assert all(torch.equal(start[k], after[k]) for k in frozen), ph.name   # exact: never written
        assert frozen or ph.name == "c"                     # phase c trains everything
        assert all(not torch.equal(start[k], after[k]) for k in trains), f"{ph.name}: a training tensor did not move"
        before = after


def test_cloned_layer_equals_its_source_plus_the_stated_noise():
    sched, model = three_phase(), build_lm(tiny(), 3)
    src = {k[len("layers.1."):]: v.clone() for k, v in model.state_dict().items() if k.startswith("layers.1.")}
    others = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("layers.2.")}
    C.enter_phase(model, sched, 1, seed=7)
    g = torch.Generator().manual_seed(7 * 1_000_003 + 2)   # the stated noise: N(0, (0.1·std P)²), seeded (seed, layer)
    for name, p in model.layers[2].named_parameters():     # same parameter order as the kit's clone
        s = src[name]
        scale = float(s.std()) or 1.0
        expected = s + 0.1 * scale * torch.randn(s.shape, generator=g)
        assert torch.equal(p.detach(), expected), name     # exact: the kit's own ops, in the same order
        assert not torch.equal(p.detach(), s)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in others.items())   # exact: untouched


def test_anti_layers_are_reinitialised_scaled_and_never_train(blocks, tmp_path):
    sched = three_phase(anti=(3,))
    model = build_lm(tiny(), 0)
    old = state(model)
    C.run_schedule(model, sched, *blocks, base(), checkpoint_dir=tmp_path, init_seed=4)
    fresh = build_lm(tiny(), C._seed_for(4, "anti:3")).state_dict()
    for k, v in model.state_dict().items():
        if k.startswith("layers.3."):
            want = fresh[k] * 0.9 if v.ndim >= 2 else fresh[k]
            assert torch.equal(v, want), k                # bitwise: re-initialised × 0.9, then never touched
            assert v.ndim < 2 or not torch.equal(v, old[k])
    with pytest.raises(P.AntiLayerTrainedError):
        P.GrowthSchedule(4, (P.Phase("all", (0, 1, 2, 3), 0, 4, 1e-3),), 4, anti_layers=(3,))


# ------------------------------------------------------------------ resume

def test_resuming_after_a_kill_in_the_middle_of_a_phase_gives_the_same_final_loss(blocks, tmp_path):
    sched = three_phase()
    whole = C.run_schedule(build_lm(tiny(), 0), sched, *blocks, base(), checkpoint_dir=tmp_path / "whole")
    part = C.run_schedule(build_lm(tiny(), 0), sched, *blocks, base(), checkpoint_dir=tmp_path / "cut", stop_after=4)
    assert not part.completed and math.isnan(part.final_eval_loss) and part.phases[-1].name == "b"
    again = C.run_schedule(build_lm(tiny(), 0), sched, *blocks, base(), checkpoint_dir=tmp_path / "cut")
    # exact: a resume repeats the uninterrupted run's computation in the same order on this machine
    assert again.completed and again.final_eval_loss == whole.final_eval_loss
    assert again.loss_curve == whole.loss_curve and again.eval_curve == whole.eval_curve
    assert all(math.isfinite(ph.step_seconds) for ph in again.phases)   # timing survives the resume


KILLED_RUN = """
import os, signal, sys, torch
torch.set_num_threads(1)
from anatomy_kit.lm import build_lm
from test_growth_training import C, base, three_phase, tiny, toy_blocks
calls = [0]
step = torch.optim.AdamW.step
def step_or_die(self, *a, **k):
    calls[0] += 1
    if calls[0] == int(sys.argv[2]):   # a SIGKILL mid-phase, one step after a checkpoint
        os.kill(os.getpid(), signal.SIGKILL)
    return step(self, *a, **k)
torch.optim.AdamW.step = step_or_die
C.run_schedule(build_lm(tiny(), 0), three_phase(), *toy_blocks(), base(checkpoint_every=2),
               checkpoint_dir=sys.argv[1])
"""


def test_a_sigkill_in_the_middle_of_a_phase_resumes_to_the_same_final_loss(blocks, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    whole = C.run_schedule(build_lm(tiny(), 0), three_phase(), *blocks, base(checkpoint_every=2),
                           checkpoint_dir=tmp_path / "whole")
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).parent)}
    # phase a: optimiser calls 1-3; phase b: 4-6, checkpointed after its 2nd step; die at call 6
    died = subprocess.run([sys.executable, "-c", KILLED_RUN, str(tmp_path / "cut"), "6"], env=env)
    assert died.returncode == -9
    import json
    assert json.loads((tmp_path / "cut" / "1-b" / "checkpoint.json").read_text())["step"] == 2
    again = C.run_schedule(build_lm(tiny(), 0), three_phase(), *blocks, base(checkpoint_every=2),
                           checkpoint_dir=tmp_path / "cut")
    assert again.phases[1].completed and again.final_eval_loss == whole.final_eval_loss   # exact: as above
    assert again.loss_curve == whole.loss_curve


def test_phases_continue_the_data_stream_of_a_single_run(blocks, tmp_path):
    """TrainConfig.data_start (added for chapter 3): phase p reads the rows a single run reads at its steps."""
    seen = []
    model = build_lm(tiny(), 0)
    model.embed.register_forward_hook(lambda m, args, out: seen.append(args[0][:, 0].clone()))
    train(model, blocks[0], blocks[1], base(steps=2, data_start=3 * 4), trainable=["layers.0.mlp.up.weight"])
    first_rows = [blocks[0][batch_indices(3 * 4 + 4 * k, 4, 32, 1)][:, 0] for k in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(seen[:2], first_rows))
    assert "data_start" not in base().fingerprint() and base(data_start=4).fingerprint()["data_start"] == 4
    seen.clear()                                            # and run_schedule passes it on
    C.run_schedule(model, three_phase(), *blocks, base(checkpoint_every=None), checkpoint_dir=tmp_path)
    phase_b = seen[3 + 2]                                   # 3 steps of phase a, 2 evaluation batches
    assert torch.equal(phase_b, blocks[0][batch_indices(3 * 4, 4, 32, 1)][:, 0])


# ------------------------------------------------------------------ schedule rule, validation, control

def test_schedule_from_importance_trains_the_core_first_and_longest():
    imp = [5.0, 1.0, 9.0, -2.0, 7.0, 3.0, 0.5, 8.0, 2.0, 4.0, 6.0, 0.1]
    s = P.schedule_from_importance(imp, 60, lr=1e-3, max_anti=2)
    assert s.anti_layers == (3,) and [ph.name for ph in s.phases] == list(P.PHASE_NAMES)
    assert [ph.steps for ph in s.phases] == [10] * 6
    core = set(s.phases[0].layers)
    assert core == {2, 7}                                    # the two most important
    assert all(core <= set(ph.layers) for ph in s.phases)
    groups = [set(ph.layers) - core for ph in s.phases[1:5]]
    assert [len(g) for g in groups] == [2, 2, 2, 3]          # smaller groups first
    assert groups[0] == {4, 10} and groups[3] == {1, 6, 11}  # ranked by importance
    assert set(s.phases[5].layers) == set(range(12)) - {3}
    trained = set(core)
    for ph in s.phases[1:5]:
        for layer, source in ph.enter:                       # nearest trained layer by depth, shallower on ties
            assert source == min(trained, key=lambda t: (abs(t - layer), t))
        trained |= set(ph.layers)
    assert P.schedule_from_importance(imp, 60, lr=1e-3, use_anti_layers=False).anti_layers == ()


@pytest.mark.parametrize("phases, budget, anti, error", [
    ((), 4, (), P.EmptyPhaseError),
    ((P.Phase("a", (), 0, 4, 1e-3),), 4, (), P.EmptyPhaseError),
    ((P.Phase("a", (0,), 0, 0, 1e-3),), 4, (), P.EmptyPhaseError),
    ((P.Phase("a", (0, 5), 0, 4, 1e-3),), 4, (), P.UnknownLayerError),
    ((P.Phase("a", (0,), 0, 4, 1e-3),), 4, (7,), P.UnknownLayerError),
    ((P.Phase("a", (0,), 0, 3, 1e-3), P.Phase("b", (1,), 2, 4, 1e-3)), 4, (), P.OverlappingPhasesError),
    ((P.Phase("a", (0,), 0, 2, 1e-3), P.Phase("b", (1,), 3, 4, 1e-3)), 4, (), P.PhaseGapError),
    ((P.Phase("a", (0,), 1, 4, 1e-3),), 4, (), P.PhaseGapError),
    ((P.Phase("a", (0,), 0, 3, 1e-3),), 4, (), P.StepBudgetError),
    ((P.Phase("a", (0, 2), 0, 4, 1e-3),), 4, (2,), P.AntiLayerTrainedError),
    ((P.Phase("a", (0,), 0, 2, 1e-3), P.Phase("b", (1,), 2, 4, 1e-3, ((1, 2),))), 4, (), P.CloneSourceError),
    ((P.Phase("a", (0,), 0, 2, 1e-3), P.Phase("b", (0,), 2, 4, 1e-3, ((1, 0),))), 4, (), P.CloneSourceError),
])
def test_schedule_validation_raises_named_errors(phases, budget, anti, error):
    with pytest.raises(error):
        P.GrowthSchedule(3, phases, budget, anti_layers=anti)
    assert issubclass(error, P.ScheduleError)


def test_shuffled_control_keeps_the_exact_schedule_shape():
    s = P.schedule_from_importance([5.0, 1.0, 9.0, -2.0, 7.0, 3.0, 0.5, 8.0, 2.0, 4.0, 6.0, 0.1], 60, lr=1e-3,
                                   max_anti=1)
    for seed in range(5):
        c = P.shuffled_control(s, seed)
        assert c.shape() == s.shape()
        assert [set(ph.layers) for ph in c.phases] != [set(ph.layers) for ph in s.phases]
        perm = c.meta["permutation"]
        assert sorted(perm) == list(range(12))
        assert all(set(b.layers) == {perm[l] for l in a.layers} for a, b in zip(s.phases, c.phases))
        assert set(c.anti_layers) == {perm[l] for l in s.anti_layers}
        assert [set(l for l, _ in ph.enter) for ph in c.phases] == [{perm[l] for l, _ in ph.enter} for ph in s.phases]
    assert P.shuffled_control(s, 3) == P.shuffled_control(s, 3)


def test_a_control_that_keeps_layers_moves_only_the_others():
    imp = [9.0, 1.0, 5.0, -2.0, 7.0, 3.0, 0.5, 8.0, 2.0, 4.0, 6.0, 8.5]   # layers 0 and 11 in the core
    s = P.schedule_from_importance(imp, 60, lr=1e-3, max_anti=1)
    assert set(s.phases[0].layers) == {0, 11}
    moved_any = set()
    for seed in range(8):
        c = P.shuffled_control(s, seed, keep=(0, 11))
        perm = c.meta["permutation"]
        assert perm[0] == 0 and perm[11] == 11 and c.meta["keep"] == [0, 11]
        assert c.shape() == s.shape() and c.phases[0].layers == s.phases[0].layers   # the core stays
        assert all(c.first_step(l) == s.first_step(l) for l in (0, 11))
        assert [set(ph.layers) for ph in c.phases] != [set(ph.layers) for ph in s.phases]
        assert all(set(b.layers) == {perm[l] for l in a.layers} for a, b in zip(s.phases, c.phases))
        moved_any |= {l for l in range(12) if perm[l] != l}
    assert moved_any <= set(range(1, 11)) and len(moved_any) >= 8    # only interior layers move, and they do
    full = [P.shuffled_control(s, seed) for seed in range(8)]
    assert any(c.first_step(0) != 0 for c in full)                    # a full shuffle may train layer 0 late
    assert s.first_step(0) == 0 and s.first_step(3) is None          # 3 is the anti-layer: never trains


@pytest.mark.parametrize("keep, match", [((0, 12), "layer 12"), ((0, 0), "twice"), ((True,), "True"),
                                         (tuple(range(11)), "leaves 1 of 12")])
def test_a_control_refuses_bad_keep_lists(keep, match):
    s = P.schedule_from_importance(np.linspace(1, 0.1, 12), 60, lr=1e-3)
    with pytest.raises(P.AnatomyKitError, match=match):
        P.shuffled_control(s, 0, keep=keep)


def test_a_control_that_cannot_differ_from_its_schedule_is_refused():
    with pytest.raises(P.AnatomyKitError, match="would equal the schedule"):
        P.shuffled_control(P.uniform_schedule(4, 10, 1e-3), 0)


def test_position_order_by_hand():
    assert P.position_order(10) == [0, 9, 1, 8, 2, 7, 3, 6, 4, 5]
    assert P.position_order(5) == [0, 4, 1, 3, 2] and P.position_order(2) == [0, 1]
    with pytest.raises(P.AnatomyKitError, match="n_layers"):
        P.position_order(1)


def test_position_control_puts_the_layers_of_the_same_rank_by_position():
    # importance ranks 2, 7, 0, 11, … (anti-layer 3 last); by position the ranks are 0, 11, 1, 10, …
    imp = [5.0, 1.0, 9.0, -2.0, 7.0, 3.0, 0.5, 8.0, 2.0, 4.0, 6.0, 0.1]
    s = P.schedule_from_importance(imp, 60, lr=1e-3, max_anti=1)
    ranked = s.meta["ranked"] + [3]
    assert ranked[:4] == [2, 7, 4, 10] and len(ranked) == 12
    c = P.position_control(s, label="edge-inward")
    to = dict(zip(ranked, [0, 11, 1, 10, 2, 9, 3, 8, 4, 7, 5, 6]))      # written out from position_order(12)
    assert c.shape() == s.shape() and c.label == "edge-inward" and c.meta["rule"] == "position control"
    assert all(set(b.layers) == {to[l] for l in a.layers} for a, b in zip(s.phases, c.phases))
    assert c.anti_layers == (6,)                                         # the least important: innermost
    assert c.phases[0].layers == (0, 11) and c.first_step(0) == 0 == c.first_step(11)
    # an importance that already is edge-inward gives the schedule back, layer for layer
    edge = [12.0 - min(l, 11 - l) - 0.01 * l for l in range(12)]
    e = P.schedule_from_importance(edge, 60, lr=1e-3, max_anti=0)
    assert [ph.layers for ph in P.position_control(e).phases] == [ph.layers for ph in e.phases]


def test_schedule_matrix_and_split_steps():
    s = P.GrowthSchedule(4, (P.Phase("a", (1,), 0, 2, 1e-3), P.Phase("b", (2,), 2, 4, 1e-3, ((2, 1),)),
                             P.Phase("c", (0, 1, 2), 4, 6, 1e-3)), 6, anti_layers=(3,))
    assert F.schedule_matrix(s).tolist() == [[0, 0, 3], [3, 1, 3], [0, 2, 3], [4, 4, 4]]
    assert P.split_steps(10, [1, 1, 1]) == [4, 3, 3] and sum(P.split_steps(416, [1] * 6)) == 416
    d = three_phase(anti=(3,)).to_dict()
    assert P.GrowthSchedule.from_dict(d) == three_phase(anti=(3,))


def test_draw_schedule_names_every_phase_and_leaves_the_legend_to_the_caller():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = P.schedule_from_importance(np.linspace(1, 0.1, 8), 36, lr=1e-3)
    fig, ax = plt.subplots()
    F.draw_schedule(s, ax, legend=False, name_rotation=35)
    texts = {t.get_text(): t.get_rotation() for t in ax.texts}
    assert texts == {name: 35.0 for name in P.PHASE_NAMES} and ax.get_legend() is None
    handles = F.legend_handles()
    assert [h.get_label() for h in handles] == [F.CELL_STATES[c] for c in sorted(F.CELL_STATES)]
    plt.close(fig)


# ------------------------------------------------------------------ costs

def test_cost_accounting_matches_a_hand_count_on_a_three_layer_toy():
    cfg = LMConfig(vocab_size=32, n_layers=3, d_model=8, n_heads=2, ffn_widths=[16] * 3, max_seq_len=4)
    f = cost.stack_flops(cfg, 4)
    # By hand: matrices per layer N = 4·8² + 3·8·16 = 640; forward 2N + 4·T·d = 1280 + 128 = 1408;
    # activation gradient 2N + 8·T·d = 1536; weight gradient 2N = 1280; head 2·V·d = 512 each part.
    assert f.forward == (1408,) * 3 and f.act_grad == (1536,) * 3 and f.weight_grad == (1280,) * 3
    assert (f.head_forward, f.head_act_grad, f.head_weight_grad) == (512, 512, 512)
    fwd = 3 * 1408 + 512                                   # every step runs everything forward: 4736
    # layer 2 alone, interface frozen: head act-grad, layer 2 act+weight, layers 0-1 below it nothing
    assert cost.step_flops(f, [2], False) == fwd + 512 + 1536 + 1280 == 8064
    # layer 1 alone: layer 2 above it is frozen but passes the gradient back (1536), layer 0 pays nothing
    assert cost.step_flops(f, [1], False) == fwd + 512 + 1536 + 2816 == 9600
    # layer 0 with the interface: head both parts, layers 1-2 act-grad, layer 0 both parts
    assert cost.step_flops(f, [0], True) == fwd + 1024 + 2 * 1536 + 2816 == 11648
    uniform = fwd + 1024 + 3 * 2816
    assert cost.step_flops(f, [0, 1, 2], True) == uniform == 3 * fwd == 14208
    toy = P.GrowthSchedule(3, (P.Phase("a", (2,), 0, 2, 1e-3, (), False), P.Phase("b", (1,), 2, 3, 1e-3, (), False),
                               P.Phase("c", (0, 1, 2), 3, 5, 1e-3)), 5)
    got = cost.schedule_costs(toy, f, tokens_per_step=10)
    assert got["layer_steps"] == 2 * 1 + 1 * 1 + 2 * 3 == 9
    assert got["flops"] == 10 * (2 * 8064 + 9600 + 2 * 14208)
    assert cost.relative_saving(got["layer_steps"], 15) == pytest.approx(40.0)


def test_flop_model_matches_torch_flop_counter_for_every_trainable_set():
    """torch counts the matrix multiplies autograd really runs (no attention scores on CPU)."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = LMConfig(vocab_size=32, n_layers=3, d_model=8, n_heads=2, ffn_widths=[16, 24, 8], max_seq_len=4)
    model, x = build_lm(cfg, 0), torch.randint(0, 32, (2, 5), generator=torch.Generator().manual_seed(0))
    f = cost.stack_flops(cfg, 4, attention=False)
    for layers, interface in [((2,), False), ((1,), False), ((0,), False), ((1,), True), ((0, 2), False),
                              ((0, 1, 2), True)]:
        names = set(C.trainable_names(model, P.Phase("p", layers, 0, 1, 1e-3, (), interface)))
        for n, p in model.named_parameters():
            p.requires_grad_(n in names)
        with FlopCounterMode(display=False) as counter:
            logits = model(x[:, :-1])
            torch.nn.functional.cross_entropy(logits.reshape(-1, 32), x[:, 1:].reshape(-1)).backward()
        assert counter.get_total_flops() / 8 == cost.step_flops(f, layers, interface), (layers, interface)


def test_measure_step_seconds_times_every_set_and_leaves_the_model_alone(monkeypatch):
    model = build_lm(tiny(), 0)
    before = state(model)
    batch = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    sets = {"all": [n for n, _ in model.named_parameters()], "one": ["layers.0.mlp.up.weight"]}
    built = []
    real = cost.make_optimizer
    monkeypatch.setattr(cost, "make_optimizer", lambda params, *a: built.append(list(params)) or real(params, *a))
    out = cost.measure_step_seconds(model, batch, sets, steps=1, repeats=2)
    assert set(out) == {"all", "one"} and all(len(v) == 2 and min(v) > 0 for v in out.values())
    assert built == [sets["all"], sets["one"]]          # each set steps the kit's AdamW, as the runs do
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())   # exact: timed on a copy


# ------------------------------------------------------------------ importance sources

def test_transferred_importance_averages_signed_orders_of_magnitude():
    src = [99999.0, 9.0, 0.0, -0.6, 999.0, 9.0]
    out = sources.transferred_importance(src, 3)
    assert out == pytest.approx([(5 + 1) / 2, (0 - math.log10(1.6)) / 2, (3 + 1) / 2])
    assert np.argsort(sources.transferred_importance(src, 6)).tolist() == np.argsort(src).tolist()


def test_reference_importance_is_the_neighbour_mean_ablation_map():
    from anatomy_kit import anatomy
    from anatomy_kit.hf.evaluation import make_batches

    model = build_lm(tiny(), 2)
    x = torch.randint(0, VOCAB, (4, 8), generator=torch.Generator().manual_seed(3))
    got = sources.reference_importance(model, x, batch_size=2)
    want = anatomy.ablation_map(model.eval(), make_batches(x, 2), strategy="neighbour-mean", prefix_cache=False,
                                progress=False)
    np.testing.assert_array_equal(got.delta_pct, want.delta_pct)   # exact: replay = full pass, as in test_ablation
