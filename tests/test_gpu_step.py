"""The training step's GPU habits, checked on a CPU (anatomy_kit.lm.step, lm.distributed, growth.gpt).

What only costs speed on a GPU cannot fail a numeric test, so these tests watch the calls: one
gradient synchronisation per optimiser step (not per micro-batch), pinned non-blocking batch
copies and the foreach gradient clip on CUDA, the loss read back every ``FLUSH_EVERY`` steps (not
every step), and no device read in chapter 6's GPT forward once its buffers are known.
"""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch

from anatomy_kit.lm import LMConfig, TrainConfig, build_lm, train
from anatomy_kit.lm import distributed as dist_
from anatomy_kit.lm import step as step_mod
from anatomy_kit.lm.speed import make_optimizer
from anatomy_kit.validate import AnatomyKitError

VOCAB = 61


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """Tiny models on one torch thread (see conftest.one_torch_thread)."""


def _blocks():
    g = torch.Generator().manual_seed(11)
    seq = (torch.randint(0, VOCAB, (40, 1), generator=g) + torch.arange(17)) % VOCAB
    return seq[:32], seq[32:]


def _model():
    return build_lm(LMConfig(vocab_size=VOCAB, n_layers=2, d_model=32, n_heads=4, ffn_widths=[64, 32],
                             max_seq_len=16), 0)


class _DDPLike(torch.nn.Module):
    """A wrapper with DDP's ``no_sync``; records whether each forward ran inside it."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.synced, self._off = inner, [], False

    @contextmanager
    def no_sync(self):
        self._off = True
        try:
            yield
        finally:
            self._off = False

    def forward(self, x):
        self.synced.append(not self._off)
        return self.inner(x)


def _session(model, step_model, device="cpu", world=2, **cfg):
    c = TrainConfig(**{"steps": 4, "batch_size": 4, "progress": False, **cfg}).validate()
    params = dict(model.named_parameters())
    opt = make_optimizer(params, c.lr, c.betas, c.weight_decay, torch.device("cpu"))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    ctx = dist_.Distributed(rank=0, world_size=world)
    return step_mod.Session(model, step_model, opt, sched, params, list(params), c, torch.device(device), ctx, {})


def test_gradients_are_synchronised_once_per_optimiser_step(monkeypatch):
    tr, _ = _blocks()
    model = _model()
    ddp = _DDPLike(model)
    step_mod.optimiser_step(_session(model, ddp, grad_accum=3), tr, step_mod.Progress())
    assert ddp.synced == [False, False, True]                 # DDP: no_sync for all but the last micro-batch
    calls = []
    monkeypatch.setattr(dist_, "is_sharded", lambda m: True)
    monkeypatch.setattr(model, "set_requires_gradient_sync", calls.append, raising=False)
    step_mod.optimiser_step(_session(model, model, grad_accum=3), tr, step_mod.Progress())
    assert calls == [False, True, False, True]                # FSDP: off and on again around micro-batches 1, 2
    one = _DDPLike(model)
    step_mod.optimiser_step(_session(model, one, world=1, grad_accum=3), tr, step_mod.Progress())
    assert one.synced == [True, True, True]                   # one process: nothing to switch


class _Rows:
    """What rows_of returns, recording how it reaches the device."""

    log: list = []

    def __init__(self, t):
        self.t = t

    def pin_memory(self):
        self.log.append("pin")
        return self

    def to(self, device, non_blocking=False):
        self.log.append(("to", torch.device(device).type, non_blocking))
        return self.t


def test_on_cuda_batches_are_pinned_and_copied_without_blocking_and_the_clip_is_foreach(monkeypatch):
    real_rows = step_mod.rows_of
    monkeypatch.setattr(step_mod, "rows_of", lambda blocks, rows: _Rows(real_rows(blocks, rows)))
    clips = []
    real_clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda p, m, foreach=None: clips.append(foreach)
                        or real_clip(p, m, foreach=False))
    tr, _ = _blocks()
    model = _model()
    _Rows.log = []
    with warnings.catch_warnings():                  # autocast("cuda") may warn on a CPU build
        warnings.simplefilter("ignore")
        step_mod.optimiser_step(_session(model, model, device="cuda", world=1, grad_accum=2), tr,
                                step_mod.Progress())
    assert _Rows.log == ["pin", ("to", "cuda", True)] * 2 and clips == [None]    # foreach chosen by torch on CUDA
    _Rows.log, clips[:] = [], []
    step_mod.optimiser_step(_session(model, model, world=1), tr, step_mod.Progress())
    assert _Rows.log == [("to", "cpu", False)] and clips == [False]     # CPU: plain copy, bit-reproducible clip


def test_the_loss_is_read_back_every_few_steps_not_every_step(monkeypatch):
    reads = []
    real = dist_.mean_over_ranks
    monkeypatch.setattr(dist_, "mean_over_ranks", lambda values, ctx: reads.append(len(values)) or real(values, ctx))
    tr, ev = _blocks()
    res = train(_model(), tr, ev, TrainConfig(steps=25, batch_size=4, progress=False))
    F = step_mod.FLUSH_EVERY
    assert reads == [F] * (25 // F) + [25 % F] and [s for s, _ in res.loss_curve] == list(range(1, 26))
    reads.clear()
    train(_model(), tr, ev, TrainConfig(steps=12, batch_size=4, eval_every=3, progress=False))
    assert reads == [3, 3, 3, 1, 2]                 # before every evaluation (3, 6, 9), at step 10 and at the end


def test_a_non_finite_loss_names_the_step_where_it_appeared():
    run = _session(_model(), None, world=1)
    prog = step_mod.Progress(step=3)
    prog.pending = [(1, torch.tensor(2.0, dtype=torch.float64)), (2, torch.tensor(math.nan, dtype=torch.float64)),
                    (3, torch.tensor(math.inf, dtype=torch.float64))]
    with pytest.raises(AnatomyKitError, match="training loss became nan at step 2"):
        step_mod.flush_losses(run, prog)
    assert prog.loss_curve == [(1, 2.0)]


def test_the_grown_gpt_reads_its_gate_and_token_count_from_the_device_only_when_they_changed(monkeypatch):
    from anatomy_kit.width_growth import srio
    from anatomy_kit.width_growth.gpt import GPT, GPTConfig, set_gate

    torch.manual_seed(0)
    grown = srio.grow(GPT(GPTConfig(vocab_size=VOCAB, n_layers=2, d_model=32, n_heads=4, max_seq_len=16)), 48, "nrio")
    grown.config = grown.config.with_(warmup_tokens=4 * 16)
    set_gate(grown, 0.0)
    reads = []
    for name in ("__float__", "__int__", "item"):
        real = getattr(torch.Tensor, name)

        def counted(self, *a, _real=real, **k):
            if self is grown.gate or self is grown.tokens_seen:
                reads.append(self is grown.gate)
            return _real(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, counted)
    idx = torch.randint(0, VOCAB, (2, 16))
    grown.train()
    gates = []
    for _ in range(8):
        grown(idx)
        gates.append(grown.host_value("gate"))
    assert gates == [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]             # 32 tokens per forward, ramp over 64
    assert reads == [False]                                               # one read of tokens_seen, at the start
    grown.tokens_seen.fill_(0)                                            # written from outside: read again
    grown(idx)
    assert reads == [False, False] and grown.host_value("gate") == 0.0
    grown.load_state_dict(grown.state_dict())                            # a checkpoint load: read again
    grown.eval()
    grown(idx)
    assert reads == [False, False, True]
