"""FFN width *allocation* (chapter 5, *The width solver*): how a fixed FFN budget is spread over depth.

- :mod:`.solver` – the surrogate ``Σ λ c w^(−a)`` and its exact KKT / water-filling optimum;
- :mod:`.rounding` – widths rounded to hardware multiples with the budget kept exactly;
- :mod:`.schedules` – uniform, cosine taper, geometric, anti and importance schedules, and rules
  like ``"geometric:gw/spherical"``;
- :mod:`.experiment` – the paired rule × seed training grid of chapter 5.

"Width" alone means residual width in this book (chapter 6 grows it); FFN widths are *allocated*.
"""

from .rounding import round_widths
from .schedules import (SCHEDULE_KINDS, allocate, anti_profile, coefficients_from_profile, continuous_schedule,
                        exponents_from_intrinsic_dimension, parse_rule, resample_profile, width_schedule)
from .solver import WidthSolution, solve_widths, surrogate_objective

__all__ = ["WidthSolution", "solve_widths", "surrogate_objective", "round_widths", "SCHEDULE_KINDS", "allocate",
           "anti_profile", "coefficients_from_profile", "continuous_schedule", "exponents_from_intrinsic_dimension",
           "parse_rule", "resample_profile", "width_schedule"]
