"""Healing against its control: the same training for both, LoRA that stays LoRA, the numbers read by hand,
the schedule, the memory-based choice, and a model split over two accelerators under the device guard."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats as sps

from anatomy_kit.card import heal
from anatomy_kit.card.heal import HealRecipe, HealRun, compare_runs, fine_tune, heal_with_control
from anatomy_kit.hf.evaluation import make_batches
from anatomy_kit.validate import AnatomyKitError
from conftest import tiny_llama

DROP = [1, 3]


def _data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    train = torch.randint(3, 500, (10, 16), generator=g)
    evals = make_batches(torch.randint(3, 500, (6, 16), generator=g), 3)
    return train, evals


class _Spy:
    """What each fine-tune actually trained on: token ids per step, optimizer steps and lr, LoRA's first A."""

    def __init__(self, monkeypatch, model):
        self.runs = []
        real_fine_tune, real_adamw, spy = heal.fine_tune, torch.optim.AdamW, self

        def fine_tune_spy(model, drop, *args, **kwargs):
            spy.runs.append({"drop": sorted(drop), "ids": [], "steps": 0, "lr": None, "lora_a": None})
            return real_fine_tune(model, drop, *args, **kwargs)

        class AdamW(real_adamw):
            def __init__(self, params, lr, **kwargs):
                params = list(params)
                super().__init__(params, lr=lr, **kwargs)
                spy.runs[-1].update(lr=lr, n_params=sum(p.numel() for p in params))

            def step(self, *a, **k):
                spy.runs[-1]["steps"] += 1
                return super().step(*a, **k)

        def record(module, args, kwargs):
            if torch.is_grad_enabled():                  # training forwards only (evaluation runs without grad)
                run = spy.runs[-1]
                run["ids"].append(kwargs["input_ids"].detach().clone() if "input_ids" in kwargs else args[0].clone())
                if run["lora_a"] is None:
                    run["lora_a"] = {n: m.lora_A["default"].weight.detach().clone()
                                     for n, m in model.named_modules() if hasattr(m, "lora_A")}

        monkeypatch.setattr(heal, "fine_tune", fine_tune_spy)
        monkeypatch.setattr(torch.optim, "AdamW", AdamW)
        model.model.register_forward_pre_hook(record, with_kwargs=True)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_the_control_trains_on_the_same_blocks_steps_lr_and_seed_as_the_healed_model(method, monkeypatch,
                                                                                     one_torch_thread):
    """The token ids of every training step, the optimizer steps, the learning rate and (LoRA) the first
    adapters of every layer both models have are read where they are used: identical for the control."""
    model = tiny_llama(n_layers=5)
    spy = _Spy(monkeypatch, model)
    train, evals = _data()
    recipe = HealRecipe(method=method, steps=4, batch_size=3, lr=3e-3, seed=5, evals=2, lora_rank=2)
    out = heal_with_control(model, {"2": DROP}, train, evals, recipe)
    control, healed = spy.runs
    assert control["drop"] == [] and healed["drop"] == DROP
    assert control["steps"] == healed["steps"] == 4 and control["lr"] == healed["lr"] == 3e-3
    assert len(control["ids"]) == len(healed["ids"]) == 4
    for a, b in zip(control["ids"], healed["ids"]):
        assert torch.equal(a, b)
    # the seed decides the order: the blocks of step 1 are those of the seeded permutation
    first = torch.randperm(10, generator=torch.Generator().manual_seed(5))[:3]
    assert torch.equal(control["ids"][0], train[first])
    if method == "lora":
        shared = set(healed["lora_a"]) & set(control["lora_a"])
        assert shared == set(healed["lora_a"]) and len(shared) == 7 * 3      # 3 kept layers, 7 maps each
        assert all(torch.equal(healed["lora_a"][n], control["lora_a"][n]) for n in shared)
    assert out["by_k"]["2"]["run"]["data_sha256"] == out["control"]["data_sha256"]


def test_lora_healing_trains_adapters_only_and_never_becomes_a_full_fine_tune(monkeypatch, one_torch_thread):
    """The optimizer holds exactly r·(in + out) parameters per linear map of the kept layers (counted here
    from the modules' shapes); the healed (merged) weights differ from the model's by a rank ≤ r matrix in
    those maps only; norms, embeddings and the dropped layers are untouched."""
    model = tiny_llama(n_layers=5)
    spy = _Spy(monkeypatch, model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train, evals = _data()
    r = 2
    healed = {}
    run = heal.fine_tune(model, DROP, train, evals, HealRecipe(method="lora", steps=3, batch_size=2, lr=1e-2, evals=1,
                                                               lora_rank=r),
                         on_healed=lambda m: healed.update({k: v.clone() for k, v in m.state_dict().items()}))
    kept = [i for i in range(5) if i not in DROP]
    maps = {f"model.layers.{i}.{n}": m for i in kept for n, m in model.model.layers[i].named_modules()
            if isinstance(m, torch.nn.Linear)}
    expected = sum(r * (m.in_features + m.out_features) for m in maps.values())
    assert spy.runs[0]["n_params"] == expected == run.trainable_parameters and run.adapted_modules == len(maps) == 21
    assert set(healed) == set(before)
    changed = 0
    for name, value in healed.items():
        module = name.rsplit(".", 1)[0]
        if module in maps and name.endswith(".weight"):
            delta = (value - before[name]).double()
            assert torch.linalg.matrix_rank(delta, rtol=1e-6) <= r, name
            changed += bool(delta.abs().max() > 0)
        else:
            assert torch.equal(value, before[name]), name    # a full fine-tune would move norms and embeddings
    assert changed == len(maps)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())   # and the model is restored


def test_full_healing_is_the_hand_loop_and_restores_the_model(one_torch_thread):
    """AdamW (β 0.9/0.999, no decay, clip 1) on the seeded blocks, repeated by hand on a copy without the layers."""
    import copy

    from torch import nn

    model = tiny_llama(n_layers=5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train, evals = _data()
    recipe = HealRecipe(method="full", steps=3, batch_size=2, lr=1e-3, seed=2, evals=1)
    run = fine_tune(model, DROP, train, evals, recipe)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    hand = copy.deepcopy(model)
    hand.model.layers = nn.ModuleList([hand.model.layers[i] for i in range(5) if i not in DROP])
    hand.config.num_hidden_layers = 3
    opt = torch.optim.AdamW(hand.parameters(), lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0)
    order = torch.randperm(10, generator=torch.Generator().manual_seed(2))
    for k in range(3):
        ids = train[order[2 * k:2 * k + 2]]
        loss = hand(input_ids=ids, labels=ids, use_cache=False).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(hand.parameters()), 1.0)
        opt.step()
    with torch.no_grad():
        ids = torch.cat([b.input_ids for b in evals])
        want = math.exp(hand(input_ids=ids, labels=ids, use_cache=False).loss.item())
    assert run.curve[3] == pytest.approx(want, rel=1e-4)
    assert sorted(run.curve) == [0, 3]                   # evals=1: the start and the end only


@pytest.mark.parametrize("steps, evals, points", [(40, 4, [0, 10, 20, 30, 40]), (3, 4, [0, 1, 2, 3]),
                                                  (3, 3, [0, 1, 2, 3]), (3, 2, [0, 2, 3]), (7, 1, [0, 7])])
def test_the_schedule_evaluates_a_few_points_and_always_the_last(steps, evals, points, monkeypatch, one_torch_thread):
    assert HealRecipe(steps=steps, evals=evals).eval_steps() == points
    if steps > 7:
        return
    calls = []
    real = heal.block_nll
    monkeypatch.setattr(heal, "block_nll", lambda m, b: calls.append(1) or real(m, b))
    train, evals_b = _data()
    run = fine_tune(tiny_llama(n_layers=3), [1], train, evals_b, HealRecipe(steps=steps, evals=evals, batch_size=2))
    assert sorted(run.curve) == points and len(calls) == len(points)


def test_step_rows_read_a_seeded_permutation_and_wrap_around():
    rows = heal.step_rows(5, 4, 2, seed=3)
    order = torch.randperm(5, generator=torch.Generator().manual_seed(3))
    assert rows.tolist() == [[order[0], order[1]], [order[2], order[3]], [order[4], order[0]], [order[1], order[2]]]
    assert not torch.equal(heal.step_rows(5, 4, 2, seed=4), rows)


def _run(before, after, drop, data="x", recipe=None):
    return HealRun(drop=drop, recipe=recipe or {"method": "full"}, curve={0: 1.0, 1: 1.0},
                   rows_before=np.asarray(before, float), rows_after=np.asarray(after, float), trainable_parameters=1,
                   adapted_modules=0, data_sha256=data, seconds=0.0, peak_memory_mb=None, memory_kind="")


def test_compare_runs_reads_the_healed_model_against_the_control_by_hand():
    n = np.array([10.0, 10.0, 10.0, 10.0])
    intact, pruned = np.array([20.0, 22, 19, 21]), np.array([26.0, 27, 23, 28])
    healed_intact, healed_pruned = np.array([15.0, 16, 14, 15]), np.array([17.0, 19, 15, 18])
    out = compare_runs(_run(intact, healed_intact, []), _run(pruned, healed_pruned, [2]), n)
    g, h = (pruned - intact) / n, (healed_pruned - healed_intact) / n
    assert out["gap_closed"]["share"] == pytest.approx(1 - h.mean() / g.mean(), rel=1e-12)
    assert out["vs_control"]["delta_pct"] == pytest.approx(100 * math.expm1(h.mean()), rel=1e-12)
    assert out["gap_before"]["delta_pct"] == pytest.approx(100 * math.expm1(g.mean()), rel=1e-12)
    low, high = out["gap_closed"]["low"], out["gap_closed"]["high"]
    t = sps.t.ppf(0.975, 3)
    for share in (low, high):                            # Fieller's ends: the paired t statistic is the quantile
        d = h - (1 - share) * g
        assert abs(d.mean()) / (d.std(ddof=1) / 2) == pytest.approx(t, rel=1e-9)
    secondary = out["untuned"]
    assert secondary["gap_closed"]["share"] == pytest.approx(1 - ((healed_pruned - intact) / n).mean() / g.mean())
    assert secondary["reading"] == heal.BEYOND_INTACT   # healed pruned wholly below the untuned intact model
    with pytest.raises(AnatomyKitError, match="not trained alike"):
        compare_runs(_run(intact, healed_intact, []), _run(pruned, healed_pruned, [2], data="y"), n)
    with pytest.raises(AnatomyKitError, match="not trained alike"):
        compare_runs(_run(intact, healed_intact, []), _run(pruned, healed_pruned, [2], recipe={"method": "lora"}), n)
    no_gap = compare_runs(_run(intact, healed_intact, []), _run(intact - 1, healed_pruned, [2]), n)
    assert no_gap["gap_closed"]["share"] is None and "no gap" in no_gap["gap_closed"]["why"]


def test_a_healed_model_better_than_the_untuned_intact_one_is_read_as_adaptation():
    assert heal.heal_reading(-15.05) == heal.BEYOND_INTACT
    assert heal.heal_reading(0.0) is None and heal.heal_reading(4.2) is None


def test_auto_heals_fully_where_it_fits_the_memory_model_and_with_lora_where_not():
    from anatomy_kit.lm.estimates import HUB_SHAPES, fine_tune_memory

    shape = HUB_SHAPES["meta-llama/Llama-3.1-8B"]
    need = fine_tune_memory(shape, 128, 4, method="full", weight_bytes=2)
    beyond = need - 2 * shape.params                     # the weights are loaded already
    fits = heal.choose_method("auto", shape, block_size=128, batch_size=4, weight_bytes=2,
                              free_bytes=beyond / 0.85, on_host=False)
    short = heal.choose_method("auto", shape, block_size=128, batch_size=4, weight_bytes=2,
                               free_bytes=beyond / 0.85 * 0.999, on_host=False)
    assert fits["method"] == "full" and short["method"] == "lora"
    # the card's default float32 on an 80 GB GPU: 32 GB of weights loaded; a full fine-tune needs 16 bytes a
    # parameter (about 128 GB), LoRA the weights and its adapters
    gpu80 = heal.choose_method("auto", shape, block_size=128, batch_size=4, weight_bytes=4, free_bytes=80e9 - 32e9,
                               on_host=False)
    assert gpu80["method"] == "lora" and gpu80["lora_gb"] < 48 and gpu80["full_gb"] > 128
    host = heal.choose_method("auto", shape, block_size=128, batch_size=4, weight_bytes=2,
                              free_bytes=beyond / 0.85, on_host=True)     # on the host the restoring copy counts
    assert host["method"] == "lora"
    assert heal.choose_method("full", shape, block_size=128, batch_size=4, weight_bytes=2, free_bytes=1.0,
                              on_host=False)["method"] == "full"          # asked for: kept
    with pytest.raises(AnatomyKitError, match="heal method='qlora'"):
        heal.choose_method("qlora", shape, block_size=128, batch_size=4, weight_bytes=2, free_bytes=1.0,
                           on_host=False)


@pytest.mark.parametrize("changes, words", [
    (dict(method="adapters"), "method='adapters'"), (dict(steps=0), "steps=0"), (dict(lr=0.0), "lr=0.0"),
    (dict(evals=0), "evals=0"), (dict(lora_rank=0), "lora_rank=0"), (dict(lora_targets=("a.b",)), "no dots"),
    (dict(lora_targets=()), "lora_targets=()"),
])
def test_a_bad_recipe_is_named(changes, words):
    with pytest.raises(AnatomyKitError, match=words.replace("(", r"\(").replace(")", r"\)")):
        HealRecipe(**changes).validate()


def test_lora_targets_that_name_no_linear_map_are_named():
    with pytest.raises(AnatomyKitError, match=r"lora_targets \['qq_proj'\] name no linear map"):
        heal.lora_target_names(tiny_llama(n_layers=2), [0], ["q_proj", "qq_proj"])
    names = heal.lora_target_names(tiny_llama(n_layers=3), [0, 2], ["q_proj", "down_proj"])
    assert names == ["model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj",
                     "model.layers.2.self_attn.q_proj", "model.layers.2.mlp.down_proj"]


@pytest.mark.parametrize("method", ["full", "lora"])
def test_healing_a_model_split_over_two_accelerators_matches_one_device(method, one_torch_thread):
    """Under the device guard (tests/device_guard.py), layers 0-2 on one stand-in accelerator and 3-5 on the
    other, with dropped layers on both sides: no tensor meets one from another device, none goes to NumPy
    from an accelerator, and the curves equal the model's on one device."""
    from device_guard import DeviceGuard, split_over_accelerators

    train, evals = _data()
    recipe = HealRecipe(method=method, steps=2, batch_size=2, lr=1e-3, evals=2, lora_rank=2)
    whole = heal_with_control(tiny_llama(n_layers=6), {"2": [2, 4]}, train, evals, recipe)
    with DeviceGuard() as guard:
        split = tiny_llama(n_layers=6)
        split_over_accelerators(split, boundary=3)
        acc = torch.device("cpu", 1)
        split_evals = make_batches(torch.cat([b.input_ids for b in evals]), 3, device=acc)
        before = {k: v.clone() for k, v in split.state_dict().items()}
        got = heal_with_control(split, {"2": [2, 4]}, train, split_evals, recipe)
        assert guard.label(split.model.layers[4].mlp.up_proj.weight) == 2      # still where it was
        assert all(torch.equal(v, before[k]) for k, v in split.state_dict().items())
    for a, b in ((whole["control"], got["control"]), (whole["by_k"]["2"]["run"], got["by_k"]["2"]["run"])):
        assert a["curve"] == pytest.approx(b["curve"], rel=1e-6)
    assert got["by_k"]["2"]["vs_control"]["delta_pct"] == pytest.approx(whole["by_k"]["2"]["vs_control"]["delta_pct"],
                                                                       rel=1e-5, abs=1e-6)
