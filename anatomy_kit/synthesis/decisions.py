"""Would chapter 3's schedule or chapter 5's widths change with another layer signal?

Used by chapter 7 (*Synthesis*). Chapter 3 turns a per-layer importance profile into a Growth
Transformer schedule; chapter 5's solver (as the report card calls it) turns a work profile into
per-layer FFN widths. Here every signal of a dict ``{name: values (L,)}`` (higher = more
important) goes through the same two paths, and two measures say how far the decision moves:

- :func:`schedules_from_signals`: chapter 3's path for its source (b), unchanged: the signal is
  carried to the training model's ``n_layers`` by relative depth as signed orders of magnitude
  (:func:`anatomy_kit.phased_training.sources.transferred_importance`), then
  :func:`anatomy_kit.phased_training.phases.schedule_from_importance` with chapter 3's knobs
  (:func:`ch03_settings` reads them from chapter 3's metrics file, :data:`CH03_DEFAULTS` holds the
  chapter's defaults). A negative value stays negative through the signed log, so a layer whose
  removal *helped* can become an anti-layer, exactly as in chapter 3.
- :func:`phase_overlap`: the Jaccard index of the (layer, step) cells in which each schedule
  trains the layer: ``|A ∩ B| / |A ∪ B|``; 1 = the same layers train at the same steps.
- :func:`widths_from_signals`: :func:`anatomy_kit.card.widths.suggest_widths`, the report card's
  call of chapter 5's solver on a profile (coefficients normalised to mean 1, exponent 1, bounds
  one rounding multiple ≤ w_ℓ ≤ 2 × today's width, rounded to multiples with the budget exact).
  These are the card's fixed knobs, for a model's own layers; chapter 5's training grid instead
  resamples a profile to its small model and uses intrinsic-dimension exponents and bounds of
  0.25–2.5 × the mean width.
  The solver needs non-negative work, so each signal is first made so by ``transform``:
  ``"clip"`` (default) sets negative values to 0 (a layer whose removal helped gets no work,
  hence the lower bound) and leaves a non-negative signal untouched, so a work profile gives
  exactly the card's widths; ``"rank"`` replaces every signal by its ranks 1..L (ties averaged),
  so only the order of the layers matters and signals of very different spread (ΔPPL spans
  orders of magnitude, a cosine signal a few per cent) become comparable.
- :func:`width_distance`: ``Σ_ℓ |a_ℓ − b_ℓ| / T`` with ``T`` the mean of the two total widths (the
  budget, when both hold it); 0 = identical, at most 2; half of it is the share of the budget that
  moves to other layers.

Missing values: a NaN (a layer the signal does not measure, e.g. the edge layers of a
neighbour regression) is filled with the median of the signal's finite values, a neutral value
that neither promotes nor demotes the layer, before either path; the filled layers are reported.
An infinite value, or a signal without a finite value, is an error.

:func:`schedule_decision` and :func:`width_decision` compare every signal with a reference
signal (chapter 3's ΔPPL, chapter 5's geometric work) and return a frozen result with ``to_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..card.widths import EXPONENT, UPPER_FACTOR, suggest_widths
from ..phased_training import phases, sources
from ..hour import HOUR_PRESETS
from ..jsonio import read_json
from ..validate import AnatomyKitError, as_vector, check_choice, check_int, check_positive

__all__ = ["ScheduleSettings", "CH03_DEFAULTS", "ch03_settings", "prepare_signals", "training_cells",
           "schedules_from_signals", "phase_overlap", "TRANSFORMS", "solver_work", "widths_from_signals",
           "width_distance", "ScheduleDecision", "schedule_decision", "WidthDecision", "width_decision"]

#: The metrics file of chapter 3, inside a build folder.
CH03_METRICS = Path("metrics") / "ch03_growth_training.json"


# ---------------------------------------------------------------------------------------------
# Chapter 3's settings
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScheduleSettings:
    """What chapter 3 builds its schedules with: the training model's depth, the step budget and the
    knobs it passes to :func:`~anatomy_kit.phased_training.phases.schedule_from_importance` (its ``knobs``
    dict: ``lr``, ``max_anti``, ``clone_noise``, ``anti_scale``; the phase shares are its default,
    equal). ``source`` says where the numbers were read."""

    n_layers: int
    steps: int
    lr: float
    max_anti: int
    clone_noise: float
    anti_scale: float
    source: str

    def knobs(self) -> dict:
        """The keyword arguments chapter 3 passes to ``schedule_from_importance``."""
        return {"lr": self.lr, "max_anti": self.max_anti, "clone_noise": self.clone_noise,
                "anti_scale": self.anti_scale}

    def to_dict(self) -> dict:
        return {"n_layers": self.n_layers, "steps": self.steps, **self.knobs(), "source": self.source}


#: Chapter 3's defaults per scale (its ``DEFAULTS`` cell; a test checks that the two agree).
CH03_DEFAULTS = {
    "smoke": ScheduleSettings(n_layers=10, steps=180, lr=6e-3, max_anti=1, clone_noise=0.05, anti_scale=0.9,
                              source="chapter 3's smoke defaults"),
    "hour": ScheduleSettings(**{k: HOUR_PRESETS["ch03_growth_training"][k] for k in (
        "n_layers", "steps", "lr", "max_anti", "clone_noise", "anti_scale")}, source="chapter 3's hour defaults"),
    "full": ScheduleSettings(n_layers=12, steps=656, lr=3e-3, max_anti=2, clone_noise=0.05, anti_scale=0.9,
                             source="chapter 3's full-scale defaults"),
}


def ch03_settings(build_dir: str | Path, scale: str = "smoke") -> ScheduleSettings:
    """The settings chapter 3 ran with, from ``<build_dir>/metrics/ch03_growth_training.json``.

    The file's ``run.sizes`` holds the resolved sizes of the run (a parameter the reader changed
    included). Without that file, chapter 3's defaults for ``scale`` (:data:`CH03_DEFAULTS`);
    ``source`` says which of the two it is. A file without those sizes is an error.
    """
    check_choice("scale", scale, sorted(CH03_DEFAULTS))
    path = Path(build_dir) / CH03_METRICS
    if not path.exists():
        return CH03_DEFAULTS[scale]
    doc = read_json(path, what="chapter 3 metrics file")
    try:
        sizes = doc["run"]["sizes"]
        return ScheduleSettings(n_layers=int(sizes["n_layers"]), steps=int(sizes["steps"]), lr=float(sizes["lr"]),
                                max_anti=int(sizes["max_anti"]), clone_noise=float(sizes["clone_noise"]),
                                anti_scale=float(sizes["anti_scale"]),
                                source=f"chapter 3's run at scale {doc['run'].get('scale', '?')!r} ({path.name})")
    except (KeyError, TypeError, ValueError) as err:
        raise AnatomyKitError(f"{path} has no usable run.sizes ({err!r}); rerun chapter 3 "
                              "(ch03_growth_training) or delete the file to use its defaults") from None


# ---------------------------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------------------------

def prepare_signals(signals: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, list[int]]]:
    """``({name: values (L,) float, NaN filled}, {name: filled layers})`` (module docstring).

    Every signal must be a 1-D sequence of the same length L ≥ 1 with at least one finite value
    and no infinity; a NaN becomes the median of that signal's finite values.
    """
    if not isinstance(signals, Mapping) or not signals:
        raise AnatomyKitError(f"signals must be a non-empty dict {{name: per-layer values}}, got {type(signals).__name__}"
                              f"{'' if not isinstance(signals, Mapping) else ' (empty)'}")
    out, filled, n = {}, {}, None
    for name, values in signals.items():
        if not isinstance(name, str) or not name:
            raise AnatomyKitError(f"signal name {name!r} must be a non-empty string")
        try:
            v = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise AnatomyKitError(f"signal {name!r} must hold numbers, got {values!r}") from None
        if v.ndim != 1 or v.size == 0:
            raise AnatomyKitError(f"signal {name!r} must be a non-empty 1-D sequence of per-layer values, "
                                  f"got shape {v.shape}")
        if n is None:
            n = v.size
        elif v.size != n:
            raise AnatomyKitError(f"signal {name!r} has {v.size} layers, the first signal {n}; every signal "
                                  "must give one value per layer of the same model")
        if np.isinf(v).any():
            raise AnatomyKitError(f"signal {name!r} is infinite at layer(s) {np.flatnonzero(np.isinf(v)).tolist()}; "
                                  "give finite values (NaN marks a layer the signal does not measure)")
        nan = np.isnan(v)
        if nan.all():
            raise AnatomyKitError(f"signal {name!r} is NaN in every layer: it ranks no layer")
        out[name] = np.where(nan, np.median(v[~nan]), v)
        filled[name] = np.flatnonzero(nan).tolist()
    return out, filled


# ---------------------------------------------------------------------------------------------
# Chapter 3: schedules
# ---------------------------------------------------------------------------------------------

def schedules_from_signals(signals: Mapping[str, Any], n_layers: int, steps: int,
                           **knobs: Any) -> dict[str, phases.GrowthSchedule]:
    """``{name: GrowthSchedule}``: each signal through chapter 3's path for its source (b).

    Each signal (L,) (NaN filled, :func:`prepare_signals`) is carried to ``n_layers`` by
    :func:`~anatomy_kit.phased_training.sources.transferred_importance` and scheduled over ``steps`` steps by
    :func:`~anatomy_kit.phased_training.phases.schedule_from_importance` with ``knobs`` (chapter 3's:
    ``ScheduleSettings.knobs()``; ``lr`` is required), labelled with the signal's name.
    """
    prepared, _ = prepare_signals(signals)
    n = check_int("n_layers", n_layers, minimum=5)
    b = check_int("steps", steps, minimum=len(phases.PHASE_NAMES))
    if "lr" not in knobs:
        raise AnatomyKitError("knobs need lr (chapter 3's peak learning rate), e.g. **ch03_settings(build).knobs()")
    if "label" in knobs:
        raise AnatomyKitError("knobs must not hold label: each schedule is labelled with its signal's name")
    return {name: phases.schedule_from_importance(sources.transferred_importance(v, n), b, label=name, **knobs)
            for name, v in prepared.items()}


def training_cells(schedule: phases.GrowthSchedule) -> np.ndarray:
    """(n_layers, budget_steps) bool: ``True`` where the layer trains at that step (anti-layers never do)."""
    if not isinstance(schedule, phases.GrowthSchedule):
        raise AnatomyKitError(f"schedule must be a GrowthSchedule, got {type(schedule).__name__}")
    cells = np.zeros((schedule.n_layers, schedule.budget_steps), dtype=bool)
    for ph in schedule.phases:
        cells[list(ph.layers), ph.start:ph.stop] = True
    return cells


def phase_overlap(a: phases.GrowthSchedule, b: phases.GrowthSchedule) -> float:
    """How much two schedules agree: the Jaccard index of their training cells (module docstring).

    ``|A ∩ B| / |A ∪ B|`` over the (layer, step) cells in which each trains the layer; 1 = the same
    layers train at the same steps (clone sources, learning rates and the interface are not compared).
    Both schedules must have the same number of layers and steps.
    """
    ca, cb = training_cells(a), training_cells(b)
    if ca.shape != cb.shape:
        raise AnatomyKitError(f"schedules {a.label!r} and {b.label!r} cover (layers, steps) {ca.shape} and {cb.shape}; "
                              "compare schedules of the same model and step budget")
    union = int((ca | cb).sum())    # ≥ 1: every phase trains a layer
    return int((ca & cb).sum()) / union


# ---------------------------------------------------------------------------------------------
# Chapter 5: widths
# ---------------------------------------------------------------------------------------------

#: How a signal becomes non-negative work for the width solver (module docstring).
TRANSFORMS = ("clip", "rank")


def solver_work(values: Any, transform: str = "clip") -> np.ndarray:
    """Non-negative work (L,) from a finite signal (L,): ``"clip"`` max(x, 0), ``"rank"`` ranks 1..L."""
    check_choice("transform", transform, TRANSFORMS)
    v = as_vector("signal", values, None, positive=False)
    if transform == "clip":
        return np.maximum(v, 0.0)
    from scipy.stats import rankdata

    return rankdata(v, method="average")


def widths_from_signals(signals: Mapping[str, Any], ffn_widths_today: Any, *, budget_fraction: float | None = None,
                        budget_params: int | None = None, ffn_params_today: Any = None,
                        transform: str = "clip") -> dict[str, np.ndarray]:
    """``{name: widths (L,) int}``: each signal through the report card's call of chapter 5's solver.

    ``ffn_widths_today`` (L,): today's FFN width per layer; the budget is either ``budget_fraction``
    of today's total, or ``budget_params`` FFN parameters (with ``ffn_params_today`` (L,), default
    proportional to the widths, turned into that fraction); give exactly one. The card's rounding
    keeps the budget exact in multiples of :func:`~anatomy_kit.card.widths.width_multiple`.
    ``transform`` makes each signal non-negative work (module docstring). See
    :func:`width_decision` for the suggestions themselves.
    """
    return {name: np.asarray(s.suggested, dtype=int) for name, s in
            _suggestions(signals, ffn_widths_today, budget_fraction, budget_params, ffn_params_today,
                         transform)[0].items()}


def _suggestions(signals, ffn_widths_today, budget_fraction, budget_params, ffn_params_today, transform):
    prepared, filled = prepare_signals(signals)
    check_choice("transform", transform, TRANSFORMS)
    today = as_vector("ffn_widths_today", ffn_widths_today, None)
    if not np.all(today == np.round(today)):
        raise AnatomyKitError(f"ffn_widths_today={today.tolist()} must hold whole widths")
    n = len(today)
    L = len(next(iter(prepared.values())))
    if L != n:
        raise AnatomyKitError(f"the signals have {L} layers but ffn_widths_today has {n}; give one width per layer")
    params = today if ffn_params_today is None else as_vector("ffn_params_today", ffn_params_today, n)
    if (budget_fraction is None) == (budget_params is None):
        raise AnatomyKitError(f"give exactly one of budget_fraction and budget_params (got {budget_fraction!r} and "
                              f"{budget_params!r}), e.g. budget_fraction=0.75 (the report card's default)")
    fraction = (check_positive("budget_fraction", budget_fraction) if budget_params is None
                else check_int("budget_params", budget_params, minimum=1) / float(params.sum()))
    today_int, params_int = [int(w) for w in today], [int(round(p)) for p in params]
    out = {}
    for name, v in prepared.items():
        work = solver_work(v, transform)
        if not work.any():
            raise AnatomyKitError(f"signal {name!r} is <= 0 in every layer, so transform={transform!r} leaves no work "
                                  "for the solver; use transform='rank' or a signal with a positive value")
        out[name] = suggest_widths(work, today_int, params_int, fraction, profile=name)
    return out, filled


def width_distance(a: Any, b: Any) -> float:
    """``Σ |a_ℓ − b_ℓ|`` over the mean of the two total widths (module docstring): 0 = identical, ≤ 2."""
    va = as_vector("a", a, None, allow_zero=True)
    vb = as_vector("b", b, len(va), allow_zero=True)
    total = 0.5 * (va.sum() + vb.sum())
    if total <= 0:
        raise AnatomyKitError("a and b are zero in every layer: a distance relative to their total width is undefined")
    return float(np.abs(va - vb).sum() / total)


# ---------------------------------------------------------------------------------------------
# The two decisions against a reference signal
# ---------------------------------------------------------------------------------------------

def _check_reference(reference: str, signals) -> str:
    names = prepare_signals(signals)[0]      # the signals' own errors first
    if not isinstance(reference, str) or reference not in names:
        raise AnatomyKitError(f"reference={reference!r} is not a signal; the signals are {sorted(names)}")
    return reference


@dataclass(frozen=True)
class ScheduleDecision:
    """Chapter 3's schedule from every signal, and its overlap with the reference signal's schedule.

    ``overlap[name]``: :func:`phase_overlap` with the reference's schedule (1 for the reference);
    ``core[name]``: the layers that train from the first step; ``anti_layers[name]``; ``filled[name]``:
    the signal's NaN layers (:func:`prepare_signals`).
    """

    reference: str
    settings: ScheduleSettings
    schedules: dict
    overlap: dict
    core: dict
    anti_layers: dict
    filled: dict

    def to_dict(self) -> dict:
        return {"reference": self.reference, "settings": self.settings.to_dict(),
                "schedules": {k: s.to_dict() for k, s in self.schedules.items()}, "overlap": dict(self.overlap),
                "core": {k: list(v) for k, v in self.core.items()},
                "anti_layers": {k: list(v) for k, v in self.anti_layers.items()},
                "filled": {k: list(v) for k, v in self.filled.items()}}


def schedule_decision(signals: Mapping[str, Any], reference: str, settings: ScheduleSettings) -> ScheduleDecision:
    """Every signal's chapter-3 schedule under ``settings`` (:func:`ch03_settings`), compared with ``reference``'s."""
    if not isinstance(settings, ScheduleSettings):
        raise AnatomyKitError(f"settings must be a ScheduleSettings (ch03_settings(build_dir)), got {settings!r}")
    _check_reference(reference, signals)
    scheds = schedules_from_signals(signals, settings.n_layers, settings.steps, **settings.knobs())
    ref = scheds[reference]
    return ScheduleDecision(reference=reference, settings=settings, schedules=scheds,
                            overlap={k: phase_overlap(ref, s) for k, s in scheds.items()},
                            core={k: list(s.phases[0].layers) for k, s in scheds.items()},
                            anti_layers={k: list(s.anti_layers) for k, s in scheds.items()},
                            filled=prepare_signals(signals)[1])


@dataclass(frozen=True)
class WidthDecision:
    """Chapter 5's widths (the report card's solver call) from every signal, and their distance from the
    reference signal's widths.

    ``widths[name]`` (L,) ints; ``distance[name]``: :func:`width_distance` to the reference's widths
    (0 for the reference); ``suggestions[name]``: the card's :class:`~anatomy_kit.card.widths.WidthSuggestion`
    (multiple, bounds, continuous widths); ``exponent``/``upper_factor``: the solver's fixed knobs.
    """

    reference: str
    transform: str
    budget_fraction: float
    multiple: int
    exponent: float
    upper_factor: float
    today: list
    widths: dict
    distance: dict
    suggestions: dict
    filled: dict

    def to_dict(self) -> dict:
        return {"reference": self.reference, "transform": self.transform, "budget_fraction": self.budget_fraction,
                "multiple": self.multiple, "exponent": self.exponent, "upper_factor": self.upper_factor,
                "today": list(self.today), "widths": {k: [int(x) for x in v] for k, v in self.widths.items()},
                "distance": dict(self.distance),
                "suggestions": {k: s.to_dict() for k, s in self.suggestions.items()},
                "filled": {k: list(v) for k, v in self.filled.items()}}


def width_decision(signals: Mapping[str, Any], reference: str, ffn_widths_today: Any, *,
                   budget_fraction: float | None = None, budget_params: int | None = None,
                   ffn_params_today: Any = None, transform: str = "clip") -> WidthDecision:
    """Every signal's widths (:func:`widths_from_signals`, same arguments), compared with ``reference``'s."""
    _check_reference(reference, signals)
    sugg, filled = _suggestions(signals, ffn_widths_today, budget_fraction, budget_params, ffn_params_today,
                                transform)
    ref = sugg[reference]
    return WidthDecision(reference=reference, transform=transform, budget_fraction=ref.budget_fraction,
                         multiple=ref.multiple, exponent=EXPONENT, upper_factor=UPPER_FACTOR, today=list(ref.today),
                         widths={k: np.asarray(s.suggested, dtype=int) for k, s in sugg.items()},
                         distance={k: width_distance(ref.suggested, s.suggested) for k, s in sugg.items()},
                         suggestions=sugg, filled=filled)
