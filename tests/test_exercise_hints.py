"""A check's hint points to the idea, never to the formula the exercise asks for (issue 37): the printed hint of
chapters 4–7's checks holds none of the expressions of their solutions."""

from __future__ import annotations

import pytest

from anatomy_kit.exercises import all_checks

#: ``{check: expressions of its solution that the hint must not print}``
SOLUTION_EXPRESSIONS = {
    "check_gw_coupling": ["Σ_ijkl", "T_ij T_kl", "^½"],
    "check_poincare": ["arcosh(", "(1 − ‖u‖²)", "r·x/‖x‖"],
    "check_widths_at": ["1/(a", "clip((", "^(1/"],
    "check_round_widths": ["w // multiple", "floor(w / multiple)"],
    "check_sign_flip_p": ["itertools.product", "|Σ d|", "2**n"],
    "check_rotation_matrix": ["(c − 1)(uuᵀ + vvᵀ)", "s(vuᵀ − uvᵀ)", "√(1 − ε²)"],
    "check_entropy_rank": ["exp(−Σ", "σ / Σσ"],
    "check_block_influence": ["1 − the mean", "cos(h_in, h_out)"],
    "check_random_set_p": ["(1 + #", "/ (1 + n)"],
}


def formula_in_hint(hint: str, expressions: list[str]) -> list[str]:
    """The expressions of a solution that a hint prints."""
    return [e for e in expressions if e in hint]


@pytest.mark.parametrize("name", sorted(SOLUTION_EXPRESSIONS))
def test_the_hint_points_to_the_idea_not_the_formula(name):
    hint = all_checks()[name].hint
    assert len(hint) > 20, f"{name} has no hint"
    printed = formula_in_hint(hint, SOLUTION_EXPRESSIONS[name])
    assert not printed, f"{name}'s hint prints the solution's {printed}: {hint!r}"


def test_a_hint_that_prints_the_formula_is_caught():
    # chapter 5's old hint: the docstring's first paragraph, with the clip formula in it
    old = ("fn(c, a, mu, lower, upper) returns the widths (L,) where one more unit buys μ: "
           "clip((c_ℓ a_ℓ/μ)^(1/(a_ℓ+1)), lower, upper).")
    assert formula_in_hint(old, SOLUTION_EXPRESSIONS["check_widths_at"]) == ["1/(a", "clip((", "^(1/"]
