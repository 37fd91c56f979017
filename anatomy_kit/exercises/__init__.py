"""Exercises with self-checks (every chapter): the reader fills a stub, a check says what is wrong.

Each chapter has a module here (``ch01``, ``ch02``, …) with its check functions, imported in a
chapter as ``from anatomy_kit.exercises import ch01``. A check takes the reader's answer (usually
a function), builds its own small inputs and compares the answer with the kit's own computation.
It says "not attempted yet" with a hint for an untouched stub, raises :class:`ExerciseFailed`
naming the slip for a wrong answer, and prints one line for a right one (:mod:`.core`). The
reference solutions sit in the chapters in collapsed ``Solution`` dropdowns that the book never
executes; tests/test_exercises.py runs them against their checks. Each module also lists, in
``WRONG_ANSWERS``, typical mistakes with the words its check must name them with.
"""

from .core import ExerciseFailed, all_checks, check, generic, wrong_answers

__all__ = ["ExerciseFailed", "all_checks", "check", "generic", "wrong_answers"]
