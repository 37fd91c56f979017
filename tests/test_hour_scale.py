"""scale="hour": every chapter resolves its hour preset, declares the same sizes as at full scale, and
``reproduce --scale hour`` parses and dispatches every chapter."""

from __future__ import annotations

import pytest

from anatomy_kit.book import cli, runner
from anatomy_kit.book.chapters import chapter_manifest
from anatomy_kit.book.run import SCALES, resolve_run
from anatomy_kit.hour import HOUR_PRESETS, hour_preset
from anatomy_kit.validate import AnatomyKitError
from chapter_defaults import full_defaults, scale_defaults
from conftest import ROOT

CHAPTERS = [c["id"] for c in chapter_manifest(ROOT)]


def test_every_chapter_has_an_hour_preset_and_the_scale_is_accepted():
    assert SCALES == ("smoke", "hour", "full") and list(HOUR_PRESETS) == CHAPTERS


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_resolves_its_hour_preset_with_the_sizes_of_full_scale(chapter, tmp_path):
    hour = scale_defaults(chapter, "hour")
    assert set(hour) == set(full_defaults(chapter))            # every size the chapter reads, at every scale
    run = resolve_run(chapter, scale="hour", device="cpu", defaults={"hour": hour}, build_dir=tmp_path)
    assert run.scale == "hour" and run.model == HOUR_PRESETS[chapter]["model"]
    assert run.corpus == HOUR_PRESETS[chapter]["corpus"] in ("fineweb-edu", "openwebtext")


def test_hour_preset_is_a_copy_and_names_a_bad_chapter():
    p = hour_preset("ch02_anatomy_weights")
    p["recovery_layers"].append(99)
    assert 99 not in HOUR_PRESETS["ch02_anatomy_weights"]["recovery_layers"]
    with pytest.raises(AnatomyKitError, match="ch99"):
        hour_preset("ch99")


def test_reproduce_scale_hour_parses_and_dispatches_every_chapter(monkeypatch, tmp_path):
    seen = []

    def fake_execute(entry, *, scale, device, build_dir, book_dir, params, root):
        nb, _ = runner._prepared(entry, root, scale, device, build_dir, params, None)   # parameters accepted
        seen.append((entry["id"], scale, device))
        return 0.0

    monkeypatch.setattr(runner, "execute_chapter", fake_execute)
    monkeypatch.setattr(cli, "reproduce", lambda **kw: runner.reproduce(**kw, root=ROOT, book_dir=None))
    assert cli.main(["reproduce", "--scale", "hour", "--device", "cuda", "--build-dir", str(tmp_path)]) == 0
    assert seen == [(c, "hour", "cuda") for c in CHAPTERS]
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--scale", "day"])
