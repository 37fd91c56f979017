"""Learned residual operators: LRIO (dense, LiGO-style) and SRIO-LO (the SRIO angle, learned).

Chapter 6, *Growing the residual stream*. The brief describes LRIO as the "large" operator:
"full dense, learned over 100 steps, LiGO-like"; the seed summary calls SRIO-LO the "learned
orthogonal" variant. INFERRED: the paper's text was not available; these are our readings.

Both start from the folded, expanded model of ``srio.py`` and learn the residual operator only
(the new heads and units keep their closed-form expansion), by a few Adam steps on the grown
model's LM loss at ``train_gate`` (default 1: at g = 0 the loss does not depend on the operator),
through weights built on the fly (``torch.func.functional_call``), then materialise a plain GPT.

* **LRIO**: writers ← M_w W, readers ← W M_rᵀ with dense (D, D) M = R₀ + Δ, R₀ the SRIO rotation
  (``init="srio"``) or I (``init="nrio"``), and Δ = [1_d rᵀ ; B] (r: (D,), B: (k, D), zero at init;
  separate for M_w and M_r). That is the largest family whose old rows only shift the old block
  uniformly, so the grown model stays exactly the small one at g = 0 after any training (tested).
  Unlike SRIO it does not keep W_in W_out (M_rᵀ M_w ≠ I in general).
* **SRIO-LO**: M_w = M_r = R(θ), θ learned from asin(ε) (one scalar; exact at g = 0 for every θ).

Both learn on the device of the model they grow (its weights, the operator's parameters and the
batches all there; a grid's builder loads the trained small model onto the run's device:
:func:`anatomy_kit.width_growth.starts.grown_model`), and read the loss curve back once, at the end.
The order of the batches comes from a CPU generator seeded by ``seed``, so it is the same on
every device.
"""

from __future__ import annotations

import math

import torch
from torch.func import functional_call

from anatomy_kit.width_growth.expansion import expand_gpt_state, plan_gpt_growth
from anatomy_kit.width_growth.srio import (apply_residual_operator, build_gpt, check_eps, check_growable,
                                     fold_state, special_eps, srio_operator)
from anatomy_kit.validate import AnatomyKitError, check_choice, check_int, check_positive


def check_batches(batches, vocab_size: int, max_seq_len: int) -> list[torch.Tensor]:
    """Return the batches if each is a (B, T+1) LongTensor of token ids, with T ≤ max_seq_len."""
    if not isinstance(batches, (list, tuple)) or not batches:
        raise AnatomyKitError("batches must be a non-empty list of (B, T+1) LongTensor")
    for i, b in enumerate(batches):
        if not isinstance(b, torch.Tensor) or b.dim() != 2 or b.dtype != torch.long or b.shape[1] < 2:
            raise AnatomyKitError(f"batches[{i}] must be a (B, T+1) LongTensor with T >= 1")
        if b.shape[1] - 1 > max_seq_len or int(b.min()) < 0 or int(b.max()) >= vocab_size:
            raise AnatomyKitError(f"batches[{i}] has T={b.shape[1] - 1} (max {max_seq_len}) or ids "
                                  f"outside [0, {vocab_size})")
    return list(batches)


def _expanded(model, new_d: int, expansion: str, mix: float):
    """(plan, expanded folded state) of the model: the unrotated starting point of both learners."""
    check_growable(model)
    cfg, state = fold_state({k: v.detach() for k, v in model.state_dict().items()}, model.config)
    plan = plan_gpt_growth(cfg, new_d)
    return plan, expand_gpt_state(state, plan, expansion, mix)


def train_operator(plan, state: dict, make_ops, params: list[torch.Tensor], batches, *, steps: int,
                   lr: float, seed: int, train_gate: float):
    """Adam on ``params``; ``make_ops()`` → (apply M_w, apply M_r), each x (…, D) ↦ M x along the last
    axis (differentiable in ``params``). Returns the loss per step (floats).

    Everything runs on the device of ``state`` (the batches are moved there); the losses stay on
    the device until the end (one read, no host sync per step).
    """
    device = state["wte.weight"].device
    template = build_gpt(plan.new, state, train_gate).eval()   # eval: no gate ramp while learning; its gate buffer
    batches = [b.to(device) for b in batches]
    opt = torch.optim.Adam(params, lr=lr)
    order = torch.Generator().manual_seed(seed)
    schedule = torch.cat([torch.randperm(len(batches), generator=order) for _ in range(steps // len(batches) + 1)])
    losses = []
    for step in range(steps):
        loss = operator_loss(template, plan, state, make_ops, batches[int(schedule[step])])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return host_floats(losses)


def host_floats(values: list[torch.Tensor]) -> list[float]:
    """0-dim tensors on any device → floats, in one device-to-host read (chapter 6)."""
    return torch.stack(values).tolist()


def operator_loss(template, plan, state: dict, make_ops, batch: torch.Tensor) -> torch.Tensor:
    """The grown model's LM loss (0-dim) on ``batch`` (B, T+1) with the operator's current weights
    (``template``: the grown GPT whose gate and buffers are used as they are; chapter 6)."""
    write, read = make_ops()
    weights = apply_residual_operator(state, plan.new, write, read)
    for buffer in ("gate", "tokens_seen"):           # the template's own (its gate is train_gate)
        weights.pop(buffer, None)
    return functional_call(template, weights, (batch[:, :-1], batch[:, 1:]))[1]


def _materialise(plan, state, write, read, gate: float):
    with torch.no_grad():
        weights = apply_residual_operator(state, plan.new, write, read)
    return build_gpt(plan.new, {k: v.detach() for k, v in weights.items()}, gate)


def _check_training(steps, lr, seed, train_gate):
    check_int("steps", steps, minimum=1)
    check_positive("lr", lr)
    check_int("seed", seed, minimum=0)
    if not 0.0 <= float(train_gate) <= 1.0:
        raise AnatomyKitError(f"train_gate={train_gate!r} must be in [0, 1]")


def structured_operator(base, d: int, r: torch.Tensor, B: torch.Tensor):
    """x (…, D) ↦ M x with M = R₀ + [1_d rᵀ; B] (r: (D,), B: (k, D)), without forming M.

    ``base`` applies R₀ (an O(D) rotation, or None for I); the rest costs O(D·k) per vector
    instead of the O(D²) of a dense product (tested against the dense M).
    """
    def apply(x: torch.Tensor) -> torch.Tensor:
        shift = (x @ r.to(x.dtype)).unsqueeze(-1).expand(*x.shape[:-1], d)
        extra = torch.cat([shift, x @ B.T.to(x.dtype)], dim=-1)
        return (x if base is None else base.rows(x)) + extra
    return apply


def lrio_parameters(d: int, k: int, device: torch.device | str) -> list[torch.Tensor]:
    """(r_w (D,), B_w (k, D), r_r (D,), B_r (k, D)): LRIO's learned parts, float64 zeros on ``device`` (chapter 6)."""
    D = d + k
    return [torch.zeros(*((D,) if i % 2 == 0 else (k, D)), dtype=torch.float64, device=device, requires_grad=True)
            for i in range(4)]


def grow_lrio(model, new_d: int, batches, steps: int = 100, lr: float = 1e-3, seed: int = 0, *,
              init: str = "srio", eps: float | None = None, expansion: str = "block", mix: float = 0.5,
              train_gate: float = 1.0, gate: float = 0.0):
    """LRIO: learn M_w, M_r (module docstring) for ``steps`` steps. Returns (GPT, loss per step)."""
    check_choice("init", init, ("srio", "nrio"))
    _check_training(steps, lr, seed, train_gate)
    plan, state = _expanded(model, new_d, expansion, mix)
    batches = check_batches(batches, plan.old.vocab_size, plan.old.max_seq_len)
    d, k, D = plan.d, plan.k, plan.D
    eps = special_eps(d, D) if eps is None else check_eps(eps)
    base = srio_operator(d, k, eps) if init == "srio" else None
    params = lrio_parameters(d, k, state["wte.weight"].device)

    def make_ops():
        r_w, B_w, r_r, B_r = params
        return structured_operator(base, d, r_w, B_w), structured_operator(base, d, r_r, B_r)

    curve = train_operator(plan, state, make_ops, params, batches, steps=steps, lr=lr, seed=seed,
                           train_gate=train_gate)
    return _materialise(plan, state, *make_ops(), gate), curve


def rotation_from_angle(d: int, k: int, theta: torch.Tensor) -> torch.Tensor:
    """Dense (D, D) SRIO rotation with s = sin θ, c = cos θ, differentiable in θ (0-dim tensor)."""
    D = d + k
    u = torch.zeros(D, dtype=torch.float64)
    u[:d] = 1 / math.sqrt(d)
    v = torch.zeros(D, dtype=torch.float64)
    v[d:] = 1 / math.sqrt(k)
    c, s = torch.cos(theta), torch.sin(theta)
    return torch.eye(D, dtype=torch.float64) + (c - 1) * (torch.outer(u, u) + torch.outer(v, v)) \
        + s * (torch.outer(v, u) - torch.outer(u, v))


def angle_rotation(d: int, theta: torch.Tensor):
    """x (…, D) ↦ R(θ) x in O(D) per vector, differentiable in θ (the dense form: :func:`rotation_from_angle`)."""
    def apply(x: torch.Tensor) -> torch.Tensor:
        k = x.shape[-1] - d
        c, s = torch.cos(theta).to(x.dtype), torch.sin(theta).to(x.dtype)
        a = x[..., :d].sum(-1, keepdim=True) / math.sqrt(d)
        b = x[..., d:].sum(-1, keepdim=True) / math.sqrt(k)
        old = ((c - 1) * a - s * b) / math.sqrt(d)
        new = (s * a + (c - 1) * b) / math.sqrt(k)
        return x + torch.cat([old.expand(*x.shape[:-1], d), new.expand(*x.shape[:-1], k)], dim=-1)
    return apply


def grow_srio_lo(model, new_d: int, batches, steps: int = 100, lr: float = 1e-2, seed: int = 0, *,
                 eps: float | None = None, expansion: str = "block", mix: float = 0.5,
                 train_gate: float = 1.0, gate: float = 0.0):
    """SRIO-LO: learn the rotation angle θ from asin(ε) (None → ε*). Returns (GPT, loss per step).

    The learned ε = sin θ is stored on the returned model as ``learned_eps`` (it may leave [0, 1]:
    a negative ε rotates the other way, still orthogonal and still exact at g = 0).
    """
    _check_training(steps, lr, seed, train_gate)
    plan, state = _expanded(model, new_d, expansion, mix)
    batches = check_batches(batches, plan.old.vocab_size, plan.old.max_seq_len)
    eps = special_eps(plan.d, plan.D) if eps is None else check_eps(eps)
    theta = torch.tensor(math.asin(eps), dtype=torch.float64, device=state["wte.weight"].device, requires_grad=True)

    def make_ops():
        R = angle_rotation(plan.d, theta)
        return R, R

    curve = train_operator(plan, state, make_ops, [theta], batches, steps=steps, lr=lr, seed=seed,
                           train_gate=train_gate)
    grown = _materialise(plan, state, *make_ops(), gate)
    grown.learned_eps = math.sin(host_floats([theta.detach()])[0])
    return grown, curve


__all__ = ["grow_lrio", "grow_srio_lo", "rotation_from_angle", "angle_rotation", "structured_operator",
           "check_batches", "train_operator", "operator_loss", "lrio_parameters"]
