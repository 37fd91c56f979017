"""Uniform access to the insides of Hugging Face decoder-only models.

Works for the Llama, Mistral, Qwen, Gemma, Phi-3, OLMo and SmolLM families (``model.model.layers``),
GPT-2 style models (``model.transformer.h``) and GPT-NeoX/Pythia (``model.gpt_neox.layers``); a
model with another layout is searched for the one ``nn.ModuleList`` of ``config.num_hidden_layers``
blocks, and a structure the kit cannot read raises :class:`StructureNotRecognised`, listing the module
paths it found. Decoder layers of recent ``transformers`` return a tensor, older ones a tuple whose
first element is the hidden state: :func:`hidden_of` accepts both, keeping the whole batch.
:func:`attention_of` and :func:`mlp_of` give a layer's two sub-blocks, :func:`silenced` makes one
contribute nothing for a ``with`` block (the layer report card drops them one at a time).

Introduced in chapter 1 (*The ablation map*).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from torch import nn

from ..validate import AnatomyKitError

#: Per-layer weight modules of a Llama-family decoder layer, by short name.
MODULE_PATHS = {
    "q": "self_attn.q_proj",
    "k": "self_attn.k_proj",
    "v": "self_attn.v_proj",
    "o": "self_attn.o_proj",
    "gate": "mlp.gate_proj",
    "up": "mlp.up_proj",
    "down": "mlp.down_proj",
}


class StructureNotRecognised(AnatomyKitError):
    """The kit cannot find a model's decoder layers, final norm, attention or FFN (the layer report card).

    The message lists the module paths the model has, so a user can see where its layers live.
    """


def module_paths(model: nn.Module, *, max_depth: int = 3, limit: int = 40) -> list[str]:
    """Names of ``model``'s submodules down to ``max_depth`` dots, with their class (``"model.layers: ModuleList[30]"``)."""
    out = []
    for name, mod in model.named_modules():
        if not name or name.count(".") >= max_depth:
            continue
        size = f"[{len(mod)}]" if isinstance(mod, nn.ModuleList) else ""
        out.append(f"{name}: {type(mod).__name__}{size}")
        if len(out) >= limit:
            out.append("…")
            break
    return out


def _not_recognised(model: nn.Module, what: str) -> StructureNotRecognised:
    paths = "; ".join(module_paths(model)) or "(none)"
    return StructureNotRecognised(f"cannot find {what} in {type(model).__name__}; its modules are: {paths}")


def backbone(model: nn.Module) -> nn.Module:
    """The decoder stack (``LlamaModel``-like) inside a causal LM."""
    for attr in ("model", "transformer", "gpt_neox"):
        inner = getattr(model, attr, None)
        if isinstance(inner, nn.Module):
            return inner
    if hasattr(model, "layers") or hasattr(model, "blocks"):     # the kit's own decoders (chapters 5, 6)
        return model
    raise _not_recognised(model, "the decoder stack (expected .model, .transformer or .gpt_neox)")


def _layer_list_by_size(model: nn.Module) -> nn.ModuleList | None:
    """The one ``nn.ModuleList`` of ``config.num_hidden_layers`` modules anywhere in ``model``, or ``None``."""
    n = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if not isinstance(n, int):
        return None
    found = [m for _, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) == n]
    return found[0] if len(found) == 1 else None


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of decoder layers, shape-agnostic: ``len(decoder_layers(m)) == L``.

    Looked up as ``.layers``, ``.h`` or ``.blocks`` of the :func:`backbone`; failing that, the only
    ``nn.ModuleList`` of ``config.num_hidden_layers`` modules (chapter 1; the report card's loader).
    """
    try:
        inner = backbone(model)
    except StructureNotRecognised:
        inner = None
    for attr in ("layers", "h", "blocks"):
        layers = getattr(inner, attr, None)
        if isinstance(layers, nn.ModuleList):
            return layers
    layers = _layer_list_by_size(model)
    if layers is None:
        raise _not_recognised(model, "the decoder layers (expected .layers, .h or .blocks of the decoder stack, "
                                     "or one ModuleList of config.num_hidden_layers blocks)")
    return layers


_NORM_NAMES = ("norm", "ln_f", "final_layer_norm", "final_norm")


def final_norm(model: nn.Module) -> nn.Module:
    """The normalisation applied after the last decoder layer (beside the layer list, by name)."""
    layers = decoder_layers(model)
    owners = [m for m in model.modules() if any(c is layers for c in m.children())]
    try:
        owners.append(backbone(model))
    except StructureNotRecognised:
        pass
    for owner in owners:
        for attr in _NORM_NAMES:
            mod = getattr(owner, attr, None)
            if isinstance(mod, nn.Module):
                return mod
    raise _not_recognised(model, f"the final norm (expected one of {', '.join(_NORM_NAMES)} beside the layers)")


def mlp_of(layer: nn.Module) -> nn.Module:
    """The feed-forward block (FFN) of one decoder layer."""
    for attr in ("mlp", "feed_forward", "ffn"):
        mod = getattr(layer, attr, None)
        if isinstance(mod, nn.Module):
            return mod
    raise _not_recognised(layer, "the FFN of a decoder layer (expected .mlp, .feed_forward or .ffn)")


def attention_of(layer: nn.Module) -> nn.Module:
    """The attention block of one decoder layer (``self_attn``, ``attn``, ``attention``; the report card)."""
    for attr in ("self_attn", "attn", "attention", "self_attention"):
        mod = getattr(layer, attr, None)
        if isinstance(mod, nn.Module):
            return mod
    raise _not_recognised(layer, "the attention of a decoder layer (expected .self_attn, .attn or .attention)")


SUBLAYERS = ("attention", "mlp")


def sublayer_of(layer: nn.Module, part: str) -> nn.Module:
    """``attention_of`` or ``mlp_of`` by name (``part`` in :data:`SUBLAYERS`; the report card)."""
    from ..validate import check_choice

    check_choice("part", part, SUBLAYERS)
    return attention_of(layer) if part == "attention" else mlp_of(layer)


@contextmanager
def silenced(module: nn.Module) -> Iterator[None]:
    """Inside the block ``module``'s output hidden state is zero: a sub-block that adds nothing to the residual.

    Zero passes unchanged through the norms some layers apply to a sub-block's output (RMSNorm or
    LayerNorm without bias of 0 is 0; Gemma 2/3, OLMo 2), so the layer computes ``h + 0``. Used by
    the report card to drop only a layer's attention or only its MLP, on any architecture.
    """
    def zero(mod, args, output):
        return replace_hidden(output, torch.zeros_like(hidden_of(output)))

    handle = module.register_forward_hook(zero)
    try:
        yield
    finally:
        handle.remove()


def hidden_of(output) -> torch.Tensor:
    """The hidden state (batch, seq, d) from a layer output that is a tensor or a tuple."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise AnatomyKitError(f"unexpected decoder-layer output of type {type(output).__name__}")


def replace_hidden(output, hidden: torch.Tensor):
    """Return ``output`` with its hidden state replaced, keeping a tuple a tuple."""
    if isinstance(output, torch.Tensor):
        return hidden
    return (hidden, *tuple(output)[1:])


def layer_module(model: nn.Module, layer: int, module: str) -> nn.Linear:
    """The ``nn.Linear`` of short name ``module`` (see :data:`MODULE_PATHS`) in ``layer``."""
    from ..validate import check_choice, check_layer_index

    check_choice("module", module, MODULE_PATHS)
    layers = decoder_layers(model)
    check_layer_index("layer", layer, len(layers))
    mod = layers[layer]
    for part in MODULE_PATHS[module].split("."):
        mod = getattr(mod, part)
    return mod


def run_model(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
    """One forward pass of a Hugging Face causal LM, or of one of the kit's own models.

    Hugging Face models get ``input_ids``, ``attention_mask`` and ``use_cache=False``; the kit's
    models (:mod:`anatomy_kit.lm`, :mod:`anatomy_kit.width_growth`) take token ids only, so padded input
    (a mask with zeros) is refused for them. Returns whatever the model returns.
    """
    from transformers import PreTrainedModel

    if isinstance(model, PreTrainedModel):
        return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    if attention_mask is not None and not bool(attention_mask.all()):
        raise AnatomyKitError(f"{type(model).__name__} takes no attention mask; give unpadded token blocks")
    return model(input_ids)


@contextmanager
def hooked(modules: list[nn.Module], hook: Callable, *, kind: str = "forward",
           with_kwargs: bool = False) -> Iterator[None]:
    """Register ``hook`` on every module for the duration of a ``with`` block."""
    handles = []
    try:
        for i, m in enumerate(modules):
            fn = (lambda i: (lambda *a, **k: hook(i, *a, **k)))(i)
            if kind == "forward":
                handles.append(m.register_forward_hook(fn, with_kwargs=with_kwargs))
            elif kind == "pre":
                handles.append(m.register_forward_pre_hook(fn, with_kwargs=with_kwargs))
            else:
                raise AnatomyKitError(f"kind={kind!r} is not accepted; choose 'forward' or 'pre'")
        yield
    finally:
        for h in handles:
            h.remove()
