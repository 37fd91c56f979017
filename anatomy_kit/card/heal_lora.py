"""LoRA adapters for healing, through ``peft``'s layers: which linear modules of the kept layers get one, each
drawn from the run's seed and the module's name (so the healed model and its control start alike), and the merged
weights they add (:mod:`.heal` runs the fine-tune)."""

from __future__ import annotations

import hashlib
import math
from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
from torch import nn

from ..hf.layers import decoder_layers
from ..validate import AnatomyKitError


__all__ = ["lora_target_names"]


def lora_target_names(model: nn.Module, keep: Sequence[int], targets: Sequence[str] | None = None) -> list[str]:
    """Full names of the modules LoRA adapts: the linear maps (``nn.Linear``, or GPT-2's ``Conv1D``) inside
    the decoder layers ``keep``, those whose last name part is in ``targets`` (``None``: all of them)."""
    layers = decoder_layers(model)
    by_layer = {id(layer): i for i, layer in enumerate(layers)}
    prefix = {}
    for name, module in model.named_modules():
        if id(module) in by_layer:
            prefix[by_layer[id(module)]] = name
    names, seen = [], set()
    for i in sorted(set(int(x) for x in keep)):
        for sub, module in layers[i].named_modules():
            if sub and _is_linear(module):
                seen.add(sub.rsplit(".", 1)[-1])
                if targets is None or sub.rsplit(".", 1)[-1] in targets:
                    names.append(f"{prefix[i]}.{sub}")
    missing = sorted(set(targets or ()) - seen)
    if missing:
        raise AnatomyKitError(f"lora_targets {missing} name no linear map of the decoder layers; this model's are "
                              f"{sorted(seen)}")
    return names


def _is_linear(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"


def _lora_seed(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") & (2**63 - 1)


@contextmanager
def _lora_adapters(model: nn.Module, names: list[str], recipe: HealRecipe) -> Iterator[dict[str, nn.Module]]:
    """peft's LoRA on the modules ``names`` (``{name: LoRA layer}``); removed after the block, the frozen
    weights never written. Each ``A`` is drawn from ``(seed, name)`` as peft draws it (Kaiming-uniform,
    a = √5); each ``B`` starts at 0, so the adapted model starts as the model."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=recipe.lora_rank, lora_alpha=recipe.lora_alpha, lora_dropout=0.0, target_modules=names,
                        bias="none")
    wrapped = get_peft_model(model, config)
    try:
        adapters = {n: m for n, m in model.named_modules() if n in set(names) and hasattr(m, "lora_A")}
        if len(adapters) != len(names):
            raise AnatomyKitError(f"peft adapted {len(adapters)} of the {len(names)} modules asked for")
        with torch.no_grad():
            for name, module in adapters.items():
                a = module.lora_A["default"].weight
                g = torch.Generator().manual_seed(_lora_seed(recipe.seed, name))
                a.copy_(nn.init.kaiming_uniform_(torch.empty(a.shape, dtype=a.dtype), a=math.sqrt(5), generator=g))
                module.lora_B["default"].weight.zero_()
        yield adapters
    finally:
        wrapped.unload()


def _merged_weights(adapters: dict[str, nn.Module]) -> dict[str, torch.Tensor]:
    """``{parameter name: W + ΔW}`` of every adapted weight, on the host (the model is not written)."""
    out = {}
    with torch.no_grad():
        for name, module in adapters.items():
            base = module.get_base_layer()
            delta = module.get_delta_weight("default").to(base.weight.dtype)
            out[f"{name}.weight"] = (base.weight + delta.to(base.weight.device)).to("cpu")
    return out
