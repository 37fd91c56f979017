"""A CPU guard for device mix-ups: run code on the CPU as a GPU run would place its tensors.

:class:`DeviceGuard` is a :class:`torch.overrides.TorchFunctionMode` (the hook PyTorch's own
``FakeTensorMode`` / ``DeviceContext`` tooling builds on) that labels every tensor as a GPU run
would hold it, *host* or *accelerator k*, while the values stay real CPU tensors (notebook code that
reads values keeps working), and raises :class:`DeviceMixError` where PyTorch on CUDA would:

- an op whose tensor operands sit on two devices, except that 0-dim host tensors mix freely with
  accelerator tensors (PyTorch's "CPU scalar" rule) — ``index_select``, ``scatter``, ``cat``, a
  matmul, ``F.embedding`` of host ids in an accelerator table;
- an in-place op (``+=``, ``add_``, ``out=``) into a host tensor from an accelerator tensor, 0-dim
  or not (only host 0-dim *operands* mix; the target's device is the op's device);
- indexing with an index tensor on another accelerator, or indexing a host tensor with an
  accelerator index (an accelerator tensor indexed by a host index is allowed, as on CUDA);
- ``.numpy()`` / ``np.asarray`` of an accelerator tensor;
- a random op whose generator sits on another device than the tensor it fills or samples
  (``torch.randn(..., generator=torch.Generator(), device=dev)``, ``x.normal_(generator=g)``,
  ``torch.multinomial(p, n, generator=g)``): CUDA's "Expected a 'cuda' device type for generator".

Tensors are found in an op's arguments and results inside lists, tuples (named ones included) and
dicts, nested (a function that returns ``{"loss": t}`` labels ``t`` where the op ran).

``.item()``, ``.tolist()``, ``.cpu()``, ``.to(...)`` and ``copy_`` move values across devices, as they do
on CUDA. Labels live with the storage (views share their base's label; ``param.data = x`` takes
``x``'s), as an attribute of the storage's Python object, so a freed storage forgets its label.

**The stand-in accelerators** are CPU devices with an index: ``torch.device("cpu", k)`` for k ≥ 1
is accelerator k (PyTorch accepts such a device on the CPU and computes there). A tensor placed
with it, created from an accelerator tensor, or a parameter of a module moved there is labelled k,
and its ``.device`` answers ``cpu:k`` so that code placing new tensors "where the model is" follows.
Two stand-in accelerators (``cpu:1`` and ``cpu:2``) test a model split across GPUs. Inside the guard,
``torch.Generator(device="cpu:k")`` is a generator of accelerator k (:class:`LabelledGenerator`;
PyTorch would drop the index).

**Threads:** a mode applies to the thread that entered it. :func:`install` and :func:`guarded` make
every thread started afterwards enter the same guard (``Thread.start`` wraps the thread's ``run``);
threads started before them, and threads PyTorch or a library runs in C++ (autograd's backward,
intra-op pools, tokenizers), are not seen: their ops are PyTorch's own, not the kit's.
Subprocesses (``torchrun`` workers, a multiprocessing pool) run without the guard unless they install it.

:func:`install` enters the guard for the rest of a process (a notebook kernel) and makes the kit's
``resolve_device("cpu")`` answer ``cpu:1`` (in every module of the kit that imported it), so that a
chapter run with ``device="cpu"`` places what a GPU run places on the accelerator; :func:`guarded`
does the same for a ``with`` block and undoes it. :func:`kernel_startup` writes the IPython startup
file that installs it in a papermill kernel (``tests/test_full_path.py``, the book's smoke build).
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import threading
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

HOST = 0
META = -1
_LABEL = "_device_guard_label"        # the attribute of a storage's Python object that holds its label

#: Ops that only read metadata, hooks or storage identity: no device rule applies.
_NO_RULE = {
    "_has_compatible_shallow_copy_type", "is_floating_point", "is_complex", "size", "dim", "numel",
    "data_ptr", "untyped_storage", "_typed_storage", "storage_offset", "stride", "element_size",
    "register_hook", "requires_grad_", "retain_grad", "detach", "detach_", "__repr__", "__format__",
    "__hash__", "__len__", "__reduce_ex__", "_is_view", "is_contiguous", "is_leaf",
    "item", "tolist", "__bool__", "__float__", "__int__", "__index__", "copy_", "set_", "type_as",
    "is_set_to", "is_same_size", "_set_grad_enabled", "backward", "pin_memory", "share_memory_",
    "__setstate__", "__getstate__", "_make_subclass", "as_subclass", "__iter__", "__contains__",
    "__dlpack__", "nbytes", "itemsize", "is_shared", "is_pinned", "_version",
}
_TO_NUMPY = {"numpy", "__array__"}
_INDEXING = {"__getitem__", "__setitem__", "index_put_", "index_put"}


class DeviceMixError(RuntimeError):
    """What PyTorch on CUDA would raise: tensors on two devices in one op, or an accelerator tensor to NumPy."""


def device_label(device) -> int:
    """``cpu`` (no index, or 0) → :data:`HOST`; ``cpu:k`` → accelerator k; ``meta`` → :data:`META`
    (shapes only: not tracked); anything else is rejected."""
    dev = torch.device(device)
    if dev.type == "meta":
        return META
    if dev.type != "cpu":
        raise ValueError(f"the device guard runs on the CPU; got device {dev} (accepted: 'cpu', 'cpu:k', 'meta')")
    return dev.index or HOST


def _name(label: int) -> str:
    return "host" if label == HOST else f"accelerator {label}"


def _walk(x, depth: int = 0):
    """Tensors inside ``x``: itself, or nested in lists, tuples (named ones too) and dicts."""
    if isinstance(x, torch.Tensor):
        yield x
    elif depth < 4 and isinstance(x, (list, tuple)):
        for v in x:
            yield from _walk(v, depth + 1)
    elif depth < 4 and isinstance(x, dict):
        for v in x.values():
            yield from _walk(v, depth + 1)


def _tensors(args, kwargs):
    """Tensors among the arguments, nested in lists, tuples and dicts."""
    out = []
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple, dict)):
            out.extend(_walk(a))
    return out


class _GeneratorMeta(type(torch.Generator)):
    def __instancecheck__(cls, obj):                  # a plain torch.Generator is one too
        return isinstance(obj, _BaseGenerator)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _BaseGenerator)


_BaseGenerator = torch._C.Generator                 # torch.Generator, whatever it is patched to


class LabelledGenerator(_BaseGenerator, metaclass=_GeneratorMeta):
    """``torch.Generator`` inside the guard: ``device="cpu:k"`` makes a generator of accelerator k."""

    def __new__(cls, device="cpu"):
        dev = torch.device(device)
        self = super().__new__(cls, device="cpu" if dev.type == "cpu" else dev)
        self.guard_label = device_label(dev) if dev.type == "cpu" else HOST
        return self

    @property
    def device(self):
        label = getattr(self, "guard_label", HOST)
        return torch.device("cpu", label) if label not in (HOST, META) else _BaseGenerator.device.__get__(self)


def generator_label(g) -> int:
    """The device a generator draws for: :data:`HOST` for a plain ``torch.Generator``."""
    return getattr(g, "guard_label", HOST)


def _generator(args, kwargs):
    g = kwargs.get("generator")
    if g is None:
        g = next((a for a in args if isinstance(a, _BaseGenerator)), None)
    return g


def _where() -> str:
    """The notebook cell line (and the kit line) that called the op, read from the stack."""
    cell = kit = None
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if kit is None and "anatomy_kit" in name and "device_guard" not in name:
            kit = f"{Path(name).name}:{frame.f_lineno}"
        if "ipykernel_" in name or name.startswith("<ipython-input"):
            line = linecache.getline(name, frame.f_lineno).strip()
            cell = f"notebook cell line {frame.f_lineno}: `{line}`"
            break
        frame = frame.f_back
    parts = [p for p in (cell, f"in anatomy_kit {kit}" if kit else None) if p]
    return "; ".join(parts) or "outside a notebook cell"


class DeviceGuard(TorchFunctionMode):
    """Label tensors host / accelerator k and raise where CUDA would (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.n_ops = 0

    # --- labels: an attribute of the storage's Python object, which PyTorch keeps as long as the storage -----
    @staticmethod
    def label(t: torch.Tensor) -> int:
        try:
            return t.untyped_storage().__dict__.get(_LABEL, HOST)
        except Exception:                       # noqa: BLE001 - a tensor without storage is the host's
            return HOST

    @staticmethod
    def mark(t: torch.Tensor, label: int) -> None:
        try:
            storage = t.untyped_storage()
        except Exception:                       # noqa: BLE001
            return
        if label == HOST:
            storage.__dict__.pop(_LABEL, None)
        else:
            storage.__dict__[_LABEL] = label

    def _mark_all(self, out, label: int) -> None:
        if label == HOST:
            return
        if isinstance(out, torch.Tensor):
            self.mark(out, label)
        elif isinstance(out, (list, tuple, dict)):
            for t in _walk(out):
                self.mark(t, label)

    def _check_generator(self, name: str, args, kwargs, op_label: int) -> None:
        g = _generator(args, kwargs)
        if g is None or op_label == META or generator_label(g) == op_label:
            return
        self._fail(f"{name}: a generator of {_name(generator_label(g))} draws for a tensor on {_name(op_label)} "
                   "(CUDA: Expected a 'cuda' device type for generator; make it with torch.Generator(device=...))")

    # --- entering: torch.Generator becomes LabelledGenerator while any thread is inside a guard -----------
    _entered = 0
    _lock = threading.Lock()

    def __enter__(self):
        with DeviceGuard._lock:
            if DeviceGuard._entered == 0:
                torch.Generator = LabelledGenerator
            DeviceGuard._entered += 1
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            with DeviceGuard._lock:
                DeviceGuard._entered -= 1
                if DeviceGuard._entered == 0:
                    torch.Generator = _BaseGenerator

    def _fail(self, what: str) -> None:
        raise DeviceMixError(f"{what} (device guard: a CUDA run raises here; {_where()})")

    # --- the rules ------------------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.n_ops += 1
        name = getattr(func, "__name__", "")
        if name in ("__get__", "__set__"):
            return self._property(func, name, args, kwargs)
        if name in _NO_RULE:
            return func(*args, **kwargs)
        if name in _TO_NUMPY:
            if self.label(args[0]) != HOST:
                self._fail(f"can't convert an {_name(self.label(args[0]))} tensor to numpy; use .cpu() first")
            return func(*args, **kwargs)
        if name in ("to", "cpu"):
            return self._move(func, name, args, kwargs)
        if name == "__deepcopy__":                # a copy stays where its original is
            out = func(*args, **kwargs)
            self._mark_all(out, self.label(args[0]))
            return out
        if name in _INDEXING:
            return self._index(func, name, args, kwargs)
        return self._op(func, name, args, kwargs)

    def _property(self, func, name, args, kwargs):
        prop = getattr(getattr(func, "__self__", None), "__name__", "")
        out = func(*args, **kwargs)
        if name == "__get__" and args and isinstance(args[0], torch.Tensor):
            label = self.label(args[0])
            if prop == "device" and label != HOST:
                return torch.device("cpu", label)
            if prop == "grad" and isinstance(out, torch.Tensor) and self.label(out) == HOST:
                self._mark_all(out, label)  # autograd made it in C++, where the parameter is
        return out

    def _move(self, func, name, args, kwargs):
        src = args[0]
        if name == "cpu":
            target = HOST
            out = func(*args, **kwargs)
        else:
            parse = {k: v for k, v in kwargs.items() if k != "copy"}
            device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args[1:], **parse)
            other = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else kwargs.get("other")
            if isinstance(other, torch.Tensor):
                target = self.label(other)
            elif device is not None:
                target = device_label(device)
            else:
                target = self.label(src)
            if target == META or src.is_meta:
                return func(*args, **kwargs)
            out = src.to(dtype=dtype or src.dtype, non_blocking=non_blocking,
                         copy=bool(kwargs.get("copy", False)),
                         **({"memory_format": memory_format} if memory_format is not None else {}))
        if isinstance(out, torch.Tensor):
            if target != self.label(src) and out.untyped_storage()._cdata == src.untyped_storage()._cdata:
                out = out.clone()                # a move is a copy on another device
            self.mark(out, target)
        return out

    def _index(self, func, name, args, kwargs):
        base = args[0]
        target = self.label(base)
        index = args[1] if len(args) > 1 else kwargs.get("indices")
        index_tensors = _tensors((index,), None) if not isinstance(index, torch.Tensor) else [index]
        for ix in index_tensors:
            if self.label(ix) not in (HOST, target):
                self._fail(f"{name}: indexing a tensor on {_name(target)} with an index on {_name(self.label(ix))}")
        if name in ("__setitem__", "index_put_", "index_put"):
            value = args[2] if len(args) > 2 else kwargs.get("values")
            if (index_tensors and isinstance(value, torch.Tensor) and self.label(value) != target
                    and not (self.label(value) == HOST and value.dim() == 0)):
                self._fail(f"{name}: values on {_name(self.label(value))} put into a tensor on {_name(target)}")
        out = func(*args, **kwargs)
        self._mark_all(out, target)
        return out

    def _op(self, func, name, args, kwargs):
        device = kwargs.get("device")
        if device is not None:                   # a factory: the device argument decides
            label = device_label(device)
            if label == META:
                return func(*args, **kwargs)
            self._check_generator(name, args, kwargs, label)
            if label != HOST:
                kwargs = {**kwargs, "device": torch.device("cpu")}
            out = func(*args, **kwargs)
            self._mark_all(out, label)
            return out
        tensors = _tensors(args, kwargs)
        in_place = (name.endswith("_") and not name.startswith("__")) or name.startswith("__i") \
            or "out" in kwargs
        target = None
        if in_place:
            dest = kwargs.get("out", args[0] if args else None)
            target = dest if isinstance(dest, torch.Tensor) else None
        labels = set()
        for t in tensors:
            if t.is_meta:
                continue                         # shapes only
            label = self.label(t)
            if label == HOST and t is not target and t.dim() == 0:
                continue                         # CPU scalars mix freely
            labels.add(label)
        if len(labels) > 1:
            where = sorted(labels)
            into = f" into a {_name(self.label(target))} tensor" if target is not None else ""
            self._fail(f"{name}{into}: expected all tensors on one device, found {_name(where[0])} "
                       f"and {_name(where[1])}")
        op_label = self.label(target) if target is not None else next(iter(labels), HOST)
        self._check_generator(name, args, kwargs, op_label)
        out = func(*args, **kwargs)
        if labels:
            self._mark_all(out, labels.pop())
        return out


def _patched_resolve_device():
    """``resolve_device`` that answers ``cpu:1`` for the CPU, and the kit's modules that hold the original."""
    from anatomy_kit.hf import models

    resolve = getattr(models.resolve_device, "__wrapped__", models.resolve_device)

    def resolve_device(device: str) -> torch.device:
        if isinstance(device, str) and device.startswith("cpu:"):
            return torch.device(device)           # str() of a stand-in accelerator, passed back in
        dev = resolve(device)
        return torch.device("cpu", 1) if dev.type == "cpu" else dev

    resolve_device.__doc__ = resolve.__doc__
    resolve_device.__wrapped__ = resolve
    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("anatomy_kit") and getattr(m, "resolve_device", None) is resolve]
    return resolve_device, resolve, holders


_thread_start = threading.Thread.start


def _guarding_start(guard: "DeviceGuard"):
    def start(self, *args, **kwargs):
        run = self.run

        def guarded_run():
            with guard:
                run()

        self.run = guarded_run
        return _thread_start(self, *args, **kwargs)

    return start


@contextlib.contextmanager
def guarded():
    """A :class:`DeviceGuard` for a ``with`` block, as :func:`install` sets it up for a process: the kit's
    ``resolve_device("cpu")`` gives accelerator 1 and new threads enter the guard; all undone at the end."""
    resolve_device, original, holders = _patched_resolve_device()
    guard = DeviceGuard()
    for m in holders:
        m.resolve_device = resolve_device
    threading.Thread.start = _guarding_start(guard)
    try:
        with guard:
            yield guard
    finally:
        threading.Thread.start = _thread_start
        for m in list(sys.modules.values()):      # modules imported inside the block took the patched one too
            if getattr(m, "resolve_device", None) is resolve_device:
                m.resolve_device = original


def install(stamp: str | None = None) -> DeviceGuard:
    """Enter a guard for the rest of this process, make ``resolve_device("cpu")`` give accelerator 1 in
    every module of the kit that holds it (and in those imported later), and guard every thread started later.

    ``stamp``: a file that gets one line once the guard is in place, so that a test can tell it ran (and how often).
    """
    resolve_device, _, holders = _patched_resolve_device()
    from anatomy_kit.hf import models

    for m in {models, *holders}:
        m.resolve_device = resolve_device
    guard = DeviceGuard()
    guard.__enter__()
    threading.Thread.start = _guarding_start(guard)
    if stamp:
        with open(stamp, "a") as f:             # one line per process that installed it
            f.write("installed\n")
    return guard


STAMP = "device-guard-installed"
STARTUP = """\
import sys
sys.path.insert(0, {tests!r})
import device_guard
device_guard.install({stamp!r})
"""


def kernel_startup(ipython_dir: Path) -> dict[str, str]:
    """Write an IPython profile whose startup installs the guard; return the environment that selects it."""
    startup = Path(ipython_dir) / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-device-guard.py").write_text(STARTUP.format(tests=str(Path(__file__).resolve().parent),
                                                              stamp=str(Path(ipython_dir) / STAMP)))
    return {"IPYTHONDIR": str(ipython_dir)}


def _moved(x, device: torch.device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, tuple):
        return tuple(_moved(v, device) for v in x)
    return x


def split_over_accelerators(model: torch.nn.Module, boundary: int) -> None:
    """Place a Hugging Face causal LM as ``device_map`` does across two GPUs, on the stand-in accelerators.

    Embeddings (and a head tied to them) and layers ``0 … boundary−1`` on accelerator 1, the other
    layers and the final norm on accelerator 2; each moved module takes its inputs to its own
    device first, as ``accelerate``'s ``AlignDevicesHook`` does. Call it inside a :class:`DeviceGuard`.
    """
    from anatomy_kit.hf.layers import decoder_layers, final_norm

    first, second = torch.device("cpu", 1), torch.device("cpu", 2)
    model.to(first)
    modules = [(layer, first if i < boundary else second) for i, layer in enumerate(decoder_layers(model))]
    for module, device in [*modules, (final_norm(model), second)]:
        module.to(device)
        module.register_forward_pre_hook(
            (lambda d: lambda m, args, kwargs: (_moved(args, d), {k: _moved(v, d) for k, v in kwargs.items()}))(device),
            with_kwargs=True)


if __name__ == "__main__":                  # python tests/device_guard.py --startup DIR (the Makefile's book build)
    import argparse

    ap = argparse.ArgumentParser(description="Write an IPython profile whose kernels install the device guard.")
    ap.add_argument("--startup", type=Path, required=True, help="the IPYTHONDIR to write (its stamp is removed)")
    folder = ap.parse_args().startup.resolve()
    (folder / STAMP).unlink(missing_ok=True)
    print(kernel_startup(folder)["IPYTHONDIR"])
