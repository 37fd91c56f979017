"""A resumed optimiser keeps the implementation flags of the device it resumes on (issue 30, item 4).

``Optimizer.load_state_dict`` brings back the saved groups' ``fused`` / ``foreach``; a checkpoint
written on one device and resumed on another must run the path chosen for the new one. Both
directions are tested on the CPU by editing the flags in a saved state (CPU AdamW has a fused
kernel, so the "GPU" optimiser can be built here).
"""

from __future__ import annotations

import torch

from anatomy_kit.lm.distributed import Distributed, load_full_states
from anatomy_kit.lm.speed import make_optimizer


def _trained(fused: bool):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    params = dict(model.named_parameters())
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True) if fused else
           make_optimizer(params, 1e-2, (0.9, 0.95), 0.1, torch.device("cpu")))
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    return model, opt, list(params)


def test_a_gpu_checkpoint_resumed_on_a_cpu_runs_the_single_tensor_path():
    model, opt, names = _trained(fused=False)
    saved = opt.state_dict()
    for g in saved["param_groups"]:                  # what make_optimizer on CUDA saves
        g["fused"], g["foreach"] = True, None
    fresh = make_optimizer(dict(model.named_parameters()), 1e-2, (0.9, 0.95), 0.1, torch.device("cpu"))
    load_full_states(model, fresh, model.state_dict(), saved, Distributed(), names)
    assert all(g["foreach"] is False and not g["fused"] for g in fresh.param_groups)
    assert [g["weight_decay"] for g in fresh.param_groups] == [0.1, 0.0]     # the training settings come back
    step = next(iter(fresh.state.values()))["step"]
    assert step.item() == 1.0


def test_a_cpu_checkpoint_resumed_where_the_optimiser_is_fused_stays_fused():
    model, opt, names = _trained(fused=False)
    saved = opt.state_dict()
    assert all(g["foreach"] is False and not g["fused"] for g in saved["param_groups"])
    live = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)      # make_optimizer's CUDA choice
    saved = {**saved, "param_groups": [{**saved["param_groups"][0],
                                        "params": sum((g["params"] for g in saved["param_groups"]), [])}]}
    load_full_states(model, live, model.state_dict(), saved, Distributed(), names)
    assert all(g["fused"] is True and g["foreach"] is None for g in live.param_groups)
    step = next(iter(live.state.values()))["step"]
    assert step.dtype == torch.float32 and step.item() == 1.0    # fused keeps float32 steps with the parameters
    model(torch.ones(2, 4)).sum().backward()
    live.step()                                                    # the fused kernel accepts the loaded state
    assert next(iter(live.state.values()))["step"].item() == 2.0
