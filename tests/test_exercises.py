"""Every chapter is a lesson: the template's sections, exercises whose checks accept the worked solution
and reject typical wrong answers (anatomy_kit.exercises)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from anatomy_kit.book.runner import chapter_manifest, to_notebook
from anatomy_kit.exercises import ExerciseFailed, all_checks, wrong_answers

from conftest import ROOT

CHAPTERS = chapter_manifest()
IDS = [c["id"] for c in CHAPTERS]
#: Headings every chapter has (notebooks/README.md, "The chapter template").
SECTIONS = ("Learning goals", "Prerequisites", "Exercises", "What we learned", "What this scale can and cannot show",
            "References")


def _nb(entry):
    return to_notebook(ROOT / "notebooks" / entry["file"])


def _headings(nb):
    return [m.group(2).strip() for c in nb.cells if c.cell_type == "markdown"
            for m in re.finditer(r"^(#+)\s+(.+)$", c.source, flags=re.M)]


def _solutions(nb):
    return [c for c in nb.cells if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_chapter_follows_the_template(entry):
    nb = _nb(entry)
    heads = _headings(nb)
    missing = [s for s in SECTIONS if not any(h.startswith(s) for h in heads)]
    assert not missing, f"{entry['id']} lacks the template section(s) {missing}"
    goals = next(c.source for c in nb.cells if c.cell_type == "markdown" and "Learning goals" in c.source)
    n_goals = len(re.findall(r"^\s*[-*\d]+[.)]?\s+\S", goals.split("Learning goals", 1)[1].split("\n#")[0], flags=re.M))
    assert 3 <= n_goals <= 5, f"{entry['id']} has {n_goals} learning goals; the template asks for 3-5"
    exercises = [h for h in heads if h.lower().startswith("exercise ")]
    assert 2 <= len(exercises) <= 4, f"{entry['id']} has {len(exercises)} exercises; the template asks for 2-4"
    sols = _solutions(nb)
    assert sols and all("hide-input" in c.metadata.get("tags", []) for c in sols), \
        f"{entry['id']}: worked solutions must be code cells tagged [solution, hide-input]"
    assert any("exercises." in c.source for c in sols), f"{entry['id']}: no solution calls a self-check"


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_worked_solutions_pass_their_checks(entry):
    """Each solution cell is self-contained: it runs alone and its check accepts it."""
    for cell in _solutions(_nb(entry)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(cell.source, f"{entry['id']} solution", "exec"), {"__name__": "solution"})
        assert "✓" in out.getvalue(), f"{entry['id']}: a solution cell ran no check:\n{cell.source[:200]}"


def test_every_check_rejects_wrong_answers_and_is_used_by_a_chapter():
    checks, wrong = all_checks(), wrong_answers()
    assert checks, "no exercise checks are registered"
    used = "\n".join(c.source for e in CHAPTERS for c in _solutions(_nb(e)))
    for name, fn in checks.items():
        assert wrong.get(name), f"check {name} lists no wrong answer to reject"
        assert name in used, f"check {name} is not called by any chapter's worked solution"
        for answer in wrong[name]:
            with pytest.raises(ExerciseFailed) as err:
                with contextlib.redirect_stdout(io.StringIO()):
                    fn(answer)
            assert len(str(err.value)) > 15 and str(err.value).count(". ") <= 1, \
                f"{name}: the message should be one sentence, got {err.value!r}"
