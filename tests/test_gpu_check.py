"""benchmarks/gpu_check.py's parts, on a CPU without chapters (the whole commands run in tests/test_rehearsal.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT

CHECKS = {"chapters", "map", "train", "train_compiled", "resume", "card_heal", "ddp", "fsdp", "split_card"}


@pytest.fixture(scope="module")
def gpu_check():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_check as module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_a_failing_check_is_recorded_and_the_others_still_run(gpu_check):
    failed = gpu_check.check("broken", lambda: 1 / 0)
    assert failed["ok"] is False and failed["error"].startswith("ZeroDivisionError") and "traceback" in failed
    assert gpu_check.check("nothing", gpu_check.chapter_paths, None, [], 1, None)["ok"] is None
    assert gpu_check.check_split_card(None, None, 1)["skipped"].startswith("1 GPU")


class SlowClock:
    """``gpu_check``'s clock where every reading of ``perf_counter`` is one second after the last (everything else
    is the ``time`` module's): a budget under a second is spent before the first check, whatever the machine's
    speed or what earlier tests have cached."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1.0
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


def test_the_json_is_written_check_by_check_and_a_spent_budget_skips_the_rest(gpu_check, tmp_path, capsys,
                                                                             monkeypatch):
    out = tmp_path / "check.json"
    monkeypatch.setattr(gpu_check, "time", SlowClock())
    assert gpu_check.main(["--toy", "--part", "training", "--budget-s", "0.5", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["checks"]) == list(gpu_check.PARTS["training"]) and doc["part"] == "training"
    assert all("budget was spent" in c["skipped"] for c in doc["checks"].values())
    printed = capsys.readouterr()
    assert json.loads(printed.out) == doc                                # stdout is ONE JSON, nothing else
    for name in gpu_check.PARTS["training"]:                             # one line per check on stderr
        assert sum(line.startswith(f"{name}: ") for line in printed.err.splitlines()) == 1, name
    for key in ("date", "device", "torch", "cuda", "python", "gpus", "native_bf16", "toy", "checks", "ok", "total_s",
                "planned_compute_s", "modules", "machine_requirements", "device_guard", "chapter_timeout_s"):
        assert key in doc, key


def test_the_report_is_the_one_place_that_assembles_the_json(gpu_check, monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_check, "report", lambda doc: {**doc, "added": 1})
    out = tmp_path / "check.json"
    gpu_check.main(["--toy", "--part", "chapters", "--out", str(out)])
    assert json.loads(out.read_text())["added"] == 1


def test_the_chapter_check_runs_each_named_chapter_in_its_own_process_on_the_device(gpu_check, monkeypatch,
                                                                                    tmp_path):
    """The glue around the chapter processes (stand-ins, full-path sizes, device, guard, one entry per chapter as
    each ends, failures per chapter, POT and budget skips), without the chapters."""
    import torch

    import standins
    from test_full_path import FULL_PATH

    calls, entries = [], []

    def process(spec, folder, limit_s):
        calls.append((spec, folder, limit_s))
        if spec["chapter"] == "ch02_anatomy_weights":
            return {"ok": False, "error": "ChapterFailed: cell 7 raised RuntimeError: expected all tensors on one device"}
        return {"ok": True, "seconds": 1.0}

    monkeypatch.setattr(standins, "build", lambda root, corpora: {"HF_HUB_OFFLINE": "1", "corpora": str(corpora)})
    monkeypatch.setattr(gpu_check, "run_chapter_process", process)
    monkeypatch.setattr(gpu_check, "has_module", lambda name: name == "datasets")        # no POT
    names = ["ch01_ablation_map", "ch02_anatomy_weights", "ch04_geometric_work"]
    got = gpu_check.chapter_paths(torch.device("cuda"), names, 2, tmp_path, timeout_s=77.0, guard=True,
                                  on_entry=lambda c, e: entries.append((c, e["ok"])))
    assert sorted(c[0]["chapter"] for c in calls) == names[:2]                           # chapter 4 needs POT
    for spec, folder, limit in calls:
        assert spec["device"] == "cuda" and spec["params"] == FULL_PATH[spec["chapter"]] and spec["guard"] is True
        assert spec["environ"] == {"HF_HUB_OFFLINE": "1", "corpora": "True"} and limit == 77.0
        assert folder == tmp_path / f"chapter-{spec['chapter']}"
    assert sorted(entries) == [("ch01_ablation_map", True), ("ch02_anatomy_weights", False),
                               ("ch04_geometric_work", None)]
    assert got["ok"] is False and list(got["chapters"]) == names and got["chapter_timeout_s"] == 77.0
    assert "expected all tensors on one device" in got["chapters"]["ch02_anatomy_weights"]["error"]
    assert "POT is not installed" in got["chapters"]["ch04_geometric_work"]["skipped"]
    # without datasets the chapters read the Python docs; past the deadline a chapter is not started
    monkeypatch.setattr(gpu_check, "has_module", lambda name: False)
    calls.clear()
    got = gpu_check.chapter_paths(torch.device("cuda"), ["ch01_ablation_map"], 1, tmp_path, timeout_s=77.0)
    assert calls[0][0]["params"] == {**FULL_PATH["ch01_ablation_map"], "corpus": "python-docs"}
    assert got["corpora"] == "python-docs (datasets is not installed)"
    got = gpu_check.chapter_paths(torch.device("cuda"), ["ch01_ablation_map"], 1, tmp_path, timeout_s=77.0,
                                  deadline=time.monotonic() + gpu_check.MIN_CHAPTER_S - 1)
    assert len(calls) == 1 and "budget was spent" in got["chapters"]["ch01_ablation_map"]["skipped"]
    assert gpu_check.chapter_list("all", "") == sorted(FULL_PATH)


@pytest.mark.parametrize("child, expect", [
    ("import time; time.sleep(60)", "past its time: the chapter was still running after 2 s"),
    ("import sys; print('boom', file=sys.stderr); sys.exit(3)", "exited with status 3 and wrote no result"),
])
def test_a_chapter_process_that_overruns_or_writes_nothing_gets_an_entry_that_says_so(gpu_check, monkeypatch,
                                                                                      tmp_path, child, expect):
    monkeypatch.setattr(gpu_check, "chapter_command", lambda spec_path: [sys.executable, "-c", child])
    start = time.monotonic()
    got = gpu_check.run_chapter_process({"chapter": "ch01_ablation_map"}, tmp_path / "one", 2.0)
    assert got["ok"] is False and expect in got["error"] and time.monotonic() - start < 30
    assert got.get("timed_out", False) is ("past its time" in expect)
    assert ("boom" in got["log_tail"]) is ("status 3" in expect)


def test_a_chapter_process_writes_its_result(gpu_check, monkeypatch, tmp_path):
    writes = ("import json, sys; spec = json.load(open(sys.argv[-1])); "
              "json.dump({'ok': True, 'seconds': 0.5, 'chapter': spec['chapter']}, open(spec['result'], 'w'))")
    monkeypatch.setattr(gpu_check, "chapter_command", lambda spec_path: [sys.executable, "-c", writes, str(spec_path)])
    got = gpu_check.run_chapter_process({"chapter": "ch06_width_growth"}, tmp_path / "one", 30.0)
    assert got["ok"] is True and got["chapter"] == "ch06_width_growth" and got["process_seconds"] > 0


def test_the_json_is_rewritten_as_each_chapter_ends_at_the_path_given_whatever_the_working_directory(
        gpu_check, monkeypatch, tmp_path):
    """A relative --out is resolved once, at the start: a chapter that changes the working directory (papermill
    does) cannot move the JSON; each chapter's entry is in the JSON as soon as that chapter ends."""
    seen = []
    out = tmp_path / "results" / "chapters.json"

    def process(spec, folder, limit_s):
        seen.append(json.loads(out.read_text())["checks"].get("chapters", {}).get("chapters", {}).copy())
        os.chdir(tmp_path / "elsewhere")
        return {"ok": True, "seconds": 0.1, "device_guard": True}

    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(gpu_check, "run_chapter_process", process)
    monkeypatch.setattr(gpu_check, "has_module", lambda name: False)
    import standins

    monkeypatch.setattr(standins, "build", lambda root, corpora: {})
    # one chapter at a time, so the second starts after the first has ended (two at a time race)
    monkeypatch.setitem(gpu_check.SIZES["toy"], "chapter_jobs", 1)
    rc = gpu_check.main(["--toy", "--part", "chapters", "--chapters", "ch01_ablation_map,ch02_anatomy_weights",
                         "--out", "results/chapters.json"])
    assert rc == 0 and not (tmp_path / "elsewhere" / "results").exists()
    assert seen == [{}, {"ch01_ablation_map": {"ok": True, "seconds": 0.1, "device_guard": True}}]
    doc = json.loads(out.read_text())
    assert list(doc["checks"]["chapters"]["chapters"]) == ["ch01_ablation_map", "ch02_anatomy_weights"]


def test_a_token_file_that_cannot_be_built_fails_its_checks_not_the_command(gpu_check, monkeypatch, tmp_path):
    """Item 1 of issue 35: the token file was built outside any check, so its ImportError left no JSON."""
    def no_datasets(folder, tokenizer_folder):
        raise ModuleNotFoundError("No module named 'datasets'")

    monkeypatch.setattr(gpu_check, "token_file", no_datasets)
    monkeypatch.setattr(gpu_check, "check_map", lambda device, size, folder: {"ok": True})
    monkeypatch.setattr(gpu_check, "check_card_heal", lambda device, size, folder, scratch: {"ok": True})
    out = tmp_path / "training.json"
    assert gpu_check.main(["--toy", "--part", "training", "--out", str(out)]) == 1
    checks = json.loads(out.read_text())["checks"]
    assert checks["map"]["ok"] is True and list(checks) == list(gpu_check.PARTS["training"])
    assert "No module named 'datasets'" in checks["train"]["error"]
    for name in ("resume", "ddp", "fsdp"):
        assert checks[name]["ok"] is False and "No module named 'datasets'" in checks[name]["error"], name


def test_what_the_carried_wheels_need_of_the_machine_is_checked_against_it(gpu_check, tmp_path):
    import numpy

    manifest = tmp_path / "manifest.json"
    assert gpu_check.machine_requirements(manifest) is None                              # no wheels carried
    manifest.write_text(json.dumps({"machine_requirements": {
        "numpy": [f"=={numpy.__version__} (pandas)", ">=999 (future)"], "no-such-dist": [">=1 (x)"]}}))
    got = gpu_check.machine_requirements(manifest)
    assert got["unmet"] == [f"numpy {numpy.__version__}: future needs >=999",
                            "no-such-dist is not installed: >=1 (x) need it"]


def test_timeouts_signal_stops_the_chapter_processes_and_leaves_the_json(tmp_path):
    """``timeout 480`` sends SIGTERM to the command's process group, which the chapter processes (each in a
    session of its own) are not in: the command passes it on, records what finished and says it was stopped."""
    import signal

    out, pids = tmp_path / "chapters.json", tmp_path / "pids"
    pids.mkdir()
    script = f"""
import sys
sys.path.insert(0, {str(ROOT / 'benchmarks')!r})
import gpu_check, standins
child = "import os, pathlib, time; pathlib.Path({str(pids)!r}, str(os.getpid())).touch(); time.sleep(300)"
gpu_check.chapter_command = lambda spec: [sys.executable, "-c", child]
standins.build = lambda root, corpora: {{}}
sys.exit(gpu_check.main(["--toy", "--part", "chapters", "--chapters", "ch01_ablation_map,ch02_anatomy_weights",
                         "--out", {str(out)!r}]))
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:   # both chapters (2 jobs) running
            time.sleep(0.2)
        assert len(list(pids.iterdir())) == 2, proc.stderr.read() if proc.poll() is not None else "none started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        outlived = [pid.name for pid in pids.iterdir() if not proc_gone(int(pid.name))]
    finally:                                                                    # a failure leaves nothing running
        proc.kill()
        for pid in pids.iterdir():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.name), signal.SIGKILL)
    doc = json.loads(out.read_text())
    assert proc.returncode == 1 and doc["stopped"].startswith("SIGTERM after") and doc["ok"] is False, err[-2000:]
    entries = doc["checks"]["chapters"]["chapters"]
    assert sorted(entries) == ["ch01_ablation_map", "ch02_anatomy_weights"]
    assert all("exited with status -15" in e["error"] for e in entries.values())
    assert outlived == []                                                       # no chapter process outlives it


def proc_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
