"""FSDP (``fully_shard``) on two CPU processes (gloo): the kit's GPT and a Hugging Face model, twice, partly frozen.

One ``torch.multiprocessing.spawn`` of two ranks (one thread each) runs every check, so the
processes start once: chapter 6's GPT (decoder layers in ``blocks``) trained with ``fsdp=True``
with its first block frozen, then trained again in the same process (chapter 3's phases: the model
is already sharded), and a Hugging Face Llama (layers in ``model.model.layers``). Rank 0 writes
what it saw; the test compares it with one process.

Tolerance: train losses within TOL nats of the single-process run, as in test_distributed.py
(the two differ only in the order of floating-point sums).
"""

from __future__ import annotations

import json
import math
import os
import socket

import numpy as np
import torch
import torch.multiprocessing as mp

from anatomy_kit.width_growth.gpt import GPT, GPTConfig
from anatomy_kit.lm import TrainConfig, train
from anatomy_kit.lm.speed import flops_per_token

from conftest import f32_sum_rtol

VOCAB, T = 61, 16
TRAIN = dict(steps=4, batch_size=4, lr=1e-2, seed=5, progress=False)
TOL = f32_sum_rtol(4 * T) * (math.log(VOCAB) + 0.5)   # float32 means of 4·16 token losses (< log V + 0.5)


def _blocks(vocab: int):
    g = torch.Generator().manual_seed(7)
    seq = (torch.randint(0, vocab, (24, 1), generator=g) + torch.arange(T + 1)) % vocab
    return seq[:16], seq[16:]


def _gpt() -> GPT:
    torch.manual_seed(3)
    return GPT(GPTConfig(vocab_size=VOCAB, n_layers=2, d_model=32, n_heads=4, max_seq_len=T))


def _not_first_block(name: str) -> bool:
    return not name.startswith("blocks.0.")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule

    from anatomy_kit.hf.layers import decoder_layers
    from conftest import tiny_llama

    try:
        tr, ev = _blocks(VOCAB)
        gpt = _gpt()
        first = train(gpt, tr, ev, TrainConfig(**TRAIN, fsdp=True), trainable=_not_first_block)
        seen = {"gpt_sharded": [isinstance(m, FSDPModule) for m in (*decoder_layers(gpt), gpt)],
                "gpt_flags": [p.requires_grad for p in gpt.parameters()],
                "gpt_curve": first.loss_curve, "gpt_flops_per_token": flops_per_token(gpt, T),
                "gpt_flops_ratio": first.flops_per_s / first.tokens_per_s, "gpt_params": first.n_params}
        frozen_before = {n: p.full_tensor().clone() for n, p in gpt.named_parameters() if n.startswith("blocks.0.")}
        second = train(gpt, tr, ev, TrainConfig(**{**TRAIN, "data_start": 16}, fsdp=True))   # sharded already
        seen["second_completed"] = second.completed
        seen["second_moved_block0"] = any(not torch.equal(frozen_before[n], p.full_tensor())
                                          for n, p in gpt.named_parameters() if n in frozen_before)
        htr, hev = _blocks(512)
        hf = tiny_llama(n_layers=2)
        res = train(hf, htr, hev, TrainConfig(**TRAIN, fsdp=True))
        seen["hf_sharded"] = [isinstance(m, FSDPModule) for m in decoder_layers(hf)]
        seen["hf_completed"] = res.completed
        if rank == 0:
            with open(out, "w") as f:
                json.dump(seen, f)
    finally:
        dist.destroy_process_group()


def test_fsdp_shards_the_gpt_and_a_hugging_face_model_twice_and_restores_flags(one_torch_thread, tmp_path):
    tr, ev = _blocks(VOCAB)
    single = train(_gpt(), tr, ev, TrainConfig(**TRAIN), trainable=_not_first_block)
    out = tmp_path / "rank0.json"
    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        mp.spawn(_rank, args=(2, _free_port(), str(out)), nprocs=2, join=True)
    finally:
        os.environ.pop("OMP_NUM_THREADS") if old is None else os.environ.update(OMP_NUM_THREADS=old)
    seen = json.loads(out.read_text())
    assert all(seen["gpt_sharded"]) and len(seen["gpt_sharded"]) == 3     # both blocks and the root
    assert all(seen["hf_sharded"]) and len(seen["hf_sharded"]) == 2       # model.model.layers found
    assert all(seen["gpt_flags"])                                         # blocks.0 trains again after the call
    np.testing.assert_allclose([l for _, l in seen["gpt_curve"]], [l for _, l in single.loss_curve], rtol=0, atol=TOL)
    unsharded = flops_per_token(_gpt(), T)
    assert seen["gpt_flops_per_token"] == unsharded                       # global sizes, every matrix once
    assert abs(seen["gpt_flops_ratio"] - unsharded) <= 1e-9 * unsharded and seen["gpt_params"] == single.n_params
    assert seen["second_completed"] and seen["second_moved_block0"]       # FSDP twice; the unfrozen block trained
    assert seen["hf_completed"]
