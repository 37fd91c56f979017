"""Progress shows on a terminal only (anatomy_kit.progress): never in a notebook kernel, so never in a page."""

from __future__ import annotations

import ast
import io
import re

import pytest

from anatomy_kit import progress
from conftest import ROOT


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.delenv("ANATOMY_KIT_PROGRESS", raising=False)
    return monkeypatch


def test_progress_only_on_a_terminal(clean_env):
    assert progress.progress_enabled(stream=_Terminal())
    assert not progress.progress_enabled(stream=io.StringIO())        # a notebook kernel's stream
    assert not progress.progress_enabled(False, stream=_Terminal())
    clean_env.setenv("TQDM_DISABLE", "1")                              # the book's runner sets it
    assert not progress.progress_enabled(stream=_Terminal())
    clean_env.delenv("TQDM_DISABLE")
    clean_env.setenv("ANATOMY_KIT_PROGRESS", "0")
    assert not progress.progress_enabled(stream=_Terminal())
    clean_env.setenv("ANATOMY_KIT_PROGRESS", "1")                      # asked for in a live notebook
    assert progress.progress_enabled(stream=io.StringIO())


def test_progress_lines_are_silent_off_a_terminal(clean_env, capsys):
    assert not progress.progress_line("[1/3] run a: eval loss 4.2")
    assert capsys.readouterr().err == ""
    clean_env.setenv("ANATOMY_KIT_PROGRESS", "1")
    assert progress.progress_line("[2/3] run b: eval loss 4.1")
    assert "[2/3] run b" in capsys.readouterr().err


def test_training_reports_go_through_progress_line(clean_env, capsys):
    from types import SimpleNamespace

    from anatomy_kit.lm.pool import _report

    result = SimpleNamespace(final_eval_loss=4.2, tokens_per_s=1000.0, wall_s=1.5)
    jobs = [(None, SimpleNamespace(desc="uniform seed 0"), None)]
    _report(True, [result], 0, jobs, 1)
    assert capsys.readouterr() == ("", "")


def test_no_module_of_the_kit_prints_a_progress_line():
    """A ``print`` whose text starts ``[k/n]`` or mentions ``eval loss`` would land in a rendered page
    (the runner's own ``[chapter] done`` lines go to the terminal that runs it)."""
    found = []
    for path in (ROOT / "anatomy_kit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print" and node.args:
                text = ast.unparse(node.args[0])
                if "eval loss" in text or re.match(r"f?['\"]\[[^\]]*/", text):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    assert not found, "use anatomy_kit.progress.progress_line:\n" + "\n".join(found)
