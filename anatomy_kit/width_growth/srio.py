r"""SRIO, the closed-form residual-space rotation, and the NRIO/MRIO operators (chapter 6).

Chapter 6, *Growing the residual stream*. Paper 3 (Ramasubramanian B) grows d → D = d + k with "a
closed-form orthogonal rotation in the plane of the all-ones unit vectors of the old and the new
residual subspaces", built from one gain ε, applied on the output side, its inverse on the input
side, and to LayerNorm γ/β. INFERRED: the paper's text was not available; every definition below
is our reconstruction (the book's appendix on sources, section on paper 3), and what we
prove about it is ours.

**The rotation.** u = [1_d; 0]/√d, v = [0; 1_k]/√k, s = ε, c = √(1 − ε²), 0 ≤ ε ≤ 1:

    R = I + (c − 1)(u uᵀ + v vᵀ) + s (v uᵀ − u vᵀ),   R u = c u + s v,   R v = −s u + c v,

identity on span{u, v}^⊥, orthogonal (Rᵀ = R(−ε)), ε = 0 → I (NRIO). Writers W_out (D × ·) become
R W_out, readers W_in (· × D) become W_in Rᵀ, so every linear write→read product W_in W_out is
unchanged. Both are "apply R along the residual axis", done in O(D) per vector.

**LayerNorm, derived.** Write h = h̄·1_d + h⊥ (h⊥ ⊥ 1_d). Then
R[h; 0] = [h + (c−1)h̄·1_d ; s√(d/k)·h̄·1_k].

* Over D coordinates its mean is h̄(d·c + s√(dk))/D. The centred vector is [h⊥; 0] (all that the
  small LayerNorm keeps) iff c = s√(d/k), i.e. **ε* = sin θ* = √(k/D)**: then R u = w = 1_D/√D and
  R[h; 0] = [h⊥; 0] + √(d/D)·h̄·1_D (the old mean spread evenly over all D coordinates). Its variance is
  then |h⊥|²/D = (d/D)·Var_d(h). So with old gains × **√(d/D)**, LayerNorm ε × **d/D** and β' new = 0,
  LN_D(R[h; 0]) = [LN_d(h); 0] exactly, for any γ. At any other ε a multiple of h̄ survives the
  centring: not exact (tested both ways).
* The readers then apply Rᵀ. Rᵀ[z; 0] = [z + (c−1)z̄·1; −s√(d/k)·z̄·1_k] equals [z; 0] only if
  z̄ = 0. LN's output z = γ⊙ĥ + β has z̄ = 0 for all ĥ only when γ is constant and β = 0; so we
  **fold** every LayerNorm's γ, β into its readers first (SliceGPT's step; ``fold_layernorms``):
  γ → 1, β → 0, W_in → W_in diag(γ), b_in → b_in + W_in β; ln_f's β becomes an LM-head bias and
  the head is untied from the embedding. After folding, SRIO at ε* with zero-initialised new units
  is exactly function-preserving **without any gate** (test). Rotating γ and β as vectors
  (``norm_params="rotate"``, the first reading in the appendix on sources) is not exact at any
  ε > 0 (test: measured).
* With the gate of ``gpt.py`` (statistics over the old coordinates at g = 0) every ε is exact at
  g = 0: the rotation only shifts the old block uniformly by (c−1)h̄, which centring removes, and
  the folded readers see [ĥ; 0], which Rᵀ leaves alone.
* Consequence: in both exact regimes the readers' Rᵀ acts on vectors it leaves unchanged, so the
  input-side inverse is invisible at initialisation (dropping it breaks only the write→read
  products, which the tests check). It matters once g > 0 and the new coordinates carry signal.
* What the function sees of R (g = 1, folded): a LayerNorm with a constant gain commutes with
  every orthogonal Q that fixes 1_D, so two rotations R₁, R₂ give the same grown function iff
  R₁ᵀ1_D = R₂ᵀ1_D — the direction LayerNorm centres away, seen from the padded frame. ε sweeps
  it through the (u, v) plane (ε = 0: 1_D; ε*: √D·u). Hence MRIO with per-stage ε* equals SRIO at
  ε* at g = 1 and g = 0 and differs only for 0 < g < 1 (tested: 4e-15 at g = 1, 3e-3 at g = 0.5).

Not preserved at g = 1 for ε ≠ ε*, and at any ε once new heads/units write into the new
coordinates (convex heads, tiled FFN copies): the grown model is then a different function, by
the amount the tests measure. Readings we chose (all INFERRED): SRIO-SO = static (closed-form) ε,
SRIO-LO = the same rotation with its angle learned briefly (``lrio.grow_srio_lo``; the seed
summary calls SO/LO "static/learned orthogonal"); MRIO = the multi-stage rotation below. The
convention s = ε (ε = 0 is NRIO) is the brief's; the seed summary's wording ("a lower ε rotates
the new mean direction more aggressively towards the old one") fits c = ε instead, i.e.
ε_paper = √(1 − ε_ours²): to check against the paper's text when it can be read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from anatomy_kit.width_growth.expansion import expand_gpt_state, plan_gpt_growth
from anatomy_kit.width_growth.gpt import GPT, set_gate
from anatomy_kit.validate import AnatomyKitError, check_choice, check_finite

OPERATORS = ("nrio", "srio-so", "srio-lo", "mrio", "lrio")
#: the operators that learn on batches (:mod:`.lrio`, which builds on this module), and their functions
LEARNED = {"srio-lo": "grow_srio_lo", "lrio": "grow_lrio"}
NORM_PARAMS = ("fold", "rotate")


def check_eps(eps) -> float:
    """Return ε as float if 0 ≤ ε ≤ 1 (ε = s = sin θ; 0 is the identity, i.e. NRIO)."""
    try:
        x = float(eps)
    except (TypeError, ValueError):
        raise AnatomyKitError(f"eps={eps!r} must be a number in [0, 1]") from None
    if not 0.0 <= x <= 1.0:  # also rejects NaN
        raise AnatomyKitError(f"eps={eps!r} is outside [0, 1]; eps = sin θ, 0 = identity (NRIO)")
    return x


def special_eps(d: int, D: int) -> float:
    """ε* = √(k/D): R maps u onto 1_D/√D, and LayerNorm commutes with the growth (docstring)."""
    return math.sqrt((D - d) / D)


@dataclass(frozen=True)
class PlaneRotation:
    """G = I + (c−1)(ppᵀ + qqᵀ) + s(qpᵀ − pqᵀ): p ↦ cp + sq, q ↦ −sp + cq, identity elsewhere.

    p and q are the unit all-ones vectors of the coordinate blocks [0, mid) and [mid, stop) of a
    width-D residual (SRIO: mid = d, stop = D; MRIO stage j: mid = D_{j−1}, stop = D_j).
    """

    mid: int
    stop: int
    width: int
    c: float
    s: float

    def _unit(self, start: int, stop: int) -> torch.Tensor:
        e = torch.zeros(self.width, dtype=torch.float64)
        e[start:stop] = 1.0 / math.sqrt(stop - start)
        return e

    @property
    def p(self) -> torch.Tensor:
        return self._unit(0, self.mid)

    @property
    def q(self) -> torch.Tensor:
        return self._unit(self.mid, self.stop)

    def apply(self, x: torch.Tensor, transpose: bool = False, inplace: bool = False, dim: int = -1) -> torch.Tensor:
        """x (…, D, …) → G x (or Gᵀ x) for every vector along axis ``dim``; O(D) each.

        With a = pᵀx, b = qᵀx (block sums): G x = x + ((c−1)a − s b) p + (s a + (c−1) b) q, two
        reductions and two broadcast adds; ``inplace`` overwrites x (for tensors the caller owns).
        ``dim=0`` rotates the columns of a (D, n) writer where they are contiguous, without a transpose.
        """
        s = -self.s if transpose else self.s
        rp, rq = math.sqrt(self.mid), math.sqrt(self.stop - self.mid)
        old, new = x.narrow(dim, 0, self.mid), x.narrow(dim, self.mid, self.stop - self.mid)
        a = old.sum(dim, keepdim=True) / rp
        b = new.sum(dim, keepdim=True) / rq
        out = x if inplace else x.clone()
        out.narrow(dim, 0, self.mid).add_(((self.c - 1.0) * a - s * b) / rp)
        out.narrow(dim, self.mid, self.stop - self.mid).add_((s * a + (self.c - 1.0) * b) / rq)
        return out


@dataclass(frozen=True)
class ResidualRotation:
    """An orthogonal R = G_m ⋯ G_1 on the residual stream (SRIO: m = 1; MRIO: one per stage)."""

    planes: tuple[PlaneRotation, ...]
    width: int

    def rows(self, x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
        """x (..., D) → R x along the last axis (= X Rᵀ for a matrix of row vectors)."""
        for i, g in enumerate(self.planes):
            x = g.apply(x, inplace=inplace or i > 0)
        return x

    def rows_t(self, x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
        """x (..., D) → Rᵀ x along the last axis."""
        for i, g in enumerate(reversed(self.planes)):
            x = g.apply(x, transpose=True, inplace=inplace or i > 0)
        return x

    def rows_inplace(self, x: torch.Tensor) -> torch.Tensor:
        return self.rows(x, inplace=True)

    def columns_inplace(self, W: torch.Tensor) -> torch.Tensor:
        """A writer W (D, n) → R W, in place, along its contiguous first axis (= ``rows(W.T).T``)."""
        for g in self.planes:
            W = g.apply(W, inplace=True, dim=0)
        return W

    def matrix(self) -> torch.Tensor:
        """Dense (D, D) float64 R (for tests and small D)."""
        return self.rows(torch.eye(self.width, dtype=torch.float64)).T


def srio_operator(d: int, k: int, eps: float) -> ResidualRotation:
    """The SRIO rotation as an O(D) operator (u = old all-ones, v = new all-ones, s = ε)."""
    if d < 1 or k < 1:
        raise AnatomyKitError(f"d={d} and k={k} must both be >= 1")
    s = check_eps(eps)
    D = d + k
    return ResidualRotation((PlaneRotation(d, D, D, math.sqrt(1 - s * s), s),), D)


def srio_rotation(d: int, k: int, eps: float) -> torch.Tensor:
    """Dense (D, D) float64 R = I + (c−1)(uuᵀ + vvᵀ) + s(vuᵀ − uvᵀ), s = ε, c = √(1−ε²)."""
    op = srio_operator(d, k, eps)
    u, v, c, s = op.planes[0].p, op.planes[0].q, op.planes[0].c, op.planes[0].s
    return torch.eye(d + k, dtype=torch.float64) + (c - 1) * (torch.outer(u, u) + torch.outer(v, v)) \
        + s * (torch.outer(v, u) - torch.outer(u, v))


def mrio_operator(d: int, stages: tuple[int, ...], eps=None) -> ResidualRotation:
    """MRIO (INFERRED reading of "medium: accounts for several growth stages"): one SRIO plane per stage.

    Stages d < D_1 < … < D_m = D. Stage j rotates the all-ones of [0, D_{j−1}) towards the all-ones
    of the block [D_{j−1}, D_j) by ε_j (``eps``: None → each stage's ε*_j = √(k_j/D_j); a float or
    one per stage). R = G_m ⋯ G_1 is orthogonal, costs O(m·D), and keeps the g = 0 exactness
    (each plane shifts the first d coordinates uniformly). With per-stage ε*, R u = 1_D/√D as in
    SRIO at ε*; the two differ on the new coordinates. One stage: MRIO = SRIO.
    """
    widths = (d, *stages)
    if any(b <= a for a, b in zip(widths, widths[1:])):
        raise AnatomyKitError(f"stages={stages!r} must increase strictly from d={d}")
    if eps is None:
        gains = [special_eps(a, b) for a, b in zip(widths, widths[1:])]
    elif isinstance(eps, (list, tuple)):
        if len(eps) != len(stages):
            raise AnatomyKitError(f"eps has {len(eps)} values for {len(stages)} stages")
        gains = [check_eps(e) for e in eps]
    else:
        gains = [check_eps(eps)] * len(stages)
    D = widths[-1]
    bounds = zip(widths, widths[1:])
    planes = tuple(PlaneRotation(a, b, D, math.sqrt(1 - s * s), s) for (a, b), s in zip(bounds, gains))
    return ResidualRotation(planes, D)


def check_growable(model) -> GPT:
    """Raise unless ``model`` is a finite, fully warmed-up :class:`GPT`."""
    if not isinstance(model, GPT):
        raise AnatomyKitError(f"model of type {type(model).__name__} is not supported; pass an "
                              "anatomy_kit.width_growth.gpt.GPT (Llama-family models: hf_grow.grow_llama)")
    if model.config.old_width is not None and float(model.gate) != 1.0:
        raise AnatomyKitError(f"gate={float(model.gate)} must be 1 (warm-up finished) before growing again")
    check_all_finite(model)
    return model


def check_all_finite(model) -> None:
    """Raise naming the first parameter that holds NaN or inf (one min/max pass per tensor; a ``meta``
    tensor holds no values to check)."""
    for name, p in model.named_parameters():
        if p.is_meta:
            continue
        lo, hi = torch.aminmax(p.detach())
        if not (torch.isfinite(lo) and torch.isfinite(hi)):
            check_finite(f"parameter {name}", p.detach())


def fold_layernorms(model: GPT) -> GPT:
    """The same function with every LayerNorm's γ = 1, β = 0: γ, β folded into its readers.

    q/k/v ← W diag(γ₁), b ← b + W β₁; fc1 likewise with ln2; lm_head ← H diag(γ_f), bias H β_f.
    The head is untied from the embedding (they now differ) and gets a bias.
    """
    check_growable(model)
    cfg, state = fold_state({k: v.detach() for k, v in model.state_dict().items()}, model.config)
    return build_gpt(cfg, {k: v.clone() for k, v in state.items()})


def fold_state(state: dict, cfg):
    """(config, state) of :func:`fold_layernorms`, on a state dict (pure)."""
    sd = dict(state)
    readers = {f"blocks.{i}.{ln}": [f"blocks.{i}.{m}" for m in mods] for i in range(cfg.n_layers)
               for ln, mods in (("ln1", ("attn.q", "attn.k", "attn.v")), ("ln2", ("mlp.fc1",)))}
    readers["ln_f"] = ["lm_head"]
    sd["lm_head.bias"] = sd.get("lm_head.bias", sd["ln_f.bias"].new_zeros(cfg.vocab_size))
    for ln, mods in readers.items():
        gamma, beta = sd[f"{ln}.weight"], sd[f"{ln}.bias"]
        for m in mods:
            W = sd[f"{m}.weight"]
            sd[f"{m}.bias"] = sd[f"{m}.bias"] + W @ beta
            sd[f"{m}.weight"] = W * gamma
        sd[f"{ln}.weight"], sd[f"{ln}.bias"] = torch.ones_like(gamma), torch.zeros_like(beta)
    return cfg.with_(tie_embeddings=False, head_bias=True), sd


def build_gpt(config, state: dict, gate: float | None = None) -> GPT:
    """A GPT of ``config`` that adopts the tensors of ``state`` (no copy, no random init; callers pass
    tensors nobody else holds). dtype and device come from the state."""
    ref = state["wte.weight"]
    with torch.device("meta"):
        model = GPT(config)
    state = {k: v.contiguous() for k, v in state.items()}
    if config.tie_embeddings:
        state["lm_head.weight"] = state["wte.weight"]
    state.setdefault("gate", torch.ones(1))
    state["gate"] = state["gate"].to(device=ref.device, dtype=ref.dtype).reshape(1).clone()
    state["tokens_seen"] = state.get("tokens_seen", torch.zeros(1, dtype=torch.long)).to(ref.device).reshape(1).clone()
    model.load_state_dict(state, strict=True, assign=True)  # adopts the tensors: no copy, no init
    if config.tie_embeddings:
        model.lm_head.weight = model.wte.weight
    return model if gate is None else set_gate(model, gate)


def residual_keys(cfg) -> dict[str, list[str]]:
    """State keys by role: ``write_rows`` (residual on axis 0), ``write`` / ``read`` (residual last)."""
    L = range(cfg.n_layers)
    write_rows = [f"blocks.{i}.{m}.weight" for i in L for m in ("attn.proj", "mlp.fc2")]
    write = ["wte.weight", "wpe.weight"] + [f"blocks.{i}.{m}.bias" for i in L for m in ("attn.proj", "mlp.fc2")]
    read = [f"blocks.{i}.{m}.weight" for i in L for m in ("attn.q", "attn.k", "attn.v", "mlp.fc1")]
    if not cfg.tie_embeddings:
        read.append("lm_head.weight")
    lns = [f"blocks.{i}.ln{j}" for i in L for j in (1, 2)] + ["ln_f"]
    norms = [f"{ln}.{p}" for ln in lns for p in ("weight", "bias")]
    return {"write_rows": write_rows, "write": write, "read": read, "norms": norms}


def apply_residual_operator(state: dict, cfg, write, read, norms=None, write_columns=None) -> dict:
    """Writers ← M_w W (``write``: rows x ↦ M_w x), readers ← W M_rᵀ (``read``), optional norm vectors.

    ``write_columns`` (W (D, n) ↦ M_w W) replaces ``write(W.T).T`` for the (D, n) writers when given.
    Pure and autograd-friendly (LRIO trains through it). ``cfg`` is the grown config.
    """
    keys = residual_keys(cfg)
    out = dict(state)
    write_columns = write_columns or (lambda W: write(W.T).T)
    for key in keys["write_rows"]:
        out[key] = write_columns(state[key])
    for key in keys["write"]:
        out[key] = write(state[key])
    for key in keys["read"]:
        out[key] = read(state[key])
    if norms is not None:
        for key in keys["norms"]:
            out[key] = norms(state[key])
    return out


def grow_with_rotation(model: GPT, new_d: int, rotation_for, expansion: str = "block", *,
                       norm_params: str = "fold", mix: float = 0.5, gate: float = 0.0) -> GPT:
    """Fold (or not), expand, rotate; ``rotation_for(plan)`` returns a :class:`ResidualRotation` or None.

    ``norm_params``: "fold" (γ, β folded into the readers first), "rotate" (γ, β rotated as vectors),
    "pad" (γ, β only padded; right when there is no rotation).
    """
    check_growable(model)
    check_choice("norm_params", norm_params, NORM_PARAMS + ("pad",))
    cfg, state = model.config, {k: v.detach() for k, v in model.state_dict().items()}
    if norm_params == "fold":
        cfg, state = fold_state(state, cfg)
    plan = plan_gpt_growth(cfg, new_d)
    state = expand_gpt_state(state, plan, expansion, mix)
    rotation = rotation_for(plan)
    if rotation is not None:
        op = rotation.rows_inplace  # the expanded tensors are ours: rotate them in place
        state = apply_residual_operator(state, plan.new, op, op, norms=op if norm_params == "rotate" else None,
                                        write_columns=rotation.columns_inplace)
    return build_gpt(plan.new, state, gate)


def grow_nrio(model: GPT, new_d: int, expansion: str = "block", *, mix: float = 0.5, gate: float = 0.0) -> GPT:
    """NRIO: no residual operator (zero-padded residual; new units by ``expansion``). Embedding stays tied."""
    return grow_with_rotation(model, new_d, lambda plan: None, expansion, norm_params="pad", mix=mix, gate=gate)


def grow_srio(model: GPT, new_d: int, eps: float | None = None, expansion: str = "block", *,
              norm_params: str = "fold", mix: float = 0.5, gate: float = 0.0) -> GPT:
    """SRIO(-SO): rotation by ε (None → ε* = √(k/D)). The learned angle (SRIO-LO) is ``lrio.grow_srio_lo``."""
    check_choice("norm_params", norm_params, NORM_PARAMS)
    if eps is not None:
        check_eps(eps)
    return grow_with_rotation(model, new_d, lambda plan: srio_operator(
        plan.d, plan.k, special_eps(plan.d, plan.D) if eps is None else eps), expansion,
        norm_params=norm_params, mix=mix, gate=gate)


def default_stages(d: int, D: int) -> tuple[int, ...]:
    """Two equal stages d → d + ⌊k/2⌋ → D (one stage when k = 1)."""
    half = (D - d) // 2
    return (D,) if half == 0 else (d + half, D)


def grow_mrio(model: GPT, new_d: int, eps=None, stages: tuple[int, ...] | None = None,
              expansion: str = "block", *, mix: float = 0.5, gate: float = 0.0) -> GPT:
    """MRIO: the multi-stage rotation of :func:`mrio_operator` (stages end at ``new_d``)."""
    d = check_growable(model).config.d_model
    stages = default_stages(d, new_d) if stages is None else tuple(stages)
    if stages and stages[-1] != new_d:
        raise AnatomyKitError(f"stages={stages!r} must end at new_d={new_d}")
    return grow_with_rotation(model, new_d, lambda plan: mrio_operator(plan.d, stages, eps), expansion,
                              mix=mix, gate=gate)


def grow(model: GPT, new_d: int, operator: str = "srio-so", eps=None, expansion: str = "block", **kw) -> GPT:
    """The closed-form operators by name: ``operator`` in nrio, srio-so, mrio (chapter 6).

    The learned ones (srio-lo, lrio) train on batches first and live in :mod:`.lrio`
    (``grow_srio_lo``, ``grow_lrio``); :func:`anatomy_kit.width_growth.starts.grow_condition` runs any
    condition of the grid, learned or not.
    """
    check_choice("operator", operator, OPERATORS)
    if operator in LEARNED:
        raise AnatomyKitError(f"operator={operator!r} is learned on batches: call anatomy_kit.width_growth.lrio."
                              f"{LEARNED[operator]}(model, new_d, batches, ...) (srio.grow runs nrio, srio-so, mrio)")
    if operator == "nrio":
        return grow_nrio(model, new_d, expansion, **kw)
    if operator == "srio-so":
        return grow_srio(model, new_d, eps, expansion, **kw)
    return grow_mrio(model, new_d, eps, kw.pop("stages", None), expansion, **kw)
