"""New heads and FFN units for a wider model: convex expansion and the Net2Net tiled split.

Chapter 6, *Growing the residual stream*. The brief says attention gets a "convex expansion"
(LiGO-inspired) and the FFN a "tiled copy in fc1/fc2". The exact coefficients are not known.
INFERRED: the paper's text was not available; the definitions below are ours.

Every grown matrix has four blocks, old/new output × old/new input. With n old units (heads of
``group`` = head_dim rows, or FFN neurons with group 1), m new units, d old and k new residual
coordinates, and ρ(j) = j mod d the residual coordinate that new coordinate d + j tiles:

* a **reader** W (n·r, d) (q/k/v, fc1, gate/up): old units keep W and read no new coordinate;
  new unit i reads ``Σ_j S[i, j] W_j`` on the old coordinates and ``Σ_j S[i, j] W_j[:, ρ]`` on the
  new ones (S: m × n source coefficients); biases likewise.
* a **writer** W (d, n·r) (proj, fc2, o_proj, down): old units write no new coordinate; new unit
  i writes ``Σ_j S[i, j] W[ρ, j]`` into the new coordinates. Into the old coordinates it writes 0
  (convex, zero) or, for the tiled split, the Net2Net share: every copy of unit j and unit j
  itself write ``W[:, j] / c_j`` (c_j = 1 + number of copies), so for identical inputs the summed
  write into the old coordinates is unchanged.

Policies: ``tiled`` (S one-hot, new unit i copies unit i mod n, split), ``convex`` (new unit i =
(1 − mix)·unit (i mod n) + mix·unit (i + 1 mod n); non-negative rows summing to 1; no split,
because the activation of a mixed unit is not the mix of activations), ``zero`` (S = 0: new units
read and write nothing; the plain zero-pad control). For attention, "tiled" means whole copied
heads with the split proj; for the FFN, "convex" means mixed neurons that write only new
coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import torch

from anatomy_kit.validate import AnatomyKitError, check_choice, check_int

if TYPE_CHECKING:
    from anatomy_kit.width_growth.gpt import GPTConfig

POLICIES = ("tiled", "convex", "zero")
# expansion name -> (attention policy, FFN policy); "block" is the paper's block-specific recipe
EXPANSIONS = {"block": ("convex", "tiled"), "convex": ("convex", "convex"),
              "tiled": ("tiled", "tiled"), "zero": ("zero", "zero")}


@dataclass(frozen=True)
class UnitGrowth:
    """How m new units are made from n old ones: ``sources`` (m, n); ``group`` rows per unit."""

    sources: torch.Tensor
    group: int = 1
    split: bool = False

    @property
    def n_old(self) -> int:
        return self.sources.shape[1]

    @property
    def n_new(self) -> int:
        return self.sources.shape[0]

    @cached_property
    def terms(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """[(source index (m,), weight (m,)), ...]: the ≤ 2 non-zeros of each row of ``sources``."""
        S = self.sources
        nnz = int((S != 0).sum(1).max()) if S.numel() else 0
        if nnz == 0:
            return []
        idx = (S != 0).to(S.dtype).topk(nnz, dim=1).indices  # (m, nnz): the non-zero columns
        weights = S.gather(1, idx)
        return [(idx[:, t], weights[:, t]) for t in range(nnz)]


def expansion_policies(expansion: str) -> tuple[str, str]:
    """(attention policy, FFN policy) for an expansion name."""
    return EXPANSIONS[check_choice("expansion", expansion, EXPANSIONS)]


def unit_sources(n_old: int, n_new: int, policy: str, mix: float = 0.5) -> torch.Tensor:
    """(n_new, n_old) float64 source coefficients of the new units under ``policy``."""
    check_int("n_old", n_old, minimum=1)
    check_int("n_new", n_new, minimum=0)
    check_choice("policy", policy, POLICIES)
    if not 0.0 <= float(mix) <= 1.0:
        raise AnatomyKitError(f"mix={mix!r} must be in [0, 1] (a convex weight)")
    S = torch.zeros(n_new, n_old, dtype=torch.float64)
    rows = torch.arange(n_new)
    if policy == "tiled" or (policy == "convex" and n_old == 1):
        S[rows, rows % n_old] = 1.0
    elif policy == "convex":
        S[rows, rows % n_old] += 1.0 - mix
        S[rows, (rows + 1) % n_old] += mix
    return S


def unit_growth(n_old: int, n_new: int, policy: str, group: int = 1, mix: float = 0.5) -> UnitGrowth:
    """The :class:`UnitGrowth` of a policy; the tiled policy splits its writes (Net2Net)."""
    return UnitGrowth(unit_sources(n_old, n_new, policy, mix), group, split=policy == "tiled")


def grouped(growth: UnitGrowth, per_source: int) -> UnitGrowth:
    """Expand a kv-head growth to its query heads (GQA: ``per_source`` query heads per kv head)."""
    eye = torch.eye(per_source, dtype=growth.sources.dtype)
    return UnitGrowth(torch.kron(growth.sources, eye), growth.group, growth.split)


def residual_sources(d: int, k: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(k,) long on ``device``: ρ(j) = j mod d, the old coordinate that new coordinate d + j tiles (chapter 6).

    Build it on the device of the tensors it indexes (a CPU index cannot index a CUDA tensor's rows).
    """
    return torch.arange(k, device=device) % d


def pad_residual(x: torch.Tensor, k: int, dim: int = -1) -> torch.Tensor:
    """Append k zero residual coordinates along ``dim`` (embeddings, writer biases)."""
    shape = list(x.shape)
    shape[dim] = k
    return torch.cat([x, x.new_zeros(shape)], dim=dim)


def grow_reader(W: torch.Tensor, b: torch.Tensor | None, growth: UnitGrowth, rho: torch.Tensor):
    """Reader W (n·r, d), b (n·r,) → W' ((n+m)·r, d+k), b' ((n+m)·r,)."""
    n, r, m = growth.n_old, growth.group, growth.n_new
    d, k = W.shape[1], rho.numel()
    if W.shape[0] != n * r:
        raise AnatomyKitError(f"reader has {W.shape[0]} rows; expected {n} units × {r}")
    new = combine_units(growth, W.reshape(n, r, d)).reshape(m * r, d)
    rho = rho.to(W.device)
    W_out = W.new_empty((n + m) * r, d + k)  # every block is written below
    W_out[: n * r, :d] = W
    W_out[: n * r, d:] = 0
    W_out[n * r:, :d] = new
    W_out[n * r:, d:] = new[:, rho]
    if b is None:
        return W_out, None
    return W_out, torch.cat([b, combine_units(growth, b.reshape(n, r)).reshape(m * r)])


def combine_units(growth: UnitGrowth, X: torch.Tensor) -> torch.Tensor:
    """X (n, ...) → (m, ...): new unit i = Σ_j sources[i, j] X[j] (gathers, not a dense product).

    ``growth`` lives on the CPU (its coefficients are small and read on the host); the gather
    indices and weights are moved to X's device here.
    """
    shape = (-1,) + (1,) * (X.dim() - 1)
    out = None
    for idx, w in growth.terms:
        term = X.index_select(0, idx.to(X.device))
        if not bool((w == 1).all()):
            term = term * w.to(X).reshape(shape)
        out = term if out is None else out.add_(term)
    return X.new_zeros((growth.n_new, *X.shape[1:])) if out is None else out


def split_counts(growth: UnitGrowth) -> torch.Tensor:
    """(n,) copies of each old unit including itself (1 where it was not copied)."""
    return 1.0 + growth.sources.sum(0)


def grow_writer(W: torch.Tensor, b: torch.Tensor | None, growth: UnitGrowth, rho: torch.Tensor):
    """Writer W (d, n·r), b (d,) → W' (d+k, (n+m)·r), b' (d+k,) (see the module docstring)."""
    n, r, m = growth.n_old, growth.group, growth.n_new
    d, k = W.shape[0], rho.numel()
    if W.shape[1] != n * r:
        raise AnatomyKitError(f"writer has {W.shape[1]} columns; expected {n} units × {r}")
    S, rho = growth.sources, rho.to(W.device)
    units = W.reshape(d, n, r).transpose(0, 1)  # (n, d, r): one slice per unit
    if growth.split:
        if not bool(((S == 0) | (S == 1)).all()) or not bool((S.sum(1) == 1).all()):
            raise AnatomyKitError("the Net2Net split needs one-hot (tiled) sources")
        units = units / split_counts(growth).to(W)[:, None, None]
    W_out = W.new_empty(d + k, (n + m) * r)  # every block is written below
    W_out[:d, : n * r] = units.transpose(0, 1).reshape(d, n * r)
    W_out[d:, : n * r] = 0
    W_out[:d, n * r:] = combine_units(growth, units).transpose(0, 1).reshape(d, m * r) if growth.split else 0
    tiles = W.reshape(d, n, r)[rho].transpose(0, 1)  # (n, k, r): each unit's writes at ρ
    W_out[d:, n * r:] = combine_units(growth, tiles).transpose(0, 1).reshape(k, m * r)
    return W_out, (None if b is None else pad_residual(b, k))


# --- the GPT of chapter 6 (gpt.py): which weights are readers and writers, grown block by block ---

@dataclass(frozen=True)
class GrowthPlan:
    """A validated width growth d → D = d + k of a :class:`~anatomy_kit.width_growth.gpt.GPT` config."""

    old: "GPTConfig"
    new: "GPTConfig"

    d = property(lambda self: self.old.d_model, doc="the old residual width d")
    D = property(lambda self: self.new.d_model, doc="the new residual width D")
    k = property(lambda self: self.D - self.d, doc="the number of new coordinates, k = D − d")


def plan_gpt_growth(cfg, new_d: int, *, tie_embeddings: bool | None = None,
                    head_bias: bool | None = None) -> GrowthPlan:
    """Grown config: head_dim fixed (heads grow with width), d_ff·D/d, ln_eps·d/D, old_width = d."""
    d = cfg.d_model
    check_int("new_d", new_d, minimum=d + 1)
    if new_d % cfg.head_dim:
        raise AnatomyKitError(f"new_d={new_d} is not a multiple of head_dim={cfg.head_dim} "
                              f"(d_model={d} / n_heads={cfg.n_heads}); heads grow, head_dim stays")
    if (cfg.ff_width * new_d) % d:
        raise AnatomyKitError(f"d_ff={cfg.ff_width} × new_d={new_d} / d={d} is not an integer FFN width")
    new = cfg.with_(d_model=new_d, n_heads=new_d // cfg.head_dim,
                    d_ff=None if cfg.d_ff is None else cfg.d_ff * new_d // d, ln_eps=cfg.ln_eps * d / new_d,
                    old_width=d, tie_embeddings=cfg.tie_embeddings if tie_embeddings is None else tie_embeddings,
                    head_bias=cfg.head_bias if head_bias is None else head_bias)
    return GrowthPlan(cfg, new)


def expand_gpt_state(state: dict, plan: GrowthPlan, expansion: str = "block", mix: float = 0.5) -> dict:
    """Grow every tensor of a GPT state dict to the new width, in the padded (unrotated) frame.

    LayerNorms: γ' = √(d/D)·[γ; γ[ρ]], β' = [β; 0] (the √(d/D) factor: see ``srio.py``). The LM head
    and the embeddings get zero new columns (their vocabulary "units" are all old).
    """
    attn_policy, ffn_policy = expansion_policies(expansion)
    old, new, k = plan.old, plan.new, plan.k
    rho = residual_sources(plan.d, k, state["wte.weight"].device)
    heads = unit_growth(old.n_heads, new.n_heads - old.n_heads, attn_policy, old.head_dim, mix)
    units = unit_growth(old.ff_width, new.ff_width - old.ff_width, ffn_policy, 1, mix)
    gain = (plan.d / plan.D) ** 0.5
    out = {}
    for key, t in state.items():
        leaf = key.rsplit(".", 2)[-2:]
        if key in ("wte.weight", "wpe.weight", "lm_head.weight"):
            out[key] = pad_residual(t, k)
        elif leaf[0] in ("ln1", "ln2", "ln_f"):
            out[key] = gain * torch.cat([t, t[rho]]) if leaf[1] == "weight" else pad_residual(t, k)
        elif leaf[0] in ("q", "k", "v", "fc1", "proj", "fc2"):
            if leaf[1] == "bias":
                continue  # grown with its weight
            base = key[: -len(".weight")]
            grow = grow_reader if leaf[0] in ("q", "k", "v", "fc1") else grow_writer
            growth = heads if leaf[0] in ("q", "k", "v", "proj") else units
            out[key], out[base + ".bias"] = grow(t, state[base + ".bias"], growth, rho)
        elif key == "tokens_seen":
            out[key] = torch.zeros_like(t)  # the warm-up of the grown model starts at growth
        else:
            out[key] = t.clone()  # lm_head.bias, gate
    return out
