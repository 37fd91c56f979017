"""The machinery of the self-checks (every chapter's exercises): a decorator that registers a check.

A check is called with the reader's answer and says one of three things:

- **not attempted yet** (with the check's hint) for an untouched stub: ``answer = ...``, a function
  that raises ``NotImplementedError`` or whose body is only ``...``/``pass``, or one that returns
  ``...``. It prints one line and returns, so a book page that runs the stub still builds;
- **the slip**, by raising :class:`ExerciseFailed` with one sentence naming the mistake;
- **agrees**, one printed line, only for an answer that ran and matched the kit.

A check returns ``None`` (a page shows no ``CheckResult(...)`` repr). The checked function
returns ``None`` when the answer is right, a sentence naming the slip, or :func:`generic` of a
sentence when it cannot name one (tests require every ``WRONG_ANSWERS`` entry to get a specific one).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import textwrap
from typing import Any, Callable

__all__ = ["ExerciseFailed", "NOT_ATTEMPTED", "AGREES", "check", "generic", "is_untouched", "all_checks",
           "wrong_answers", "CHAPTER_MODULES"]

#: The chapter modules that hold checks (imported by :func:`all_checks`).
CHAPTER_MODULES = ("ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07")
#: What a check prints for an untouched stub, and for an answer that matched the kit.
NOT_ATTEMPTED, AGREES = "not attempted yet", "your answer agrees with the kit's"

_REGISTRY: dict[str, Callable] = {}


class ExerciseFailed(AssertionError):
    """The reader's answer is wrong; the message says how, in one sentence.

    ``check`` names the check, ``generic`` is true when the check could not name the slip. In
    IPython only the sentence is shown, not a traceback into the kit.
    """

    def __init__(self, message: str, *, check: str = "", generic: bool = False):
        super().__init__(message)
        self.check, self.generic = check, generic

    def _render_traceback_(self) -> list[str]:
        return [f"✗ {self.check + ': ' if self.check else ''}{self}"]


class _Generic(str):
    """A message that does not name a specific slip (see :func:`generic`)."""


def generic(message: str) -> str:
    """Mark a check's fallback message, the one it gives when it cannot name the slip (every chapter's checks)."""
    return _Generic(message)


class _NotAttempted(Exception):
    """Raised inside a check when the reader's function returned ``...``."""


def _stub_statement(node: ast.stmt) -> bool:
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return node.value.value is Ellipsis or isinstance(node.value.value, str)   # ``...`` or a docstring
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _stub_source(fn: Callable) -> bool:
    """True when ``fn``'s source is a stub body (docstring, ``...``, ``pass``, ``raise NotImplementedError``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return False                        # no source (exec'd code, builtins): judged by running it
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return len(defs) == 1 and all(_stub_statement(s) for s in defs[0].body)


def is_untouched(answer: Any) -> bool:
    """Whether ``answer`` is an untouched stub: ``...``, a tuple/list/dict holding ``...``, or a function
    whose body is only a docstring, ``...``, ``pass`` or ``raise NotImplementedError`` (every chapter)."""
    if answer is Ellipsis:
        return True
    if isinstance(answer, (tuple, list)):
        return any(a is Ellipsis for a in answer)
    if isinstance(answer, dict):
        return any(a is Ellipsis for a in answer.values())
    return inspect.isfunction(answer) and _stub_source(answer)


def _guarded(answer: Any) -> Any:
    """The reader's function, wrapped so that returning ``...`` counts as not attempted."""
    if not callable(answer) or inspect.isclass(answer):
        return answer

    @functools.wraps(answer)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        out = answer(*args, **kwargs)
        if out is Ellipsis or (isinstance(out, tuple) and any(o is Ellipsis for o in out)):
            raise _NotAttempted
        return out

    return guarded


def _kit_function(answer: Any) -> str | None:
    """The qualified name of a kit function passed as an answer (it is not the reader's), else None."""
    module = getattr(answer, "__module__", "") or ""
    if callable(answer) and module.startswith("anatomy_kit.") and not module.startswith("anatomy_kit.exercises"):
        return f"{module}.{getattr(answer, '__qualname__', answer)}"
    return None


def _hint(fn: Callable, hint: str | None) -> str:
    text = hint if hint is not None else (inspect.getdoc(fn) or "").split("\n\n")[0]
    return " ".join(text.replace("``", "`").split())


def check(name: str | None = None, *, hint: str | None = None) -> Callable:
    """Register a check (chapters 1–6). The decorated function takes the reader's answer first and
    returns ``None`` (right), a sentence naming the slip, or :func:`generic` of a sentence. ``hint``
    (default: the first paragraph of its docstring) is printed for an untouched stub."""

    def decorate(fn: Callable[..., str | None]) -> Callable[..., None]:
        key, tip = name or fn.__name__, _hint(fn, hint)

        @functools.wraps(fn)
        def wrapper(answer: Any = Ellipsis, *args: Any, **kwargs: Any) -> None:
            if is_untouched(answer):
                print(f"… {key}: {NOT_ATTEMPTED}. Hint: {tip}")
                return None
            own = _kit_function(answer)
            if own:
                raise ExerciseFailed(f"{own} is the kit's own function; write your own answer", check=key)
            try:
                problem = fn(_guarded(answer), *args, **kwargs)
            except (NotImplementedError, _NotAttempted):
                print(f"… {key}: {NOT_ATTEMPTED} (your function still raises NotImplementedError or returns "
                      f"...). Hint: {tip}")
                return None
            except ExerciseFailed as err:
                err.check = err.check or key
                raise
            except Exception as err:  # the reader's code raised: say so, in one sentence
                raise ExerciseFailed(f"your answer raised {type(err).__name__}: {err}", check=key) from err
            if problem:
                raise ExerciseFailed(str(problem), check=key, generic=isinstance(problem, _Generic))
            print(f"✓ {key}: {AGREES}.")
            return None

        wrapper.check_name, wrapper.hint = key, tip
        _REGISTRY[key] = wrapper
        return wrapper

    return decorate


def _chapter_modules():
    for mod in CHAPTER_MODULES:
        try:
            yield importlib.import_module(f"{__package__}.{mod}")
        except ModuleNotFoundError as err:
            if err.name != f"{__package__}.{mod}":
                raise


def all_checks() -> dict[str, Callable]:
    """Every registered check by name (imports the chapter modules that exist)."""
    for _ in _chapter_modules():
        pass
    return dict(_REGISTRY)


def wrong_answers() -> dict[str, list]:
    """``{check name: [entry, …]}`` from every chapter module's ``WRONG_ANSWERS``; an entry is
    ``(wrong answer, words the message must contain)`` (or, until a chapter is converted, a bare answer)."""
    out: dict[str, list] = {}
    for m in _chapter_modules():
        for k, v in getattr(m, "WRONG_ANSWERS", {}).items():
            out.setdefault(k, []).extend(v)
    return out
