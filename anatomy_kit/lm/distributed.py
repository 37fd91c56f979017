"""Training across processes with PyTorch's own engine, for :func:`anatomy_kit.lm.train` (chapter 5 at full scale).

Under ``torchrun`` (``RANK``, ``WORLD_SIZE`` and ``MASTER_ADDR`` in the environment, any world size,
1 included: one GPU then still runs the NCCL paths) ``train`` joins the process group
(``nccl`` on CUDA, ``gloo`` on a CPU; one GPU per process, ``cuda:LOCAL_RANK``), and then

- each optimiser step's batch rows (the same rows a single process would read) are split into
  equal contiguous parts, one per rank, so the *global* batch is the single-process batch and
  the gradient, averaged by DistributedDataParallel, is the single-process gradient up to the
  order of floating-point sums;
- the model is wrapped in ``DistributedDataParallel`` (without re-broadcasting buffers every step:
  every rank computes the same ones) or, with ``TrainConfig(fsdp=True)``, sharded with
  ``torch.distributed.fsdp.fully_shard`` (each decoder layer that
  :func:`anatomy_kit.hf.layers.decoder_layers` finds — ``layers``, ``blocks``, a Hugging Face
  model's ``model.layers`` — then the whole model), which keeps only a slice of every weight and
  optimiser moment on each GPU. A model that is already sharded (a second ``train`` call on it:
  chapter 3's phases, an in-process resume) is used as it is;
- gradients are synchronised once per optimiser step, after the last micro-batch
  (:func:`gradient_sync`: DDP's ``no_sync``, FSDP's ``set_requires_gradient_sync``);
- the reported loss is the mean over ranks, reduced for many steps at once
  (:func:`mean_over_ranks`); every rank evaluates the same blocks (same weights, same number);
  only rank 0 writes checkpoints and shows a progress bar, after gathering the full state for
  FSDP; every rank resumes from the same checkpoint.

One process not launched by ``torchrun`` changes nothing: no process group, no wrapper.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist
from torch import nn

from ..validate import AnatomyKitError

__all__ = ["Distributed", "join", "local_rows", "wrap", "is_sharded", "gradient_sync", "mean_over_ranks", "barrier",
           "full_states", "load_full_states", "full_tensor"]


@dataclass(frozen=True)
class Distributed:
    """This process's place in a run: ``rank`` of ``world_size`` (one process: 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    fsdp: bool = False
    group: bool = False          # joined a process group (a torchrun launch, world size 1 included)

    @property
    def active(self) -> bool:
        return self.group or self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def join(device: str, fsdp: bool = False) -> tuple[Distributed, torch.device]:
    """Read ``torchrun``'s environment, join (or reuse) the process group, and choose this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    launched = world > 1 or all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR"))
    if not launched:
        if fsdp:
            raise AnatomyKitError("fsdp=True shards a model across processes: launch the run with torchrun "
                                  "(e.g. torchrun --nproc_per_node 2 script.py)")
        return Distributed(), torch.device(device)
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    if dist.get_world_size() != world:
        raise AnatomyKitError(f"the process group has {dist.get_world_size()} ranks but WORLD_SIZE={world}")
    return Distributed(rank=rank, world_size=world, local_rank=local, fsdp=bool(fsdp), group=True), dev


def local_rows(rows: torch.Tensor, ctx: Distributed) -> torch.Tensor:
    """This rank's equal, contiguous share of a micro-batch's rows ``(B,)``."""
    if not ctx.active:
        return rows
    if len(rows) % ctx.world_size:
        raise AnatomyKitError(f"batch_size={len(rows)} is not divisible by the {ctx.world_size} processes; choose a "
                              f"multiple of {ctx.world_size} so every rank gets the same number of rows")
    k = len(rows) // ctx.world_size
    return rows[ctx.rank * k:(ctx.rank + 1) * k]


def is_sharded(model: nn.Module) -> bool:
    """Whether ``fully_shard`` has already been applied to ``model`` (chapter 5)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:                               # pragma: no cover - torch without FSDP2
        return False
    return isinstance(model, FSDPModule)


def wrap(model: nn.Module, ctx: Distributed, device: torch.device) -> nn.Module:
    """The module the step runs: ``model`` itself, a DDP wrapper, or ``model`` sharded in place (FSDP).

    FSDP shards every decoder layer (:func:`~anatomy_kit.hf.layers.decoder_layers`: the kit's
    decoders and Hugging Face models alike), then the rest; a model sharded by an earlier call is
    returned as it is. A model that is sharded while this run asks for DDP is an error.
    """
    if not ctx.active:
        return model
    if ctx.fsdp:
        from torch.distributed.fsdp import fully_shard

        from ..hf.layers import decoder_layers

        if not is_sharded(model):
            for layer in decoder_layers(model):
                fully_shard(layer)
            fully_shard(model)
        return model
    if is_sharded(model):
        raise AnatomyKitError("the model was sharded by an earlier fsdp=True run; train it with fsdp=True again")
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False)


@contextmanager
def gradient_sync(step_model: nn.Module, model: nn.Module, ctx: Distributed, enabled: bool) -> Iterator[None]:
    """Inside the block the backward pass synchronises gradients across ranks only if ``enabled`` (chapter 5).

    Gradient accumulation calls it with ``enabled`` false for every micro-batch but the last, so
    DDP all-reduces (FSDP reduce-scatters) once per optimiser step instead of once per micro-batch.
    """
    if not ctx.active or enabled:
        yield
        return
    if is_sharded(model):
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
        return
    with (step_model.no_sync() if hasattr(step_model, "no_sync") else nullcontext()):
        yield


def mean_over_ranks(values: torch.Tensor, ctx: Distributed) -> list[float]:
    """Element-wise mean over the ranks of ``values`` (a float64 tensor on the run's device), as floats (chapter 5).

    One all-reduce and one device-to-host copy for however many values (the losses of many
    steps at once); unchanged with one process.
    """
    if ctx.active:
        values = values.clone()
        dist.all_reduce(values)
        values = values / ctx.world_size
    return values.tolist()


def barrier(ctx: Distributed) -> None:
    if ctx.active:
        dist.barrier()


#: Optimiser group entries that choose an implementation for this device, not a training setting.
IMPLEMENTATION_FLAGS = ("fused", "foreach", "capturable", "differentiable")


def with_live_flags(opt_state: dict, opt: torch.optim.Optimizer) -> dict:
    """``opt_state`` (an optimiser ``state_dict``) with each group's implementation flags taken from ``opt``.

    Set *before* loading: ``load_state_dict`` places the ``step`` counters by the loaded flags
    (fused and capturable keep them on the parameters' device).
    """
    if len(opt_state["param_groups"]) != len(opt.param_groups):
        raise AnatomyKitError(f"the saved optimiser has {len(opt_state['param_groups'])} parameter groups, "
                              f"this one {len(opt.param_groups)}")
    groups = [{**saved, **{k: live[k] for k in IMPLEMENTATION_FLAGS if k in live}}
              for saved, live in zip(opt_state["param_groups"], opt.param_groups)]
    return {**opt_state, "param_groups": groups}


def _index_form(osd: dict, names: list[str]) -> dict:
    """A full optimiser state keyed by parameter name → keyed by position (``Optimizer.state_dict``'s form)."""
    index = {n: i for i, n in enumerate(names)}
    groups = [{**g, "params": [index[n] for n in g["params"]]} for g in osd["param_groups"]]
    return {"state": {index[n]: v for n, v in osd["state"].items()}, "param_groups": groups}


def _name_form(osd: dict, names: list[str]) -> dict:
    groups = [{**g, "params": [names[i] for i in g["params"]]} for g in osd["param_groups"]]
    return {"state": {names[int(i)]: v for i, v in osd["state"].items()}, "param_groups": groups}


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor behind ``t`` (an FSDP shard is gathered: every rank must call it); ``t`` otherwise
    (chapter 5)."""
    gather = getattr(t, "full_tensor", None)
    return gather() if callable(gather) else t


def full_states(model: nn.Module, opt: torch.optim.Optimizer, ctx: Distributed, names: list[str]
                ) -> tuple[dict, dict]:
    """(model ``state_dict``, optimiser ``state_dict``) in full, as one process would hold them.

    With FSDP every rank takes part in gathering them (call it on all ranks) and only rank 0
    receives them (the others get empty dicts); otherwise they are local.
    ``names``: the optimised parameters' names in the optimiser's order.
    """
    if not ctx.fsdp:
        return model.state_dict(), opt.state_dict()
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    msd = get_model_state_dict(model, options=options)
    osd = get_optimizer_state_dict(model, opt, options=options)
    if not ctx.is_main:               # with cpu_offload only rank 0 receives the gathered state
        return {}, {}
    return msd, _index_form(osd, names)


def load_full_states(model: nn.Module, opt: torch.optim.Optimizer, model_state: dict, opt_state: dict,
                     ctx: Distributed, names: list[str]) -> None:
    """Load full states (from a checkpoint every rank has read) into ``model`` and ``opt``.

    The optimiser keeps *its own* implementation flags (``fused``, ``foreach``, …: those
    :func:`~anatomy_kit.lm.speed.make_optimizer` gave it), not the saved ones that
    ``load_state_dict`` would bring back: a checkpoint written by another implementation (an
    older single-tensor CPU run) resumes with this one's.
    """
    opt_state = with_live_flags(opt_state, opt)
    if not ctx.fsdp:
        model.load_state_dict(model_state)
        opt.load_state_dict(opt_state)
        return
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                         set_optimizer_state_dict)

    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, model_state, options=options)
    set_optimizer_state_dict(model, opt, _name_form(opt_state, names), options=options)
