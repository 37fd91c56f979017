"""Self-checks of chapter 3 (*Growth Transformer training*).

``check_growth_groups`` (exercise 1): the reader cuts an importance profile into anti-layers and five groups,
the core first; the check compares with the phases of :func:`anatomy_kit.phased_training.phases.schedule_from_importance`.
``check_clone_source`` (exercise 2): the reader picks the trained layer an entering layer is cloned from; the
check compares with a distance count written out here.

``check_step_flops`` (exercise 4): the reader writes the training FLOPs per token of one step of a stack of ``L``
equal layers in which some layers (and perhaps the interface) train, the rest frozen; the check
compares it with :func:`anatomy_kit.phased_training.cost.step_flops` on several stacks.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..phased_training.cost import StackFlops, step_flops
from .core import check, generic

__all__ = ["check_growth_groups", "check_clone_source", "check_step_flops", "WRONG_ANSWERS"]

#: (n_layers, trainable layers, interface trains) — the stacks the check tries.
_CASES = [(3, {2}, False), (3, {1}, False), (4, {0}, True), (6, {2, 4}, False), (6, set(range(6)), True),
          (5, {3}, True), (5, set(), True)]
_COSTS = dict(f=7.0, a=11.0, w=5.0, h=3.0)   # forward, activation grad, weight grad of a layer; the head's parts


def _kit(n_layers: int, trainable: set, interface: bool, f: float, a: float, w: float, h: float) -> float:
    flops = StackFlops((f,) * n_layers, (a,) * n_layers, (w,) * n_layers, h, h, h)
    return step_flops(flops, trainable, interface)


# ---------------------------------------------------------------------------- the groups and the clones

#: (importance (L,), max_anti): 13 layers with three negative ones, at most two of them anti-layers, so
#: 11 layers cut into groups of 2, 2, 2, 2, 3; then 11 layers with one negative and room for two.
_GROUP_CASES = (
    (np.array([5.0, 0.3, 9.0, -0.2, 1.5, 7.0, 0.8, -1.0, 2.5, 0.1, 4.0, -0.5, 6.0]), 2),
    (np.array([2.0, 8.0, -0.1, 3.0, 0.5, 9.0, 1.0, 4.0, 0.2, 7.0, 6.0]), 2),
)


def _kit_groups(importance: np.ndarray, max_anti: int) -> tuple[list[int], list[set[int]]]:
    from ..phased_training.phases import schedule_from_importance

    sc = schedule_from_importance(importance, 60, lr=1e-3, max_anti=max_anti)
    core = set(sc.phases[0].layers)
    return sorted(sc.anti_layers), [core] + [set(p.layers) - core for p in sc.phases[1:5]]


def _cut(ranked: list[int], small_first: bool = True) -> list[list[int]]:
    base, extra = divmod(len(ranked), 5)
    sizes = [base] * (5 - extra) + [base + 1] * extra
    sizes = sizes if small_first else sizes[::-1]
    return [ranked[sum(sizes[:g]):sum(sizes[:g + 1])] for g in range(5)]


def _groups_slip(importance, max_anti, slip: str):
    order = sorted(range(len(importance)), key=lambda l: (-importance[l], l))
    negative = sorted(range(len(importance)), key=lambda l: importance[l])
    negative = [l for l in negative if importance[l] < 0]
    anti = {"all negative": negative, "keep anti": []}.get(slip, negative[:max_anti])
    ranked = [l for l in order if l not in anti]
    if slip == "ascending":
        ranked = ranked[::-1]
    return sorted(anti), _cut(ranked, small_first=slip != "large first")


_GROUP_SLIPS = {
    "ascending": "your core holds the least important layers: rank from the highest importance down",
    "large first": "the groups are as equal as possible with the smaller ones first, so the core is the smallest "
                   "group; yours puts the larger groups first",
    "all negative": "at most max_anti layers become anti-layers, the most negative; the other negative ones train",
    "keep anti": "layers with negative importance (at most max_anti of them) are anti-layers: take them out before "
                 "cutting the groups",
}


def _as_groups(answer) -> tuple[list[int], list[set[int]]]:
    anti, groups = answer
    return sorted(int(l) for l in anti), [{int(l) for l in g} for g in groups]


@check("check_growth_groups")
def check_growth_groups(fn: Callable) -> str | None:
    """``fn(importance, max_anti)`` returns ``(anti_layers, groups)``: at most ``max_anti`` layers of negative
    importance (the most negative) as anti-layers, and the other layers ranked from high to low importance and cut
    into 5 consecutive groups, sizes as equal as possible, the smaller first (groups[0] is the core)."""
    for importance, max_anti in _GROUP_CASES:
        yours = _as_groups(fn(importance.copy(), max_anti))
        want = _kit_groups(importance, max_anti)
        if len(yours[1]) != 5:
            return f"cut the layers into 5 groups (one entering per phase 1–5); you returned {len(yours[1])}"
        if yours == want:
            continue
        for slip, message in _GROUP_SLIPS.items():
            if yours == _as_groups(_groups_slip(importance, max_anti, slip)):
                return message
        return generic(f"for importance {importance.tolist()} your anti-layers and groups are {yours}, the kit's "
                       f"{want}")
    return None


#: (entering layer, trained layers): a tie (5 is as far from 3 as from 7), an edge, and one trained layer.
_CLONE_CASES = ((5, [3, 7, 10]), (0, [4, 8]), (9, [2, 6, 11]), (6, [4, 8]), (11, [1]), (2, [0, 4, 5]))


def _nearest(layer: int, trained: list[int]) -> int:
    """The trained layer at the smallest |depth gap|, the shallower of two at the same gap (written out)."""
    best = None
    for t in sorted(trained):                       # shallow first, so a tie keeps the shallower one
        if best is None or abs(t - layer) < abs(best - layer):
            best = t
    return best


_CLONE_SLIPS = {
    "deeper": ("on a tie take the shallower layer (the smaller index); yours takes the deeper one",
               lambda l, tr: min(tr, key=lambda t: (abs(t - l), -t))),
    "below": ("clone from the nearest trained layer in either direction; yours only looks at the layers below",
              lambda l, tr: max([t for t in tr if t < l], default=min(tr))),
    "last": ("clone from the trained layer nearest in depth, not the last one to have trained",
             lambda l, tr: tr[-1]),
}


@check("check_clone_source")
def check_clone_source(fn: Callable) -> str | None:
    """``fn(layer, trained)`` (an entering layer, the list of layers trained so far) returns the trained layer
    nearest in depth to ``layer``; of two at the same distance, the shallower."""
    for layer, trained in _CLONE_CASES:
        yours = int(fn(layer, list(trained)))
        want = _nearest(layer, trained)
        if yours == want:
            continue
        for message, slip in _CLONE_SLIPS.values():
            if all(int(fn(l, list(tr))) == slip(l, tr) for l, tr in _CLONE_CASES):
                return message
        return generic(f"layer {layer} with {trained} trained: yours is {yours}, the nearest is {want}")
    return None


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
def _groups_wrong(slip: str) -> Callable:
    def wrong(importance, max_anti):
        return _groups_slip(importance, max_anti, slip)
    wrong.__name__ = f"groups_{slip.replace(' ', '_')}"
    return wrong


WRONG_ANSWERS = {"check_growth_groups": [(_groups_wrong("ascending"), "least important"),
                                         (_groups_wrong("large first"), "smaller ones first"),
                                         (_groups_wrong("all negative"), "at most max_anti"),
                                         (_groups_wrong("keep anti"), "take them out")],
                 "check_clone_source": [(_CLONE_SLIPS["deeper"][1], "shallower"), (_CLONE_SLIPS["below"][1], "below"),
                                        (_CLONE_SLIPS["last"][1], "not the last")],
                 "check_step_flops": [(_no_pass_through, "still runs the backward pass"),
                                      (_everything_backward, "needs no backward pass"),
                                      (_trainable_forward_only, "every layer runs forward"),
                                      (_interface_ignored, "embedding below layer 0"),
                                      (_no_head, "LM head")]}
