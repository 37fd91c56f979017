"""Chapter 6's grid: the gate ramp inside the model, recipes and token budgets, the job graph and its
token streams, cached starting points, resume and shards, dead output directions, the SmolLM2 sweep."""

from __future__ import annotations

import math

import pytest
import torch

from anatomy_kit.width_growth import diagnostics as dg
from anatomy_kit.width_growth import experiment as ex
from anatomy_kit.width_growth import recipe as rc
from anatomy_kit.width_growth import srio, starts
from anatomy_kit.width_growth.gpt import GPT, set_gate
from anatomy_kit.lm import TrainConfig, evaluate, train
from anatomy_kit.lm.batches import batch_indices
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_forward_rtol, f32_sum_rtol, ppl_rtol

V, T = 61, 12


@pytest.fixture(autouse=True)
def _threads(one_torch_thread):
    yield


def blocks(n: int, seed: int = 0) -> torch.Tensor:
    """Token rows with a learnable pattern (a unit-test stand-in, not language)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.arange(T + 1)[None] * 5 + torch.randint(0, V, (n, 1), generator=g)) % V


def tiny_recipe(**kw) -> rc.GrowthRecipe:
    base = dict(vocab_size=V, n_layers=2, d_small=16, d_large=24, head_dim=8, block_size=T, batch_size=4,
                steps_small=6, steps_grown=5, gate_tokens=2 * 4 * T, lr=3e-3, warmup_steps=1, learn_steps=2,
                eval_every=2, ms_widths=(8, 16, 24), ms_total_steps=12,
                conditions=("srio-so", "nrio", "srio-so/no-gate", "nrio/zero-pad", "cold"), ms_operators=("srio-so", "nrio"))
    base.update(kw)
    return rc.GrowthRecipe(**base).validate()


def small_gpt(seed: int = 0) -> GPT:
    return starts.fresh_model(tiny_recipe().config(16), seed)


# --- the gate ramp lives in the model -------------------------------------------------------------

def test_gate_ramps_with_the_tokens_of_training_forwards_only():
    grown = srio.grow_srio(small_gpt(), 24)
    grown.config = grown.config.with_(warmup_tokens=3 * 2 * T)
    x = blocks(2)[:, :-1]
    grown.train()
    gates = []
    for _ in range(4):
        grown(x)
        gates.append(float(grown.gate))
    assert gates == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0]) and int(grown.tokens_seen) == 4 * 2 * T
    grown.eval()
    grown(x)                                   # evaluation reads the gate and leaves the count alone
    assert int(grown.tokens_seen) == 4 * 2 * T
    assert "tokens_seen" in grown.state_dict() and grown.gate.shape == (1,)


def test_growing_resets_the_count_and_an_unset_ramp_leaves_the_gate_alone():
    small = small_gpt()
    small.tokens_seen.fill_(999)
    grown = srio.grow_srio(small, 24, gate=0.25)
    assert int(grown.tokens_seen) == 0
    grown.train()
    grown(blocks(2)[:, :-1])
    assert float(grown.gate) == 0.25           # warmup_tokens=None: set_gate's value stays


def ramped_grown() -> GPT:
    grown = srio.grow_srio(small_gpt(), 24)
    grown.config = grown.config.with_(warmup_tokens=4 * 4 * T)
    return grown


def test_the_ramp_resumes_from_a_checkpoint_exactly(tmp_path):
    data, ev = blocks(40), blocks(8, 1)

    def cfg(folder, stop=None):
        return TrainConfig(steps=8, batch_size=4, lr=3e-3, seed=1, checkpoint_dir=str(tmp_path / folder),
                           checkpoint_every=1, stop_after=stop, progress=False)

    whole = train(ramped_grown(), data, ev, cfg("whole"))
    first = train(ramped_grown(), data, ev, cfg("split", stop=3))
    assert 0 < float(first.model.gate) < 1          # stopped inside the warm-up
    again = train(ramped_grown(), data, ev, cfg("split"))
    assert again.resumed_from == 3 and again.final_eval_loss == whole.final_eval_loss   # exact: same run, resumed
    assert float(again.model.gate) == 1.0 and int(again.model.tokens_seen) == 8 * 4 * T


# --- recipes and token budgets --------------------------------------------------------------------

def test_steps_follow_parameter_counts():
    assert rc.steps_by_params(10, [1, 1, 2]) == [3, 2, 5] or rc.steps_by_params(10, [1, 1, 2]) == [2, 3, 5]
    steps = rc.steps_by_params(360, [84_000, 163_000, 270_000, 552_000])
    assert sum(steps) == 360 and steps == sorted(steps) and all(s >= 1 for s in steps)
    assert abs(steps[3] / steps[0] - 552 / 84) < 0.5


def test_paper_recipe_trains_each_stage_on_twenty_tokens_per_parameter():
    r = rc.paper_d256_d384()
    small, large = rc.param_count(r.config(256)), rc.param_count(r.config(384))
    # an independent count: tied embedding, positions, 12·d² + 13·d per block (4·d² attention with biases,
    # 8·d² FFN, two LayerNorms), the final LayerNorm
    by_hand = lambda d: 50257 * d + 256 * d + 8 * (12 * d * d + 13 * d) + 2 * d  # noqa: E731
    assert (small, large) == (by_hand(256), by_hand(384))
    assert r.tokens_per_step == 64 * 8 * 256
    for steps, n in ((r.steps_small, small), (r.steps_grown, large)):
        assert abs(steps * r.tokens_per_step - 20 * n) <= r.tokens_per_step / 2
    assert r.gate_tokens == 40_000_000 and (r.n_layers, r.block_size, r.vocab_size) == (8, 256, 50257)
    ms = rc.paper_multistage()
    counts = [rc.param_count(ms.config(d)) for d in ms.ms_widths]
    assert 24e6 <= counts[0] <= 27e6 and 115e6 <= counts[-1] <= 125e6
    tokens = [s * ms.tokens_per_step for s in ms.multistage_steps()]
    assert all(abs(t / n - 20) < 0.05 for t, n in zip(tokens, counts))


@pytest.mark.parametrize("changes, message", [
    (dict(gate_tokens=10**9), "the gate would not reach 1"),
    (dict(conditions=("nrio", "cold")), "must include 'srio-so'"),
    (dict(conditions=("srio-so", "xrio")), "condition='xrio' is not accepted"),
    (dict(ms_widths=(8, 24, 16)), "strictly increasing"),
    (dict(d_large=20), "width 20 is not a multiple of head_dim=8"),
    (dict(ms_total_steps=4), "too few for its gate"),
    (dict(d_large=16), "d_large=16 must be >= 17"),
])
def test_bad_recipes_are_named(changes, message):
    with pytest.raises(AnatomyKitError, match=message):
        tiny_recipe(**changes)


# --- the job graph and its token streams -----------------------------------------------------------

def test_jobs_share_one_token_stream_per_seed(tmp_path):
    r = tiny_recipe()
    jobs = {j.name: j for j in ex.grid_jobs(r, [3, 4], ex.GridPaths(tmp_path), blocks(30), ms_seeds=[3])}
    assert len(jobs) == 2 * 6 + 1 + 1 + 2 * 2     # per seed: small, 4 grown, cold; ms: stage 0, cold, 2 ops × 2 stages
    small, grown, cold = jobs["small-d16-seed3"], jobs["srio-so-seed3"], jobs["cold-d24-11steps-seed3"]
    rows = r.batch_size
    assert grown.config.data_start == r.steps_small * rows and small.config.data_start == 0
    assert cold.config.steps == r.steps_small + r.steps_grown and grown.after == ("small-d16-seed3",)
    # step i of the continuation reads the rows the cold start reads at step steps_small + i
    for i in range(r.steps_grown):
        a = batch_indices(grown.config.data_start + i * rows, rows, 30, 3)
        b = batch_indices((r.steps_small + i) * rows, rows, 30, 3)
        assert torch.equal(a, b)
    order = [[j.name for j in wave] for wave in ex.waves(list(jobs.values()))]
    assert "small-d16-seed3" in order[0] and "srio-so-seed3" in order[1]
    assert "ms-srio-so-stage2-d24-seed3" in order[2] and jobs["ms-srio-so-stage2-d24-seed3"].after == (
        "ms-srio-so-stage1-d16-seed3",)
    assert {j.chain for j in jobs.values() if j.seed == 4} == {1}


def test_the_longest_chains_start_first(tmp_path):
    jobs = {j.name: j for j in ex.grid_jobs(tiny_recipe(), [3], ex.GridPaths(tmp_path), blocks(30), ms_seeds=[3])}
    order = [j.name for j in ex._critical_first(list(jobs.values()))]

    def chain(name):                   # its cost plus the costliest chain of runs that start from it, by hand
        after = [k for k in jobs.values() if name in k.after]
        return jobs[name].cost + max((chain(k.name) for k in after), default=0.0)

    assert [chain(n) for n in order] == sorted((chain(n) for n in order), reverse=True)
    assert order.index("ms-stage0-d8-seed3") < order.index("ms-srio-so-stage1-d16-seed3")


def test_waves_refuse_a_missing_source(tmp_path):
    job = ex.grid_jobs(tiny_recipe(), [0], ex.GridPaths(tmp_path), blocks(30))[1]
    with pytest.raises(AnatomyKitError, match="which are not in the job list"):
        ex.waves([job])


def test_grid_trains_resumes_and_shards(tmp_path):
    r = tiny_recipe(conditions=("srio-so", "srio-so/no-gate", "cold"))
    data, ev = blocks(40), blocks(8, 1)
    paths = ex.GridPaths(tmp_path / "grid")
    jobs = ex.grid_jobs(r, [0, 1], paths, data)
    part = ex.run_jobs(jobs, data, ev, shard="1/2", verbose=False)
    assert part and all(name.endswith("seed1") for name in part)
    assert not paths.run("small-d16-seed0").exists()
    everything = ex.run_jobs(jobs, data, ev, verbose=False)
    assert set(everything) == {j.name for j in jobs}
    assert everything["srio-so-seed1"].resumed_from == r.steps_grown      # the shard's run, only collected
    assert everything["srio-so-seed0"].resumed_from == 0
    # gated growth starts exactly where the small model ended; the ungated one does not
    small = starts.trained_model(r.config(16), paths.run("small-d16-seed0"))
    start = starts.load_start(paths.start("srio-so-seed0"))
    no_gate = starts.load_start(paths.start("srio-so_no-gate-seed0"))
    loss = evaluate(small, ev, 4)
    # the grown model (2 layers, width 24) computes the small one's function in other float32 sums, and
    # each batch's loss is a float32 sum of 4·12 = 48 per-token losses
    assert evaluate(start, ev, 4) == pytest.approx(loss, rel=f32_forward_rtol(2, 24) + f32_sum_rtol(4 * T))
    assert abs(evaluate(no_gate, ev, 4) - loss) > 1e-3
    grown = starts.trained_model(paths.start("srio-so-seed0"), paths.run("srio-so-seed0"))
    assert float(grown.gate) == 1.0 and grown.config.warmup_tokens == r.gate_tokens


def test_start_files_round_trip_and_are_reused(tmp_path):
    small = small_gpt()
    for grown in (srio.grow_nrio(small, 24), srio.grow_srio(small, 24, gate=0.5)):
        path = starts.save_start(grown, tmp_path / f"{grown.config.tie_embeddings}.safetensors", note="x")
        back = starts.load_start(path)
        assert back.config == grown.config and starts.start_meta(path)[1] == {"note": "x"}
        # exact: the saved float32 values, read back
        assert all(torch.equal(a, b) for a, b in zip(grown.state_dict().values(), back.state_dict().values()))
        assert (back.lm_head.weight is back.wte.weight) == grown.config.tie_embeddings
    cfg = tiny_recipe().config(16)
    start = tmp_path / "run" / "start.safetensors"
    model_dir = tmp_path / "small"
    train(small_gpt(), blocks(20), blocks(4, 1), TrainConfig(steps=2, batch_size=4, checkpoint_dir=str(model_dir),
                                                             progress=False))
    first = starts.grown_model(cfg, str(model_dir), 24, "srio-so", str(start), gate_tokens=10)
    (model_dir / "checkpoint.json").unlink()       # the cached start no longer needs its source
    second = starts.grown_model(cfg, str(model_dir), 24, "srio-so", str(start), gate_tokens=10)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))  # reused
    assert float(first.gate) == 0.0 and first.config.warmup_tokens == 10


def test_grow_condition_sets_the_gate_and_names_errors():
    small = small_gpt()
    gated, meta = starts.grow_condition(small, 24, "srio-so", gate_tokens=48)
    ungated, _ = starts.grow_condition(small, 24, "srio-so/no-gate", gate_tokens=48)
    assert (float(gated.gate), gated.config.warmup_tokens, meta["gate_tokens"]) == (0.0, 48, 48)
    assert (float(ungated.gate), ungated.config.warmup_tokens) == (1.0, None)
    lo, meta = starts.grow_condition(small, 24, "srio-lo", gate_tokens=48, batches=[blocks(4)], learn_steps=2)
    assert len(meta["operator_curve"]) == 2 and math.isfinite(meta["learned_eps"])
    for cond, kw, message in (("cold", {}, "is a cold start"), ("lrio", {}, "needs batches"),
                              ("xrio", {}, "condition='xrio' is not accepted")):
        with pytest.raises(AnatomyKitError, match=message):
            starts.grow_condition(small, 24, cond, gate_tokens=48, **kw)
    with pytest.raises(AnatomyKitError, match="no start file"):
        starts.start_meta("nowhere/start.safetensors")


# --- dead output directions --------------------------------------------------------------------------

def test_entropy_rank_and_dead_counts():
    assert dg.entropy_rank([2.0, 2.0, 2.0]) == pytest.approx(3.0)
    assert dg.entropy_rank([5.0, 0.0, 0.0]) == pytest.approx(1.0) and dg.entropy_rank([0.0, 0.0]) == 0.0
    assert 1.0 < dg.entropy_rank([3.0, 1.0]) < 2.0
    assert dg.dead_directions([1.0, 0.5, 1e-7, 0.0]) == 2 and dg.dead_directions([0.0, 0.0]) == 2
    assert dg.dead_directions([1.0, 1e-4], rel_tol=1e-3) == 1
    with pytest.raises(AnatomyKitError, match="non-negative"):
        dg.entropy_rank([1.0, -1.0])


def test_zero_padding_leaves_the_new_directions_dead_through_training_and_block_expansion_does_not():
    """New heads and units that read and write nothing get no gradient, so their columns stay exactly 0:
    an attention output projection keeps only its d old columns, and exactly k of its D directions stay
    dead through training (the precursor's finding); the rotation does not revive them (it mixes rows,
    the dead ones are columns). fc2 has 4d > D old columns, whose new rows do train: fewer stay dead.
    Convex heads and tiled units start alive."""
    small = small_gpt()
    data, ev = blocks(40), blocks(8, 1)
    k = 24 - 16
    for grow, dead in ((lambda m: srio.grow_nrio(m, 24, "zero"), k), (lambda m: srio.grow_srio(m, 24, None, expansion="zero"), k),
                       (lambda m: srio.grow_srio(m, 24), 0)):
        grown = set_gate(grow(small), 1.0)
        trained = train(grown, data, ev, TrainConfig(steps=6, batch_size=4, lr=1e-2, progress=False)).model
        spectra = dg.output_spectra(trained)
        assert [s.dead for s in spectra if s.module == "attn.proj"] == [dead] * 2
        assert all(s.dead <= dead for s in spectra if s.module == "mlp.fc2")
        assert dg.dead_fraction(spectra, k) == dead / k
        assert {s.full_rank for s in spectra} == {24}


def test_spike_and_heal_reads_the_curve():
    r = dg.spike_and_heal([(0, 3.0), (5, 3.4), (10, 3.1), (15, 2.9), (20, 2.8)], before=3.0)
    assert (r.peak_step, r.heal_step) == (5, 15) and r.spike == pytest.approx(0.4)
    flat = dg.spike_and_heal([(0, 3.0), (5, 2.9)], before=3.0)
    assert flat.spike == 0.0 and flat.heal_step == 0
    assert dg.spike_and_heal([(0, 4.0), (5, 3.5)], before=3.0).heal_step is None


# --- SmolLM2-style: the sweep across ε and gates -------------------------------------------------------

def test_llama_sweep_is_exact_at_gate_zero_and_flat_in_eps():
    from conftest import tiny_llama

    from anatomy_kit.width_growth.hf_probe import llama_sweep
    from anatomy_kit.hf.evaluation import make_batches

    llama = tiny_llama(n_layers=2)
    batches = make_batches(torch.randint(3, 512, (4, 10), generator=torch.Generator().manual_seed(0)), 2)
    out = llama_sweep(llama, batches, 48, [("block", 0.0), ("block", 0.3), ("block", 0.9), ("zero", 0.0)])
    rows = {(r["expansion"], r["eps"], r["gate"]): r["ppl"] for r in out["rows"]}
    # The same function in other float32 sums: a 2-layer forward of width ≤ 48, per-batch sums of 2·9 NLLs
    rtol = ppl_rtol(f32_forward_rtol(2, 48) + f32_sum_rtol(2 * 9), out["small"])
    assert all(rows[("block", e, 0.0)] == pytest.approx(out["small"], rel=rtol) for e in (0.0, 0.3, 0.9))
    assert rows[("block", 0.3, 1.0)] == pytest.approx(rows[("block", 0.0, 1.0)], rel=rtol)
    assert rows[("block", 0.9, 1.0)] == pytest.approx(rows[("block", 0.0, 1.0)], rel=rtol)
    assert abs(rows[("block", 0.0, 1.0)] - out["small"]) > 1e-3 * out["small"]
    assert rows[("zero", 0.0, 1.0)] == pytest.approx(out["small"], rel=rtol)    # RMSNorm zero-pad: exact in reals
    for cases, gates, message in (([], [0.0], "must be non-empty"), ([("block", 2.0)], [0.0], "eps=2.0"),
                                  ([("block", 0.1)], [1.5], "gate=1.5")):
        with pytest.raises(AnatomyKitError, match=message):
            llama_sweep(llama, batches, 48, cases, gates)


# --- reading the grid -----------------------------------------------------------------------------------

def test_paper_orderings_pair_the_papers_rows_with_our_arms():
    from anatomy_kit.width_growth.results import paper_orderings
    from anatomy_kit.manifest import reference

    ref = reference("p3.d256_d384_losses")
    assert ref["conditions"]["nrio"] == "nrio/untied"        # the parameter-matched NRIO
    final = {"srio-so": {0: 4.0, 1: 4.1, 2: 4.05}, "nrio/untied": {0: 4.05, 1: 4.14, 2: 4.11},
             "lrio": {0: 4.02, 1: 4.16, 2: 4.12}, "nrio": {0: 9.0, 1: 9.0, 2: 9.0}}
    out = paper_orderings(ref, final)
    assert set(out) == {"srio − nrio", "srio − ligo", "nrio − ligo"}
    keys, pc = out["srio − nrio"]
    assert keys == ("srio", "nrio") and pc.deltas == pytest.approx((-0.05, -0.04, -0.06))
    assert out["nrio − ligo"][1].deltas == pytest.approx((0.03, -0.02, -0.01))
    assert "srio − ligo" not in paper_orderings(ref, {k: final[k] for k in ("srio-so", "nrio/untied")})
    with pytest.raises(AnatomyKitError, match="'conditions' mapping"):
        paper_orderings({"value": {}}, final)


def test_preservation_measures_exact_and_inexact_growth():
    from anatomy_kit.width_growth.results import preservation

    rows = {r["case"]: r for r in preservation(small_gpt(), 24, blocks(3)[:, :-1], [
        ("pad", dict(operator="nrio", expansion="zero")), ("star", dict(operator="srio-so", expansion="zero")),
        ("block", dict(operator="srio-so"))])}
    assert all(r["gate 0"] < 1e-12 for r in rows.values())
    assert rows["star"]["gate 1"] < 1e-12 < rows["pad"]["gate 1"] and rows["block"]["gate 1"] > 1e-6


# --- the parameter-matched control and the key seeds (issue 17) ------------------------------------------

def test_the_untied_nrio_has_the_folded_arms_parameters_and_nrios_function():
    """nrio/untied: NRIO with the head a copy of the embedding plus a zero bias. Same function as NRIO at
    every gate (the same computation on equal weights, so exactly equal), as many parameters as SRIO."""
    small = small_gpt()
    untied, _ = starts.grow_condition(small, 24, "nrio/untied", gate_tokens=48)
    tied, _ = starts.grow_condition(small, 24, "nrio", gate_tokens=48)
    folded, _ = starts.grow_condition(small, 24, "srio-so", gate_tokens=48)
    assert untied.param_count() == folded.param_count() > tied.param_count()
    assert untied.lm_head.weight is not untied.wte.weight and not untied.config.tie_embeddings
    x = blocks(3)[:, :-1]
    with torch.no_grad():
        for g in (0.0, 0.5, 1.0):
            assert torch.equal(set_gate(untied, g)(x), set_gate(tied, g)(x))
    with pytest.raises(AnatomyKitError, match="already untied"):
        starts.untie_head(untied)
    with pytest.raises(AnatomyKitError, match="untied_head is a setting of operator 'nrio'"):
        rc.Condition("x", "srio-so", untied_head=True)


def test_key_arms_train_on_the_key_seeds_and_the_others_do_not(tmp_path):
    r = tiny_recipe(conditions=("srio-so", "nrio", "nrio/untied", "nrio/zero-pad", "cold"))
    assert r.key_arms == ("srio-so", "nrio/untied", "nrio")
    by_arm = ex.arm_seeds(r, [3], [3, 4])
    assert by_arm["small"] == by_arm["srio-so"] == by_arm["nrio/untied"] == [3, 4]
    assert by_arm["nrio/zero-pad"] == by_arm["cold"] == [3]
    names = {j.name for j in ex.grid_jobs(r, [3], ex.GridPaths(tmp_path), blocks(30), key_seeds=[3, 4])}
    assert {"small-d16-seed4", "srio-so-seed4", "nrio_untied-seed4", "nrio-seed4"} <= names
    assert not names & {"nrio_zero-pad-seed4", "cold-d24-11steps-seed4"}
    assert ex.arm_seeds(r, [3]) == ex.arm_seeds(r, [3], [3])
    for seeds, key, message in (([3], [4], "hold every seed"), ([3], [4, 4, 3], "distinct"),
                                ([], None, "non-empty")):
        with pytest.raises(AnatomyKitError, match=message):
            ex.arm_seeds(r, seeds, key)
    with pytest.raises(AnatomyKitError, match="key condition='xrio' is not accepted"):
        tiny_recipe(key_conditions=("xrio",))


def test_collect_runs_reads_each_arm_on_its_seeds(tmp_path):
    r = tiny_recipe(conditions=("srio-so", "nrio/untied", "cold"), steps_small=3, steps_grown=3,
                    gate_tokens=4 * T, ms_widths=())
    data, ev = blocks(40), blocks(8, 1)
    paths = ex.GridPaths(tmp_path / "grid")
    results = ex.run_jobs(ex.grid_jobs(r, [0], paths, data, key_seeds=[0, 1]), data, ev, verbose=False)
    from anatomy_kit.width_growth.results import collect_runs, final_losses, paired_vs

    runs = collect_runs(r, [0], paths, results, ev, key_seeds=[0, 1])
    assert {c: sorted(v) for c, v in runs.items()} == {"small": [0, 1], "srio-so": [0, 1],
                                                      "nrio/untied": [0, 1], "cold": [0]}
    pc = paired_vs(final_losses(runs), "srio-so", "cold")
    assert pc.seeds == (0,) and not pc.unpaired                 # paired on the shared seed only


def test_attribution_splits_the_gap_to_nrio_into_three_steps():
    from anatomy_kit.width_growth.results import ATTRIBUTION_STEPS, attribution, paired_vs

    final = {"nrio": {0: 4.30, 1: 4.20, 2: 4.25, 3: 4.31}, "nrio/untied": {0: 4.20, 1: 4.15, 2: 4.22, 3: 4.2},
             "srio-so/eps-0": {0: 4.10, 1: 4.12, 2: 4.2, 3: 4.1}, "srio-so": {0: 4.11, 1: 4.11, 2: 4.21, 3: 4.1},
             "lrio": {0: 5.0, 1: 5.0, 2: 5.0}}
    steps = attribution(final)
    assert list(steps) == [name for name, _, _ in ATTRIBUTION_STEPS]
    assert steps["untie the head"].deltas == pytest.approx((-0.10, -0.05, -0.03, -0.11))
    total = paired_vs(final, "srio-so", "nrio").deltas
    # the three steps telescope to the full recipe minus NRIO, seed by seed (float64 sums of three terms)
    assert [sum(x) for x in zip(*(pc.deltas for pc in steps.values()))] == pytest.approx(total, abs=1e-12)
    assert "rotate by ε*" not in attribution({k: final[k] for k in ("nrio", "nrio/untied", "srio-so")})
