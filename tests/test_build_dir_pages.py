"""The generated pages read the build folder the book command was given, not always build/ beside the book."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

from anatomy_kit.book import pages, runner


def test_build_book_names_its_build_folder_to_the_sphinx_extension(tmp_path, monkeypatch):
    seen = {}

    def fake_run(cmd, text, env):
        seen.update(cmd=cmd, env=env)
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.delenv(pages.BUILD_DIR_ENV, raising=False)
    runner.build_book(tmp_path / "book", tmp_path / "build-c")
    assert seen["env"][pages.BUILD_DIR_ENV] == str((tmp_path / "build-c").resolve())
    runner.build_book(tmp_path / "book")                          # no folder named: the extension's default
    assert pages.BUILD_DIR_ENV not in seen["env"]


def test_the_extension_reads_the_named_folder_else_build_beside_the_book(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(pages, "write_generated", lambda book, build: calls.append((Path(book), Path(build))))
    app = SimpleNamespace(srcdir=str(tmp_path / "book"))
    monkeypatch.setenv(pages.BUILD_DIR_ENV, str(tmp_path / "elsewhere"))
    pages._on_builder_inited(app)
    monkeypatch.delenv(pages.BUILD_DIR_ENV)
    pages._on_builder_inited(app)
    assert calls == [(tmp_path / "book", tmp_path / "elsewhere"), (tmp_path / "book", tmp_path / "build")]
