"""A build's metrics record the registry it ran under, so a reader can check a build against the freeze commit
from the metrics alone (``sha256sum data_manifest/registry/freeze.yaml``)."""

import hashlib
import json
import shutil

import pytest

from anatomy_kit.book import resolve_run
from anatomy_kit.book.report import build_report, registry_line
from anatomy_kit.manifest import manifest_dir, registry_stamp
from conftest import ROOT

FREEZE = ROOT / "data_manifest" / "registry" / "freeze.yaml"


def _files_digest(folder):
    """The stamp's whole-registry digest, written out independently: name, NUL, bytes, NUL, in name order."""
    return hashlib.sha256(b"".join(p.name.encode() + b"\0" + p.read_bytes() + b"\0"
                                   for p in sorted(folder.glob("*.yaml")))).hexdigest()


def _copy_manifest(tmp_path, monkeypatch):
    copy = tmp_path / "manifest"
    shutil.copytree(manifest_dir(), copy)
    monkeypatch.setenv("ANATOMY_KIT_MANIFEST", str(copy))
    return copy


def test_the_metrics_carry_the_committed_freeze_files_sha256(tmp_path):
    run = resolve_run("chx", scale="smoke", device="cpu", build_dir=tmp_path,
                      defaults={"smoke": {"model": "embedded", "corpus": "python-docs", "n": 1}})
    stamp = json.loads(run.save_metrics({"x": 1.0}, []).read_text())["registry"]
    assert stamp["freeze_sha256"] == hashlib.sha256(FREEZE.read_bytes()).hexdigest()
    assert stamp["files_sha256"] == _files_digest(FREEZE.parent)
    assert stamp["frozen"] == "2026-12-05"


def test_editing_a_chapter_file_changes_the_whole_digest_only(tmp_path, monkeypatch):
    before = registry_stamp()
    copy = _copy_manifest(tmp_path, monkeypatch)
    chapter = copy / "registry" / "ch01_ablation_map.yaml"
    chapter.write_bytes(chapter.read_bytes() + b"\n")
    after = registry_stamp()
    assert after["files_sha256"] == _files_digest(copy / "registry") != before["files_sha256"]
    assert after["freeze_sha256"] == before["freeze_sha256"] and after["frozen"] == before["frozen"]


def test_editing_the_freeze_changes_both_digests_and_a_renamed_file_changes_the_whole_one(tmp_path, monkeypatch):
    before = registry_stamp()
    copy = _copy_manifest(tmp_path, monkeypatch)
    freeze = copy / "registry" / "freeze.yaml"
    freeze.write_text(freeze.read_text().replace("date: '2026-12-05'", "date: '2026-12-06'"))
    after = registry_stamp()
    assert after["frozen"] == "2026-12-06"
    assert after["freeze_sha256"] == hashlib.sha256(freeze.read_bytes()).hexdigest() != before["freeze_sha256"]
    assert after["files_sha256"] != before["files_sha256"]
    # same bytes under another name: the name is part of what is hashed
    freeze.write_bytes(FREEZE.read_bytes())
    (copy / "registry" / "ch07_synthesis.yaml").rename(copy / "registry" / "ch07_synthesis_b.yaml")
    moved = registry_stamp()
    assert moved["freeze_sha256"] == before["freeze_sha256"] and moved["files_sha256"] != before["files_sha256"]


def test_a_draft_registry_has_no_freeze(tmp_path, monkeypatch):
    copy = _copy_manifest(tmp_path, monkeypatch)
    (copy / "registry" / "freeze.yaml").unlink()
    stamp = registry_stamp()
    assert stamp["frozen"] is None and stamp["freeze_sha256"] is None
    assert stamp["files_sha256"] == _files_digest(copy / "registry")


@pytest.mark.parametrize("frozen", [None, {}])
def test_a_freeze_file_without_a_date_is_not_frozen(tmp_path, monkeypatch, frozen):
    copy = _copy_manifest(tmp_path, monkeypatch)
    freeze = copy / "registry" / "freeze.yaml"
    freeze.write_text(json.dumps({"frozen": frozen, "plan": {}}))
    stamp = registry_stamp()
    assert stamp["frozen"] is None and stamp["freeze_sha256"] == hashlib.sha256(freeze.read_bytes()).hexdigest()


def _doc(chapter, stamp):
    return {"chapter": chapter, **({"registry": stamp} if stamp is not None else {})}


FROZEN = {"frozen": "2026-12-05", "freeze_sha256": "ab" * 32, "files_sha256": "cd" * 32}


def test_the_report_line_names_the_one_registry_every_chapter_ran_under():
    line = registry_line([_doc("ch01", FROZEN), _doc("ch02", dict(FROZEN, files_sha256="ef" * 32))])
    assert line == f"Every chapter ran under the registry frozen on 2026-12-05, freeze.yaml sha256 {'ab' * 8}…."


def test_the_report_line_groups_chapters_that_ran_under_different_registries():
    other = dict(FROZEN, freeze_sha256="12" * 32)
    line = registry_line([_doc("ch01", FROZEN), _doc("ch02", other), _doc("ch03", FROZEN), _doc("ch04", None),
                          _doc("ch05", {"frozen": None, "freeze_sha256": None, "files_sha256": "00" * 32})])
    assert line == ("The chapters ran under different registries: "
                    f"ch01, ch03: the registry frozen on 2026-12-05, freeze.yaml sha256 {'ab' * 8}…; "
                    f"ch02: the registry frozen on 2026-12-05, freeze.yaml sha256 {'12' * 8}…; "
                    "ch04, ch05: no registry stamp recorded.")
    # the same freeze file under another date is another registry
    assert registry_line([_doc("a", FROZEN), _doc("b", dict(FROZEN, frozen="2026-12-06"))]).startswith(
        "The chapters ran under different registries")
    draft = {"frozen": None, "freeze_sha256": "ab" * 32}
    assert registry_line([_doc("a", draft)]) == \
        f"Every chapter ran under a draft registry (not frozen), freeze.yaml sha256 {'ab' * 8}…."


def test_a_built_report_says_the_registry_of_its_chapters(tmp_path):
    """End to end: two chapters' metrics written by save_metrics, the report built from them."""

    for chapter in ("cha", "chb"):
        run = resolve_run(chapter, scale="smoke", device="cpu", build_dir=tmp_path,
                          defaults={"smoke": {"model": "embedded", "corpus": "python-docs", "n": 1}})
        run.save_metrics({"x": 1.0}, [])
    sha = hashlib.sha256(FREEZE.read_bytes()).hexdigest()
    build_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert f"Every chapter ran under the registry frozen on 2026-12-05, freeze.yaml sha256 {sha[:16]}…." in md
