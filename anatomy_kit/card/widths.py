"""Per-layer FFN widths from the work profile, by chapter 5's solver (the book page *Your model's report card*).

Today's width of layer ℓ is read from its MLP's weights (the smallest dimension of its 2-D weights
that is not the model width: ``intermediate_size`` for gated MLPs, Phi-3's fused ``gate_up`` included;
4·d for GPT-2). The budget is a fraction of today's FFN parameters; with FFN parameters proportional
to width (every layer's MLP has the same shape) that is the same fraction of the summed width.
:func:`anatomy_kit.allocation.solve_widths` minimises ``Σ c_ℓ w_ℓ^(−1)`` with ``c`` the GW work
profile (normalised to mean 1, :func:`anatomy_kit.allocation.coefficients_from_profile`), exponent 1,
bounds ``one multiple ≤ w_ℓ ≤ 2 × today's width``; :func:`anatomy_kit.allocation.round_widths` rounds
to multiples (64, or the largest power of two ≤ 64 that divides every width and leaves four units)
keeping the budget exact. A budget outside the bounds is :class:`~.errors.WidthBudgetInfeasible`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from torch import nn

from ..allocation import coefficients_from_profile, round_widths, solve_widths
from ..hf.layers import decoder_layers, mlp_of
from ..validate import AnatomyKitError
from .errors import WidthBudgetInfeasible

__all__ = ["WidthSuggestion", "today_widths", "width_multiple", "check_budget", "suggest_widths", "EXPONENT", "UPPER_FACTOR"]

EXPONENT = 1.0
UPPER_FACTOR = 2.0


def today_widths(model: nn.Module) -> tuple[list[int], list[int]]:
    """``(width, FFN parameters)`` of every layer's MLP (module docstring)."""
    d = int(getattr(model.config, "hidden_size", 0) or getattr(model.config, "n_embd", 0))
    widths, params = [], []
    for layer in decoder_layers(model):
        mlp = mlp_of(layer)
        dims = [s for p in mlp.parameters() if p.dim() == 2 for s in p.shape if s != d]
        if not dims:
            raise AnatomyKitError(f"cannot read the FFN width of {type(mlp).__name__}: no 2-D weight with a "
                                  f"dimension other than the model width {d}")
        widths.append(int(min(dims)))
        params.append(int(sum(p.numel() for p in mlp.parameters())))
    return widths, params


def width_multiple(widths: list[int]) -> int:
    """64, or the largest power of two below it that divides every width and leaves at least four units."""
    m = 64
    while m > 1 and any(w % m or w // m < 4 for w in widths):
        m //= 2
    return m


@dataclass(frozen=True)
class WidthSuggestion:
    """The solver's widths under ``budget_fraction`` of today's FFN parameters, beside today's."""

    profile: str
    budget_fraction: float
    multiple: int
    today: list[int]
    suggested: list[int]
    continuous: list[float]
    params_today: int
    params_suggested: int
    lower: int
    upper: list[int]
    exponent: float = EXPONENT

    def to_dict(self) -> dict:
        return asdict(self)


def check_budget(today: list[int], budget_fraction: float) -> tuple[int, int, list[int]]:
    """``(multiple, budget in width units, upper bounds)``, or :class:`WidthBudgetInfeasible` naming the range
    the solver can meet (checked before any measurement, so a bad budget fails at once)."""
    m = width_multiple(today)
    budget = int(round(budget_fraction * sum(today) / m)) * m
    upper = [int(UPPER_FACTOR * w) // m * m for w in today]
    if budget < m * len(today) or budget > sum(upper):
        hint = " (a percentage? 75 % is 0.75 or '75%')" if budget_fraction > UPPER_FACTOR else ""
        raise WidthBudgetInfeasible(
            f"ffn_budget={budget_fraction:g}{hint} asks for {budget:,} FFN units over {len(today)} layers; the solver "
            f"can meet between {m * len(today):,} (one multiple of {m} per layer, {m * len(today) / sum(today):.3g} of "
            f"today) and {sum(upper):,} ({sum(upper) / sum(today):.3g} of today, {UPPER_FACTOR:g}× today's width per "
            "layer); give a fraction in that range")
    return m, budget, upper


def suggest_widths(work: np.ndarray, today: list[int], params: list[int], budget_fraction: float,
                   profile: str = "work_gw") -> WidthSuggestion:
    """Chapter 5's solver on ``work`` (L,) under ``budget_fraction`` of today's FFN parameters (module docstring)."""
    m, budget, upper = check_budget(today, budget_fraction)
    try:
        sol = solve_widths(coefficients_from_profile(work), EXPONENT, budget=float(budget), lower=float(m),
                           upper=np.asarray(upper, dtype=float))
        widths = round_widths(sol.widths, m, budget, lower=m, upper=upper)
    except AnatomyKitError as err:
        raise WidthBudgetInfeasible(f"ffn_budget={budget_fraction:g}: {err}") from None
    per_unit = [p / w for p, w in zip(params, today)]
    return WidthSuggestion(profile=profile, budget_fraction=float(budget_fraction), multiple=m, today=list(today),
                           suggested=widths, continuous=[float(x) for x in sol.widths],
                           params_today=int(sum(params)),
                           params_suggested=int(round(sum(w * u for w, u in zip(widths, per_unit)))),
                           lower=m, upper=upper)
