"""A resumed optimiser keeps the implementation flags it was built with (issue 30, item 4).

``Optimizer.load_state_dict`` brings back the saved groups' ``fused`` / ``foreach``; a checkpoint
written by another implementation (the single-tensor path that CPU runs used before
:func:`~anatomy_kit.lm.speed.make_optimizer` went fused everywhere) must run the live one's.
Both directions are tested on the CPU.
"""

from __future__ import annotations

import torch

from anatomy_kit.lm.distributed import Distributed, load_full_states
from anatomy_kit.lm.speed import make_optimizer


def _trained(fused: bool):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    params = dict(model.named_parameters())
    opt = (make_optimizer(params, 1e-2, (0.9, 0.95), 0.1, torch.device("cpu")) if fused else
           torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False))   # an older CPU run's optimiser
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    return model, opt, list(params)


def test_a_fused_checkpoint_resumed_by_a_single_tensor_optimiser_stays_single_tensor():
    model, opt, names = _trained(fused=True)
    saved = opt.state_dict()
    assert all(g["fused"] is True for g in saved["param_groups"])
    live = torch.optim.AdamW([{"params": [p for p in model.parameters() if p.ndim >= 2]},
                              {"params": [p for p in model.parameters() if p.ndim < 2]}], lr=1e-2, foreach=False)
    load_full_states(model, live, model.state_dict(), saved, Distributed(), names)
    assert all(g["foreach"] is False and not g["fused"] for g in live.param_groups)
    assert [g["weight_decay"] for g in live.param_groups] == [0.1, 0.0]     # the training settings come back
    step = next(iter(live.state.values()))["step"]
    assert step.item() == 1.0


def test_a_single_tensor_checkpoint_resumed_by_the_kit_runs_fused():
    model, opt, names = _trained(fused=False)
    saved = opt.state_dict()
    assert all(g["foreach"] is False and not g["fused"] for g in saved["param_groups"])
    live = make_optimizer(dict(model.named_parameters()), 1e-2, (0.9, 0.95), 0.1, torch.device("cpu"))
    matrices = [i for i, p in enumerate(model.parameters()) if p.ndim >= 2]
    saved = {**saved, "param_groups": [{**saved["param_groups"][0], "params": matrices},
                                       {**saved["param_groups"][0], "params": [i for i in range(4)
                                                                               if i not in matrices]}]}
    load_full_states(model, live, model.state_dict(), saved, Distributed(), names)
    assert all(g["fused"] is True and not g["foreach"] for g in live.param_groups)
    step = next(iter(live.state.values()))["step"]
    assert step.dtype == torch.float32 and step.item() == 1.0    # fused keeps float32 steps with the parameters
    model(torch.ones(2, 4)).sum().backward()
    live.step()                                                    # the fused kernel accepts the loaded state
    assert next(iter(live.state.values()))["step"].item() == 2.0
