"""Checkpoints without pickle: tensors in safetensors, everything else in JSON (chapter 5).

A checkpoint folder holds ``checkpoint.json`` (the step, data position, curves, optimiser and
scheduler settings, NumPy/Python RNG states, the run's identity, and the name and sha256 of the
tensor file) and ``state-<step>.safetensors`` (model parameters, optimiser moments, the CPU RNG
state and the CUDA RNG state of the device the run trained on — that device's only, so a
checkpoint resumes on a machine with fewer GPUs, or none). The tensor file is written first under
a new name, then the JSON is replaced atomically, then older tensor files are deleted: a crash at
any point leaves a consistent
checkpoint (the previous one or the new one). Loading reads only tensors and JSON, never
executes code from the file, and checks the tensor file's checksum.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..jsonio import read_json, require_fields, write_json
from ..validate import AnatomyKitError
from ..checksums import sha256_of

__all__ = ["CHECKPOINT_NAME", "save_checkpoint", "load_checkpoint", "has_checkpoint", "rng_state", "set_rng_state",
           "state_digest", "model_tensors", "load_trained", "identity_differences"]

CHECKPOINT_NAME = "checkpoint.json"
_FIELDS = ("identity", "tensor_file", "tensor_sha256", "step", "data_position", "loss_curve", "eval_curve",
           "optimizer", "scheduler", "rng")


def state_digest(model: torch.nn.Module) -> str:
    """sha256 over every parameter's name, shape, dtype and bytes: identifies a starting point.

    The bytes are the whole tensor's: an FSDP-sharded model is gathered first (every rank must
    call it), so the digest does not depend on how the model is placed.
    """
    from .distributed import full_tensor

    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        t = full_tensor(p.detach()).cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _cuda_device(device: torch.device | str | None) -> torch.device | None:
    """The CUDA device whose RNG a checkpoint keeps: ``device`` if CUDA, the current GPU if ``None``, else none."""
    if not torch.cuda.is_available():
        return None
    if device is not None:
        device = torch.device(device)
        if device.type != "cuda":
            return None
        return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())
    return torch.device("cuda", torch.cuda.current_device())


def rng_state(device: torch.device | str | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, JSON) of the torch CPU, NumPy and Python random states, and the CUDA one of ``device``.

    Only the training device's CUDA generator is kept (``"rng.cuda"``; ``device=None``: the current
    CUDA device): the state of GPUs the run did not use is not the run's, and a machine with fewer
    GPUs must be able to resume it. Chapter 5.
    """
    tensors = {"rng.torch": torch.get_rng_state()}
    cuda = _cuda_device(device)
    if cuda is not None:
        tensors["rng.cuda"] = torch.cuda.get_rng_state(cuda)
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_py = random.getstate()
    return tensors, {"numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(gauss)],
                     "python": [version, list(internal), gauss_py]}


def set_rng_state(tensors: dict[str, torch.Tensor], state: dict, device: torch.device | str | None = None) -> None:
    """Restore what :func:`rng_state` captured; the CUDA state goes to ``device`` (default: the current GPU).

    A checkpoint written on a GPU resumes on a CPU (the CUDA state is not needed there) and on any
    GPU. Checkpoints of earlier versions kept every visible GPU's state (``"rng.cuda.<i>"``): the
    one of the device's index is restored, or the first one when that index was not saved.
    """
    torch.set_rng_state(tensors["rng.torch"])
    cuda = _cuda_device(device)
    if cuda is not None:
        legacy = sorted((k for k in tensors if k.startswith("rng.cuda.")), key=lambda k: int(k.rsplit(".", 1)[1]))
        saved = tensors.get("rng.cuda", tensors.get(f"rng.cuda.{cuda.index}", tensors[legacy[0]] if legacy else None))
        if saved is not None:
            torch.cuda.set_rng_state(saved, cuda)
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_py = state["python"]
    random.setstate((version, tuple(internal), gauss_py))


#: what the machine decides: left out of a run's identity (chapter 5 collects GPU grids on a CPU)
_MACHINE_SETTINGS = ("precision", "batch_size", "grad_accum")


def _comparable(identity: dict) -> dict:
    """A run identity without what the machine decides: precision, and the split of a step's rows."""
    out = dict(identity)
    train = dict(out.get("train", {}))
    rows = int(train.get("batch_size", 0)) * int(train.get("grad_accum", 1))
    for key in _MACHINE_SETTINGS:
        train.pop(key, None)
    out["train"] = {**train, "rows_per_step": rows}
    return out


def identity_differences(saved: dict, current: dict) -> list[str]:
    """The parts of two run identities that differ, by name (``[]``: the same run; chapter 5).

    An identity is ``{"start": weights digest, "train": TrainConfig.fingerprint(), "trainable": names,
    "train_blocks"/"eval_blocks": shapes}``. Precision and the micro-batch split
    (``batch_size × grad_accum`` counts as one number: the step reads the same rows) are left out:
    the device chooses them, and a checkpoint must resume on another device.
    """
    a, b = _comparable(saved), _comparable(current)
    out = []
    for key in sorted(set(a) | set(b)):
        if key == "train" and isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            out += [f"train.{k}" for k in sorted(set(a[key]) | set(b[key])) if a[key].get(k) != b[key].get(k)]
        elif a.get(key) != b.get(key):
            out.append({"start": "starting weights"}.get(key, key))
    return out


def _split_optimizer(opt_state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    tensors, scalars = {}, {}
    for idx, entry in opt_state["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optim.{idx}.{key}"] = value
            else:
                scalars[f"{idx}.{key}"] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in opt_state["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def _join_optimizer(tensors: dict[str, torch.Tensor], doc: dict) -> dict:
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = value
    for key, value in doc["scalars"].items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items()} for g in doc["param_groups"]]
    return {"state": state, "param_groups": groups}


def save_checkpoint(folder: str | os.PathLike, *, scheduler: Any, identity: dict, step: int, data_position: int,
                    loss_curve: list, eval_curve: list, model: torch.nn.Module | None = None,
                    optimizer: torch.optim.Optimizer | None = None, model_state: dict | None = None,
                    optimizer_state: dict | None = None, device: torch.device | str | None = None,
                    written_with: dict | None = None) -> Path:
    """Write a checkpoint into ``folder`` (see the module docstring); return the JSON path.

    The model and optimiser states are ``model.state_dict()`` / ``optimizer.state_dict()``, or given
    directly (``model_state``/``optimizer_state``: full states gathered from a sharded model).
    ``device``: the training device (its CUDA RNG state is kept). ``written_with``: what the
    checkpoint was written with that is not the run's identity (device, precision), for the record.
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model_state = model.state_dict() if model_state is None else model_state
    opt_tensors, opt_doc = _split_optimizer(optimizer.state_dict() if optimizer_state is None else optimizer_state)
    rng_tensors, rng_doc = rng_state(device)
    tensors, seen = {}, set()
    for k, v in model_state.items():             # tied weights appear twice: store independent copies
        v = v.detach().cpu().contiguous()
        tensors[f"model.{k}"] = v.clone() if v.data_ptr() in seen else v
        seen.add(v.data_ptr())
    tensors.update({k: v.detach().cpu().contiguous() for k, v in {**opt_tensors, **rng_tensors}.items()})
    name = f"state-{step:08d}-{os.getpid()}.safetensors"
    save_file(tensors, str(folder / name))
    doc = {"identity": identity, "tensor_file": name, "tensor_sha256": sha256_of(folder / name), "step": int(step),
           "data_position": int(data_position), "loss_curve": loss_curve, "eval_curve": eval_curve,
           "optimizer": opt_doc, "scheduler": scheduler.state_dict(), "rng": rng_doc}
    if written_with is not None:
        doc["written_with"] = written_with
    path = write_json(folder / CHECKPOINT_NAME, doc, indent=None)
    for old in folder.glob("state-*.safetensors"):
        if old.name != name:
            old.unlink(missing_ok=True)
    return path


def has_checkpoint(folder: str | os.PathLike | None) -> bool:
    """Whether ``folder`` holds a checkpoint written by :func:`save_checkpoint`."""
    return folder is not None and (Path(folder) / CHECKPOINT_NAME).exists()


def load_checkpoint(folder: str | os.PathLike) -> tuple[dict, dict]:
    """(JSON document, tensors) of the checkpoint in ``folder``; the tensor file's checksum is checked.

    Model tensors are under ``"model.<name>"`` (:func:`model_tensors`); ``doc["optimizer_state"]`` is the
    optimiser's ``state_dict`` rebuilt (on the CPU; ``load_state_dict`` moves it to the parameters).
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    path = folder / CHECKPOINT_NAME
    doc = require_fields(read_json(path, what="training checkpoint"), _FIELDS, path=path, what="training checkpoint")
    tensor_path = folder / doc["tensor_file"]
    if not tensor_path.exists() or sha256_of(tensor_path) != doc["tensor_sha256"]:
        raise AnatomyKitError(f"checkpoint {path} names {doc['tensor_file']}, which is missing or does not match its "
                              "sha256; delete the folder to start over")
    tensors = load_file(str(tensor_path), device="cpu")
    opt_tensors = {k: v for k, v in tensors.items() if k.startswith("optim.")}   # load_state_dict places them
    doc["optimizer_state"] = _join_optimizer(opt_tensors, doc["optimizer"])
    doc["loss_curve"] = [tuple(x) for x in doc["loss_curve"]]
    doc["eval_curve"] = [tuple(x) for x in doc["eval_curve"]]
    return doc, tensors


def model_tensors(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The model's ``state_dict`` inside a checkpoint's tensors."""
    return {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}


def load_trained(model: torch.nn.Module, checkpoint_dir: str | os.PathLike) -> torch.nn.Module:
    """Load the weights :func:`train` saved in ``checkpoint_dir`` into ``model`` (same shapes); eval mode."""
    if not has_checkpoint(checkpoint_dir):
        raise AnatomyKitError(f"no checkpoint in {checkpoint_dir}; train with checkpoint_dir={str(checkpoint_dir)!r} first")
    _, tensors = load_checkpoint(checkpoint_dir)
    state = model_tensors(tensors)
    own = model.state_dict()
    bad = sorted(k for k in own if k not in state or tuple(state[k].shape) != tuple(own[k].shape))
    if bad:
        raise AnatomyKitError(f"checkpoint in {checkpoint_dir} holds another model: parameters {bad[:4]} are missing "
                              "or differ in shape")
    model.load_state_dict(state)
    return model.eval()
