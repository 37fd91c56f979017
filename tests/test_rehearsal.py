"""The rehearsal of a lent GPU machine (benchmarks/rehearse.py): its verdict rules by hand, then the whole
rehearsal at CI size (the two README commands in the machine's environment, under the device guard)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

#: The chapters CI's rehearsal runs (``make rehearse`` runs all): chapter 1 reads the corpus through token
#: blocks, chapter 3 through load_corpus, fits its BPE tokenizer on it and trains; both failed on a machine
#: without ``datasets`` (issue 35). Chapter 6 (load_corpus, Documents.select) ran past the 300 s limit on
#: two cores shared with other work, so CI leaves it to ``make rehearse``.
CI_CHAPTERS = ["ch01_ablation_map", "ch03_growth_training"]


@pytest.fixture(scope="module")
def rehearse():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import rehearse as module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


TRAINING = ("map", "train", "train_compiled", "resume", "card_heal", "ddp", "fsdp", "split_card")


def _doc(**checks) -> dict:
    return {"device_guard": True, "machine_requirements": {"needs": {}, "unmet": []}, "checks": checks}


def _chapters(**entries) -> dict:
    return {"ok": True, "chapters": entries}


def test_the_readme_block_is_the_install_the_export_and_two_timed_commands(rehearse):
    lines = rehearse.readme_commands()
    assert lines[0].startswith("python -m pip install --no-index --no-deps ") and " --target .device-site " in lines[0]
    assert lines[0].endswith("benchmarks/wheels/*.whl") and lines[1].startswith("export PYTHONPATH=$PWD/.device-site:")
    parts = [rehearse.timed_part(line) for line in lines[2:]]
    assert [(p, str(out)) for p, _, out in parts] == [("chapters", "benchmarks/results/gpu-chapters.json"),
                                                       ("training", "benchmarks/results/gpu-training.json")]
    assert all(0 < limit <= 600 for _, limit, _ in parts)          # within a lent machine's 10 minutes a command


def test_a_clean_run_has_no_cause(rehearse):
    ok = {"ok": True, "device_guard": True}
    doc = _doc(chapters=_chapters(ch01_ablation_map=ok, ch04_geometric_work={"ok": None, "skipped": "POT is not "
                                                                              "installed"}))
    assert rehearse.causes("chapters", 0, 480, doc, ["ch01_ablation_map", "ch04_geometric_work"], ("chapters",)) == []
    doc = _doc(**{name: {"ok": True} for name in TRAINING})
    assert rehearse.causes("training", 0, 480, doc, [], TRAINING) == []


@pytest.mark.parametrize("case, expect", [
    ("no json", "chapters: the command wrote no JSON (exit status 1): Traceback ... | ... No module named 'datasets'"),
    ("timeout", "chapters: the command ran past its `timeout 480` and was stopped"),
    ("no entry", "chapters: chapter ch06_width_growth wrote no entry"),
    ("chapter timed out", "chapters: chapter ch01_ablation_map ran past its time (300.0 s) and was stopped"),
    ("mix-up", "chapters: a device mix-up in chapter ch01_ablation_map: ChapterFailed: cell 12 raised DeviceMixError"),
    ("import", "chapters: a missing import in chapter ch01_ablation_map: ModuleNotFoundError: No module named 'x'"),
    ("never started", "chapters: chapter ch01_ablation_map never started: the budget was spent before it could start"),
    ("unguarded", "chapters: chapter ch01_ablation_map ran without the device guard in its kernel"),
    ("no guard flag", "chapters: the command ran without --device-guard"),
    ("unmet", "chapters: the carried wheels need of the machine's packages what they are not: numpy 1.26.4: pandas "
              "needs >=2.0.2"),
])
def test_each_way_a_lent_machine_would_fail_is_named(rehearse, case, expect):
    ok = {"ok": True, "device_guard": True}
    entries = {"ch01_ablation_map": ok, "ch06_width_growth": ok}
    doc, rc, tail = _doc(), 0, ""
    doc["checks"]["chapters"] = {"ok": True, "chapters": entries}
    if case == "no json":
        doc, rc, tail = None, 1, "Traceback ...\n\rtokenising:  40%|####  | 2/5 [00:01<00:02, 1.2it/s]\n... No module named 'datasets'\n"
    elif case == "timeout":
        rc = 124
    elif case == "no entry":
        del entries["ch06_width_growth"]
    elif case == "chapter timed out":
        entries["ch01_ablation_map"] = {"ok": False, "timed_out": True, "limit_s": 300.0, "error": "past its time"}
    elif case == "mix-up":
        entries["ch01_ablation_map"] = {"ok": False, "error": "ChapterFailed: cell 12 raised DeviceMixError"}
    elif case == "import":
        entries["ch01_ablation_map"] = {"ok": False, "error": "ModuleNotFoundError: No module named 'x'"}
    elif case == "never started":
        entries["ch01_ablation_map"] = {"ok": None, "skipped": "the budget was spent before it could start"}
    elif case == "unguarded":
        entries["ch01_ablation_map"] = {"ok": True, "device_guard": False}
    elif case == "no guard flag":
        doc["device_guard"] = False
    elif case == "unmet":
        doc["machine_requirements"]["unmet"] = ["numpy 1.26.4: pandas needs >=2.0.2"]
    got = rehearse.causes("chapters", rc, 480, doc, ["ch01_ablation_map", "ch06_width_growth"],
                          ("chapters",), tail)
    assert got == [expect]


def test_a_training_check_that_fails_or_is_missing_is_named(rehearse):
    doc = _doc(**{name: {"ok": True} for name in TRAINING})
    doc["checks"]["train"] = {"ok": False, "error": "DeviceMixError: linear: expected all tensors on one device"}
    del doc["checks"]["fsdp"]
    assert rehearse.causes("training", 1, 480, doc, [], TRAINING) == [
        "training: a device mix-up in check 'train': DeviceMixError: linear: expected all tensors on one device",
        "training: check 'fsdp' wrote no entry"]


def test_a_chapters_check_that_raised_before_any_chapter_is_named_with_the_chapters_it_left(rehearse):
    doc = _doc(chapters={"ok": False, "error": "ModuleNotFoundError: No module named 'datasets'"})
    assert rehearse.causes("chapters", 1, 480, doc, ["ch01_ablation_map"], ("chapters",)) == [
        "chapters: a missing import in check 'chapters': ModuleNotFoundError: No module named 'datasets'",
        "chapters: chapter ch01_ablation_map wrote no entry"]


def test_a_carried_tree_over_the_limit_is_named(rehearse):
    sizes = {"working_tree_mib": 4.0, "wheels_mib": 61.5, "carried_mib": 65.5}
    assert rehearse.size_causes(sizes, 64.0) == ["the carried tree is 65.5 MiB (working tree 4.0 + wheels 61.5), "
                                                 "over the 64 MiB a lent machine takes"]
    assert rehearse.size_causes({**sizes, "wheels_mib": 60.0, "carried_mib": 64.0}, 64.0) == []


@pytest.mark.whole_run
def test_the_rehearsal_passes(tmp_path):
    """The two README commands on the recreated machine (no datasets, no POT, no GGUF reader; the carried wheels
    installed with --no-index --target), under the device guard, each under its README timeout."""
    work = tmp_path / "rehearsal"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rehearse.py"), "--chapters",
                           ",".join(CI_CHAPTERS), "--work", str(work)], capture_output=True, text=True, env=env,
                          timeout=1500, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((work / "rehearsal.json").read_text())
    print(f"rehearsal: {summary['total_s']:.0f} s; carried {summary['sizes']['carried_mib']} MiB; "
          + ", ".join(f"{c.get('part', 'install')} {c.get('seconds', 0):.0f} s" for c in summary["commands"]))
    assert summary["ok"] and summary["causes"] == [] and summary["sizes"]["carried_mib"] <= 64
    readme, sizes = (ROOT / "README.md").read_text(), summary["sizes"]      # the README says what was measured
    wheels = re.search(r"\(([\d.]+) MiB in (\d+) wheels; POT is left out\)", readme)
    tree = re.search(r"carried +working tree ([\d.]+) MiB", readme)
    total = re.search(r"carried +working tree .* = ([\d.]+) MiB \(limit 64 MiB\)", readme)
    assert abs(float(wheels[1]) - sizes["wheels_mib"]) < 0.06 and int(wheels[2]) == sizes["wheels"]
    assert [x.split()[0] for x in sizes["left_out"]] == ["pot"]
    assert abs(float(tree[1]) - sizes["working_tree_mib"]) <= 0.5 and abs(float(total[1]) - sizes["carried_mib"]) <= 0.5
    machine = set(summary["machine_distributions"])
    assert {"torch", "transformers", "numpy", "pytest"} <= machine
    assert not {"datasets", "pot", "gguf", "pyarrow", "pandas", "papermill", "anatomy-kit", "tqdm"} & machine
    chapters = json.loads((work / "gpu-chapters.json").read_text())
    assert chapters["modules"]["datasets"] is False and chapters["modules"]["ot"] is False
    ran = chapters["checks"]["chapters"]
    assert ran["ran"] == CI_CHAPTERS and ran["corpora"] == "python-docs (datasets is not installed)"
    assert all(ran["chapters"][c]["device_guard"] is True for c in CI_CHAPTERS)
    doc = json.loads((work / "gpu-training.json").read_text())
    checks = doc["checks"]
    assert doc["device_guard"] is True and doc["device_guard_ops"] > 10_000 and doc["ok"] is True
    assert list(checks) == list(TRAINING) and checks["train_compiled"]["ok"] is None
    assert checks["split_card"]["skipped"].startswith("0 GPU")
    assert checks["map"]["layers"] == 4 and checks["map"]["tokens"] == 64 and checks["map"]["baseline_ppl"] > 1
    t = checks["train"]
    assert t["ok"] and t["completed"] and t["steps_done"] == 8 and t["untimed_steps"] == 2
    assert t["tokens_per_s"] > 0 and t["flops_per_s"] > 0 and t["mfu"] is None             # a CPU has no peak
    assert t["estimated_memory_gib"] > 0 and "peak_memory_gib" not in t                    # measured on CUDA only
    assert checks["resume"]["ok"] and checks["resume"]["resumed_on"] == "cpu"
    assert checks["card_heal"]["ok"] and checks["card_heal"]["layers"] == 4 and set(checks["card_heal"]["healed"])
    for name in ("ddp", "fsdp"):                       # WORLD_SIZE = 2: a process group, really distributed
        assert checks[name]["ok"] and checks[name]["world_size"] == 2 and checks[name]["backend"] == "gloo"
        assert checks[name]["checkpoint"] is True
