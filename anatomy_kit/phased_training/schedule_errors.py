"""The named errors of a growth schedule (paper 1; chapter 3): one class per kind of mistake.

Raised by :mod:`anatomy_kit.phased_training.phases` when a schedule checks itself; importable from there.
"""

from __future__ import annotations

from ..validate import AnatomyKitError

__all__ = ["ScheduleError", "EmptyPhaseError", "UnknownLayerError", "OverlappingPhasesError", "PhaseGapError",
           "StepBudgetError", "AntiLayerTrainedError", "CloneSourceError"]


class ScheduleError(AnatomyKitError):
    """A growth schedule that cannot be run (the subclass names the kind of mistake)."""


class EmptyPhaseError(ScheduleError):
    """A phase with no steps or no training layer, or a schedule with no phase."""


class UnknownLayerError(ScheduleError):
    """A layer index outside ``0 … n_layers − 1`` (or listed twice)."""


class OverlappingPhasesError(ScheduleError):
    """A phase starts before the previous one has stopped."""


class PhaseGapError(ScheduleError):
    """Steps that belong to no phase (the first phase does not start at 0, or a gap between phases)."""


class StepBudgetError(ScheduleError):
    """The phases' steps do not add up to the schedule's budget."""


class AntiLayerTrainedError(ScheduleError):
    """An anti-layer appears among a phase's training layers."""


class CloneSourceError(ScheduleError):
    """An entering layer that does not train in its phase, enters twice, or clones an untrained layer."""
