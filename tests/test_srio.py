"""Chapter 6 growth operators: the SRIO rotation, its LayerNorm/RMSNorm derivations, the gate,
the expansions and the learned operators, checked with max-abs errors on tiny models (batch ≥ 2)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from anatomy_kit.width_growth import expansion as ex
from anatomy_kit.width_growth import lrio, srio
from anatomy_kit.width_growth.gpt import GPT, GPTConfig, finish_warmup, gate_schedule, gated_layer_norm, set_gate
from anatomy_kit.validate import AnatomyKitError

D_OLD, D_NEW = 32, 48  # 4 → 6 heads of 8
EXACT = 1e-5  # the brief's tolerance for "equal logits"; float64 models reach ~1e-14


@pytest.fixture(autouse=True)
def one_thread_seeded():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(before)


def make_gpt(ln_eps: float = 1e-5, seed: int = 0) -> GPT:
    """A random float64 GPT whose LayerNorms and biases are not at their defaults (so folding matters)."""
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=97, n_layers=2, d_model=D_OLD, n_heads=4, max_seq_len=16, ln_eps=ln_eps, init_std=0.2)
    model = GPT(cfg).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    return model


@pytest.fixture(scope="module")
def small():
    return make_gpt()


@pytest.fixture(scope="module")
def tokens():
    torch.manual_seed(1)
    return torch.randint(0, 97, (3, 12))


def logits_error(a: GPT, b: GPT, idx, gate: float | None = None) -> float:
    if gate is not None:
        set_gate(a, gate)
    with torch.no_grad():
        return (a(idx) - b(idx)).abs().max().item()


def pattern_batches(n: int, vocab: int = 97, B: int = 4, T: int = 12) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    return [(torch.arange(T + 1)[None] * 3 + torch.randint(0, vocab, (B, 1), generator=g)) % vocab for _ in range(n)]


# --- the rotation -------------------------------------------------------------------------------

@pytest.mark.parametrize("d,k,eps", [(32, 16, 0.3), (256, 128, None), (5, 3, 1.0)])
def test_rotation_orthogonal_rank_two_and_acts_on_u_v_as_derived(d, k, eps):
    eps = srio.special_eps(d, d + k) if eps is None else eps
    R = srio.srio_rotation(d, k, eps)
    D, s, c = d + k, eps, math.sqrt(1 - eps**2)
    assert (R.T @ R - torch.eye(D, dtype=torch.float64)).abs().max() < 1e-12
    u = torch.cat([torch.ones(d), torch.zeros(k)]).double() / math.sqrt(d)
    v = torch.cat([torch.zeros(d), torch.ones(k)]).double() / math.sqrt(k)
    assert (R @ u - (c * u + s * v)).abs().max() < 1e-12
    assert (R @ v - (-s * u + c * v)).abs().max() < 1e-12
    x = torch.randn(4, D, dtype=torch.float64)
    x_perp = x - (x @ u)[:, None] * u - (x @ v)[:, None] * v  # the orthogonal complement
    assert (x_perp @ R.T - x_perp).abs().max() < 1e-12
    op = srio.srio_operator(d, k, eps)  # the O(D) path equals the dense matrix
    assert (op.rows(x) - x @ R.T).abs().max() < 1e-12
    assert (op.rows_t(x) - x @ R).abs().max() < 1e-12


def test_eps_zero_is_identity():
    assert torch.equal(srio.srio_rotation(7, 5, 0.0), torch.eye(12, dtype=torch.float64))


def test_special_angle_copies_the_old_mean_into_the_new_coordinates():
    d, k = 32, 16
    h = torch.randn(3, d, dtype=torch.float64) + 2.0
    padded = torch.cat([h, torch.zeros(3, k, dtype=torch.float64)], 1)
    rotated = srio.srio_operator(d, k, srio.special_eps(d, d + k)).rows(padded)
    mean = h.mean(1, keepdim=True)
    expected = torch.cat([h - mean, torch.zeros(3, k, dtype=torch.float64)], 1) + math.sqrt(d / (d + k)) * mean
    assert (rotated - expected).abs().max() < 1e-12
    other = srio.srio_operator(d, k, 0.3).rows(padded)
    assert (other - expected).abs().max() > 0.1


@pytest.mark.parametrize("eps,exact", [("special", True), (0.3, False), (0.0, False)])
def test_layernorm_commutes_with_growth_only_at_the_special_angle(eps, exact):
    """LN_D(R[h; 0]; √(d/D)·γ, ln_eps·d/D) = [LN_d(h); 0] at ε* = √(k/D) only."""
    d, k, D, e = 32, 16, 48, 1e-2
    eps = srio.special_eps(d, D) if eps == "special" else eps
    h = torch.randn(4, d, dtype=torch.float64) * 2 + 1.5
    gamma, beta = 1 + 0.3 * torch.randn(d, dtype=torch.float64), 0.3 * torch.randn(d, dtype=torch.float64)
    small = F.layer_norm(h, (d,), gamma, beta, e)
    x = srio.srio_operator(d, k, eps).rows(torch.cat([h, torch.zeros(4, k, dtype=torch.float64)], 1))
    gamma_g = math.sqrt(d / D) * torch.cat([gamma, torch.ones(k, dtype=torch.float64)])
    grown = F.layer_norm(x, (D,), gamma_g, torch.cat([beta, torch.zeros(k, dtype=torch.float64)]), e * d / D)
    err = (grown - torch.cat([small, torch.zeros(4, k, dtype=torch.float64)], 1)).abs().max().item()
    assert err < 1e-12 if exact else err > 1e-2


# --- the gate -----------------------------------------------------------------------------------

def test_gated_layer_norm_is_plain_layer_norm_at_gate_one():
    ln = torch.nn.LayerNorm(48, eps=1e-5).double()
    with torch.no_grad():
        ln.weight.add_(0.3 * torch.randn(48, dtype=torch.float64))
        ln.bias.add_(0.3 * torch.randn(48, dtype=torch.float64))
    x = torch.randn(2, 5, 48, dtype=torch.float64)
    assert (gated_layer_norm(x, ln, 32, torch.tensor(1.0)) - ln(x)).abs().max() < 1e-12
    hidden = gated_layer_norm(x, ln, 32, torch.tensor(0.0))
    assert hidden[..., 32:].abs().max() == 0  # new coordinates invisible to every reader at g = 0


GROWERS = {
    "nrio": lambda m, e: srio.grow_nrio(m, D_NEW, e),
    "srio-so eps=0.3": lambda m, e: srio.grow_srio(m, D_NEW, 0.3, expansion=e),
    "srio-so eps=1": lambda m, e: srio.grow_srio(m, D_NEW, 1.0, expansion=e),
    "srio-so eps*": lambda m, e: srio.grow_srio(m, D_NEW, None, expansion=e),
    "mrio": lambda m, e: srio.grow_mrio(m, D_NEW, expansion=e),
    "srio-lo": lambda m, e: lrio.grow_srio_lo(m, D_NEW, pattern_batches(2), 3, 0.05, eps=0.3, expansion=e)[0],
    "lrio": lambda m, e: lrio.grow_lrio(m, D_NEW, pattern_batches(2), steps=3, lr=0.05, expansion=e)[0],
}


@pytest.mark.parametrize("expansion", ["block", "convex", "tiled", "zero"])
@pytest.mark.parametrize("operator", list(GROWERS))
def test_gate_zero_reproduces_the_small_model(small, tokens, operator, expansion):
    grown = GROWERS[operator](small, expansion)
    assert grown.config.d_model == D_NEW and grown.config.n_heads == 6 and grown.config.ff_width == 192
    assert logits_error(grown, small, tokens, gate=0.0) < EXACT
    assert logits_error(grown, small, tokens, gate=1.0) > 1e-3 or expansion == "zero"


def test_srio_at_eps_zero_is_nrio_at_every_gate(small, tokens):
    """Folding γ/β into the readers (SRIO's first step) changes no function, gated or not."""
    a, b = srio.grow_srio(small, D_NEW, 0.0), srio.grow_nrio(small, D_NEW)
    for g in (0.0, 0.5, 1.0):
        set_gate(a, g), set_gate(b, g)
        assert logits_error(a, b, tokens) < 1e-10


def test_fold_layernorms_keeps_the_function(small, tokens):
    folded = srio.fold_layernorms(small)
    assert logits_error(folded, small, tokens) < 1e-10
    assert torch.equal(folded.ln_f.weight, torch.ones_like(folded.ln_f.weight))
    assert not folded.config.tie_embeddings and folded.lm_head.bias.abs().max() > 0


def storage(model) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in model.state_dict().values()}


def test_grown_models_share_no_tensor_with_their_source(small):
    folded = srio.fold_layernorms(small)
    assert not storage(folded) & storage(small)
    for grown in (srio.grow_nrio(small, D_NEW), srio.grow_srio(small, D_NEW), srio.grow_nrio(folded, D_NEW)):
        assert not storage(grown) & storage(small) and not storage(grown) & storage(folded)


# --- exactness without the gate, and what is not preserved ----------------------------------------

@pytest.mark.parametrize("ln_eps", [1e-5, 5e-2])
def test_special_angle_is_exact_without_gate_for_zero_initialised_new_units(tokens, ln_eps):
    """ε* + folded LN (γ' = √(d/D), ln_eps·d/D) + new units that write nothing: exact at gate = 1."""
    model = make_gpt(ln_eps)
    assert logits_error(srio.grow_srio(model, D_NEW, None, expansion="zero"), model, tokens, 1.0) < 1e-10
    assert logits_error(srio.grow_mrio(model, D_NEW, expansion="zero"), model, tokens, 1.0) < 1e-10


@pytest.mark.parametrize("grow", [lambda m: srio.grow_srio(m, D_NEW, 0.3, expansion="zero"),
                                  lambda m: srio.grow_nrio(m, D_NEW, "zero")])
def test_other_angles_break_layernorm_without_gate(small, tokens, grow):
    """NRIO's zero-pad shifts LN's mean to (d/D)·h̄; ε ≠ ε* leaves part of h̄ uncentred."""
    assert logits_error(grow(small), small, tokens, 1.0) > 0.05


def test_new_units_change_the_function_at_gate_one(small, tokens):
    """Convex heads and tiled copies read and write the new coordinates: not preserved at g = 1."""
    for expansion in ("block", "convex", "tiled"):
        assert logits_error(srio.grow_srio(small, D_NEW, None, expansion=expansion), small, tokens, 1.0) > 0.1


def test_rotating_layernorm_params_as_vectors_is_not_exact(small, tokens):
    """The specs' first reading (γ' = Rγ, β' = Rβ, no folding) breaks even the gate = 0 model.

    Even with LayerNorms at their defaults (γ = 1, β = 0, so folding changes nothing) rotating γ
    as a vector breaks it: R·1_D is not constant (old entries c − s√(k/d)), while "fold" is exact.
    """
    assert logits_error(srio.grow_srio(small, D_NEW, 0.3, norm_params="rotate"), small, tokens, 0.0) > 0.05
    plain = make_gpt()
    with torch.no_grad():
        for module in plain.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0), module.bias.zero_()
    assert logits_error(srio.grow_srio(plain, D_NEW, 0.3, norm_params="rotate"), plain, tokens, 0.0) > 0.05
    assert logits_error(srio.grow_srio(plain, D_NEW, 0.3, norm_params="fold"), plain, tokens, 0.0) < EXACT


def test_every_linear_write_read_path_is_preserved(small):
    """W_in_new W_out_new = W_in_pad W_out_pad: embedding→q, proj→fc1, fc2→head (and wpe→k)."""
    rot, pad = srio.grow_srio(small, D_NEW, 0.3), srio.grow_srio(small, D_NEW, 0.0)
    pairs = [(lambda m: m.blocks[0].attn.q.weight, lambda m: m.wte.weight.T),
             (lambda m: m.blocks[1].attn.k.weight, lambda m: m.wpe.weight.T),
             (lambda m: m.blocks[0].mlp.fc1.weight, lambda m: m.blocks[0].attn.proj.weight),
             (lambda m: m.lm_head.weight, lambda m: m.blocks[1].mlp.fc2.weight)]
    for read, write in pairs:
        with torch.no_grad():
            assert (read(rot) @ write(rot) - read(pad) @ write(pad)).abs().max() < 1e-12
            assert (read(rot) - read(pad)).abs().max() > 1e-3  # the weights themselves did change


def test_tiled_ffn_split_preserves_old_coordinates_for_identical_inputs():
    """Net2Net: a copy and its source see the same input, so their halved fc2 columns sum to the old
    write. Not preserved: the copies also read the new coordinates (tiled fc1 columns) and write them;
    once the input's new coordinates are non-zero (gate > 0) copy and source diverge."""
    d, F_old, k = 16, 64, 8
    fc1, b1 = torch.randn(F_old, d, dtype=torch.float64), torch.randn(F_old, dtype=torch.float64)
    fc2, b2 = torch.randn(d, F_old, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    growth = ex.unit_growth(F_old, F_old * k // d, "tiled")
    rho = ex.residual_sources(d, k)
    g1, gb1 = ex.grow_reader(fc1, b1, growth, rho)
    g2, gb2 = ex.grow_writer(fc2, b2, growth, rho)
    x = torch.randn(5, d, dtype=torch.float64)
    small = F.gelu(x @ fc1.T + b1) @ fc2.T + b2
    padded = torch.cat([x, torch.zeros(5, k, dtype=torch.float64)], 1)
    grown = F.gelu(padded @ g1.T + gb1) @ g2.T + gb2
    assert (grown[:, :d] - small).abs().max() < 1e-12
    assert grown[:, d:].abs().max() > 0.1  # the copies also write the new coordinates
    noisy = torch.cat([x, torch.randn(5, k, dtype=torch.float64)], 1)  # new inputs differ: copies diverge
    assert (F.gelu(noisy @ g1.T + gb1) @ g2.T + gb2)[:, :d].sub(small).abs().max() > 0.1


def test_convex_and_tiled_sources():
    S = ex.unit_sources(4, 6, "convex", mix=0.25)
    assert S.min() >= 0 and (S.sum(1) - 1).abs().max() < 1e-15 and (S > 0).sum(1).eq(2).all()
    T = ex.unit_sources(4, 6, "tiled")
    assert T.sum(1).eq(1).all() and ex.split_counts(ex.unit_growth(4, 6, "tiled")).tolist() == [3, 3, 2, 2]
    assert ex.unit_sources(4, 2, "zero").abs().max() == 0


def test_mrio_is_orthogonal_one_stage_is_srio_and_special_stages_map_u_to_w():
    d, D = 32, 48
    R2 = srio.mrio_operator(d, (40, 48)).matrix()
    assert (R2.T @ R2 - torch.eye(D, dtype=torch.float64)).abs().max() < 1e-12
    assert (srio.mrio_operator(d, (48,), 0.3).matrix() - srio.srio_rotation(d, 16, 0.3)).abs().max() < 1e-15
    u = torch.cat([torch.ones(d), torch.zeros(D - d)]).double() / math.sqrt(d)
    assert (R2 @ u - torch.ones(D, dtype=torch.float64) / math.sqrt(D)).abs().max() < 1e-12
    R1 = srio.srio_rotation(d, D - d, srio.special_eps(d, D))
    assert (R2 - R1).abs().max() > 5e-3  # same image of u, different action on the new coordinates (0.0115)


def test_rotations_with_the_same_pull_back_of_the_ones_give_the_same_function(small, tokens):
    """MRIO(per-stage ε*) and SRIO(ε*) both send u to 1_D/√D: same function at g = 1, not at g = 0.5."""
    a, b = srio.grow_srio(small, D_NEW, None, gate=1.0), srio.grow_mrio(small, D_NEW, gate=1.0)
    assert logits_error(a, b, tokens) < 1e-10
    set_gate(a, 0.5), set_gate(b, 0.5)
    assert logits_error(a, b, tokens) > 1e-4  # the gate's masks see the new coordinates differently
    c, d = srio.grow_srio(small, D_NEW, 0.3, gate=1.0), srio.grow_mrio(small, D_NEW, 0.3, gate=1.0)
    assert logits_error(c, d, tokens) > 1e-2  # different pull-backs of 1_D


# --- learned operators --------------------------------------------------------------------------

def test_lrio_loss_falls_and_gate_zero_stays_exact(small, tokens):
    grown, curve = lrio.grow_lrio(small, D_NEW, pattern_batches(3), steps=25, lr=0.02)
    assert len(curve) == 25 and sum(curve[-3:]) / 3 < curve[0] - 0.1
    assert logits_error(grown, small, tokens, 0.0) < EXACT


def test_srio_lo_learns_the_angle(small):
    grown, curve = lrio.grow_srio_lo(small, D_NEW, pattern_batches(1), eps=0.3, steps=15, lr=0.05)
    assert curve[-1] < curve[0] - 0.02 and abs(grown.learned_eps - 0.3) > 0.1  # one scalar: 5.029 → 4.998


# --- Hugging Face Llama (RMSNorm, GQA, SwiGLU) ----------------------------------------------------

@pytest.fixture(scope="module")
def llama():
    from conftest import tiny_llama

    return tiny_llama(n_layers=2).double()


def llama_logits(model, idx):
    with torch.no_grad():
        return model(idx).logits


@pytest.mark.parametrize("eps,expansion", [(0.0, "block"), (0.3, "block"), (0.9, "tiled"), (0.5, "convex")])
def test_llama_gate_zero_reproduces_the_small_model(llama, eps, expansion):
    from anatomy_kit.width_growth.hf_grow import grow_llama

    idx = torch.randint(0, 512, (2, 10))
    grown = grow_llama(llama, 48, eps, expansion)
    cfg = grown.config
    widths = (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size)
    assert widths == (48, 6, 3, 96)
    assert (grown.lm_head.weight is grown.model.embed_tokens.weight) == (eps == 0.0)
    assert not storage(grown) & storage(llama)
    ref = llama_logits(llama, idx)
    assert (llama_logits(grown, idx) - ref).abs().max() < EXACT
    grown.growth_gate.set(1.0)
    assert (llama_logits(grown, idx) - ref).abs().max() > 1e-2


def test_llama_zero_pad_is_exact_without_gate_and_rotation_is_a_change_of_basis(llama):
    """RMSNorm: zero-pad + √(d/D) gains is exact at g = 1; with folded gains, SRIO(ε) ≡ NRIO at any g."""
    from anatomy_kit.width_growth.hf_grow import grow_llama

    idx = torch.randint(0, 512, (2, 10))
    ref = llama_logits(llama, idx)
    padded = grow_llama(llama, 48, 0.0, "zero", gate=1.0)
    assert (llama_logits(padded, idx) - ref).abs().max() < EXACT
    for g in (0.5, 1.0):
        a, b = grow_llama(llama, 48, 0.0, gate=g), grow_llama(llama, 48, 0.6, gate=g)
        assert (llama_logits(a, idx) - llama_logits(b, idx)).abs().max() < EXACT
        assert (llama_logits(a, idx) - ref).abs().max() > 1e-2


# --- named errors -------------------------------------------------------------------------------

def test_bad_inputs_raise_named_errors(small, llama):
    from anatomy_kit.width_growth.hf_grow import grow_llama

    cases = [
        (lambda: srio.grow_srio(small, 32), "new_d=32 must be >= 33"),
        (lambda: srio.grow_nrio(small, 44), "new_d=44 is not a multiple of head_dim=8"),
        (lambda: srio.grow_srio(small, 48, 1.5), "eps=1.5 is outside [0, 1]"),
        (lambda: srio.grow_srio(small, 48, -0.1), "eps=-0.1 is outside [0, 1]"),
        (lambda: srio.srio_rotation(4, 4, float("nan")), "eps=nan is outside [0, 1]"),
        (lambda: srio.grow_srio(llama, 48), "LlamaForCausalLM is not supported"),
        (lambda: grow_llama(small, 48, 0.1), "GPT is not supported"),
        (lambda: grow_llama(llama, 40, 0.1), "new_hidden=40 does not divide into heads"),
        (lambda: grow_llama(llama, 48, 2.0), "eps=2.0 is outside [0, 1]"),
        (lambda: srio.grow(small, 48, operator="xrio"), "operator='xrio' is not accepted"),
        (lambda: srio.grow(small, 48, expansion="diagonal"), "expansion='diagonal' is not accepted"),
        (lambda: srio.grow(small, 48, operator="lrio"), "is learned on batches: call anatomy_kit.width_growth.lrio.grow_lrio"),
        (lambda: srio.grow(small, 48, operator="srio-lo"), "lrio.grow_srio_lo(model, new_d, batches"),
        (lambda: lrio.grow_lrio(small, 48, [torch.zeros(2, 5)]), "batches[0] must be a (B, T+1) LongTensor"),
        (lambda: srio.grow_mrio(small, 48, stages=(40, 44)), "must end at new_d=48"),
        (lambda: GPTConfig(d_model=30, n_heads=4).validate(), "d_model=30 is not divisible by n_heads=4"),
        (lambda: set_gate(small, 1.5), "gate=1.5 must be in [0, 1]"),
    ]
    for call, message in cases:
        with pytest.raises(AnatomyKitError) as err:
            call()
        assert message in str(err.value), (message, str(err.value))
    nan_model = make_gpt()
    with torch.no_grad():
        nan_model.blocks[0].mlp.fc1.weight[0, 0] = float("nan")
    with pytest.raises(AnatomyKitError, match="parameter blocks.0.mlp.fc1.weight holds 1 non-finite"):
        srio.grow_srio(nan_model, 48)
    warming = srio.grow_srio(small, 48, gate=0.5)
    with pytest.raises(AnatomyKitError, match="gate=0.5 must be 1"):
        srio.grow_srio(warming, 64)


def test_gate_schedule_ramps_linearly_to_one_and_the_warm_up_finishes(small, tokens):
    assert [gate_schedule(t) for t in (0, 20_000_000, 40_000_000, 90_000_000)] == [0.0, 0.5, 1.0, 1.0]
    grown = srio.grow_srio(small, D_NEW, 0.3)
    with pytest.raises(AnatomyKitError, match="gate=0.0 must be 1 before the warm-up can finish"):
        finish_warmup(grown)
    with torch.no_grad():
        gated = set_gate(grown, 1.0)(tokens)
        assert (finish_warmup(grown)(tokens) - gated).abs().max() < 1e-12 and grown.config.old_width is None


def test_grown_model_grows_again_after_warm_up(small, tokens):
    twice = srio.grow_srio(set_gate(srio.grow_srio(small, 48, gate=1.0), 1.0), 64, 0.2)
    assert twice.config.d_model == 64 and twice.config.old_width == 48 and twice.config.n_heads == 8
    once = set_gate(srio.grow_srio(small, 48), 1.0)
    assert logits_error(twice, once, tokens, 0.0) < EXACT


def test_learned_operators_apply_without_forming_dense_matrices():
    """LRIO's M = R₀ + [1_d rᵀ; B] and SRIO-LO's R(θ) in O(D·k) / O(D) equal their dense forms."""
    d, k = 6, 3
    g = torch.Generator().manual_seed(0)
    r, B = torch.randn(d + k, dtype=torch.float64, generator=g), torch.randn(k, d + k, dtype=torch.float64, generator=g)
    x = torch.randn(4, 2, d + k, dtype=torch.float64, generator=g)
    R0 = srio.srio_rotation(d, k, 0.4)
    M = R0 + torch.cat([torch.ones(d, 1, dtype=torch.float64) * r, B])
    assert (lrio.structured_operator(srio.srio_operator(d, k, 0.4), d, r, B)(x) - x @ M.T).abs().max() < 1e-12
    M_id = torch.eye(d + k, dtype=torch.float64) + torch.cat([torch.ones(d, 1, dtype=torch.float64) * r, B])
    assert (lrio.structured_operator(None, d, r, B)(x) - x @ M_id.T).abs().max() < 1e-12
    theta = torch.tensor(0.7, dtype=torch.float64)
    assert (lrio.angle_rotation(d, theta)(x) - x @ lrio.rotation_from_angle(d, k, theta).T).abs().max() < 1e-12
    W = torch.randn(d + k, 5, dtype=torch.float64, generator=g)  # a writer: rotated along its first axis
    assert (srio.srio_operator(d, k, 0.4).columns_inplace(W.clone()) - R0 @ W).abs().max() < 1e-12


def test_srio_and_lrio_do_not_import_each_other():
    """lrio builds on srio; srio names the learned operators without importing them (no import circle)."""
    import ast
    import inspect

    def imported(module) -> set[str]:
        tree = ast.parse(inspect.getsource(module))
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | \
               {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}

    assert "anatomy_kit.width_growth.srio" in imported(lrio)
    assert not {m for m in imported(srio) if m.endswith("lrio")}
