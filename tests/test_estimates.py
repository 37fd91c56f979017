"""Time and memory estimates of the chapters at full scale: counted FLOPs, and the running page's table is current."""

from __future__ import annotations

import pytest

from anatomy_kit.book import chapter_costs as C
from anatomy_kit.lm import estimates as E
from anatomy_kit.hour import HOUR_PRESETS
from anatomy_kit.lm import PRESETS
from anatomy_kit.validate import AnatomyKitError
from conftest import ROOT


def test_the_running_page_shows_the_current_table(tmp_path):
    """The page includes the table the book build computes from this module (anatomy_kit.book.pages)."""
    from anatomy_kit.book.pages import write_generated

    text = (ROOT / "book" / "running.md").read_text()
    start = text.index("\n", text.index("<!-- estimates-table:")) + 1
    shown = text[start:text.index("<!-- end estimates-table -->")].strip()
    assert shown == "```{include} _generated/estimates_table.md\n```"
    write_generated(tmp_path)
    assert (tmp_path / "_generated" / "estimates_table.md").read_text().strip() == C.markdown_table()


#: chapter 5's primary claims compare these arms (the key rule and the two tapers against uniform): they train on
#: n_key_seeds, the other two rules on n_seeds
KEY_ARMS = ["cosine", "geometric:topology/hyperbolic", "reverse-cosine", "uniform"]


def test_chapter_five_counts_every_run_of_the_preset():
    from chapter_defaults import full_defaults

    full = full_defaults("ch05_width_solver")
    assert C.FULL_SIZES["ch05_width_solver"] == {k: full[k] for k in ("preset", "n_seeds", "n_key_seeds")}
    assert C.ch05_key_arms("full") == C.ch05_key_arms("smoke") == C.ch05_key_arms("hour") == KEY_ARMS
    est = {e.chapter: e for e in C.chapter_estimates()}["ch05_width_solver"]
    P = PRESETS["440M"]
    tokens = P["steps"] * P["batch_size"] * P["grad_accum"] * P["block_size"]
    n = E.preset_shape("440M").params
    rules = E.width_solver_rules()            # the paper's five rows and the reversed taper
    runs = 2 * full["n_seeds"] + 4 * full["n_key_seeds"]          # 2 × 6 + 4 × 10 = 52
    assert len(rules) == 6 and rules[0] == "uniform" and est.work.startswith(f"{runs} runs")
    per_run = est.flops / runs
    assert 6 * n * tokens < per_run < 1.3 * 6 * n * tokens     # 6·N·D plus attention
    assert est.kind == "train-bf16" and est.hours() == pytest.approx(est.flops / (0.4 * 989e12) / 3600)
    hour = {e.chapter: e for e in C.hour_estimates()}["ch05_width_solver"]
    H = HOUR_PRESETS["ch05_width_solver"]
    assert hour.work.startswith(f"{2 * H['n_seeds'] + 4 * max(H['n_seeds'], H['n_key_seeds'])} runs")


def test_measured_throughput_replaces_the_assumption_and_durations_read_well():
    e = C.chapter_estimates()[0]
    assert e.hours(2 * E.ASSUMED_FLOPS[e.kind]) == pytest.approx(e.hours() / 2)
    assert "measured" in C.markdown_table(1e14)
    assert E.duration(0.2) == "12 min" and E.duration(3.42) == "3.4 h" and E.duration(24 * 19.2) == "19 days"


def test_forward_flops_and_memory_formulas():
    m = E.ModelShape(1e8, 10, 512, 1000, 1536)
    assert E.forward_flops(m, 100, 64) == (2e8 + 4 * 10 * 64 * 512) * 100
    d, w, V, tokens = 512, 1536, 1000, 1024 * 8
    # per layer and token: fp32 residual in + normalised vector of two RMSNorms (2·8·d), matmul I/O in bf16:
    # norm outputs, q|k|v, rotated q and k, attention output (8·d) and SwiGLU's gate|up, SiLU, product (4·w)
    layer = 16 * d + 2 * (8 * d + 4 * w)
    assert E.activation_bytes(m, "bf16") == layer and E.activation_bytes(m, "fp32") == 16 * d + 4 * (8 * d + 4 * w)
    head = 8 * d + 2 * d + 12 * V                    # final norm, its bf16 output, cross-entropy's backward
    full = E.training_memory(m, 1024, 8)
    assert full == 18e8 + tokens * (10 * layer + head)                    # 16·N states + 2·N bf16 weight copies
    assert E.training_memory(m, 1024, 8, precision="fp32") == 16e8 + tokens * (
        10 * E.activation_bytes(m, "fp32") + 8 * d + 4 * d + 12 * V)
    ckpt = E.training_memory(m, 1024, 8, checkpointing=True)
    assert ckpt == 18e8 + tokens * (10 * 4 * d + layer + head)            # each layer keeps its input; one recomputes
    gelu = E.ModelShape(1e8, 10, 512, 1000, ffn="gelu", rope=False, norm="layer", norm_readers=(3, 1))
    assert E.activation_bytes(gelu, "bf16") == 2 * 4 * d + 2 * ((3 + 1) * d + 4 * d + 2 * 4 * d)   # q, k, v, fc1: 4 copies
    assert E.activation_bytes(gelu, "fp32") == 2 * 4 * d + 4 * (2 * d + 4 * d + 2 * 4 * d)          # one each in float32


def test_fine_tune_memory_of_every_parameter_and_of_lora_adapters_by_hand():
    m = E.ModelShape(1e8, 10, 512, 1000, 1536)
    d, w, r, tokens = 512, 1536, 8, 128 * 4
    # q, k, v, o: r(d + d) each; gate, up: r(d + w); down: r(w + d)
    per_layer = r * (4 * 2 * d + 3 * (d + w))
    assert E.lora_parameters(m, r) == 10 * per_layer
    assert E.lora_parameters(m, r, ("q", "v")) == 10 * r * 4 * d
    gelu = E.ModelShape(1e8, 10, 512, 1000, 1536, ffn="gelu")
    assert E.lora_parameters(gelu, r, ("gate", "up")) == 10 * r * (d + w)       # a GELU FFN has no gate
    fp32_act = tokens * (10 * E.activation_bytes(m, "fp32") + 8 * d + 4 * d + 12 * 1000)
    assert E.fine_tune_memory(m, 128, 4, method="full") == 16e8 + fp32_act          # 4 × 4 bytes a parameter
    assert E.fine_tune_memory(m, 128, 4, method="full") == E.training_memory(m, 128, 4, precision="fp32")
    bf16_act = tokens * (10 * E.activation_bytes(m, "bf16") + 8 * d + 2 * d + 12 * 1000)
    assert E.fine_tune_memory(m, 128, 4, method="full", weight_bytes=2) == 8e8 + bf16_act
    lora = E.fine_tune_memory(m, 128, 4, method="lora", weight_bytes=2, lora_rank=r)
    assert lora == 2e8 + 16 * 10 * per_layer + bf16_act + tokens * 10 * 7 * r * 2     # 7 adapters' r values
    assert lora < E.fine_tune_memory(m, 128, 4, method="full", weight_bytes=2)
    with pytest.raises(AnatomyKitError, match="method='adapters'"):
        E.fine_tune_memory(m, 128, 4, method="adapters")
    with pytest.raises(AnatomyKitError, match="LoRA target='wq'"):
        E.lora_parameters(m, r, ("wq",))


def test_lora_parameters_are_what_peft_adds_to_a_llama_model(one_torch_thread):
    """peft's LoRA on every linear map of a Llama whose k and v have the model's width (no grouped query)."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=4)
    model = get_peft_model(LlamaForCausalLM(cfg), LoraConfig(r=4, target_modules=[
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == E.lora_parameters(E.ModelShape(0, 3, 32, 64, 48), 4)


def test_the_440m_preset_needs_about_70_gb_at_its_micro_batch():
    """The issue's hand count: 65–75 GB (bf16 logits' float32 cross-entropy, float32 residual, SwiGLU), not 51."""
    P = PRESETS["440M"]
    gb = E.training_memory(E.preset_shape("440M"), P["block_size"], P["batch_size"]) / 1e9
    assert 65 < gb < 80
    est = {e.chapter: e for e in C.chapter_estimates()}["ch05_width_solver"]
    assert est.memory_gb == pytest.approx(gb)


def _saved_bytes_per_token(model, vocab: int, batch: int, T: int, bf16: bool) -> float:
    """Bytes of the distinct storages autograd saves for backward in one forward + cross-entropy, per token."""
    import torch

    saved = {}

    def pack(t):
        saved[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
        return t

    ids = torch.randint(0, vocab, (batch, T + 1), generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(ids[:, :-1])
        torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
    return sum(saved.values())


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("model", ["kit decoder", "chapter 6 GPT"])
def test_activation_bytes_are_what_autograd_saves(one_torch_thread, precision, model):
    """The per-token growth of the saved tensors between two batch sizes (weights and per-sequence
    buffers cancel) is the memory model's, plus the per-token statistics it leaves out: 4 bytes per
    RMSNorm (8 per LayerNorm: mean and 1/σ), attention's log-sum-exp (4·H per layer), the indices
    (the embedding's view of the (B, T+1) token blocks, and the targets). Exact: the same tensors are counted."""
    import torch

    from anatomy_kit.width_growth.gpt import GPT, GPTConfig
    from anatomy_kit.lm import LMConfig, build_lm

    L, d, H, w, V, T = 2, 32, 4, 40, 61, 16
    if model == "kit decoder":
        net = build_lm(LMConfig(vocab_size=V, n_layers=L, d_model=d, n_heads=H, ffn_widths=[w] * L, max_seq_len=T))
        shape, stats = E.ModelShape(0, L, d, V, w), 4
    else:
        torch.manual_seed(0)
        net = GPT(GPTConfig(vocab_size=V, n_layers=L, d_model=d, n_heads=H, d_ff=w, max_seq_len=T))
        shape, stats = E.ModelShape(0, L, d, V, w, ffn="gelu", rope=False, norm="layer"), 8   # q|k|v: one matmul
    bf16 = precision == "bf16"
    per_token = (_saved_bytes_per_token(net, V, 5, T, bf16) - _saved_bytes_per_token(net, V, 2, T, bf16)) / (3 * T)
    a = 2 if bf16 else 4
    model_bytes = L * E.activation_bytes(shape, precision) + shape.norm_bytes() + a * d + 4 * V  # forward-saved
    left_out = stats * (2 * L + 1) + 4 * H * L + 8 * (T + 1) / T + 8   # ids: a view of the (B, T+1) blocks; targets
    assert per_token == model_bytes + left_out


def test_the_micro_batch_is_chosen_from_the_free_memory():
    m, T, rows = E.preset_shape("440M"), 1024, 512
    cpu = E.choose_micro_batch(m, T, rows, None, default=32)
    assert (cpu.micro_batch, cpu.grad_accum, cpu.checkpointing) == (32, 16, False)      # CPU: the recipe's split
    need = {b: E.training_memory(m, T, b) for b in (1, 8, 16, 32, 64)}
    h200 = E.choose_micro_batch(m, T, rows, need[32] / 0.85 + 1)
    assert (h200.micro_batch, h200.grad_accum, h200.checkpointing) == (32, 16, False)
    smaller = E.choose_micro_batch(m, T, rows, need[16] / 0.85 + 1)
    assert (smaller.micro_batch, smaller.grad_accum) == (16, 32) and "micro-batch 16 × 32" in str(smaller)
    tight = E.choose_micro_batch(m, T, rows, (need[1] - 1) / 0.85)                     # one row does not fit:
    assert tight.checkpointing and tight.micro_batch * tight.grad_accum == rows          # recompute instead
    two = E.choose_micro_batch(m, T, rows, need[16] / 0.85 + 1, world_size=2)
    assert two.micro_batch * two.grad_accum * 2 == rows
    with pytest.raises(AnatomyKitError, match=r"one row of 1024 tokens needs about .* GB with activation checkpointing"):
        E.choose_micro_batch(m, T, rows, 1e9)
    with pytest.raises(AnatomyKitError, match="rows=6 per step do not divide over world_size=4"):
        E.choose_micro_batch(m, T, 6, None, world_size=4)


def test_the_width_solver_grid_fits_its_runs_to_the_device(monkeypatch):
    """allocation.RuleGrid.fit_memory: the preset's split on a CPU; on a GPU the plan goes into every TrainConfig."""
    from anatomy_kit.allocation.experiment import RuleGrid
    from anatomy_kit.lm import speed

    P = PRESETS["440M"]
    grid = RuleGrid(preset=P, seeds=[0], steps=10, vocab_size=P["vocab_size"])
    grid.widths["uniform"] = {"widths": [P["mean_width"]] * P["n_layers"]}
    plan = grid.fit_memory("cpu")
    c = grid.train_config("uniform", 0, "ckpt", "cpu")
    assert (c.batch_size, c.grad_accum, c.activation_checkpointing, c.precision) == (32, 16, False, "fp32")
    assert str(plan) == "micro-batch 32 × 16 accumulation steps, without activation checkpointing"
    monkeypatch.setattr(speed, "free_memory", lambda device: 40e9)                     # a 40 GB GPU
    monkeypatch.setattr(speed, "native_bf16", lambda device: True)
    plan = grid.fit_memory("cuda")
    c = grid.train_config("uniform", 0, "ckpt", "cuda")
    assert (c.batch_size, c.grad_accum, c.precision) == (plan.micro_batch, plan.grad_accum, "bf16")
    assert plan.micro_batch < 32 and plan.micro_batch * plan.grad_accum == 512 and plan.estimate_gb < 0.85 * 40


def test_chapter_six_counts_every_arm_and_seed_of_the_grid():
    from anatomy_kit.width_growth import recipe as R

    est = {e.chapter: e for e in C.chapter_estimates()}["ch06_width_growth"]
    r = R.paper_d256_d384()
    # chapter 6's full defaults: the 5 key arms on 8 seeds, the 6 other grown arms on 3
    runs = 5 * 8 + (len(R.CONDITIONS) - 1 - 5) * 3
    grown = runs * 6 * R.param_count(r.config(r.d_large)) * r.steps_grown * r.tokens_per_step
    assert grown < est.flops < 3 * grown       # the grown arms dominate; small runs, cold start, chain add the rest


# --- the hour scale ------------------------------------------------------------------------------

def test_every_chapters_hour_preset_fits_one_gpu_hour_and_80_gb():
    from anatomy_kit.hour import HOUR_MEMORY_GB, HOUR_MINUTES, HOUR_PRESETS

    est = {e.chapter: e for e in C.hour_estimates()}
    assert list(est) == list(HOUR_PRESETS)                   # every chapter, in book order
    for chapter, e in est.items():
        assert e.hours() * 60 <= HOUR_MINUTES, (chapter, e.hours() * 60)
        assert e.memory_gb < HOUR_MEMORY_GB, (chapter, e.memory_gb)


def test_hour_estimates_read_the_presets(monkeypatch):
    """Chapter 2's recovery FLOPs by hand; doubling its recovery layers doubles them."""
    from anatomy_kit import hour

    s = hour.HOUR_PRESETS["ch02_anatomy_weights"]
    m, T = E.HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"], s["block_size"]
    per_token = 2 * m.params + 4 * m.n_layers * T * m.d_model
    runs = len(s["recovery_layers"]) * len(s["recovery_lrs"]) * s["n_trained_draws"]
    by_hand = runs * s["recovery_steps"] * (3 * s["train_batch"] + s["recovery_eval"]) * T * per_token
    got = C.hour_estimate("ch02_anatomy_weights")
    assert got["flops"] == pytest.approx(by_hand, rel=1e-12)
    assert got["minutes"] == pytest.approx(by_hand / (0.5 * 67e12) / 60, rel=1e-12)
    monkeypatch.setitem(hour.HOUR_PRESETS, "ch02_anatomy_weights",
                        {**s, "recovery_layers": s["recovery_layers"] * 2})
    assert C.hour_estimate("ch02_anatomy_weights")["flops"] == pytest.approx(2 * by_hand, rel=1e-12)


def test_the_card_hour_estimate_counts_its_passes_at_17b():
    """The card's FLOPs: the card's own pass counts times lm.estimates.pass_flops, on SmolLM2-1.7B."""
    from anatomy_kit.card.cost import card_flops, planned_passes
    from anatomy_kit.card.settings import CardSettings
    from anatomy_kit.hour import HOUR_PRESETS

    s = HOUR_PRESETS["card_report"]
    m = E.HUB_SHAPES[s["model"]]
    settings = CardSettings(tokens=s["tokens"], block_size=s["block_size"], batch_size=s["batch_size"],
                            calibration_tokens=s["calibration_tokens"], max_prune=s["max_prune"],
                            n_random=s["n_random"], geometry_tokens=s["geometry_tokens"])
    total = sum(card_flops(planned_passes(m.n_layers, settings), m, s["block_size"]).values())
    assert C.hour_estimate("card_report")["flops"] == pytest.approx(total, rel=1e-12)
    assert 1e9 < m.params < 2e9 and "SmolLM2-1.7B" in s["model"]


def test_pass_flops_is_the_forward_count_split_per_layer_and_head():
    m = E.ModelShape(1e8, 10, 512, 1000, 1536)
    # every token through all layers and the head once = one forward pass
    assert E.pass_flops(m, 10 * 300, 300, 64) == pytest.approx(E.forward_flops(m, 300, 64), rel=1e-12)
    assert E.pass_flops(m, 0, 1, 64) == 2 * 1000 * 512


def test_hour_estimate_takes_a_measured_throughput_of_its_kind_and_names_bad_input():
    e = C.hour_estimate("ch01_ablation_map")                          # float32 evaluation
    assert e["minutes"] == e["minutes_assumed"] == pytest.approx(e["flops"] / (0.5 * 67e12) / 60)
    got = C.hour_estimate("ch01_ablation_map", {"eval-fp32": 1e13, "train-bf16": 1e15})
    assert got["minutes"] == pytest.approx(e["flops"] / 1e13 / 60) and got["minutes_assumed"] == e["minutes"]
    train_only = C.hour_estimate("ch01_ablation_map", {"train-bf16": 1e15})   # another kind: the assumption
    assert train_only["minutes"] == e["minutes"]
    with pytest.raises(AnatomyKitError, match="chapter"):
        C.hour_estimate("ch99")
    with pytest.raises(AnatomyKitError, match="train-bf16"):
        C.hour_estimate("ch01_ablation_map", {"train-bf16": -1.0})
    with pytest.raises(AnatomyKitError, match="measured kind"):
        C.hour_estimate("ch01_ablation_map", {"bf16": 1e15})


def test_the_running_page_includes_the_hour_scale_tables(tmp_path):
    from anatomy_kit.book.pages import write_generated

    text = (ROOT / "book" / "running.md").read_text()
    for name in ("scales_table", "hour_table", "power_tables"):
        assert f"```{{include}} _generated/{name}.md\n```" in text
    write_generated(tmp_path)
    assert (tmp_path / "_generated" / "hour_table.md").read_text().strip() == C.hour_markdown_table()


def test_chapter_six_hour_trains_the_key_arms_on_the_key_seeds(monkeypatch):
    """One more key seed adds the five key arms and one small model; one more seed, the other six arms and
    one cold start (counted with forward_flops on each width's shape)."""
    import dataclasses

    from anatomy_kit import hour
    from anatomy_kit.width_growth import recipe as R

    s = hour.HOUR_PRESETS["ch06_width_growth"]
    r = dataclasses.replace(R.paper_d256_d384(), **{k: s[k] for k in (
        "n_layers", "d_small", "d_large", "head_dim", "block_size", "vocab_size", "batch_size", "grad_accum",
        "steps_small", "steps_grown")})

    def train(d, steps):
        m = E.ModelShape(float(R.param_count(r.config(d))), r.n_layers, d, r.vocab_size, ffn="gelu", rope=False,
                         norm="layer")
        return 3 * E.forward_flops(m, steps * r.tokens_per_step, r.block_size)

    base = C.hour_estimate("ch06_width_growth")["flops"]
    monkeypatch.setitem(hour.HOUR_PRESETS, "ch06_width_growth", {**s, "n_key_seeds": s["n_key_seeds"] + 1})
    key = C.hour_estimate("ch06_width_growth")["flops"] - base
    assert key == pytest.approx(5 * train(r.d_large, r.steps_grown) + train(r.d_small, r.steps_small), rel=1e-9)
    monkeypatch.setitem(hour.HOUR_PRESETS, "ch06_width_growth", {**s, "n_seeds": s["n_seeds"] + 1})
    other = C.hour_estimate("ch06_width_growth")["flops"] - base
    assert other == pytest.approx(6 * train(r.d_large, r.steps_grown)
                                  + train(r.d_large, r.steps_small + r.steps_grown), rel=1e-9)
