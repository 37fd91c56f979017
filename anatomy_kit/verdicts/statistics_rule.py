"""The one statistics rule of the book, stated once (the intro, the glossary and every chapter render this text).

Every verdict rests on one of a few kinds of evidence, each with one test; the numbers in the text come from
the kit's constants (α, the confidence level, the sign-flip floor, the most primaries a family may name), so a
changed constant changes every page at once. :func:`statistics_rule_markdown` is the text;
:func:`statistics_rule_view` shows it in a notebook cell.
"""

from __future__ import annotations

from .decision import sign_flip_floor
from .multiplicity import HOLM_ALPHA, MAX_PRIMARIES

__all__ = ["CONFIDENCE", "STATISTICS_RULE_TITLE", "statistics_rule_items", "statistics_rule_markdown",
           "statistics_rule_view"]

#: The confidence level of every interval that decides.
CONFIDENCE = 0.95
STATISTICS_RULE_TITLE = "How every verdict is decided (one rule for the whole book)"


def _fewest_seeds(alpha: float) -> int:
    n = 1
    while sign_flip_floor(n) > alpha:
        n += 1
    return n


def statistics_rule_items() -> list[tuple[str, str]]:
    """``[(kind of evidence, how it decides)]``, in the order the text gives them."""
    a, c = f"{HOLM_ALPHA:g}", f"{100 * CONFIDENCE:g} %"
    n = _fewest_seeds(HOLM_ALPHA)
    return [
        ("Paired seeds (models trained from several seeds)",
         f"the exact sign-flip test on the seeds' paired differences, and its {c} sign-flip interval; no normal "
         f"shape is assumed. With n seeds its smallest two-sided p is 2/2ⁿ, so fewer than {n} seeds can never "
         f"reach α = {a}: such a design cannot decide. A t interval over seeds may be shown beside it; it never "
         "decides."),
        ("Evaluation blocks (one model, many blocks of text)",
         f"the paired {c} t interval over the blocks (and its t-test p): a difference is established only when "
         "the whole interval lies on one side of the threshold."),
        ("Sets, ranks and shuffled orders",
         "the chance of a result at least as extreme under the declared null model: exact where the null can be "
         "enumerated, else from seeded Monte Carlo draws, p = (1 + hits)/(1 + draws); a Monte Carlo p at exactly "
         f"α = {a} does not decide."),
        ("Equality",
         "only within a margin declared with the rule (two one-sided tests); an interval that contains 0 is "
         "absence of evidence, not equality."),
        ("Many claims",
         f"each paper's claims (and the book's own questions) form a family that names at most {MAX_PRIMARIES} "
         f"primary claims, corrected together by Holm at α = {a}, one hypothesis per tested part; a primary that "
         "holds but fails the correction is not claimed. Every other claim is secondary: its p is shown "
         "unadjusted and it is never counted as a finding."),
        ("Not comparable",
         "our setting (another model, scale or measurement, an unmet precondition) or the design cannot speak to "
         "the claim; the row still shows what our run saw."),
        ("Confirmatory and exploratory",
         "the rules were frozen before the confirmatory run (seeds no earlier run used, held-out text); only its "
         "verdicts confirm. The verdicts on the earlier, exploratory data are shown beside them, marked: the rules "
         "were written after those data had been seen."),
    ]


def statistics_rule_markdown(heading: str | None = None) -> str:
    """The rule as Markdown: an optional bold heading, then one bullet per kind of evidence."""
    lines = [f"**{heading}**", ""] if heading else []
    lines += [f"- **{kind}**: {how}" for kind, how in statistics_rule_items()]
    return "\n".join(lines) + "\n"


def statistics_rule_view():
    """The rule in a notebook cell (every chapter's Evidence section)."""
    from IPython.display import Markdown

    return Markdown(statistics_rule_markdown(STATISTICS_RULE_TITLE))
