"""Chapter 6's growth code on the ``meta`` device with every operation's devices checked (tests/meta_device.py).

A GPU run of chapter 6 grows SmolLM2 with its weights on CUDA; an index or helper tensor built on
the CPU crashes it there. Here the same code runs on a SmolLM2-shaped model (and chapter 6's GPT)
whose weights are on ``meta``, inside :func:`meta_device.same_device`, which refuses any operation
on two devices — the crash a GPU would show, without a GPU or memory.
"""

from __future__ import annotations

import pytest
import torch

from anatomy_kit.width_growth import expansion as ex
from anatomy_kit.width_growth import lrio, srio
from anatomy_kit.width_growth.gpt import GPT, GPTConfig
from anatomy_kit.width_growth.hf_grow import grow_llama, storage_key
from meta_device import MixedDevices, on_meta, same_device, smollm2_on_meta


def test_the_device_check_catches_what_a_gpu_would_refuse():
    x = torch.empty(5, 3, device="meta")
    idx = torch.tensor([0, 2])
    with same_device():
        assert (x * torch.tensor(2.0)).shape == (5, 3)             # a 0-dim CPU tensor is a scalar
        assert x.index_select(0, idx.to("meta")).shape == (2, 3)
        assert x[idx].shape == (2, 3)                                # CUDA moves an index of x[i] itself
        for mixed in (lambda: x.index_select(0, idx), lambda: x + torch.ones(3),
                      lambda: torch.cat([x, torch.zeros(1, 3)]), lambda: x[idx] + torch.ones(2, 3)):
            with pytest.raises((MixedDevices, RuntimeError)):
                mixed()


@pytest.mark.parametrize("eps", [0.0, 0.3])
@pytest.mark.parametrize("expansion", ["block", "tiled", "zero"])
def test_smollm2_grows_on_the_meta_device(eps, expansion):
    """Chapter 6's sweep: grow_llama → expand_llama_state (and folding, rotation) with no tensor on the CPU."""
    small = smollm2_on_meta(n_layers=2)
    with same_device():
        grown = grow_llama(small, 768, eps, expansion)
    cfg = grown.config
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size) == (768, 12, 4, 2048)
    assert all(p.is_meta for p in grown.parameters()) and all(b.is_meta for b in grown.buffers())
    layer = grown.model.layers[1]
    assert layer.self_attn.q_proj.weight.shape == (768, 768) and layer.self_attn.k_proj.weight.shape == (256, 768)
    assert layer.mlp.down_proj.weight.shape == (768, 2048) and grown.lm_head.weight.shape == (49152, 768)
    assert (grown.lm_head.weight is grown.model.embed_tokens.weight) == (eps == 0.0)   # folding unties the head
    memory = [storage_key(p) for p in grown.parameters()]
    assert len(set(memory)) == len(memory)           # no two weights share memory (meta tensors all have address 0)


@pytest.mark.parametrize("operator", ["nrio", "srio-so", "mrio"])
def test_chapter_six_gpt_grows_on_the_meta_device(operator):
    torch.manual_seed(0)
    small = on_meta(GPT(GPTConfig(vocab_size=97, n_layers=2, d_model=32, n_heads=4, max_seq_len=16)))
    with same_device():
        grown = srio.grow(small, 48, operator)
    assert grown.config.d_model == 48 and grown.blocks[0].mlp.fc1.weight.shape == (192, 48)
    assert all(t.is_meta for t in grown.state_dict().values())


@pytest.mark.parametrize("learner", ["lrio", "srio-lo"])
def test_the_learned_operators_train_on_the_device_of_the_model(learner, monkeypatch):
    """Item 5 of the GPU issue: LRIO and SRIO-LO learn where the model is (parameters, batches, loss, Adam),
    not on the CPU. Only the final read of the losses (values) is replaced: meta tensors have none."""
    monkeypatch.setattr(lrio, "host_floats", lambda values: [0.0] * len(values))
    torch.manual_seed(0)
    small = on_meta(GPT(GPTConfig(vocab_size=97, n_layers=2, d_model=32, n_heads=4, max_seq_len=16)))
    batches = [torch.randint(0, 97, (2, 9), generator=torch.Generator().manual_seed(i)) for i in range(2)]  # CPU
    grow = lrio.grow_lrio if learner == "lrio" else lrio.grow_srio_lo
    with same_device():
        grown, curve = grow(small, 48, batches, steps=3)
    assert curve == [0.0] * 3 and grown.config.d_model == 48
    assert all(t.is_meta for t in grown.state_dict().values())


@pytest.mark.filterwarnings("ignore:for .*copying from a non-meta parameter")   # loading weights onto meta: no-op
def test_a_grid_grows_its_runs_on_the_runs_device(tmp_path, monkeypatch):
    """The grid's builder loads the trained small model onto the run's device and grows it there (item 5)."""
    import functools

    from anatomy_kit.width_growth import experiment, recipe, starts
    from anatomy_kit.lm import TrainConfig, train

    cfg = GPTConfig(vocab_size=97, n_layers=2, d_model=32, n_heads=4, max_seq_len=16)
    blocks = torch.randint(0, 97, (8, 17), generator=torch.Generator().manual_seed(0))
    train(starts.fresh_model(cfg, 0), blocks, blocks, TrainConfig(steps=1, batch_size=2, checkpoint_dir=str(tmp_path),
                                                                 progress=False))
    seen = []

    class Grown(Exception):
        pass

    def grow_condition(model, *a, **k):
        seen.append(next(model.parameters()).device.type)
        raise Grown

    monkeypatch.setattr(starts, "grow_condition", grow_condition)
    with pytest.raises(Grown):
        starts.grown_model(cfg, str(tmp_path), 48, "srio-so", str(tmp_path / "start.safetensors"), gate_tokens=32,
                           device="meta")
    assert seen == ["meta"]
    r = recipe.paper_d256_d384().with_(n_layers=2, d_small=32, d_large=48, head_dim=16, block_size=16, batch_size=2,
                                       grad_accum=1, steps_small=2, steps_grown=2, learn_steps=1, warmup_steps=0,
                                       eval_every=1, eval_batches=1, gate_tokens=32)
    jobs = experiment.grid_jobs(r, [0], experiment.GridPaths(tmp_path / "grid"), blocks, device="cuda")
    grown = [j for j in jobs if isinstance(j.build, functools.partial) and j.build.func is starts.grown_model]
    assert grown and all(j.build.keywords["device"] == "cuda" for j in grown)   # every grown builder: the run's device
