"""The `scale="full"` path on stand-ins: hub models by id and hub corpora by name, offline, and whole chapters.

:mod:`standins` writes a temporary Hugging Face cache holding tiny random models under the real hub
ids and the Python docs in each hub corpus's format; with ``HF_HUB_OFFLINE=1`` the kit loads them
through its normal code paths. The numbers mean nothing; what is tested is that every branch full
scale takes runs (hub loading by id, multi-model loops, corpus streaming, device selection).

Adding a chapter's full path is one entry in ``FULL_PATH``: its id and the size parameters that shrink
the run to about a minute on two CPU cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import device_guard
import standins
from conftest import ROOT

#: chapter id -> size parameters for a run of about a minute (everything else: the chapter's full defaults)
FULL_PATH = {
    "ch01_ablation_map": {"n_eval": 4, "block_size": 32, "batch_size": 2},
    "ch02_anatomy_weights": {                  # full: whole-model recovery, three learning rates
        "n_eval": 4, "block_size": 32, "batch_size": 2, "n_shuffles": 50, "substitution_counts": [1, 3],
        "n_random_orders": 2, "n_manipulated": 2, "alphas": [0.9, 1.1], "recovery_layers": [8, 15, 22],
        "recovery_steps": 2, "recovery_lrs": [1e-4, 3e-5], "n_noise_draws": 2, "n_trained_draws": 2,
        "n_train": 4, "train_batch": 2, "recovery_eval": 2},
    "ch03_growth_training": {                  # full: 12 layers, fineweb-edu, SmolLM2's profile as source (b)
        "d_model": 32, "ffn_width": 64, "vocab_size": 512, "block_size": 32, "batch_size": 4, "steps": 12,
        "n_seeds": 3, "n_secondary_seeds": 2, "reference_steps": 6, "eval_every": 6, "n_eval": 4,
        "ablation_blocks": 2, "n_documents": 100, "timing_repeats": 1},
    "ch04_geometric_work": {                   # full: the seven models of paper 2, worker processes
        "n_tokens": 64, "n_blocks": 2, "block_size": 32, "batch_size": 2, "sensitivity_blocks": 1,
        "n_draws": 1, "n_jobs": 2},
    "ch05_width_solver": {                     # "debug": the full presets' recipe (GPT-2 tokenizer, bf16)
        "preset": "debug", "n_seeds": 2, "n_key_seeds": 2, "steps": 6, "n_documents": 100,
        "profile_tokens": 64},
    "ch06_width_growth": {                     # full: GPT-2 tokenizer, openwebtext, every arm, SmolLM2 sweep
        "n_layers": 2, "d_small": 32, "d_large": 48, "head_dim": 16, "block_size": 32, "batch_size": 2,
        "grad_accum": 2, "steps_small": 6, "steps_grown": 4, "gate_tokens": 256, "warmup_steps": 1,
        "learn_steps": 2, "eval_every": 2, "eval_batches": 1, "n_seeds": 2, "n_key_seeds": 2,
        "ms_widths": [16, 32, 48],
        "ms_total_steps": 6, "n_train": 64, "n_eval": 8, "n_documents": 100, "llm_hidden": 96,
        "llm_blocks": 2, "llm_block_size": 32},
    "card_report": {                           # full: SmolLM2-135M base, fineweb-edu, 16,384 tokens, K = 7
        "tokens": 128, "block_size": 32, "batch_size": 2, "calibration_tokens": 64, "max_prune": 2,
        "n_random": 3, "geometry_tokens": 24},
    "ch07_synthesis": {                        # full: the base model's card, K = 7, 99 random sets per k
        "tokens": 128, "block_size": 32, "batch_size": 2, "calibration_tokens": 64, "max_prune": 2,
        "n_random": 3, "geometry_tokens": 24, "n_null": 3, "n_perm": 200},
}

ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "gemma2": "Gemma2ForCausalLM",
                 "gemma3": "Gemma3ForCausalLM", "gpt2": "GPT2LMHeadModel"}


@pytest.fixture(scope="session")
def standin_env(tmp_path_factory):
    root = Path(os.environ.get("ANATOMY_KIT_STANDINS") or tmp_path_factory.mktemp("standins"))
    return standins.build(root)


@pytest.fixture(scope="session")
def loaded(standin_env, tmp_path_factory):
    """Every stand-in loaded by hub id and every corpus by name, in a fresh process pointed at the cache."""
    env = {**os.environ, **standin_env, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    scratch = tmp_path_factory.mktemp("standin-check")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "standins.py"), str(scratch)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("repo", sorted(standins.MODELS))
def test_each_stand_in_loads_by_its_hub_id_and_runs(loaded, repo):
    arch, n_layers, _ = standins.MODELS[repo]
    got = loaded["models"][repo]
    assert got["class"] == ARCHITECTURES[arch] and got["n_layers"] == n_layers and got["source"] == "hub"
    assert got["logits"] == [1, got["n_ids"], got["vocab"]] and got["finite"]


def test_smollm2_has_its_real_tokenizer(loaded):
    assert loaded["models"]["HuggingFaceTB/SmolLM2-135M"]["vocab"] == 49152


@pytest.mark.parametrize("name", sorted(standins.CORPORA))
def test_each_hub_corpus_loads_by_name_and_streams_into_a_token_file(loaded, name):
    from anatomy_kit.data import python_docs_text

    got = loaded["corpora"][name]
    assert got["n_documents"] >= 30 and got["ids_unique"]
    texts = python_docs_text()[1]
    assert got["first_text"] in (texts[0][:80], f" = {python_docs_text()[0][0]} = ")   # real text, the docs
    assert 3000 <= got["token_file_train"] < 3000 + max(map(len, texts))


def test_the_manifest_and_the_stand_ins_name_the_same_hub_corpora():
    from anatomy_kit.manifest import corpus_entries

    hub = {k: (v["hub_id"], v.get("config")) for k, v in corpus_entries().items() if v["kind"] == "hub"}
    assert hub == standins.CORPORA


@pytest.fixture
def guarded(standin_env, tmp_path):
    """The stand-in environment plus the device guard in the kernel (``tests/device_guard.py``).

    The chapter runs with ``device="cpu"`` while the guard labels what a GPU run would hold on the
    accelerator and raises where CUDA would, naming the notebook cell's line.
    """
    return {**standin_env, **device_guard.kernel_startup(tmp_path / "ipython")}


@pytest.mark.whole_run
@pytest.mark.parametrize("chapter", sorted(FULL_PATH))
def test_chapter_runs_its_full_path_on_stand_ins(chapter, guarded, tmp_path):
    doc = _run_on_stand_ins(chapter, "full", guarded, tmp_path)
    assert doc["run"]["scale"] == "full"
    assert (tmp_path / "ipython" / device_guard.STAMP).exists(), "the device guard did not start in the kernel"


def _run_on_stand_ins(chapter: str, scale: str, environ: dict, build_dir: Path) -> dict:
    """Execute ``chapter`` at ``scale`` on the CPU with its size parameters of :data:`FULL_PATH` and the
    kernel variables ``environ``; return its metrics (and print how long it took)."""
    from anatomy_kit.book.chapters import chapter_manifest
    from anatomy_kit.book.runner import execute_chapter

    entry = next(c for c in chapter_manifest(ROOT) if c["id"] == chapter)
    start = time.time()
    execute_chapter(entry, scale=scale, device="cpu", build_dir=build_dir, book_dir=None, params=FULL_PATH[chapter],
                    root=ROOT, environ=environ)
    print(f"{chapter} {scale} path on stand-ins: {time.time() - start:.0f} s")
    return json.loads((build_dir / "metrics" / f"{chapter}.json").read_text())


#: The hour presets (:mod:`anatomy_kit.hour`) on the same stand-ins with the same shrinking parameters, for
#: the chapters whose hour run then differs from their full run: the card and chapter 7 on SmolLM2-1.7B
#: (chapter 7 also reads chapter 3's hour settings). Chapters 1-6's hour presets differ from full only in
#: sizes the shrinking parameters set (chapter 5: its preset, seeds and steps; chapter 6: seeds, steps,
#: widths of the chain), so their hour run on stand-ins would repeat their full run: running them twice
#: would add their stand-in time for nothing (the next test checks both lists).
HOUR_PATH = ["card_report", "ch07_synthesis"]


def test_the_other_chapters_hour_path_is_their_full_path_on_stand_ins():
    from anatomy_kit.hour import HOUR_PRESETS
    from chapter_defaults import full_defaults

    for chapter in sorted(set(FULL_PATH) - set(HOUR_PATH)):
        full, hour = full_defaults(chapter), HOUR_PRESETS[chapter]
        differ = {k for k in hour if hour[k] != full[k]}
        assert differ <= set(FULL_PATH[chapter]), f"{chapter}: hour differs in {differ - set(FULL_PATH[chapter])}"
    for chapter in HOUR_PATH:
        full, hour = full_defaults(chapter), HOUR_PRESETS[chapter]
        assert {k for k in hour if hour[k] != full.get(k)} - set(FULL_PATH[chapter]), chapter


@pytest.mark.whole_run
@pytest.mark.parametrize("chapter", HOUR_PATH)
def test_chapter_runs_its_hour_path_on_stand_ins(chapter, guarded, tmp_path):
    """Under the device guard, as the full path: the hour scale is meant for one GPU."""
    from anatomy_kit.hour import HOUR_PRESETS

    doc = _run_on_stand_ins(chapter, "hour", guarded, tmp_path)
    assert doc["run"]["scale"] == "hour" and doc["run"]["model"] == HOUR_PRESETS[chapter]["model"]
    assert (tmp_path / "ipython" / device_guard.STAMP).exists(), "the device guard did not start in the kernel"
