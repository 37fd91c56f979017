r"""The growth operators on a Hugging Face Llama-family model (SmolLM2): RMSNorm, GQA, RoPE, SwiGLU.

Chapter 6, *Growing the residual stream*. INFERRED: the paper's text was not available, and it
grows its own LayerNorm GPT, not Llama; this transfer is ours. ``grow_llama`` returns a plain
``LlamaForCausalLM`` of width D plus a warm-up gate (forward hooks on every RMSNorm), so the
perplexity can be measured at gate 0, gate 1 and across ε.

**What carries over from LayerNorm, derived.** RMSNorm_D(x) = g ⊙ x / √(|x|²/D + e) has no centring.

* Zero-pad (NRIO, ε = 0): |[h; 0]|²/D = (d/D)·|h|²/d, so with e' = e·d/D the padded residual
  normalises to √(D/d)·[h/rms_d(h); 0]; the right factor is therefore **g' = √(d/D)·g** on the old
  gains (the normalised vector grows by √(D/d), the gain takes it back). Exact even without the
  gate, as long as nothing writes into the new coordinates; any g' on the new coordinates works.
* The rotation: LayerNorm's special angle ε* has no counterpart (there is no mean to hand over).
  R does not commute with an elementwise gain (g ⊙ R x ≠ R (g ⊙ x)), so SRIO on an unfolded model
  is not exact. But |R x| = |x|: once the gains are folded into the readers (W ← W diag(g), the
  final gain into an untied LM head), RMSNorm commutes with any orthogonal R, so SRIO at **every**
  ε leaves the residual path exact, like SliceGPT's rotations.
* The gate: masking the old coordinates' statistics (as ``gpt.py`` does for LayerNorm) is exact
  only without rotation, because R shifts the old block by (c−1)h̄ and RMSNorm does not remove
  shifts. So the gate hook works in the unrotated frame: y = g' ⊙ R N_g(Rᵀ x), N_g the RMS norm with
  statistics w = [1_d; g·1_k] over D and the new outputs × g. At g = 1 that is the plain norm
  (|Rᵀx| = |x|, the folded gain is a constant), so the hooks can then be removed.
* Consequence for the experiments: with folded gains the whole grown Llama is R-equivariant, so
  SRIO(ε) computes **the same function as NRIO at every gate value** (tested to 1e-5): perplexity
  across ε is flat by construction. ε can only matter through training (Adam's per-coordinate
  step sizes see the rotated coordinates; folding also moves the gains into the readers and
  unties the head, which changes what is trained) — that is what a run must measure.

New heads (GQA: whole key/value groups grow; query heads follow their kv head) and SwiGLU units
(gate and up are readers, down the writer) are expanded with ``expansion.py``'s policies. RoPE acts
per head on a fixed head_dim, so it is untouched. No biases (Llama has none; others are refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from anatomy_kit.width_growth.expansion import (expansion_policies, grouped, grow_reader, grow_writer, pad_residual,
                                          residual_sources, unit_growth)
from anatomy_kit.width_growth.srio import ResidualRotation, check_all_finite, check_eps, srio_operator
from anatomy_kit.validate import AnatomyKitError, check_int


@dataclass(frozen=True)
class LlamaGrowthPlan:
    """Widths of a Llama growth d → D: heads, kv heads and the SwiGLU width grow by D/d."""

    d: int
    D: int
    n_layers: int
    head_dim: int
    n_kv: int
    n_kv_new: int
    q_per_kv: int
    ffn: int
    ffn_new: int

    @property
    def k(self) -> int:
        return self.D - self.d


def check_llama(model):
    """Return ``model`` if it is a finite LlamaForCausalLM without biases and not mid warm-up."""
    from transformers import LlamaForCausalLM

    if not isinstance(model, LlamaForCausalLM):
        raise AnatomyKitError(f"model of type {type(model).__name__} is not supported; pass a "
                              "transformers LlamaForCausalLM (GPT of gpt.py: srio.grow)")
    cfg = model.config
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        raise AnatomyKitError("Llama models with attention_bias or mlp_bias are not supported")
    gate = getattr(model, "growth_gate", None)
    if gate is not None and gate.value != 1.0:
        raise AnatomyKitError(f"gate={gate.value} must be 1 (warm-up finished) before growing again")
    check_all_finite(model)
    return model


def plan_llama_growth(cfg, new_hidden: int) -> LlamaGrowthPlan:
    """Validate the widths: head_dim fixed, kv heads × D/d and intermediate × D/d integers."""
    d, hd = cfg.hidden_size, getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    check_int("new_hidden", new_hidden, minimum=d + 1)
    n_q, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    if n_q * hd != d:
        raise AnatomyKitError(f"num_attention_heads={n_q} × head_dim={hd} != hidden_size={d}; "
                              "heads cannot grow with the width")
    if (n_kv * new_hidden) % d or new_hidden % hd:
        raise AnatomyKitError(f"new_hidden={new_hidden} does not divide into heads: num_key_value_heads={n_kv} "
                              f"× {new_hidden}/{d} must be an integer and new_hidden a multiple of head_dim={hd}")
    if (cfg.intermediate_size * new_hidden) % d:
        raise AnatomyKitError(f"intermediate_size={cfg.intermediate_size} × {new_hidden}/{d} is not an integer")
    return LlamaGrowthPlan(d, new_hidden, cfg.num_hidden_layers, hd, n_kv, n_kv * new_hidden // d, n_q // n_kv,
                           cfg.intermediate_size, cfg.intermediate_size * new_hidden // d)


def _layer(i: int) -> str:
    return f"model.layers.{i}"


def _folds(plan: LlamaGrowthPlan) -> list[tuple[str, list[str]]]:
    """(norm, the weights that read its output) for every RMSNorm."""
    folds = [(f"{_layer(i)}.{ln}", [f"{_layer(i)}.{m}.weight" for m in mods]) for i in range(plan.n_layers)
             for ln, mods in (("input_layernorm", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
                              ("post_attention_layernorm", ("mlp.gate_proj", "mlp.up_proj")))]
    return folds + [("model.norm", ["lm_head.weight"])]


def fold_rms_gains(state: dict, plan: LlamaGrowthPlan) -> dict:
    """Gains into readers: q/k/v ← W diag(g_in), gate/up ← W diag(g_post), lm_head ← E diag(g_final)."""
    out = dict(state)
    for ln, keys in _folds(plan):
        gain = state[f"{ln}.weight"]
        for key in keys:
            out[key] = state[key] * gain
        out[f"{ln}.weight"] = torch.ones_like(gain)
    return out


def storage_key(t: torch.Tensor) -> tuple:
    """What identifies the memory ``t`` views: its storage object, offset, shape and strides (chapter 6).

    Unlike ``data_ptr()`` this tells tensors apart on the ``meta`` device too (every meta tensor
    has address 0), where the kit's tests grow models without memory.
    """
    return (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape), t.stride())


def fold_expanded_gains(source: dict, state: dict, plan: LlamaGrowthPlan) -> dict:
    """:func:`fold_rms_gains` after :func:`expand_llama_state`, in place on its fresh tensors.

    Scaling a reader's columns commutes with making new rows from old ones, so folding the
    expanded gain [g; g[ρ]] (taken from ``source``, the unexpanded state) into the expanded
    reader equals expanding the folded reader, without a second copy of every reader. A reader
    that shares its tensor with another key (the tied LM head) is scaled into a new tensor.
    """
    out = dict(state)
    rho = residual_sources(plan.d, plan.k, state["model.embed_tokens.weight"].device)
    shared = {storage_key(t) for k, t in state.items() if k != "lm_head.weight"}
    for ln, keys in _folds(plan):
        gain = source[f"{ln}.weight"]
        gain = torch.cat([gain, gain[rho]])
        for key in keys:
            t = state[key]
            out[key] = t * gain if key == "lm_head.weight" and storage_key(t) in shared else t.mul_(gain)
        out[f"{ln}.weight"] = torch.full_like(gain, (plan.d / plan.D) ** 0.5)
    return out


def expand_llama_state(state: dict, plan: LlamaGrowthPlan, expansion: str, mix: float) -> dict:
    """Every tensor at width D in the unrotated frame; norm gains √(d/D)·[g; g[ρ]]."""
    attn_policy, ffn_policy = expansion_policies(expansion)
    rho = residual_sources(plan.d, plan.k, state["model.embed_tokens.weight"].device)
    kv = unit_growth(plan.n_kv, plan.n_kv_new - plan.n_kv, attn_policy, plan.head_dim, mix)
    q = grouped(kv, plan.q_per_kv)
    ffn = unit_growth(plan.ffn, plan.ffn_new - plan.ffn, ffn_policy, 1, mix)
    growth = {"q_proj": q, "k_proj": kv, "v_proj": kv, "o_proj": q,
              "gate_proj": ffn, "up_proj": ffn, "down_proj": ffn}
    scale = (plan.d / plan.D) ** 0.5
    out, done = {}, {}
    for key, t in state.items():
        name, same = key.split(".")[-2], storage_key(t)
        if same in done:                      # a tied weight: expand it once, keep it shared
            out[key] = done[same]
            continue
        if key in ("model.embed_tokens.weight", "lm_head.weight"):
            out[key] = pad_residual(t, plan.k)
        elif name.endswith("norm") or name.endswith("layernorm"):
            out[key] = scale * torch.cat([t, t[rho]])
        elif name in ("o_proj", "down_proj"):
            out[key] = grow_writer(t, None, growth[name], rho)[0]
        elif name in growth:
            out[key] = grow_reader(t, None, growth[name], rho)[0]
        else:
            raise AnatomyKitError(f"unexpected Llama weight {key!r}; only the standard layout is supported")
        done[same] = out[key]
    return out


def rotate_llama_state(state: dict, rotation: ResidualRotation) -> dict:
    """Writers ← R W (embedding rows, o_proj, down_proj), readers ← W Rᵀ (q/k/v, gate/up, lm_head).

    In place: the tensors of ``state`` must be fresh (``expand_llama_state``'s output)."""
    out = dict(state)
    for key, t in state.items():
        name = key.split(".")[-2]
        if name in ("o_proj", "down_proj"):
            out[key] = rotation.columns_inplace(t)
        elif name in ("embed_tokens", "lm_head", "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
            out[key] = rotation.rows_inplace(t)
    return out


def grown_llama_config(cfg, plan: LlamaGrowthPlan, tie: bool):
    """The grown LlamaConfig: widths, rms_norm_eps·d/D, tying."""
    changes = {"hidden_size": plan.D, "num_attention_heads": plan.n_kv_new * plan.q_per_kv,
               "num_key_value_heads": plan.n_kv_new, "intermediate_size": plan.ffn_new, "head_dim": plan.head_dim,
               "rms_norm_eps": cfg.rms_norm_eps * plan.d / plan.D, "tie_word_embeddings": tie}
    new = type(cfg).from_dict({**cfg.to_dict(), **changes})
    new._attn_implementation = cfg._attn_implementation
    return new


def build_llama(cfg, state: dict, source):
    """A LlamaForCausalLM of ``cfg`` adopting ``state``'s fresh tensors (no copy, no random init).

    Built on the meta device; the non-persistent buffers (RoPE frequencies, which depend on
    head_dim and the RoPE settings only, both unchanged) are copied from ``source``.
    """
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    model.load_state_dict(state, strict=True, assign=True)
    for name, buffer in source.named_buffers():
        owner, _, attr = name.rpartition(".")
        if name not in state:
            setattr(model.get_submodule(owner), attr, buffer.clone())
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    on_meta = all(t.is_meta for t in state.values())         # a model grown without memory (tests)
    left = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if left and not on_meta:
        raise AnatomyKitError(f"grown Llama left tensors uninitialised: {left[:3]}")
    return model.eval()


def gated_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, old_width: int, gate: float,
                   rotation: ResidualRotation | None) -> torch.Tensor:
    """weight ⊙ R N_g(Rᵀ x); x (..., D). In float32 (as Hugging Face) or better."""
    h = x.to(torch.promote_types(x.dtype, torch.float32))
    if rotation is not None:
        h = rotation.rows_t(h)
    w = torch.ones(h.shape[-1], dtype=h.dtype, device=h.device)
    w[old_width:] = gate
    ms = (w * h * h).sum(-1, keepdim=True) / h.shape[-1]
    y = h * torch.rsqrt(ms + eps) * w
    if rotation is not None:
        y = rotation.rows(y)
    return weight * y.to(x.dtype)


@dataclass
class LlamaGrowthGate:
    """The warm-up gate of a grown Llama: hooks on its RMSNorms; ``set(g)``; ``remove()`` at g = 1."""

    old_width: int
    rotation: ResidualRotation | None
    value: float = 0.0
    handles: list = field(default_factory=list)

    def set(self, gate: float) -> "LlamaGrowthGate":
        if not 0.0 <= float(gate) <= 1.0:
            raise AnatomyKitError(f"gate={gate!r} must be in [0, 1]")
        self.value = float(gate)
        return self

    def hook(self, module, args, output):
        if self.value == 1.0:
            return output
        return gated_rms_norm(args[0], module.weight, module.variance_epsilon, self.old_width, self.value,
                              self.rotation)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.value = 1.0


def attach_gate(model, old_width: int, rotation: ResidualRotation | None, gate: float = 0.0) -> LlamaGrowthGate:
    """Hook every RMSNorm of ``model`` (input, post-attention, final) and store the gate on it."""
    state = LlamaGrowthGate(old_width, rotation).set(gate)
    norms = [m for layer in model.model.layers for m in (layer.input_layernorm, layer.post_attention_layernorm)]
    for norm in norms + [model.model.norm]:
        state.handles.append(norm.register_forward_hook(state.hook))
    model.growth_gate = state
    return state


def grow_llama(model, new_hidden: int, eps: float, expansion: str = "block", *, mix: float = 0.5,
               gate: float = 0.0):
    """Grow a LlamaForCausalLM to ``new_hidden`` with SRIO at ε (0 = NRIO); returns it gated at ``gate``.

    ε = 0 keeps the gains and the tied embedding; ε > 0 folds the gains, unties the LM head, and
    rotates. Set the gate with ``grown.growth_gate.set(g)``.
    """
    check_llama(model)
    s = check_eps(eps)
    expansion_policies(expansion)
    plan = plan_llama_growth(model.config, new_hidden)
    state = {k: v.detach() for k, v in model.state_dict().items()}
    tie = bool(model.config.tie_word_embeddings) and s == 0.0
    grown_state = expand_llama_state(state, plan, expansion, mix)
    if s > 0.0:
        grown_state = fold_expanded_gains(state, grown_state, plan)
    state = grown_state
    rotation = srio_operator(plan.d, plan.k, s) if s > 0.0 else None
    if rotation is not None:
        state = rotate_llama_state(state, rotation)
    grown = build_llama(grown_llama_config(model.config, plan, tie), state, model)
    attach_gate(grown, plan.d, rotation, gate)
    return grown
