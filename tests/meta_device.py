"""Running the kit's model code without memory or a GPU, with every operation's devices checked.

A GPU run crashes where one operation takes a CUDA tensor and a CPU tensor (a binary operation,
``cat``, ``index_select`` or indexing with an index built on the CPU). CPU-only tests cannot see
it. Two helpers make them see it:

- weights on the ``meta`` device (shapes only, no memory: a SmolLM2-sized model costs nothing),
  :func:`on_meta` / :func:`smollm2_on_meta`: binary operations and ``cat`` with a CPU tensor
  already fail there;
- :func:`same_device`: inside the block every PyTorch operation must take its tensors from one
  device, with CUDA's exceptions (a 0-dim CPU tensor counts as a scalar; ``x[i]`` and
  ``x[i] = v`` accept a CPU index ``i``; copies between devices), so ``index_select`` with a CPU
  index fails too, as it would on a GPU.

Use both: ``with same_device(): grow_llama(smollm2_on_meta(), ...)``. Code that reads values
(``float(t)``, ``.item()``) cannot run on ``meta``; that is the only limit.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

#: operations whose job is to move data between devices
_MOVES = {"aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::to"}
#: advanced indexing: CUDA moves a CPU index itself
_INDEXING = {"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}


class MixedDevices(RuntimeError):
    """One operation took tensors on two devices (it would fail on a GPU)."""


class _SameDevice(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name not in _MOVES:
            checked = (args[0], args[2:], kwargs) if name in _INDEXING else (args, kwargs)   # not the indices
            devices = {t.device for t in tree_leaves(checked) if isinstance(t, torch.Tensor)
                       and not (t.device.type == "cpu" and t.dim() == 0)}
            if len(devices) > 1:
                raise MixedDevices(f"{func._schema.name} takes tensors on {sorted(map(str, devices))}")
        return func(*args, **kwargs)


@contextmanager
def same_device() -> Iterator[None]:
    """Inside the block an operation on tensors of two devices raises :class:`MixedDevices`."""
    with _SameDevice():
        yield


def on_meta(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every parameter and buffer moved to ``meta`` (in place; values are dropped, ties kept)."""
    return model.to("meta")


def smollm2_on_meta(n_layers: int = 30, tie: bool = True):
    """A ``LlamaForCausalLM`` of SmolLM2-135M's shape (d 576, 9 heads, 3 kv heads, FFN 1536, vocabulary
    49,152; ``n_layers`` of its 30) built on ``meta``: no memory, no download."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=n_layers,
                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                      rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=tie)
    with torch.device("meta"):
        return LlamaForCausalLM(cfg).eval()
