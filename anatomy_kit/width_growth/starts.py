"""Starting points of chapter 6's runs: fresh models, grown models cached on disk, trained weights.

Chapter 6, *Growing the residual stream*. A grown run starts from weights that a growth operator
computed from a trained small model (LRIO and SRIO-LO even train their operator first). The
builder :func:`grown_model` computes them once, in the worker process that trains the run, and
saves them beside the run's checkpoint (``start.safetensors``: tensors, the grown config, the
learned angle or the operator's loss curve), so a resumed run, a later collection and a shard
on another machine all start from the same bytes. Builders are module-level functions: a
``functools.partial`` of them is what :func:`anatomy_kit.lm.train_many` sends to its workers.

Growing happens on the run's device (``device``: the trained small model is loaded there, and
LRIO/SRIO-LO learn their operator there, not on one CPU thread); the start file is written from
the grown weights and the builder returns them as read back from it, on the CPU, so every run of
that start (a resume, a collection elsewhere) begins from the same bytes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import torch

from anatomy_kit.width_growth import lrio, srio
from anatomy_kit.width_growth.gpt import GPT, GPTConfig, set_gate
from anatomy_kit.width_growth.recipe import CONDITIONS, Condition
from anatomy_kit.lm.checkpoint import load_trained
from anatomy_kit.validate import AnatomyKitError, check_choice

__all__ = ["fresh_model", "grow_condition", "grown_model", "save_start", "load_start", "start_meta",
           "trained_model", "untie_head"]

START_FILE = "start.safetensors"


def fresh_model(config: GPTConfig, seed: int) -> GPT:
    """A GPT of ``config`` initialised from ``torch.manual_seed(seed)`` (same seed, same weights)."""
    torch.manual_seed(seed)
    return GPT(config)


def save_start(model: GPT, path: str | os.PathLike, **meta) -> Path:
    """Write ``model``'s tensors and config (and JSON-ready ``meta``) to ``path``, atomically."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tied = model.config.tie_embeddings
    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()
             if not (tied and k == "lm_head.weight")}
    doc = {"config": json.dumps(asdict(model.config)), "meta": json.dumps(meta)}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    save_file(state, str(tmp), metadata=doc)
    os.replace(tmp, path)
    return path


def start_meta(path: str | os.PathLike) -> tuple[GPTConfig, dict]:
    """(config, meta) stored in a start file, without loading its tensors."""
    from safetensors import safe_open

    path = Path(path)
    if not path.exists():
        raise AnatomyKitError(f"no start file {path}; its run has not been built yet")
    with safe_open(str(path), framework="pt") as f:
        doc = f.metadata()
    return GPTConfig(**json.loads(doc["config"])).validate(), json.loads(doc["meta"])


def load_start(path: str | os.PathLike, device: str | torch.device = "cpu") -> GPT:
    """The model saved by :func:`save_start` (same bytes, float32, on ``device``: read on the host, then moved)."""
    from safetensors.torch import load_file

    cfg, _ = start_meta(path)
    return srio.build_gpt(cfg, load_file(str(path), device="cpu")).to(torch.device(device))


def grow_condition(model: GPT, new_d: int, condition: Condition | str, *, gate_tokens: int,
                   batches: list | None = None, learn_steps: int = 100, learn_lr: float = 1e-3,
                   learn_lr_angle: float = 1e-2, seed: int = 0) -> tuple[GPT, dict]:
    """Grow ``model`` to ``new_d`` as ``condition`` says; returns (grown GPT, meta for the start file).

    Gated conditions start at gate 0 and ramp over ``gate_tokens`` training tokens
    (``config.warmup_tokens``); the others start at gate 1. LRIO and SRIO-LO learn their
    operator on ``batches`` for ``learn_steps`` steps first (meta keeps their loss curve).
    """
    cond = CONDITIONS[check_choice("condition", condition, CONDITIONS)] if isinstance(condition, str) else condition
    if cond.operator is None:
        raise AnatomyKitError(f"condition {cond.name!r} is a cold start; it does not grow a model")
    meta: dict = {"condition": cond.name, "old_width": model.config.d_model}
    if cond.operator in ("srio-lo", "lrio"):
        if not batches:
            raise AnatomyKitError(f"condition {cond.name!r} learns its operator and needs batches")
        if cond.operator == "lrio":
            grown, curve = lrio.grow_lrio(model, new_d, batches, learn_steps, learn_lr, seed, expansion=cond.expansion)
        else:
            grown, curve = lrio.grow_srio_lo(model, new_d, batches, learn_steps, learn_lr_angle, seed,
                                             expansion=cond.expansion)
            meta["learned_eps"] = grown.learned_eps
        meta["operator_curve"] = curve
    else:
        grown = srio.grow(model, new_d, cond.operator, eps=cond.eps, expansion=cond.expansion)
    if cond.untied_head:
        grown = untie_head(grown)
    if cond.gated:
        grown.config = grown.config.with_(warmup_tokens=int(gate_tokens))
        set_gate(grown, 0.0)
    else:
        grown.config = grown.config.with_(warmup_tokens=None)
        set_gate(grown, 1.0)
    meta["gate_tokens"] = int(gate_tokens) if cond.gated else 0
    return grown.float(), meta


def untie_head(model: GPT) -> GPT:
    """The same function with the LM head a copy of the embedding plus a zero bias (chapter 6's
    parameter-matched NRIO: as many parameters as the folded arms, whose folding unties the head)."""
    if not model.config.tie_embeddings:
        raise AnatomyKitError("the model's LM head is already untied from its embedding")
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state["lm_head.weight"] = state["wte.weight"].clone()
    state["lm_head.bias"] = state["wte.weight"].new_zeros(model.config.vocab_size)
    return srio.build_gpt(model.config.with_(tie_embeddings=False, head_bias=True), state)


def trained_model(config_or_start: GPTConfig | str | os.PathLike, checkpoint_dir: str | os.PathLike,
                  device: str | torch.device = "cpu") -> GPT:
    """The weights a run left in ``checkpoint_dir``, on ``device``: a GPT of the config (or a start file's config)."""
    cfg = config_or_start if isinstance(config_or_start, GPTConfig) else start_meta(config_or_start)[0]
    with torch.device("meta"):
        model = GPT(cfg)
    model = model.to_empty(device=torch.device(device))
    if cfg.tie_embeddings:
        model.lm_head.weight = model.wte.weight
    return load_trained(model, checkpoint_dir)


def grown_model(source: GPTConfig | str, source_dir: str, new_d: int, condition: str, start_path: str, *,
                gate_tokens: int, batches: list | None = None, learn_steps: int = 100, learn_lr: float = 1e-3,
                learn_lr_angle: float = 1e-2, seed: int = 0, device: str = "cpu") -> GPT:
    """Builder of a grown run: the cached start if ``start_path`` exists, else grow the trained source.

    ``source``: the source run's config, or the start file of a grown source (multi-stage);
    ``source_dir``: the source run's checkpoint folder (trained to the end, gate 1); ``device``:
    where to grow (the run's device; ``"auto"`` is not resolved here). Returns the start on the CPU.
    """
    if Path(start_path).exists():
        return load_start(start_path)
    small = trained_model(source, source_dir, device)
    grown, meta = grow_condition(small, new_d, condition, gate_tokens=gate_tokens, batches=batches,
                                 learn_steps=learn_steps, learn_lr=learn_lr, learn_lr_angle=learn_lr_angle,
                                 seed=seed)
    save_start(grown, start_path, **meta)
    return load_start(start_path)
