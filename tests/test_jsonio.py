"""The one JSON writer and reader, and the named errors that bad files give everywhere they are read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from anatomy_kit.anatomy.importance import load_profile
from anatomy_kit.book.report import build_report
from anatomy_kit.store import Store
from anatomy_kit.geometry.profiles import load_profiles
from anatomy_kit.jsonio import read_json, to_jsonable, write_json
from anatomy_kit.lm.checkpoint import load_checkpoint
from anatomy_kit.validate import AnatomyKitError


def test_write_is_atomic_and_converts_numpy(tmp_path):
    path = write_json(tmp_path / "a" / "x.json", {"a": np.float32(1.5), "b": np.arange(3), "c": tmp_path})
    assert json.loads(path.read_text()) == {"a": 1.5, "b": [0, 1, 2], "c": str(tmp_path)}
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]
    with pytest.raises(TypeError, match="cannot store object"):
        to_jsonable(object())
    with pytest.raises(TypeError):                         # a failed write leaves the old file intact
        write_json(path, {"bad": object()})
    assert json.loads(path.read_text())["a"] == 1.5 and [p.name for p in path.parent.iterdir()] == ["x.json"]


@pytest.mark.parametrize("reader, what", [
    (read_json, "JSON file"), (Store, "resumable store"), (load_profiles, "work-profiles file"),
    (load_profile, "importance profile")])
def test_bad_files_give_named_errors(tmp_path, reader, what):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(AnatomyKitError, match=f"is not a valid {what}"):
        reader(bad)
    if reader is not Store:            # a store that does not exist yet is simply empty
        with pytest.raises(AnatomyKitError, match="no "):
            reader(tmp_path / "missing.json")


def test_files_with_missing_fields_name_them(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"schema": "anatomy_kit/work-profiles/1", "model": "m"}))
    with pytest.raises(AnatomyKitError, match=r"lacks field\(s\) \['geometries'"):
        load_profiles(tmp_path / "p.json")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "chX.json").write_text(json.dumps({"chapter": "chX"}))
    with pytest.raises(AnatomyKitError, match=r"chX.json lacks field\(s\) \['claims', 'run'\]"):
        build_report(tmp_path)
    (tmp_path / "metrics" / "chX.json").write_text(json.dumps({"chapter": "chX", "run": {}, "claims": [{"id": "p9.x"}]}))
    with pytest.raises(AnatomyKitError, match="claim 'p9.x' has no entry in data_manifest/references.yaml"):
        build_report(tmp_path)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "checkpoint.json").write_text(json.dumps({"step": 3}))
    with pytest.raises(AnatomyKitError, match="lacks field"):
        load_checkpoint(tmp_path / "ckpt")
    (tmp_path / "s.json").write_text("[1, 2]")
    with pytest.raises(AnatomyKitError, match="is not a resumable store"):
        Store(tmp_path / "s.json")
