"""Chapter 1's interval check names the slips a reader actually makes, written the way a reader writes
them (scipy's two-sample tests, a normal quantile), and gives only the generic message to an answer it
cannot explain (anatomy_kit.exercises.ch01, issue 18: an unpaired Welch answer got only the generic message)."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from anatomy_kit.exercises import ExerciseFailed, ch01


def _percent(low, high):
    return 100 * math.expm1(low), 100 * math.expm1(high)


def welch_by_scipy(base, new, n):
    """A reader's unpaired answer: Welch's t on the per-token NLL of the two sets of blocks."""
    ci = scipy_stats.ttest_ind(new / n, base / n, equal_var=False).confidence_interval(0.95)
    return _percent(ci.low, ci.high)


def pooled_by_scipy(base, new, n):
    """A reader's unpaired answer with equal variances assumed (Student's two-sample t)."""
    ci = scipy_stats.ttest_ind(new / n, base / n, equal_var=True).confidence_interval(0.95)
    return _percent(ci.low, ci.high)


def paired_by_scipy(base, new, n):
    """The right answer, through scipy's paired test."""
    ci = scipy_stats.ttest_rel(new / n, base / n).confidence_interval(0.95)
    return _percent(ci.low, ci.high)


def normal_quantile(base, new, n):
    d = (new - base) / n
    half = scipy_stats.norm.ppf(0.975) * d.std(ddof=1) / math.sqrt(len(d))
    return _percent(d.mean() - half, d.mean() + half)


def bootstrap(base, new, n):
    """A percentile bootstrap: wrong, but not a slip the check can name from its numbers."""
    d = (new - base) / n
    means = d[np.random.default_rng(1).integers(0, len(d), (4000, len(d)))].mean(axis=1)
    return _percent(*np.quantile(means, [0.025, 0.975]))


def _failure(answer) -> ExerciseFailed:
    with pytest.raises(ExerciseFailed) as err:
        with contextlib.redirect_stdout(io.StringIO()):
            ch01.check_delta_interval(answer)
    return err.value


@pytest.mark.parametrize("answer, words", [(welch_by_scipy, "Welch's unpaired t"),
                                           (pooled_by_scipy, "two-sample (pooled) t"),
                                           (normal_quantile, "normal 1.96")])
def test_a_readers_slip_is_named(answer, words):
    err = _failure(answer)
    assert not err.generic and words in str(err), str(err)


def test_welch_and_pooled_are_told_apart_on_the_checks_own_cases():
    """One case gives the changed blocks a far wider spread, so Welch's degrees of freedom differ from 2B − 2."""
    from anatomy_kit.exercises.ch01 import _interval_inputs, _pooled, _welch

    gaps = [max(abs(a - b) / abs(b) for a, b in zip(_welch(*c), _pooled(*c))) for c in _interval_inputs()]
    assert max(gaps) > 1e-2, gaps          # far beyond the check's matching tolerance of 1e-4


def test_the_paired_answer_agrees_and_an_unexplained_one_is_generic():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ch01.check_delta_interval(paired_by_scipy)
    assert "agrees" in out.getvalue()
    err = _failure(bootstrap)
    assert err.generic and "narrower than the kit's" in str(err)


def test_the_nll_checks_own_loop_on_a_hand_worked_batch():
    """Two positions, vocabulary 2: logits (0, log 3) at position 0 predict label 1 with p = 3/4; the
    label −100 at position 1 is not scored (and position 1's logits predict nothing)."""
    import torch

    from anatomy_kit.exercises.ch01 import _nll_candidates

    logits = torch.tensor([[[0.0, math.log(3.0)], [5.0, 0.0]]])
    values = _nll_candidates(logits, torch.tensor([[0, 1]]))
    assert math.isclose(values["right"], -math.log(0.75), rel_tol=1e-7)     # float32 log 3: 6e-8 relative
    assert math.isclose(values["perplexity"], 4 / 3, rel_tol=1e-7)


def test_the_nll_check_names_a_readers_slips():
    """Slips written the way a reader writes them: a mean over every position, padding included."""
    import torch

    def over_every_position(logits, labels):
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(),
                                                reduction="none")          # 0 where the label is −100
        return nll.mean()

    with pytest.raises(ExerciseFailed, match="labelled −100 too"):
        with contextlib.redirect_stdout(io.StringIO()):
            ch01.check_next_token_nll(over_every_position)
