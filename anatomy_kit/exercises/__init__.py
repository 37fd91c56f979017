"""Exercises with self-checks (every chapter): the reader writes a small piece, a check says what is wrong.

Each chapter has a module here (``ch01``, ``ch02``, …) with its check functions. A check takes the
reader's answer (usually a function), builds its own small inputs, compares the answer with the
kit's own computation, and either prints one line saying it is right or raises
:class:`ExerciseFailed` with one sentence saying what is wrong. The worked solutions live in the
chapters (hidden code cells tagged ``solution``); the book build executes them, so a broken
solution or a broken check fails the build. Each module also lists, in ``WRONG_ANSWERS``,
typical mistakes its checks must reject (tests/test_exercises.py runs them).
"""

from .core import CheckResult, ExerciseFailed, all_checks, check, wrong_answers

__all__ = ["CheckResult", "ExerciseFailed", "all_checks", "check", "wrong_answers"]
