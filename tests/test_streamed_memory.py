"""Greedy removal (the card) and chapter 7's pruning test hold one batch at a time (issue 30, item 5).

Peak memory of the tensors created during the run (:mod:`memory_meter`) must not grow when the
token budget doubles: before streaming, every batch's prefix cache (L layer inputs of B × T × d
float32 each) was held at once, so doubling the batches from 2 to 4 added 2 caches.
"""

from __future__ import annotations

import numpy as np
import torch

from anatomy_kit.card.pruning import greedy_removal
from anatomy_kit.hf.evaluation import make_batches
from anatomy_kit.synthesis.pruning import decisive_test
from conftest import tiny_llama
from memory_meter import LiveTensorBytes

N_LAYERS, B, T, D = 4, 2, 32, 32          # tiny_llama's width is 32
ONE_CACHE = N_LAYERS * B * T * D * 4       # bytes of one batch's layer inputs (float32)


def _peak(run, n_batches: int) -> int:
    model = tiny_llama(n_layers=N_LAYERS)
    torch.manual_seed(3)
    batches = make_batches(torch.randint(3, 512, (n_batches * B, T)), B)
    with LiveTensorBytes() as meter:
        run(model, batches)
    return meter.peak


def _greedy(model, batches):
    greedy_removal(model, batches, max_k=1)


def _decisive(model, batches):
    signals = {"a": np.arange(N_LAYERS, dtype=float)}
    decisive_test(model, batches, signals, max_k=1, n_random=1)


def test_greedy_removal_peak_memory_is_flat_when_the_calibration_budget_doubles():
    small, large = _peak(_greedy, 2), _peak(_greedy, 4)
    assert small > ONE_CACHE                          # the meter sees at least one cache
    assert large - small < ONE_CACHE / 2, (small, large, ONE_CACHE)    # held at once: + 2 caches


def test_chapter_7_pruning_test_peak_memory_is_flat_when_the_evaluation_budget_doubles():
    small, large = _peak(_decisive, 2), _peak(_decisive, 4)
    assert small > ONE_CACHE
    assert large - small < ONE_CACHE / 2, (small, large, ONE_CACHE)
