"""A training script for ``torchrun``: one :func:`~anatomy_kit.lm.train.train` call from a JSON spec (chapter 5).

    torchrun --standalone --nproc_per_node 2 -m anatomy_kit.lm.launch spec.json result.json

The spec names the model (``"model"``: :class:`~anatomy_kit.lm.model.LMConfig` fields, built by
:func:`~anatomy_kit.lm.model.build_lm` with ``"seed"``), the training settings (``"train"``:
:class:`~anatomy_kit.lm.train.TrainConfig` fields) and the data, either a token file
(``"data": {"token_file": folder, "block_size": T, "n_train": ..., "n_eval": ...}``, read as
memory-mapped windows) or two ``.npy`` files of blocks (``"data": {"train_npy": ..., "eval_npy": ...}``).
Every process runs the same script; :func:`train` splits each step's rows between them. Rank 0
writes the result (curves, tokens/s, FLOP/s, MFU, world size, device) as JSON. The same command
with ``--nproc_per_node 1`` (or plain ``python -m``) trains in one process: the numbers agree.
This is how the kit's tests and ``benchmarks/gpu_check.py`` run multi-process training; a
research script under ``torchrun`` looks the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..jsonio import read_json, write_json
from ..validate import AnatomyKitError
from .model import LMConfig, build_lm
from .train import TrainConfig, TrainResult, train

__all__ = ["load_data", "run_spec", "result_summary", "main"]


def load_data(spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """(train blocks, eval blocks) named by a spec's ``"data"`` entry, memory-mapped (nothing loaded)."""
    d = spec.get("data") or {}
    if "token_file" in d:
        from ..data.tokenfile import open_token_file

        tf = open_token_file(d["token_file"], verify=bool(d.get("verify", True)))
        T = int(d["block_size"])
        return tf.windows("train", T, d.get("n_train")), tf.windows("eval", T, d.get("n_eval"))
    if "train_npy" in d and "eval_npy" in d:
        return np.load(d["train_npy"], mmap_mode="r"), np.load(d["eval_npy"], mmap_mode="r")
    raise AnatomyKitError(f"the spec's data entry {d!r} names neither a token_file nor train_npy/eval_npy")


def result_summary(result: TrainResult) -> dict:
    """The JSON-friendly part of a :class:`TrainResult`."""
    return {"loss_curve": result.loss_curve, "eval_curve": result.eval_curve,
            "final_eval_loss": result.final_eval_loss, "tokens_per_s": result.tokens_per_s,
            "flops_per_s": result.flops_per_s, "mfu": result.mfu, "steps_done": result.steps_done,
            "completed": result.completed, "resumed_from": result.resumed_from, "n_params": result.n_params,
            "world_size": result.world_size, "device": result.device, "wall_s": result.wall_s}


def run_spec(spec: dict) -> TrainResult:
    """Build the spec's model and train it (in this process, or as one rank of a ``torchrun`` launch)."""
    cfg = LMConfig(**spec["model"])
    config = TrainConfig(**{**spec["train"], "betas": tuple(spec["train"].get("betas", (0.9, 0.95)))})
    train_blocks, eval_blocks = load_data(spec)
    return train(build_lm(cfg, int(spec.get("seed", 0))), train_blocks, eval_blocks, config)


def main(argv: list[str] | None = None) -> int:
    import torch.distributed as dist

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    spec = read_json(Path(args[0]), what="training spec")
    result = run_spec(spec)
    if not dist.is_initialized() or dist.get_rank() == 0:
        backend = dist.get_backend() if dist.is_initialized() else None   # None: no process group
        write_json(Path(args[1]), {**result_summary(result), "backend": backend})
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
