"""The book states one statistics rule (anatomy_kit.verdicts.statistics_rule): no page may state another.

The intro and the glossary include the kit's text (``_generated/statistics_rule.md``); a chapter may explain a t
interval or a sign-flip test, but no page may say that a t interval decides a claim over seeds, that a seed claim
uses a t quantile, or repeat one of the phrasings the book used before the rule was written once (issue 37)."""

from __future__ import annotations

import re

import pytest

from chapter_source import CHAPTERS
from conftest import ROOT

PAGES = sorted([*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.md")])

#: Phrasings of an older rule, each of which contradicts the kit's: a t quantile for seed claims (2.57 is
#: t(0.975, 5), six seeds), "the t interval decides" (at three seeds), every verdict's interval a t interval.
KNOWN_CONTRADICTIONS = [
    r"quantile\s+(?:of\s+)?2\.57",
    r"reach 0\.05 and the t interval decides",
    r"covers the true value in 95 % of repeated\s+experiments \(a \{term\}`t interval`\)",
]
SEEDS = re.compile(r"\bseeds?\b", re.I)
T_INTERVAL = re.compile(r"\bt[ -](?:interval|quantile|test)s?\b|Student", re.I)
DECIDES = re.compile(r"\b(?:decid\w*|establish\w*|settles?|exclud\w*)\b", re.I)
#: "never decides", "does not decide", "cannot settle": a negated verb states the rule, not another one
NEGATED = re.compile(r"\b(?:never|not|cannot|no|no longer|neither|nor)\s+(?:\w+\s+){0,2}?(?:decid|establish|settl|exclud)\w*",
                     re.I)


CODE_CELL = re.compile(r"^(`{3,})\{code-cell\}[^\n]*\n(.*?)^\1\s*$", re.M | re.S)


def code_text(code: str) -> str:
    """The words a code cell writes on the page: its string literals in source order, adjacent ones joined (an
    f-string's ``{…}`` fields dropped), one statement per paragraph."""
    import ast
    import io
    import tokenize
    import warnings

    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!", ":"))]
    out, words = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))   # a backslash in a plain literal
        try:
            for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
                if tok.type == tokenize.STRING:
                    prefix = re.match(r"^[A-Za-z]*", tok.string).group(0).lower()
                    body = tok.string[len(prefix):]
                    if "f" in prefix:      # an f-string's fields are dropped, its doubled braces kept as one
                        body = re.sub(r"\{\{|\}\}|\{[^{}]*\}", lambda m: m.group(0)[0] if m.group(0) in ("{{", "}}")
                                      else "", body)
                    text = ast.literal_eval(body)
                    words.append(text if isinstance(text, str) else "")
                elif tok.type == tokenize.NEWLINE:
                    out.append("".join(words))
                    words = []
        except (tokenize.TokenError, SyntaxError, ValueError):
            pass
    out.append("".join(words))
    return "\n\n".join(w for w in out if w.strip())


def page_text(markdown: str) -> str:
    """A page's prose, then what its code cells write (their string literals), as text to read."""
    code = [code_text(m.group(2)) for m in CODE_CELL.finditer(markdown)]
    return "\n\n".join([CODE_CELL.sub("", markdown), *code])


def sentences(text: str) -> list[str]:
    """The text's sentences, one line each (a sentence ends at '. ', '? ', '! ', a blank line or a list item)."""
    flat = re.sub(r"\n(?!\s*\n|\s*(?:[-*+]|\d+\.)\s)", " ", text)
    return [s.strip() for para in flat.split("\n") for s in re.split(r"(?<=[.?!;])\s+(?=[A-Z*(])", para)
            if s.strip()]


def other_rules(text: str) -> list[str]:
    """Each place in ``text`` that states a statistics rule other than the kit's: a known contradicting phrasing,
    or a sentence that has a t interval (or quantile, or test) decide a claim over seeds."""
    found = [m.group(0) for p in KNOWN_CONTRADICTIONS for m in re.finditer(p, text, re.I)]
    for s in sentences(text):
        if SEEDS.search(s) and T_INTERVAL.search(s) and DECIDES.search(s):
            t_at = T_INTERVAL.search(s).start()
            deciding = [m for m in DECIDES.finditer(s)
                        if not NEGATED.search(s[max(0, m.start() - 40):m.end()])]
            # the t interval must be the subject: a deciding verb after it, with no other test in between
            if any(m.start() > t_at and not re.search(r"sign-flip|Holm|permutation", s[t_at:m.start()], re.I)
                   for m in deciding):
                found.append(s[:160])
    return found


@pytest.mark.parametrize("page", PAGES, ids=[f"{p.parent.name}/{p.name}" for p in PAGES])
def test_no_page_states_another_statistics_rule(page):
    found = other_rules(page_text(page.read_text()))
    assert not found, (f"{page.name} states a statistics rule other than the kit's (include "
                       f"_generated/statistics_rule.md, or say what the rule says): {found}")


def test_the_intro_and_the_glossary_render_the_kits_rule():
    for page in ("intro.md", "glossary.md"):
        text = (ROOT / "book" / page).read_text()
        assert "```{include} _generated/statistics_rule.md\n```" in text, f"{page} does not include the kit's rule"


def test_a_contradicting_rule_is_caught_and_the_kits_is_not():
    from anatomy_kit.verdicts.statistics_rule import statistics_rule_markdown

    assert not other_rules(statistics_rule_markdown())
    # the phrasings the book had before the rule was written once
    assert other_rules("With 3 seeds the smallest two-sided p is 2/8 = 0.25, so it can never reach 0.05 and the "
                       "t interval decides.")
    assert other_rules("Seed claims use a t interval (quantile 2.57 for six seeds).")
    assert other_rules("With six seeds the t interval of the paired differences decides the claim.")
    assert other_rules("Over three seeds a Student t test establishes the gain.")
    # what the rule itself says, in a chapter's words
    assert not other_rules("The sign-flip interval decides; the t interval over the seeds is shown beside it and "
                           "never decides.")
    # evaluation blocks are decided by a t interval: the rule says so
    assert not other_rules("With five evaluation blocks the t interval decides whether an anti-layer is real.")
    assert not other_rules("With eight seeds the exact sign-flip interval decides; the t interval, which assumes "
                           "normal differences, is shown beside it and never decides.")


# ---------------------------------------------------------------- the learner's path, then the evidence (issue 37)

def path_problems(chapter: str, markdown: str) -> list[str]:
    """What keeps a chapter from the issue's order: the "What held up" box right after the learning goals, and
    the claims, rules, power and multiplicity in one folded Evidence section (``evidence_view``) near the end."""
    problems = []
    goals = re.search(r"^## Learning goals\n(.*?)(?=^## )", markdown, re.M | re.S)
    box = f"```{{include}} ../_generated/held_up/{chapter}.md\n```"
    if not goals or not goals.group(1).rstrip().endswith(box):
        problems.append("the 'What held up' box is not included right after the learning goals")
    code = "\n".join(m.group(2) for m in CODE_CELL.finditer(markdown))
    if "claims_view(" in code or "power_view(" in code:
        problems.append("a claims or power table stands on the learner's path (use evidence_view in Evidence)")
    evidence = re.search(r"^## Evidence\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    if not evidence or "evidence_view(run, claims" not in evidence.group(1) or code.count("evidence_view(") != 1:
        problems.append("no single evidence_view(run, claims) cell under a '## Evidence' heading")
    elif markdown.index("## Evidence") < markdown.index("## What this scale can and cannot show"):
        problems.append("the Evidence section comes before the summary")
    return problems


# the report card page judges no claim of its own: it has no What held up box and no Evidence section
JUDGING = [c for c in CHAPTERS if c["id"] != "card_report"]


@pytest.mark.parametrize("entry", JUDGING, ids=[c["id"] for c in JUDGING])
def test_each_chapter_opens_with_what_held_up_and_folds_its_evidence(entry):
    problems = path_problems(entry["id"], (ROOT / "notebooks" / entry["file"]).read_text())
    assert not problems, f"{entry['id']}: {problems}"


def test_a_chapter_off_the_path_is_caught():
    good = ("## Learning goals\n\n- a goal\n\n```{include} ../_generated/held_up/chX.md\n```\n\n## The idea\n\n"
            "## What this scale can and cannot show\n\n## Evidence\n\n```{code-cell} ipython3\n"
            "evidence_view(run, claims)\n```\n\n## References\n")
    assert path_problems("chX", good) == []
    assert path_problems("chX", good.replace("```{include} ../_generated/held_up/chX.md\n```\n", "")) == [
        "the 'What held up' box is not included right after the learning goals"]
    shown = good.replace("## The idea\n", "## The idea\n\n```{code-cell} ipython3\nclaims_view(claims)\n```\n")
    assert path_problems("chX", shown) == [
        "a claims or power table stands on the learner's path (use evidence_view in Evidence)"]
    assert path_problems("chX", good.replace("## Evidence", "## Beside the paper")) == [
        "no single evidence_view(run, claims) cell under a '## Evidence' heading"]
