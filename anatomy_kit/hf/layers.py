"""Uniform access to the insides of Hugging Face decoder-only models.

Works for the Llama, Mistral, Qwen, Gemma and SmolLM families (``model.model.layers``)
and GPT-2 style models (``model.transformer.h``). Decoder layers of recent
``transformers`` return a tensor, older ones a tuple whose first element is the
hidden state: :func:`hidden_of` accepts both, keeping the whole batch.

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


def backbone(model: nn.Module) -> nn.Module:
    """The decoder stack (``LlamaModel``-like) inside a causal LM."""
    for attr in ("model", "transformer", "gpt_neox"):
        inner = getattr(model, attr, None)
        if isinstance(inner, nn.Module):
            return inner
    if hasattr(model, "layers"):
        return model
    raise AnatomyKitError(f"cannot find the decoder stack of {type(model).__name__}; "
                          "expected .model, .transformer or .gpt_neox")


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of decoder layers, shape-agnostic: ``len(decoder_layers(m)) == L``."""
    inner = backbone(model)
    for attr in ("layers", "h"):
        layers = getattr(inner, attr, None)
        if isinstance(layers, nn.ModuleList):
            return layers
    raise AnatomyKitError(f"cannot find decoder layers in {type(inner).__name__}; expected .layers or .h")


def final_norm(model: nn.Module) -> nn.Module:
    """The normalisation applied after the last decoder layer."""
    inner = backbone(model)
    for attr in ("norm", "ln_f", "final_layer_norm"):
        mod = getattr(inner, attr, None)
        if isinstance(mod, nn.Module):
            return mod
    raise AnatomyKitError(f"cannot find the final norm of {type(inner).__name__}")


def mlp_of(layer: nn.Module) -> nn.Module:
    """The feed-forward block (FFN) of one decoder layer."""
    for attr in ("mlp", "feed_forward", "ffn"):
        mod = getattr(layer, attr, None)
        if isinstance(mod, nn.Module):
            return mod
    raise AnatomyKitError(f"cannot find the FFN of {type(layer).__name__}; expected .mlp")


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
    models (:mod:`anatomy_kit.lm`, :mod:`anatomy_kit.growth`) take token ids only, so padded input
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
