"""Tests of the per-layer-width LM, the deterministic training loop and paired statistics (chapter 5)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from anatomy_kit.geometry import capture_ffn_clouds
from anatomy_kit.hf.surgery import clone_layer
from anatomy_kit.lm import LMConfig, PerLayerWidthLM, build_lm, param_count, train, train_many
from anatomy_kit.lm.pool import run_in_pool
from anatomy_kit.lm.train import TrainConfig, batch_indices, load_trained, lr_at
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_forward_rtol, f32_sum_rtol, ppl_rtol

VOCAB = 61


def tiny(widths=(48, 96, 32), **kw) -> LMConfig:
    return LMConfig(vocab_size=VOCAB, n_layers=len(widths), d_model=32, n_heads=4,
                    ffn_widths=list(widths), max_seq_len=16, **kw)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """Every test in this module runs on one torch thread (see conftest.one_torch_thread)."""


@pytest.fixture(scope="module")
def blocks():
    g = torch.Generator().manual_seed(123)
    # A learnable toy language: a noisy "count up by one" sequence.
    start = torch.randint(0, VOCAB, (96, 1), generator=g)
    seq = (start + torch.arange(17)) % VOCAB
    noise = torch.randint(0, VOCAB, seq.shape, generator=g)
    seq = torch.where(torch.rand(seq.shape, generator=g) < 0.1, noise, seq)
    return seq[:80], seq[80:]


def cfg(**kw) -> TrainConfig:
    base = dict(steps=24, batch_size=8, lr=1e-2, warmup=4, eval_every=8, seed=3, progress=False)
    base.update(kw)
    return TrainConfig(**base)


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ffn", ["swiglu", "gelu"])
def test_forward_shapes_and_param_count_formula(ffn):
    c = tiny(ffn=ffn)
    model = PerLayerWidthLM(c)
    idx = torch.randint(0, VOCAB, (2, 16))
    logits = model(idx)
    assert logits.shape == (2, 16, VOCAB)
    logits, loss = model(idx, torch.randint(0, VOCAB, (2, 16)))
    assert loss.ndim == 0 and abs(float(loss.detach()) - math.log(VOCAB)) < 0.5  # near uniform at init
    d, mats = 32, (3 if ffn == "swiglu" else 2)
    expected = VOCAB * d + sum(4 * d * d + mats * d * w + 2 * d for w in c.ffn_widths) + d
    assert param_count(c) == model.param_count() == expected
    for blk, w in zip(model.layers, c.ffn_widths):
        assert blk.mlp.down.in_features == w


def test_equal_total_width_means_equal_params():
    assert param_count(tiny((64, 64, 64))) == param_count(tiny((96, 64, 32))) == param_count(tiny((16, 16, 160)))


def test_model_is_causal():
    model = PerLayerWidthLM(tiny())
    idx = torch.randint(0, VOCAB, (2, 12))
    idx2 = idx.clone()
    idx2[:, 8:] = (idx2[:, 8:] + 1) % VOCAB
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[:, :8], model(idx2)[:, :8])


def test_the_hf_cloud_capture_finds_the_parts_of_our_model():
    model = PerLayerWidthLM(tiny())
    idx = torch.randint(0, VOCAB, (3, 10))
    clouds = capture_ffn_clouds(model, idx, n_tokens=12, seed=0, batch_size=2)
    assert len(clouds) == 3 and all(c.x.shape == (12, 32) and c.y.shape == (12, 32) for c in clouds)
    assert all(np.array_equal(c.token_index, clouds[0].token_index) for c in clouds)
    with torch.no_grad():  # recompute layer 1 by hand at the sampled positions
        h = model.embed(idx)
        h = model.layers[0](h)
        blk = model.layers[1]
        x = h + blk.attn(blk.norm1(h))
        y = x + blk.mlp(blk.norm2(x))
    flat = clouds[1].token_index
    tol = f32_forward_rtol(2, 96)   # 2 layers (FFN width ≤ 96) on other batch shapes; states below 1: atol = rtol
    np.testing.assert_allclose(clouds[1].x, x.reshape(-1, 32)[flat].double().numpy(), atol=tol)
    np.testing.assert_allclose(clouds[1].y, y.reshape(-1, 32)[flat].double().numpy(), atol=tol)
    np.testing.assert_allclose(clouds[0].y, h.reshape(-1, 32)[flat].double().numpy(), atol=tol)  # block 0 output


def test_bad_configs_name_the_field():
    with pytest.raises(AnatomyKitError, match=r"ffn_widths has 2 entries but n_layers=3"):
        PerLayerWidthLM(LMConfig(vocab_size=10, n_layers=3, d_model=32, n_heads=4, ffn_widths=[8, 8]))
    with pytest.raises(AnatomyKitError, match=r"d_model=30 is not divisible by n_heads=4"):
        PerLayerWidthLM(LMConfig(vocab_size=10, n_layers=1, d_model=30, n_heads=4, ffn_widths=[8]))
    with pytest.raises(AnatomyKitError, match=r"ffn_widths\[1\]=0 must be >= 1"):
        PerLayerWidthLM(LMConfig(vocab_size=10, n_layers=2, d_model=32, n_heads=4, ffn_widths=[8, 0]))
    with pytest.raises(AnatomyKitError, match=r"ffn='relu' is not accepted"):
        PerLayerWidthLM(LMConfig(vocab_size=10, n_layers=1, d_model=32, n_heads=4, ffn_widths=[8], ffn="relu"))
    with pytest.raises(AnatomyKitError, match=r"sequence length 17 exceeds max_seq_len=16"):
        PerLayerWidthLM(tiny())(torch.zeros(1, 17, dtype=torch.long))


# ---------------------------------------------------------------------------------------------
# Training loop
# ---------------------------------------------------------------------------------------------

def fit(widths, tr, ev, c, **kw):
    """Train a fresh model seeded like the run (the pairing convention of chapter 5)."""
    return train(build_lm(widths if isinstance(widths, LMConfig) else tiny(widths), c.seed), tr, ev, c, **kw)


def test_lr_schedule_and_data_order():
    c = cfg(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(0, c) == pytest.approx(0.1) and lr_at(9, c) == pytest.approx(1.0)
    assert lr_at(10, c) == pytest.approx(1.0) and lr_at(100, c) == pytest.approx(0.1)
    assert lr_at(55, c) == pytest.approx(0.55)
    # The stream is a sequence of permutations; batches can straddle epochs.
    stream = torch.cat([batch_indices(p, 7, 10, 5) for p in range(0, 70, 7)])
    for e in range(7):
        assert sorted(stream[10 * e:10 * e + 10].tolist()) == list(range(10))
    assert torch.equal(batch_indices(13, 7, 10, 5), stream[13:20])
    assert not torch.equal(batch_indices(0, 10, 10, 5), batch_indices(0, 10, 10, 6))


def test_training_learns_and_is_bit_identical(blocks):
    tr, ev = blocks
    r1 = fit(tiny(), tr, ev, cfg())
    r2 = fit(tiny(), tr, ev, cfg())
    assert r1.completed and r1.steps_done == 24
    assert r1.loss_curve == r2.loss_curve and r1.eval_curve == r2.eval_curve
    assert r1.final_eval_loss == r2.final_eval_loss
    for (k, a), (_, b) in zip(r1.model.state_dict().items(), r2.model.state_dict().items()):
        assert torch.equal(a, b), k
    assert [s for s, _ in r1.eval_curve] == [8, 16, 24]
    assert r1.final_eval_loss < math.log(VOCAB) - 0.3  # it learns something
    assert r1.tokens_per_s > 0 and r1.n_params == param_count(tiny())
    r3 = fit(tiny(), tr, ev, cfg(seed=4))
    assert r3.loss_curve != r1.loss_curve


@pytest.mark.parametrize("stop_after,every", [(10, 5), (13, 5)])
def test_resume_equals_uninterrupted(blocks, tmp_path, stop_after, every):
    tr, ev = blocks
    full = fit(tiny(), tr, ev, cfg())
    part = fit(tiny(), tr, ev, cfg(checkpoint_dir=tmp_path, checkpoint_every=every, stop_after=stop_after))
    assert not part.completed and part.steps_done == stop_after and math.isnan(part.final_eval_loss)
    files = sorted(p.name for p in tmp_path.iterdir())   # atomic: no temporary left; JSON + tensors, no pickle
    assert files[0] == "checkpoint.json" and len(files) == 2 and files[1].endswith(".safetensors")
    resumed = fit(tiny(), tr, ev, cfg(checkpoint_dir=tmp_path, checkpoint_every=every))
    assert resumed.resumed_from == stop_after and resumed.completed
    assert resumed.final_eval_loss == full.final_eval_loss   # exact: a resume repeats the run's computation
    assert len(resumed.loss_curve) == 24
    assert resumed.loss_curve == full.loss_curve             # exact, as above
    # A finished checkpoint is returned without retraining.
    again = fit(tiny(), tr, ev, cfg(checkpoint_dir=tmp_path, checkpoint_every=every))
    assert again.resumed_from == 24 and again.final_eval_loss == resumed.final_eval_loss


def test_grad_accumulation_and_numpy_blocks(blocks, tmp_path):
    tr, ev = blocks
    ref = fit(tiny(), tr, ev, cfg(steps=6))
    acc = fit(tiny(), tr, ev, cfg(steps=6, batch_size=4, grad_accum=2))  # same rows, two halves
    rtol = f32_sum_rtol(8 * 16)   # a float32 mean of 8·16 token losses, in two halves or at once
    np.testing.assert_allclose([l for _, l in acc.loss_curve], [l for _, l in ref.loss_curve], rtol=rtol)
    assert acc.final_eval_loss == pytest.approx(ref.final_eval_loss, rel=rtol)
    mm = np.lib.format.open_memmap(tmp_path / "blocks.npy", mode="w+", dtype=np.uint16, shape=tuple(tr.shape))
    mm[:] = tr.numpy()
    mm.flush()
    from_disk = fit(tiny(), np.load(tmp_path / "blocks.npy", mmap_mode="r"), ev.numpy(), cfg(steps=6))
    assert from_disk.loss_curve == ref.loss_curve and from_disk.final_eval_loss == ref.final_eval_loss  # same run


def test_train_many_in_processes_equals_serial(blocks):
    tr, ev = blocks
    jobs = [(tiny(), cfg(steps=8, seed=s, desc=f"seed {s}")) for s in (0, 1)]
    serial = train_many(jobs, tr, ev, processes=1, verbose=False)
    parallel = train_many(jobs, tr, ev, processes=2, verbose=False)
    assert [r.loss_curve for r in serial] == [r.loss_curve for r in parallel]   # exact: the same runs, in workers
    assert [r.final_eval_loss for r in serial] == [r.final_eval_loss for r in parallel]
    assert serial[0].final_eval_loss != serial[1].final_eval_loss and parallel[0].model is None


def _mark_after(args: tuple) -> int:
    """Job ``i``: fail unless the marker files of ``needs`` exist, then (a moment later) write its own."""
    folder, i, needs = args
    missing = [j for j in needs if not (folder / f"done-{j}").exists()]
    if missing:
        raise AssertionError(f"job {i} started before jobs {missing} finished")
    time.sleep(0.3)
    (folder / f"done-{i}").touch()
    return i


def test_a_job_starts_only_after_its_sources_and_bad_orders_are_refused(tmp_path):
    needs = [(), (0,), (1,), (), (0, 3)]                  # a chain 0 → 1 → 2, and 4 after 0 and 3
    finished = []
    run_in_pool(_mark_after, [(tmp_path, i, n) for i, n in enumerate(needs)], 2,
                lambda i, r: finished.append(r), after=needs)
    assert sorted(finished) == [0, 1, 2, 3, 4]
    assert finished.index(2) > finished.index(1) > finished.index(0) and finished.index(4) > finished.index(3)
    with pytest.raises(AssertionError, match=r"job 7 started before jobs \[9\] finished"):   # a job's own error
        run_in_pool(_mark_after, [(tmp_path, 6, ()), (tmp_path, 7, (9,))], 2, print)
    run_in_pool(_mark_after, [], 2, print)                                                 # nothing to do
    with pytest.raises(AnatomyKitError, match="wait for each other in a cycle"):
        run_in_pool(_mark_after, [(tmp_path, 0, ()), (tmp_path, 1, ())], 2, print, after=[(1,), (0,)])
    with pytest.raises(AnatomyKitError, match=r"after\[0\] names \[0\]"):
        run_in_pool(_mark_after, [(tmp_path, 0, ())], 2, print, after=[(0,)])
    with pytest.raises(AnatomyKitError, match="after has 1 entries for 2 jobs"):
        run_in_pool(_mark_after, [(tmp_path, 0, ()), (tmp_path, 1, ())], 2, print, after=[()])


def test_train_many_runs_a_job_after_its_source_in_workers_and_serially(blocks, tmp_path):
    tr, ev = blocks
    jobs = [(tiny(), cfg(steps=4, seed=s, checkpoint_dir=str(tmp_path / f"{p}-{s}"), desc=f"seed {s}"))
            for p in ("serial", "pool") for s in (0, 1)]
    serial = train_many(jobs[:2], tr, ev, processes=1, verbose=False, after=[(1,), ()])   # job 1 runs first
    pooled = train_many(jobs[2:], tr, ev, processes=2, verbose=False, after=[(1,), ()])
    assert [r.final_eval_loss for r in serial] == [r.final_eval_loss for r in pooled]
    with pytest.raises(AnatomyKitError, match="starts after job 1, which shard 0/2 does not run"):
        train_many(jobs[:2], tr, ev, processes=1, verbose=False, shard="0/2", after=[(1,), ()])


def test_frozen_parameters_do_not_change_bitwise(blocks):
    tr, ev = blocks
    c = cfg(steps=6)
    model = build_lm(tiny(), c.seed)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    res = train(model, tr, ev, c, trainable=lambda name: name.startswith("layers.1."))
    after = model.state_dict()
    changed = {k for k in after if not torch.equal(after[k], before[k])}
    assert changed and all(k.startswith("layers.1.") for k in changed)       # only layer 1 moved
    assert set(res.trainable) == {n for n, _ in model.named_parameters() if n.startswith("layers.1.")}
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags  # flags restored
    with pytest.raises(AnatomyKitError, match="selects no parameter"):
        train(build_lm(tiny(), 0), tr, ev, c, trainable=lambda name: False)
    with pytest.raises(AnatomyKitError, match=r"does not have"):
        train(build_lm(tiny(), 0), tr, ev, c, trainable=["layers.9.mlp.up.weight"])


class _KilledAfter(np.ndarray):
    """Token blocks whose batch reads raise after ``reads`` of them: a run killed mid-way."""

    @classmethod
    def of(cls, array, reads):
        out = np.asarray(array).view(cls)
        out.left = reads
        return out

    def __getitem__(self, index):
        if isinstance(index, np.ndarray):         # a batch of rows (slices are the input checks)
            self.left -= 1
            if self.left < 0:
                raise KeyboardInterrupt
        return np.asarray(super().__getitem__(index))


def test_a_model_the_loop_did_not_build_trains_and_resumes(blocks, tmp_path):
    """A cloned model (layer 2 := layer 0 + noise), partly frozen, killed mid-run and resumed."""
    tr, ev = blocks
    widths = (48, 96, 48)

    def cloned():
        m = build_lm(tiny(widths), 3)
        clone_layer(m, 0, 2, noise_std=0.01, seed=1)
        return m

    only = [n for n, _ in cloned().named_parameters() if not n.startswith("layers.0.")]
    c = cfg(steps=12, seed=3, eval_every=4)
    full = train(cloned(), tr, ev, c, trainable=only)
    with pytest.raises(KeyboardInterrupt):   # killed while reading the batch of step 8
        train(cloned(), _KilledAfter.of(tr.numpy(), reads=8), ev, cfg(steps=12, seed=3, eval_every=4,
              checkpoint_dir=tmp_path, checkpoint_every=3), trainable=only)
    resumed = train(cloned(), tr, ev, cfg(steps=12, seed=3, eval_every=4, checkpoint_dir=tmp_path, checkpoint_every=3),
                    trainable=only)
    assert resumed.resumed_from == 6 and resumed.final_eval_loss == full.final_eval_loss   # exact: resumed run
    assert resumed.loss_curve == full.loss_curve
    # the checkpoint belongs to this start: another clone noise is another run
    def other():
        m = build_lm(tiny(widths), 3)
        clone_layer(m, 0, 2, noise_std=0.02, seed=1)
        return m
    with pytest.raises(AnatomyKitError, match="written by a different run"):
        train(other(), tr, ev, cfg(steps=12, seed=3, eval_every=4, checkpoint_dir=tmp_path), trainable=only)
    loaded = load_trained(build_lm(tiny(widths), 0), tmp_path)
    for (k, a), (_, b) in zip(loaded.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), k


def test_resume_refuses_a_foreign_checkpoint(blocks, tmp_path):
    tr, ev = blocks
    fit(tiny(), tr, ev, cfg(steps=6, checkpoint_dir=tmp_path))
    with pytest.raises(AnatomyKitError, match="written by a different run"):
        fit(tiny((32, 96, 48)), tr, ev, cfg(steps=6, checkpoint_dir=tmp_path))


def test_training_input_errors(blocks):
    tr, ev = blocks
    with pytest.raises(AnatomyKitError, match=r"token ids in \[0, 99\] but vocab_size=61"):
        fit(tiny(), torch.tensor([[0, 99, 3]]), ev, cfg())
    with pytest.raises(AnatomyKitError, match=r"hold 20 inputs per row but max_seq_len=16"):
        fit(tiny(), torch.zeros(4, 21, dtype=torch.long), ev, cfg())
    with pytest.raises(AnatomyKitError, match=r"warmup=50 must be <= 24"):
        fit(tiny(), tr, ev, cfg(warmup=50))
    with pytest.raises(AnatomyKitError, match=r"must be an integer torch tensor"):
        fit(tiny(), tr.float(), ev, cfg())


def test_seeded_models_share_every_tensor_whose_name_and_shape_agree():
    a = build_lm(tiny((48, 96, 32)), 7).state_dict()
    b = build_lm(tiny((48, 64, 32)), 7).state_dict()   # layer 1's FFN differs
    c = build_lm(tiny((48, 96, 32)), 8).state_dict()
    same = {k for k in a if a[k].shape == b[k].shape and torch.equal(a[k], b[k])}
    assert same == {k for k in a if not k.startswith("layers.1.mlp.")}
    assert not torch.equal(a["embed.weight"], c["embed.weight"])
    std = float(a["layers.0.attn.qkv.weight"].std())
    assert abs(std - tiny().std) < 0.1 * tiny().std                        # the stated initial scale
    assert abs(float(a["layers.0.attn.o.weight"].std()) * math.sqrt(6) - tiny().std) < 0.15 * tiny().std


def test_the_prefix_cached_ablation_map_runs_on_our_model():
    from anatomy_kit import anatomy
    from anatomy_kit.hf.evaluation import make_batches

    model = build_lm(tiny((48, 96, 32, 48)), 0).eval()
    batches = make_batches(torch.randint(0, VOCAB, (4, 12), generator=torch.Generator().manual_seed(2)), 2)
    cached = anatomy.ablation_map(model, batches, strategy="skip", progress=False)
    naive = anatomy.ablation_map(model, batches, strategy="skip", prefix_cache=False, progress=False)
    np.testing.assert_array_equal(cached.ppl, naive.ppl)    # exact: replay = full pass (as in test_ablation)
    nll, count = 0.0, 0
    with torch.no_grad():   # skipping layer 2 by hand
        for b in batches:
            x = model.embed(b.input_ids)
            for i, blk in enumerate(model.layers):
                x = x if i == 2 else blk(x)
            logits = torch.nn.functional.linear(model.norm(x), model.embed.weight)
            nll += float(torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB),
                                                           b.input_ids[:, 1:].reshape(-1), reduction="sum"))
            count += b.input_ids[:, 1:].numel()
    # float32 sums of a batch's 2·11 token NLLs in two orders, logits of 32-term dot products in other shapes
    rtol = ppl_rtol(f32_sum_rtol(22) + f32_forward_rtol(1, 32), cached.ppl[2])
    assert cached.ppl[2] == pytest.approx(math.exp(nll / count), rel=rtol)


# ---------------------------------------------------------------------------------------------
# Checkpoints across machines: fewer GPUs, another device or precision
# ---------------------------------------------------------------------------------------------

class _FakeGPUs:
    """torch.cuda's RNG calls on ``count`` pretend GPUs (a CPU-only test): states are 16 bytes holding the index."""

    def __init__(self, monkeypatch, count: int, current: int = 0):
        self.count, self.current, self.restored = count, current, []
        for name, fn in {"is_available": lambda: True, "device_count": lambda: self.count,
                         "current_device": lambda: self.current, "get_rng_state": self.get,
                         "get_rng_state_all": lambda: [self.get(i) for i in range(self.count)],
                         "set_rng_state": self.set, "set_rng_state_all": self.set_all}.items():
            monkeypatch.setattr(torch.cuda, name, fn)

    def _index(self, device) -> int:
        index = torch.device("cuda", device).index if isinstance(device, int) else torch.device(device).index
        if index >= self.count:                  # what CUDA does with a device that is not there
            raise RuntimeError(f"invalid device ordinal {index} (this machine has {self.count} GPUs)")
        return index

    def get(self, device="cuda"):
        return torch.full((16,), self._index(device), dtype=torch.uint8)

    def set(self, state, device="cuda"):
        self.restored.append((self._index(device), int(state[0])))

    def set_all(self, states):
        for i, s in enumerate(states):
            self.set(s, i)


def test_checkpoints_keep_only_the_training_gpus_rng_and_resume_with_fewer_gpus(tmp_path, monkeypatch):
    from anatomy_kit.lm.checkpoint import load_checkpoint, save_checkpoint, set_rng_state

    model = build_lm(tiny(), 0)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    _FakeGPUs(monkeypatch, count=8, current=0)
    save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched, identity={}, step=1, data_position=8,
                    loss_curve=[], eval_curve=[], device="cuda:3")          # rank 3 of an 8-GPU machine
    doc, tensors = load_checkpoint(tmp_path)
    assert [k for k in tensors if k.startswith("rng.cuda")] == ["rng.cuda"] and int(tensors["rng.cuda"][0]) == 3
    one = _FakeGPUs(monkeypatch, count=1)                                   # resumed on a 1-GPU machine
    set_rng_state(tensors, doc["rng"], torch.device("cuda"))
    assert one.restored == [(0, 3)]                                         # the training GPU's state, on GPU 0
    legacy = {**{k: v for k, v in tensors.items() if k != "rng.cuda"},
              **{f"rng.cuda.{i}": torch.full((16,), i, dtype=torch.uint8) for i in range(12)}}
    one.restored.clear()
    set_rng_state(legacy, doc["rng"], torch.device("cuda:0"))               # an older checkpoint of 12 GPUs
    assert one.restored == [(0, 0)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)          # and on a CPU: nothing to restore
    one.restored.clear()
    set_rng_state(tensors, doc["rng"], torch.device("cpu"))
    assert one.restored == []


def test_a_checkpoint_resumes_in_another_precision_and_micro_batch_split(blocks, tmp_path):
    """What the machine decides (precision, micro-batch split) is not the run's identity; a real difference is named."""
    from anatomy_kit.lm.checkpoint import load_checkpoint

    tr, ev = blocks
    part = fit(tiny(), tr, ev, cfg(steps=8, checkpoint_dir=tmp_path, checkpoint_every=4, stop_after=4))
    assert part.steps_done == 4
    other = cfg(steps=8, checkpoint_dir=tmp_path, checkpoint_every=4, precision="bf16", batch_size=4, grad_accum=2)
    resumed = fit(tiny(), tr, ev, other)                  # CPU autocast stands in for a GPU's bf16
    assert resumed.resumed_from == 4 and resumed.completed and len(resumed.loss_curve) == 8
    assert resumed.loss_curve[:4] == part.loss_curve
    written = load_checkpoint(tmp_path)[0]["written_with"]
    assert (written["precision"], written["batch_size"], written["grad_accum"]) == ("bf16", 4, 2)
    again = fit(tiny(), tr, ev, cfg(steps=8, checkpoint_dir=tmp_path, checkpoint_every=4))   # collected in fp32
    assert again.resumed_from == 8 and again.completed
    with pytest.raises(AnatomyKitError, match=r"different run \(train\.lr, train\.rows_per_step differ\)"):
        fit(tiny(), tr, ev, cfg(steps=8, checkpoint_dir=tmp_path, lr=2e-2, batch_size=4))
