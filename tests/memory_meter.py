"""Peak bytes of live tensors, measured through PyTorch's dispatcher (CPU tensors are invisible to tracemalloc).

:class:`LiveTensorBytes` is a :class:`torch.utils._python_dispatch.TorchDispatchMode`: every tensor an
op returns inside the block whose storage it has not seen is counted (the storage's bytes) until
that tensor object is freed; ``peak`` is the largest total at any moment. Views and in-place
results share a counted storage and add nothing. A storage kept alive only by a view after its
first tensor dies is no longer counted, so the meter can only under-count, and it counts the
same way in the runs it compares.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveTensorBytes(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._counted: set[int] = set()

    def _free(self, key: int, n: int) -> None:
        self._counted.discard(key)
        self.live -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.is_meta:
                continue
            storage = t.untyped_storage()
            key = storage._cdata
            if key in self._counted:
                continue
            n = storage.nbytes()
            self._counted.add(key)
            self.live += n
            self.peak = max(self.peak, self.live)
            weakref.finalize(t, self._free, key, n)
        return out
