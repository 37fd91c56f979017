"""One-device speed options of train(): activation checkpointing, optimiser choice, TF32, compile, FLOP/s and MFU."""

from __future__ import annotations

import math

import pytest
import torch

from anatomy_kit.lm import LMConfig, TrainConfig, build_lm, train, training_flops
from anatomy_kit.lm import speed
from anatomy_kit.validate import AnatomyKitError

VOCAB = 61


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """Tiny models on one torch thread (see conftest.one_torch_thread)."""


def _cfg() -> LMConfig:
    return LMConfig(vocab_size=VOCAB, n_layers=3, d_model=32, n_heads=4, ffn_widths=[64, 32, 48], max_seq_len=16)


def _blocks():
    g = torch.Generator().manual_seed(11)
    seq = (torch.randint(0, VOCAB, (40, 1), generator=g) + torch.arange(17)) % VOCAB
    return seq[:32], seq[32:]


def _train_cfg(**kw) -> TrainConfig:
    return TrainConfig(**{"steps": 6, "batch_size": 4, "lr": 1e-2, "seed": 1, "progress": False, **kw})


def test_activation_checkpointing_recomputes_and_gives_the_same_loss_and_gradients(monkeypatch):
    from anatomy_kit.lm import model as lm_model

    calls = {"n": 0}
    forward = lm_model.FFN.forward

    def counted(self, x):
        calls["n"] += 1
        return forward(self, x)

    monkeypatch.setattr(lm_model.FFN, "forward", counted)   # (module hooks do not fire while recomputing)
    idx = torch.randint(0, VOCAB, (3, 16), generator=torch.Generator().manual_seed(0))
    grads, runs = {}, {}
    for on in (False, True):
        model = build_lm(_cfg(), seed=4).train()
        model.checkpoint_activations = on
        calls["n"] = 0
        _, loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        runs[on] = calls["n"]
        grads[on] = (float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters()})
    assert runs == {False: 3, True: 6}                    # every layer's FFN ran again in the backward pass
    assert grads[True][0] == grads[False][0]             # exact: the recomputation repeats the same forward
    for n, g in grads[False][1].items():
        assert torch.equal(grads[True][1][n], g), n


def test_train_with_activation_checkpointing_follows_the_same_curve_and_restores_the_flag(monkeypatch):
    from anatomy_kit.lm import model as lm_model

    calls = {"n": 0}
    forward = lm_model.FFN.forward

    def counted(self, x):
        calls["n"] += 1
        return forward(self, x)

    monkeypatch.setattr(lm_model.FFN, "forward", counted)
    tr, ev = _blocks()
    plain = train(build_lm(_cfg(), 0), tr, ev, _train_cfg())
    plain_calls, calls["n"] = calls["n"], 0
    model = build_lm(_cfg(), 0)
    ckpt = train(model, tr, ev, _train_cfg(activation_checkpointing=True))
    assert calls["n"] == plain_calls + 6 * 3                # each of 6 steps recomputed its 3 FFNs
    assert ckpt.loss_curve == plain.loss_curve and ckpt.final_eval_loss == plain.final_eval_loss   # exact, as above
    assert model.checkpoint_activations is False


def test_activation_checkpointing_of_a_hugging_face_model():
    from conftest import tiny_llama

    g = torch.Generator().manual_seed(3)
    seq = torch.randint(0, 512, (12, 17), generator=g)
    hf = tiny_llama(n_layers=2)
    hf.config.max_seq_len = 16
    a = train(hf, seq[:8], seq[8:], _train_cfg(steps=3))
    hf2 = tiny_llama(n_layers=2)
    b = train(hf2, seq[:8], seq[8:], _train_cfg(steps=3, activation_checkpointing=True))
    for (_, x), (_, y) in zip(a.loss_curve, b.loss_curve):
        assert x == y           # exact: recomputing the same forward in the backward pass changes no gradient
    assert not hf2.is_activation_checkpointing
    with pytest.raises(AnatomyKitError, match="activation_checkpointing=True needs a PerLayerWidthLM"):
        with speed.activation_checkpointing(torch.nn.Linear(2, 2), True):
            pass


def test_the_optimiser_is_fused_on_every_device_with_weight_decay_on_matrices_only():
    params = dict(build_lm(_cfg(), 0).named_parameters())
    for device in ("cpu", "cuda"):
        opt = speed.make_optimizer(params, 1e-3, (0.9, 0.95), 0.1, torch.device(device))
        assert opt.defaults["fused"] is True and not opt.defaults["foreach"]
    decay, no_decay = opt.param_groups
    assert all(p.ndim >= 2 for p in decay["params"]) and all(p.ndim < 2 for p in no_decay["params"])
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0


def test_the_fused_cpu_step_is_adamw_by_its_formula():
    """Two steps of make_optimizer's AdamW against the update written out (Loshchilov & Hutter, with bias
    correction): p ← p·(1 − lr·λ) − lr·m̂/(√v̂ + ε), on a matrix (decayed) and a vector (not)."""
    g = torch.Generator().manual_seed(0)
    w, b = torch.nn.Parameter(torch.randn(5, 3, generator=g)), torch.nn.Parameter(torch.randn(3, generator=g))
    grads = [(torch.randn(5, 3, generator=g), torch.randn(3, generator=g)) for _ in range(2)]
    lr, (b1, b2), wd, eps = 1e-2, (0.9, 0.95), 0.1, 1e-8
    opt = speed.make_optimizer({"w": w, "b": b}, lr, (b1, b2), wd, torch.device("cpu"))
    ref = {"w": [w.detach().double().clone(), 0.0, 0.0, wd], "b": [b.detach().double().clone(), 0.0, 0.0, 0.0]}
    for t, (gw, gb) in enumerate(grads, start=1):
        w.grad, b.grad = gw.clone(), gb.clone()
        opt.step()
        for name, grad in (("w", gw.double()), ("b", gb.double())):
            p, m, v, decay = ref[name]
            m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
            p = p * (1 - lr * decay) - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
            ref[name] = [p, m, v, decay]
    # float32 rounds each of the update's ~10 operations by at most u relative; two steps
    for name, p in (("w", w), ("b", b)):
        torch.testing.assert_close(p.detach().double(), ref[name][0], rtol=20 * 2.0 ** -24, atol=0)


@pytest.fixture
def tf32_settings():
    """The TF32 switches as they were, restored after the test (through the API that does not raise)."""
    switches = speed._tf32_settings()
    before = [getattr(owner, name) for owner, name, _ in switches]
    yield switches
    for (owner, name, _), value in zip(switches, before):
        setattr(owner, name, value)


def test_tf32_is_switched_on_for_cuda_runs_only_and_restored(tf32_settings):
    (matmul, name, on), (conv, conv_name, _) = tf32_settings
    off = "ieee" if name == "fp32_precision" else False
    setattr(matmul, name, off)
    with speed.fast_matmuls(torch.device("cpu")):
        assert getattr(matmul, name) == off
    with speed.fast_matmuls(torch.device("cuda")):
        assert getattr(matmul, name) == on and getattr(conv, conv_name) == on
    assert getattr(matmul, name) == off
    with speed.fast_matmuls(torch.device("cuda"), enabled=False):
        assert getattr(matmul, name) == off


@pytest.mark.parametrize("before", ["tf32", "ieee"])
@pytest.mark.parametrize("set_before", ["set_float32_matmul_precision", "fp32_precision"])
def test_tf32_context_works_after_the_new_precision_api_was_used(tf32_settings, set_before, before):
    """Reading the legacy allow_tf32 flag raises on torch >= 2.9 once fp32_precision chose TF32; the context does not."""
    matmul = torch.backends.cuda.matmul
    if not hasattr(matmul, "fp32_precision"):
        pytest.skip("torch < 2.9 has only the legacy flags")
    if set_before == "set_float32_matmul_precision":
        torch.set_float32_matmul_precision("highest")
    matmul.fp32_precision = before
    with speed.fast_matmuls(torch.device("cuda")):
        assert matmul.fp32_precision == "tf32"
    assert matmul.fp32_precision == before


def test_compile_wraps_the_step_model_and_checkpoints_keep_the_plain_names(monkeypatch, tmp_path):
    """torch.compile itself takes minutes on a CPU; here it is replaced by a recorder that runs the model as is."""
    compiled = []

    class Recorder(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            compiled.append(x.shape)
            return self.inner(x)

    monkeypatch.setattr(torch, "compile", lambda m: Recorder(m))
    tr, ev = _blocks()
    res = train(build_lm(_cfg(), 0), tr, ev, _train_cfg(compile=True, checkpoint_dir=str(tmp_path)))
    assert len(compiled) >= 6                               # every step (and evaluation) ran through it
    from anatomy_kit.lm.checkpoint import load_checkpoint, model_tensors

    names = set(model_tensors(load_checkpoint(tmp_path)[1]))
    assert names == set(build_lm(_cfg(), 0).state_dict()) and res.completed


def test_flops_and_mfu_in_the_result():
    tr, ev = _blocks()
    res = train(build_lm(_cfg(), 0), tr, ev, _train_cfg())
    per_token = training_flops(_cfg(), 1.0, 16)
    assert res.flops_per_s == pytest.approx(res.tokens_per_s * per_token, rel=1e-12)
    assert res.mfu is None and res.device == "cpu" and res.world_size == 1  # a CPU has no peak in the table
    assert speed.utilisation(4.945e14, "cpu", "bf16") is None


@pytest.mark.parametrize("name,precision,peak", [
    ("NVIDIA H100 80GB HBM3", "bf16", 989e12), ("NVIDIA H100 PCIe", "bf16", 756e12),
    ("NVIDIA H100 NVL", "bf16", 835e12), ("NVIDIA H200", "bf16", 989e12), ("NVIDIA H200 NVL", "bf16", 835e12),
    ("NVIDIA H200 NVL", "tf32", 418e12), ("NVIDIA GH200 480GB", "bf16", 989e12),
    ("NVIDIA A100-SXM4-80GB", "bf16", 312e12), ("NVIDIA A100 80GB PCIe", "tf32", 156e12),
    ("NVIDIA L40S", "bf16", 362e12), ("NVIDIA L4", "bf16", 121e12), ("NVIDIA A10", "bf16", 125e12),
    ("NVIDIA A10G", "bf16", None), ("Tesla T4", "bf16", None), ("NVIDIA H100 80GB HBM3", "fp32", None),
])
def test_device_peaks_come_from_the_data_sheet_table(name, precision, peak):
    assert speed.device_peak_flops(name, precision) == peak


def test_flops_per_token_of_a_hugging_face_model_counts_matrices_once():
    from conftest import tiny_llama

    m = tiny_llama(n_layers=2)
    mats = sum(p.numel() for p in {p.data_ptr(): p for p in m.parameters() if p.ndim >= 2}.values())
    assert speed.flops_per_token(m, 64) == 6 * mats + 12 * 2 * 64 * 32
    assert speed.flops_per_token(build_lm(_cfg(), 0), 16) == training_flops(_cfg(), 1.0, 16)


def test_flops_per_token_of_chapter_six_gpt_has_its_attention_term():
    from anatomy_kit.width_growth.gpt import GPT, GPTConfig

    g = GPT(GPTConfig(vocab_size=VOCAB, n_layers=3, d_model=32, n_heads=4, max_seq_len=16))
    mats = sum(p.numel() for p in g.parameters() if p.ndim >= 2)          # wte tied to lm_head: once
    assert speed.flops_per_token(g, 16) == 6 * mats + 12 * 3 * 16 * 32


def test_bf16_only_where_the_gpu_computes_it_natively(monkeypatch):
    """V100/T4 (compute capability < 8) only emulate bf16: the recipe's bf16 becomes fp32 there, and train refuses it."""
    assert speed.training_precision("bf16", "cpu") == "fp32" and not speed.native_bf16("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for capability, native in (((7, 5), False), ((8, 0), True), ((9, 0), True)):
        def supported(including_emulation=True, capability=capability):
            return True if including_emulation else capability >= (8, 0)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
        assert speed.native_bf16("cuda") is native
        assert speed.training_precision("bf16", "cuda") == ("bf16" if native else "fp32")
        assert speed.training_precision("fp32", "cuda") == "fp32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    monkeypatch.setattr("anatomy_kit.lm.distributed.join", lambda device, fsdp: (
        __import__("anatomy_kit.lm.distributed", fromlist=["Distributed"]).Distributed(), torch.device("cuda")))
    tr, ev = _blocks()
    with pytest.raises(AnatomyKitError, match="precision='bf16' on Tesla T4, which only emulates bf16"):
        train(build_lm(_cfg(), 0), tr, ev, _train_cfg(precision="bf16", device="cuda"))


def test_untimed_steps_leave_the_first_steps_out_of_the_speed(monkeypatch):
    """tokens/s counts only the steps after ``untimed_steps`` (compilation and warm-up are not speed)."""
    from anatomy_kit.lm import step as step_mod

    clock = {"t": 0.0}
    real_step = step_mod.optimiser_step

    def slow_first(run, blocks, prog):          # step 1 takes 100 s of a fake clock, the others 1 s
        clock["t"] += 100.0 if prog.step == 0 else 1.0
        real_step(run, blocks, prog)

    import sys
    from types import SimpleNamespace

    train_module = sys.modules["anatomy_kit.lm.train"]      # (anatomy_kit.lm.train is also the function)
    monkeypatch.setattr(train_module, "optimiser_step", slow_first)
    monkeypatch.setattr(train_module, "time", SimpleNamespace(perf_counter=lambda: clock["t"]))
    tr, ev = _blocks()
    all_steps = train(build_lm(_cfg(), 0), tr, ev, _train_cfg())
    after_one = train(build_lm(_cfg(), 0), tr, ev, _train_cfg(untimed_steps=1))
    assert all_steps.tokens_per_s == 6 * 4 * 16 / 105.0
    assert after_one.tokens_per_s == 5 * 4 * 16 / 5.0                    # the 100 s step is left out
    assert after_one.loss_curve == all_steps.loss_curve
    assert math.isnan(train(build_lm(_cfg(), 0), tr, ev, _train_cfg(untimed_steps=6)).tokens_per_s)


def test_speed_flags_are_validated():
    for flag in ("compile", "tf32", "activation_checkpointing", "fsdp"):
        with pytest.raises(AnatomyKitError, match=f"{flag}='yes' must be True or False"):
            _train_cfg(**{flag: "yes"}).validate()
    with pytest.raises(AnatomyKitError, match="untimed_steps=-1 must be >= 0"):
        _train_cfg(untimed_steps=-1).validate()
