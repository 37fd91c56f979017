"""Training under torchrun: 2 CPU processes (gloo) follow the single-process loss curve at the same global batch.

Tolerance: every train loss and the final eval loss within TOL (absolute, nats) of one process.
The two runs differ only in the order of floating-point sums (each rank averages its half of the
rows, DDP averages the two gradients, and the multi-process runs accumulate two micro-batches of 4
rows where one process reads 8 at once), which AdamW carries along for the 16 steps.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from anatomy_kit.lm import LMConfig, TrainConfig, build_lm, train
from anatomy_kit.lm.distributed import local_rows, Distributed
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_sum_rtol

VOCAB = 61
# a float32 mean of 8·16 token losses in two orders; the losses stay below log V + 0.5 (≈ 4.6) from the start
TOL = f32_sum_rtol(8 * 16) * (math.log(VOCAB) + 0.5)


def _blocks():
    g = torch.Generator().manual_seed(7)
    start = torch.randint(0, VOCAB, (72, 1), generator=g)
    seq = (start + torch.arange(17)) % VOCAB                     # a noisy count-up-by-one sequence
    noise = torch.randint(0, VOCAB, seq.shape, generator=g)
    seq = torch.where(torch.rand(seq.shape, generator=g) < 0.1, noise, seq)
    return seq[:64], seq[64:]


MODEL = dict(vocab_size=VOCAB, n_layers=2, d_model=32, n_heads=4, ffn_widths=[64, 32], max_seq_len=16)
TRAIN = dict(steps=16, batch_size=8, lr=1e-2, warmup=2, eval_every=8, seed=5, progress=False)


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ddp")
    tr, ev = _blocks()
    np.save(folder / "train.npy", tr.numpy())
    np.save(folder / "eval.npy", ev.numpy())
    return folder


@pytest.fixture(scope="module")
def single(one_torch_thread):
    tr, ev = _blocks()
    return train(build_lm(LMConfig(**MODEL), 0), tr, ev, TrainConfig(**TRAIN))


def _torchrun(folder, name: str, nproc: int, **train_kw) -> dict:
    spec = {"model": MODEL, "seed": 0, "train": {**TRAIN, **train_kw},
            "data": {"train_npy": str(folder / "train.npy"), "eval_npy": str(folder / "eval.npy")}}
    (folder / f"{name}.json").write_text(json.dumps(spec))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "anatomy_kit.lm.launch", str(folder / f"{name}.json"), str(folder / f"{name}-out.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((folder / f"{name}-out.json").read_text())


def _assert_same_curve(got: dict, ref) -> None:
    assert [s for s, _ in got["loss_curve"]] == [s for s, _ in ref.loss_curve]
    np.testing.assert_allclose([l for _, l in got["loss_curve"]], [l for _, l in ref.loss_curve], rtol=0, atol=TOL)
    np.testing.assert_allclose([l for _, l in got["eval_curve"]], [l for _, l in ref.eval_curve], rtol=0, atol=TOL)
    assert abs(got["final_eval_loss"] - ref.final_eval_loss) <= TOL


def test_two_gloo_processes_follow_the_single_process_loss_curve(data_files, single):
    """The same 8 rows per step as 4 × 2 accumulated micro-batches: gradients synchronised once, after the second."""
    got = _torchrun(data_files, "ddp", 2, batch_size=4, grad_accum=2)
    assert got["world_size"] == 2 and got["completed"] and got["device"] == "cpu"
    _assert_same_curve(got, single)
    assert single.loss_curve[-1][1] < single.loss_curve[0][1] - 0.5      # it learned: the curves are not flat


def test_fsdp_checkpoints_on_rank_zero_and_every_rank_resumes(data_files, single, tmp_path):
    ckpt = tmp_path / "ckpt"
    part = _torchrun(data_files, "fsdp-part", 2, fsdp=True, checkpoint_dir=str(ckpt), checkpoint_every=4,
                     stop_after=8, batch_size=4, grad_accum=2)
    assert part["steps_done"] == 8 and not part["completed"]
    files = sorted(p.name for p in ckpt.iterdir())
    assert files[0] == "checkpoint.json" and len(files) == 2, files    # one writer: one tensor file
    rest = _torchrun(data_files, "fsdp-rest", 2, fsdp=True, checkpoint_dir=str(ckpt), checkpoint_every=4,
                     batch_size=4, grad_accum=2)
    assert rest["resumed_from"] == 8 and rest["completed"] and rest["world_size"] == 2
    _assert_same_curve(rest, single)


def test_rows_are_split_evenly_and_an_uneven_batch_is_refused():
    rows = torch.arange(8)
    parts = [local_rows(rows, Distributed(rank=r, world_size=4)).tolist() for r in range(4)]
    assert parts == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert local_rows(rows, Distributed()).tolist() == rows.tolist()
    with pytest.raises(AnatomyKitError, match="batch_size=6 is not divisible by the 4 processes"):
        local_rows(torch.arange(6), Distributed(rank=0, world_size=4))
    with pytest.raises(AnatomyKitError, match="fsdp=True shards a model across processes"):
        tr, ev = _blocks()
        train(build_lm(LMConfig(**MODEL), 0), tr, ev, TrainConfig(**{**TRAIN, "steps": 2, "warmup": 0, "fsdp": True}))


def test_a_torchrun_launch_of_one_process_joins_a_group_and_shards(data_files, single, tmp_path):
    """World size 1 under torchrun: a process group (NCCL on one GPU, gloo here) and FSDP really run."""
    ckpt = tmp_path / "ckpt"
    got = _torchrun(data_files, "fsdp-one", 1, fsdp=True, checkpoint_dir=str(ckpt), checkpoint_every=16)
    assert got["backend"] == "gloo" and got["world_size"] == 1 and got["completed"]
    assert (ckpt / "checkpoint.json").exists()
    _assert_same_curve(got, single)
