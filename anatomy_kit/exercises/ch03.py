"""Self-checks of chapter 3 (*Growth Transformer training*).

``check_step_flops`` (exercise 2): the reader writes the training FLOPs per token of one step of a stack of ``L``
equal layers in which some layers (and perhaps the interface) train, the rest frozen; the check
compares it with :func:`anatomy_kit.growth.cost.step_flops` on several stacks.
"""

from __future__ import annotations

from typing import Callable

from ..growth.cost import StackFlops, step_flops
from .core import check, generic

__all__ = ["check_step_flops", "WRONG_ANSWERS"]

#: (n_layers, trainable layers, interface trains) — the stacks the check tries.
_CASES = [(3, {2}, False), (3, {1}, False), (4, {0}, True), (6, {2, 4}, False), (6, set(range(6)), True),
          (5, {3}, True), (5, set(), True)]
_COSTS = dict(f=7.0, a=11.0, w=5.0, h=3.0)   # forward, activation grad, weight grad of a layer; the head's parts


def _kit(n_layers: int, trainable: set, interface: bool, f: float, a: float, w: float, h: float) -> float:
    flops = StackFlops((f,) * n_layers, (a,) * n_layers, (w,) * n_layers, h, h, h)
    return step_flops(flops, trainable, interface)


def _no_pass_through(n_layers, trainable, interface, f, a, w, h):
    """Frozen layers above the lowest training part pay no activation gradient."""
    return n_layers * f + h + (h if trainable or interface else 0) + (h if interface else 0) + len(trainable) * (a + w)


def _everything_backward(n_layers, trainable, interface, f, a, w, h):
    """Every frozen layer pays the activation gradient, also those below the lowest training layer."""
    frozen = n_layers - len(trainable)
    return n_layers * f + 2 * h + (h if interface else 0) + len(trainable) * (a + w) + frozen * a


def _trainable_forward_only(n_layers, trainable, interface, f, a, w, h):
    """Only the training layers run forward (the layer-steps view of cost)."""
    return _kit(n_layers, trainable, interface, f, a, w, h) - (n_layers - len(trainable)) * f


def _interface_ignored(n_layers, trainable, interface, f, a, w, h):
    """The embedding below layer 0 is forgotten: frozen layers under the lowest training layer pass nothing."""
    if not trainable:
        return _kit(n_layers, trainable, interface, f, a, w, h)
    lowest = min(trainable)
    return _kit(n_layers, trainable, interface, f, a, w, h) - sum(a for l in range(lowest) if l not in trainable)


def _no_head(n_layers, trainable, interface, f, a, w, h):
    """The LM head is forgotten."""
    head = h + (h if trainable or interface else 0) + (h if interface else 0)
    return _kit(n_layers, trainable, interface, f, a, w, h) - head


_DIAGNOSES = [
    (_no_pass_through, "a frozen layer above the lowest training part still runs the backward pass for the "
                       "activation gradient, so the gradient can reach what trains below it"),
    (_everything_backward, "a frozen layer below the lowest training part needs no backward pass at all, since "
                           "nothing beneath it wants a gradient"),
    (_trainable_forward_only, "every layer runs forward in every step, the frozen ones too, because the layers "
                              "above need their outputs"),
    (_interface_ignored, "when the interface trains, the embedding below layer 0 trains, so every frozen layer "
                         "passes the gradient down to it and pays its activation gradient"),
    (_no_head, "the LM head costs h forward in every step, h more for its activation gradient whenever anything "
               "trains, and h more for its weight gradient when the interface trains"),
]


@check("check_step_flops", hint="every layer and the head run forward in every step; then ask, layer by layer "
                               "from the top, which backward parts it pays: a training layer both, a frozen "
                               "layer only its activation gradient and only if something below it trains "
                               "(the embedding under layer 0 counts when the interface trains)")
def check_step_flops(fn: Callable) -> str | None:
    """``fn(n_layers, trainable, interface, f, a, w, h)`` → training FLOPs per token of one step.

    ``trainable``: a set of layer indices; ``interface``: whether the embedding (below layer 0, tied
    to the head) and the final norm train; ``f, a, w``: a layer's forward, activation-gradient and
    weight-gradient FLOPs; ``h``: each of the head's three parts.
    """
    for n, trainable, interface in _CASES:
        want = _kit(n, set(trainable), interface, **_COSTS)
        got = fn(n, set(trainable), interface, *_COSTS.values())
        if abs(float(got) - want) > 1e-9 * max(1.0, abs(want)):
            for wrong, why in _DIAGNOSES:
                if abs(float(got) - wrong(n, set(trainable), interface, *_COSTS.values())) < 1e-9:
                    return f"For {n} layers with {sorted(trainable)} training (interface {interface}) you get {got:g}: {why}"
            return generic(f"for {n} layers with {sorted(trainable)} training (interface {interface}) you get "
                           f"{got:g} FLOPs per token, the kit {want:g}")
    return None


#: (wrong answer, words its message must contain): each slip of :data:`_DIAGNOSES` must be named.
WRONG_ANSWERS = {"check_step_flops": [(_no_pass_through, "still runs the backward pass"),
                                      (_everything_backward, "needs no backward pass"),
                                      (_trainable_forward_only, "every layer runs forward"),
                                      (_interface_ignored, "embedding below layer 0"),
                                      (_no_head, "LM head")]}
