"""Phased training schedules for Growth Transformer training (paper 1; chapter 3).

A :class:`GrowthSchedule` lists :class:`Phase` objects. Each phase covers the global optimiser steps
``[start, stop)``, names the decoder layers that train in it (all others are frozen), its peak
learning rate, the layers that *enter* at its start (initialised as a clone of a layer that has
already trained, plus noise) and whether the interface (embedding and final norm) trains. Anti-layers
are re-initialised, scaled by ``anti_scale`` and never train. The schedule checks itself when it is
built and raises a named :class:`ScheduleError` subclass for each kind of mistake.

:func:`schedule_from_importance` is OUR rule (the paper's schedule table was not available):

1. anti-layers: layers of negative importance (removing them helped), at most ``max_anti``,
   the most negative first;
2. the other layers, ranked from most to least important, are cut into five consecutive groups,
   the smaller groups first (so the most important group, *the core*, is the smallest);
3. phases 1–5 (gastrulation, neurulation, organogenesis, growth, connective): phase *p* lets group
   *p* enter and trains it together with the core; the core trains in every phase, so the most
   important layers train first and longest; a layer that enters after the first phase is cloned
   from the nearest layer (by depth) that has trained already;
4. phase 6 (maturation) fine-tunes every layer but the anti-layers.

:func:`shuffled_control` permutes layer identities (all, or all but the layers it is told to keep) and
keeps the exact shape; :func:`uniform_schedule` is the baseline (one phase, every layer).
:mod:`.schedule_figure` shows a schedule as a layers × phases picture.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from ..validate import AnatomyKitError, as_vector, check_int, check_positive
from .schedule_errors import (AntiLayerTrainedError, CloneSourceError, EmptyPhaseError, OverlappingPhasesError,
                              PhaseGapError, ScheduleError, StepBudgetError, UnknownLayerError)

__all__ = ["PHASE_NAMES", "ScheduleError", "EmptyPhaseError", "UnknownLayerError", "OverlappingPhasesError",
           "PhaseGapError", "StepBudgetError", "AntiLayerTrainedError", "CloneSourceError", "Phase",
           "GrowthSchedule", "uniform_schedule", "schedule_from_importance", "shuffled_control", "position_control",
           "position_order", "split_steps",
           "nearest_trained"]

#: The six phases, named after embryonic development (the digest of paper 1); what each does is our rule.
PHASE_NAMES = ("gastrulation", "neurulation", "organogenesis", "growth", "connective", "maturation")


@dataclass(frozen=True)
class Phase:
    """Steps ``[start, stop)`` of a schedule: ``layers`` train (the rest is frozen) at peak ``lr``.

    ``enter`` holds ``(layer, source)`` pairs: at the phase's start ``layer`` becomes a copy of
    ``source`` plus noise. ``interface``: the embedding (tied to the LM head) and the final norm train.
    """

    name: str
    layers: tuple[int, ...]
    start: int
    stop: int
    lr: float
    enter: tuple[tuple[int, int], ...] = ()
    interface: bool = True

    @property
    def steps(self) -> int:
        return self.stop - self.start

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(layers=list(self.layers), enter=[list(e) for e in self.enter])
        return d


@dataclass(frozen=True)
class GrowthSchedule:
    """A validated phased schedule over ``budget_steps`` optimiser steps (chapter 3).

    ``clone_noise``: relative std of the noise added to a clone (each tensor P gets
    N(0, (clone_noise · std P)²), :func:`anatomy_kit.hf.surgery.cloned_layer`); ``anti_scale``: the
    factor (α) applied to an anti-layer after it is re-initialised.
    """

    n_layers: int
    phases: tuple[Phase, ...]
    budget_steps: int
    anti_layers: tuple[int, ...] = ()
    anti_scale: float = 0.9
    clone_noise: float = 0.05
    label: str = "growth"
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "phases", tuple(self.phases))
        object.__setattr__(self, "anti_layers", tuple(sorted(int(l) for l in self.anti_layers)))
        self.validate()

    def validate(self) -> "GrowthSchedule":
        """Raise the :class:`ScheduleError` subclass that names the first mistake; return ``self``."""
        n = check_int("n_layers", self.n_layers, minimum=1)
        check_int("budget_steps", self.budget_steps, minimum=1)
        check_positive("anti_scale", self.anti_scale)
        check_positive("clone_noise", self.clone_noise, allow_zero=True)
        if not self.phases:
            raise EmptyPhaseError("the schedule has no phase; give at least one")
        _check_layers("anti_layers", self.anti_layers, n)
        expected_start, trained = 0, set()
        for i, ph in enumerate(self.phases):
            where = f"phase {i} ({ph.name!r})"
            _check_phase_steps(where, ph, expected_start)
            if not ph.layers:
                raise EmptyPhaseError(f"{where} trains no layer; give at least one layer index")
            _check_layers(f"{where} layers", ph.layers, n)
            check_positive(f"{where} lr", ph.lr)
            anti = sorted(set(ph.layers) & set(self.anti_layers))
            if anti:
                raise AntiLayerTrainedError(f"{where} trains anti-layer(s) {anti}; anti-layers "
                                            f"{list(self.anti_layers)} never train")
            _check_entries(where, ph, trained, n)
            trained |= set(ph.layers)
            expected_start = ph.stop
        if expected_start != self.budget_steps:
            total = sum(ph.steps for ph in self.phases)
            raise StepBudgetError(f"the phases hold {total} steps but budget_steps={self.budget_steps}; "
                                  "the steps of all phases must add up to the budget")
        return self

    @property
    def n_phases(self) -> int:
        return len(self.phases)

    def layer_steps(self) -> int:
        """Trainable-layer-steps: Σ over phases of steps × number of training layers."""
        return sum(ph.steps * len(ph.layers) for ph in self.phases)

    def first_step(self, layer: int) -> int | None:
        """The global step at which ``layer`` first trains, or ``None`` if it never does (chapter 3)."""
        return next((ph.start for ph in self.phases if layer in ph.layers), None)

    def shape(self) -> list[tuple]:
        """What :func:`shuffled_control` keeps: per phase (name, start, stop, lr, #layers, #entering, interface)."""
        return [(ph.name, ph.start, ph.stop, ph.lr, len(ph.layers), len(ph.enter), ph.interface)
                for ph in self.phases] + [("anti", len(self.anti_layers), self.anti_scale, self.clone_noise)]

    def describe(self) -> list[dict]:
        """One row per phase (for a table): name, steps, lr, training layers, entering layers and sources."""
        return [{"phase": ph.name, "steps": f"{ph.start}–{ph.stop}", "n steps": ph.steps, "lr": ph.lr,
                 "trains": list(ph.layers), "enters (← source)": ", ".join(f"{a}←{b}" for a, b in ph.enter) or "—",
                 "interface trains": ph.interface} for ph in self.phases]

    def to_dict(self) -> dict:
        return {"n_layers": self.n_layers, "budget_steps": self.budget_steps, "anti_layers": list(self.anti_layers),
                "anti_scale": self.anti_scale, "clone_noise": self.clone_noise, "label": self.label,
                "meta": self.meta, "phases": [ph.to_dict() for ph in self.phases]}

    @classmethod
    def from_dict(cls, d: dict) -> "GrowthSchedule":
        phases = tuple(Phase(p["name"], tuple(p["layers"]), p["start"], p["stop"], p["lr"],
                             tuple(tuple(e) for e in p["enter"]), p["interface"]) for p in d["phases"])
        return cls(d["n_layers"], phases, d["budget_steps"], tuple(d["anti_layers"]), d["anti_scale"],
                   d["clone_noise"], d["label"], dict(d.get("meta", {})))


def _check_layers(what: str, layers: Sequence[int], n: int) -> None:
    for l in layers:
        if isinstance(l, bool) or not isinstance(l, (int, np.integer)) or not 0 <= int(l) < n:
            raise UnknownLayerError(f"{what} names layer {l!r}; this model has layers 0..{n - 1}")
    if len(set(layers)) != len(layers):
        raise UnknownLayerError(f"{what} lists a layer twice: {list(layers)}")


def _check_phase_steps(where: str, ph: Phase, expected_start: int) -> None:
    check_int(f"{where} start", ph.start, minimum=0)
    check_int(f"{where} stop", ph.stop, minimum=0)
    if ph.stop <= ph.start:
        raise EmptyPhaseError(f"{where} covers steps [{ph.start}, {ph.stop}): no step; stop must exceed start")
    if ph.start < expected_start:
        raise OverlappingPhasesError(f"{where} starts at step {ph.start}, before the previous phase stops at "
                                     f"{expected_start}; phases must not overlap")
    if ph.start > expected_start:
        raise PhaseGapError(f"{where} starts at step {ph.start} but the previous phase stops at {expected_start}: "
                            f"steps {expected_start}..{ph.start - 1} belong to no phase")


def _check_entries(where: str, ph: Phase, trained: set, n: int) -> None:
    for entry in ph.enter:
        if len(entry) != 2:
            raise CloneSourceError(f"{where} enter entry {entry!r} must be a (layer, source) pair")
        layer, source = entry
        _check_layers(f"{where} enter", (layer, source), n)
        if layer not in ph.layers:
            raise CloneSourceError(f"{where}: layer {layer} enters but does not train in this phase")
        if layer in trained:
            raise CloneSourceError(f"{where}: layer {layer} enters but has trained already")
        if source not in trained:
            raise CloneSourceError(f"{where}: layer {layer} would be cloned from layer {source}, which has not "
                                   f"trained yet (trained so far: {sorted(trained) or 'none'})")


def uniform_schedule(n_layers: int, budget_steps: int, lr: float, *, label: str = "uniform") -> GrowthSchedule:
    """The baseline: one phase in which every layer and the interface train for ``budget_steps`` steps."""
    n = check_int("n_layers", n_layers, minimum=1)
    return GrowthSchedule(n, (Phase("uniform", tuple(range(n)), 0, budget_steps, lr),), budget_steps, label=label)


def split_steps(budget_steps: int, shares: Sequence[float]) -> list[int]:
    """Integer steps proportional to ``shares`` that add up to ``budget_steps``, each ≥ 1 (largest remainders)."""
    w = as_vector("shares", shares, None)
    b = check_int("budget_steps", budget_steps, minimum=len(w))
    raw = 1 + (b - len(w)) * w / w.sum()
    steps = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - steps), kind="stable")[: b - int(steps.sum())]:
        steps[i] += 1
    return [int(s) for s in steps]


def nearest_trained(layer: int, trained: Sequence[int]) -> int:
    """The trained layer closest to ``layer`` in depth; a tie goes to the shallower one."""
    if not trained:
        raise CloneSourceError(f"layer {layer} has no trained layer to be cloned from")
    return min(trained, key=lambda t: (abs(t - layer), t))


def _groups(ranked: list[int], n_groups: int) -> list[list[int]]:
    """``ranked`` cut into ``n_groups`` consecutive groups, sizes as equal as possible, smaller first."""
    base, extra = divmod(len(ranked), n_groups)
    sizes = [base] * (n_groups - extra) + [base + 1] * extra
    out, i = [], 0
    for s in sizes:
        out.append(ranked[i:i + s])
        i += s
    return out


def _anti_from(importance: np.ndarray, max_anti: int) -> list[int]:
    negative = [int(l) for l in np.argsort(importance, kind="stable") if importance[l] < 0]
    return sorted(negative[:max_anti])


def _phases_from_groups(groups: list[list[int]], everyone: list[int], steps: list[int], lrs: list[float],
                        interface: bool) -> tuple[Phase, ...]:
    """Phase p < 5 trains core ∪ group p (group p enters, cloned from the nearest trained layer); then all."""
    phases, start, trained = [], 0, []
    core = groups[0]
    for p, name in enumerate(PHASE_NAMES):
        if p < len(groups):
            new = groups[p]
            layers = sorted(set(core) | set(new))
            enter = tuple((l, nearest_trained(l, trained)) for l in sorted(new)) if p else ()
        else:
            layers, enter = sorted(everyone), ()
        phases.append(Phase(name, tuple(layers), start, start + steps[p], lrs[p], enter, interface))
        start += steps[p]
        trained = sorted(set(trained) | set(layers))
    return tuple(phases)


def schedule_from_importance(importance: Any, budget_steps: int, *, lr: float, shares: Sequence[float] | None = None,
                             max_anti: int | None = None, use_anti_layers: bool = True, clone_noise: float = 0.05,
                             anti_scale: float = 0.9, interface: bool = True, final_lr_factor: float = 1.0,
                             label: str = "growth") -> GrowthSchedule:
    """Our six-phase schedule from a per-layer importance (higher = more important; module docstring).

    ``shares``: relative lengths of the six phases (default equal); ``max_anti``: the cap on
    anti-layers (default ``n_layers // 6``); ``use_anti_layers=False`` ignores negative importances;
    ``final_lr_factor`` scales the maturation phase's learning rate. Chapter 3.
    """
    imp = as_vector("importance", importance, None, positive=False)
    n = len(imp)
    shares = [1.0] * len(PHASE_NAMES) if shares is None else list(shares)
    if len(shares) != len(PHASE_NAMES):
        raise AnatomyKitError(f"shares has {len(shares)} entries; give one per phase ({len(PHASE_NAMES)})")
    max_anti = n // 6 if max_anti is None else check_int("max_anti", max_anti, minimum=0)
    anti = _anti_from(imp, max_anti) if use_anti_layers else []
    ranked = [l for l in sorted(range(n), key=lambda l: (-imp[l], l)) if l not in anti]
    if len(ranked) < 5:
        raise AnatomyKitError(f"the schedule needs at least 5 layers that train; importance has {n} layers and "
                              f"{len(anti)} anti-layer(s)")
    steps = split_steps(budget_steps, shares)
    lrs = [check_positive("lr", lr)] * 5 + [lr * check_positive("final_lr_factor", final_lr_factor)]
    phases = _phases_from_groups(_groups(ranked, 5), ranked, steps, lrs, bool(interface))
    meta = {"rule": "importance", "importance": [float(x) for x in imp], "ranked": ranked}
    return GrowthSchedule(n, phases, budget_steps, tuple(anti), anti_scale, clone_noise, label, meta)


def _permuted(schedule: GrowthSchedule, perm: np.ndarray, label: str) -> GrowthSchedule:
    phases, trained = [], []
    for ph in schedule.phases:
        layers = tuple(sorted(int(perm[l]) for l in ph.layers))
        entering = sorted(int(perm[l]) for l, _ in ph.enter)
        enter = tuple((l, nearest_trained(l, trained)) for l in entering)
        phases.append(replace(ph, layers=layers, enter=enter))
        trained = sorted(set(trained) | set(layers))
    meta = dict(schedule.meta, rule="shuffled control", permutation=[int(p) for p in perm])
    return replace(schedule, phases=tuple(phases), anti_layers=tuple(int(perm[l]) for l in schedule.anti_layers),
                   label=label, meta=meta)


def shuffled_control(schedule: GrowthSchedule, seed: int, *, keep: Sequence[int] = (),
                     label: str = "random control") -> GrowthSchedule:
    """The same schedule shape with layer identities permuted at random (chapter 3's controls).

    A permutation π of the layers (seeded) maps every phase's layers, its entering layers and the
    anti-layers; steps, learning rates, group sizes and the interface are kept. ``keep`` lists layers
    that π leaves in place (its fixed points): they train exactly when the schedule trains them, and
    only the other layers are shuffled among themselves. Chapter 3 keeps the two layers next to the
    interface, 0 (above the embedding) and L − 1 (below the tied head), so that a schedule that
    trains layer 0 from the first step is compared with a control that does too. Entering layers are
    cloned from their nearest trained layer again (by depth, in the permuted schedule). A draw that
    reproduces the original layer sets is redrawn (up to 100 times); if every draw does (fewer than
    two layers free to move, or a schedule whose sets no permutation of them changes), a
    :class:`~anatomy_kit.validate.AnatomyKitError` says so.
    """
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    n = schedule.n_layers
    keep = (keep,) if isinstance(keep, (int, np.integer)) else tuple(keep)
    _check_layers("keep", keep, n)
    keep = [int(l) for l in keep]
    free = [l for l in range(n) if l not in set(keep)]
    if len(free) < 2:
        raise AnatomyKitError(f"keep={keep} leaves {len(free)} of {n} layers to shuffle; a control needs at least 2")
    original = [set(ph.layers) for ph in schedule.phases]
    for _ in range(100):
        perm = np.arange(n)
        perm[free] = rng.permutation(free)
        out = _permuted(schedule, perm, label)
        if [set(ph.layers) for ph in out.phases] != original:
            return replace(out, meta=dict(out.meta, keep=sorted(keep)))
    raise AnatomyKitError(f"no permutation of layers {free} changes the phases of {schedule.label!r} in 100 draws: "
                          "its phases treat those layers alike, so a shuffled control would equal the schedule")


def position_order(n_layers: int) -> list[int]:
    """The layers by position alone, edges first and inward: distance from the nearest edge
    ``min(l, n − 1 − l)`` ascending, the lower layer first at equal distance (``[0, 9, 1, 8, …]`` for 10)."""
    n = check_int("n_layers", n_layers, minimum=2)
    return sorted(range(n), key=lambda l: (min(l, n - 1 - l), l))


def position_control(schedule: GrowthSchedule, *, label: str = "edge-inward control") -> GrowthSchedule:
    """The same schedule shape with each layer replaced by the layer of the same rank in
    :func:`position_order`: the layer the importance order ranks k-th (``schedule.meta["ranked"]``,
    then its anti-layers, least important) becomes the k-th layer from the edges inward. Steps,
    learning rates, group sizes, the interface and the number of anti-layers are kept; only *which*
    layers, now chosen by position alone, changes. Chapter 3's control for "the importance order,
    not the edges, is what helps"."""
    ranked = list(schedule.meta.get("ranked", [])) + [l for l in schedule.anti_layers
                                                       if l not in schedule.meta.get("ranked", [])]
    n = schedule.n_layers
    ranked += [l for l in range(n) if l not in ranked]          # layers the schedule never names
    if sorted(ranked) != list(range(n)):
        raise AnatomyKitError(f"schedule {schedule.label!r} does not rank its {n} layers once each: {ranked}")
    perm = np.empty(n, dtype=int)
    perm[ranked] = position_order(n)
    out = _permuted(schedule, perm, label)
    return replace(out, meta=dict(out.meta, rule="position control"))
