"""The machinery of the self-checks: a decorator that registers a check, and its result."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ExerciseFailed", "CheckResult", "check", "all_checks", "wrong_answers", "CHAPTER_MODULES"]

#: The chapter modules that hold checks (imported by :func:`all_checks`).
CHAPTER_MODULES = ("ch01", "ch02", "ch03", "ch04", "ch05", "ch06")

_REGISTRY: dict[str, Callable] = {}


class ExerciseFailed(AssertionError):
    """The reader's answer is wrong; the message says how, in one sentence."""


@dataclass(frozen=True)
class CheckResult:
    """A passed check: its name and the line it printed."""

    name: str
    message: str

    def __bool__(self) -> bool:
        return True


def check(name: str | None = None) -> Callable:
    """Register a check. The decorated function returns ``None`` when the answer is right, or a
    sentence saying what is wrong; the registered wrapper prints a ✓ line or raises :class:`ExerciseFailed`."""

    def decorate(fn: Callable[..., str | None]) -> Callable[..., CheckResult]:
        key = name or fn.__name__

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> CheckResult:
            try:
                problem = fn(*args, **kwargs)
            except ExerciseFailed:
                raise
            except Exception as err:  # the reader's code raised: say so, in one sentence
                raise ExerciseFailed(f"your answer raised {type(err).__name__}: {err}") from err
            if problem:
                raise ExerciseFailed(problem)
            line = f"✓ {key}: your answer agrees with the kit's."
            print(line)
            return CheckResult(key, line)

        wrapper.check_name = key
        _REGISTRY[key] = wrapper
        return wrapper

    return decorate


def all_checks() -> dict[str, Callable]:
    """Every registered check by name (imports the chapter modules that exist)."""
    for mod in CHAPTER_MODULES:
        try:
            importlib.import_module(f"{__package__}.{mod}")
        except ModuleNotFoundError as err:
            if err.name != f"{__package__}.{mod}":
                raise
    return dict(_REGISTRY)


def wrong_answers() -> dict[str, list]:
    """``{check name: [wrong answer, …]}`` from every chapter module's ``WRONG_ANSWERS``."""
    all_checks()
    out: dict[str, list] = {}
    for mod in CHAPTER_MODULES:
        try:
            m = importlib.import_module(f"{__package__}.{mod}")
        except ModuleNotFoundError:
            continue
        for k, v in getattr(m, "WRONG_ANSWERS", {}).items():
            out.setdefault(k, []).extend(v)
    return out
