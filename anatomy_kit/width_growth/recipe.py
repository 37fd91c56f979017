"""What chapter 6's width-growth grid holds fixed: shapes, token budgets, the gate, the conditions.

Chapter 6, *Growing the residual stream*. A :class:`GrowthRecipe` is one experiment: a small
:class:`~anatomy_kit.width_growth.gpt.GPT` of width ``d_small`` is trained for ``steps_small`` steps, grown
to ``d_large`` by each :class:`Condition`'s operator and expansion, and trained ``steps_grown``
more; a cold-start model of width ``d_large`` trains ``steps_small + steps_grown`` steps on the
same token stream (equal tokens). A multi-stage chain grows through ``ms_widths`` with
``ms_total_steps`` spread over the stages in proportion to each stage's parameter count (a
constant number of tokens per parameter per stage, the "Chinchilla 20×" rule of the paper's
24M → 120M recipe, scaled down at smoke scale).

The paper's full-scale recipes (:func:`paper_d256_d384`, :func:`paper_multistage`) compute their
token budgets from parameter counts: ``tokens = tokens_per_param × parameters`` per stage. The
shapes of the multi-stage recipe (widths 320 → 448 → 640 → 896 at 8 layers, 26M → 122M
parameters) are OUR choice: the paper's were not available, only "24M → 120M".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from anatomy_kit.width_growth.gpt import GPT, GPTConfig
from anatomy_kit.width_growth.srio import OPERATORS
from anatomy_kit.width_growth.expansion import EXPANSIONS
from anatomy_kit.validate import AnatomyKitError, check_choice, check_int, check_positive

__all__ = ["Condition", "CONDITIONS", "FULL_RECIPE", "KEY_CONDITIONS", "GrowthRecipe", "gpt_config", "param_count",
           "steps_by_params", "paper_d256_d384", "paper_multistage"]


@dataclass(frozen=True)
class Condition:
    """One arm of the grid: ``operator`` (None: cold start at the large width), expansion, gate, and
    for ``srio-so`` the angle ``eps`` (None: ε* = √(k/D)). ``untied_head`` (NRIO only): after growth
    the LM head becomes a copy of the embedding with a zero bias, so the arm has exactly the
    parameters of the folded arms (whose folding unties the head) and the same function as NRIO."""

    name: str
    operator: str | None
    expansion: str = "block"
    gated: bool = True
    eps: float | None = None
    untied_head: bool = False

    def __post_init__(self) -> None:
        if self.operator is not None:
            check_choice("operator", self.operator, OPERATORS)
        check_choice("expansion", self.expansion, EXPANSIONS)
        if self.eps is not None and self.operator != "srio-so":
            raise AnatomyKitError(f"eps={self.eps} is only a setting of operator 'srio-so', not {self.operator!r}")
        if self.untied_head and self.operator != "nrio":
            raise AnatomyKitError(f"untied_head is a setting of operator 'nrio' (the folded operators untie the "
                                  f"head themselves), not of {self.operator!r}")

    @property
    def slug(self) -> str:
        """A file-name-safe name: ``srio-so/no-gate`` → ``srio-so_no-gate``."""
        return self.name.replace("/", "_")


#: The arms of chapter 6. "srio-so" is the full recipe (rotation at ε*, block-specific
#: expansion, gate); each ablation changes one component of it. Folding the norms unties the LM
#: head (more parameters), so two controls separate what SRIO changes: "nrio/untied" is NRIO with
#: an untied head and a head bias (parameter-matched with the folded arms, not folded), and
#: "srio-so/eps-0" folds the norms as SRIO does but does not rotate (ε = 0). All three compute
#: NRIO's function at growth: nrio → nrio/untied → srio-so/eps-0 → srio-so adds the untied head,
#: then the folding, then the rotation.
CONDITIONS = {c.name: c for c in (
    Condition("srio-so", "srio-so"),
    Condition("nrio", "nrio"),
    Condition("nrio/untied", "nrio", untied_head=True),
    Condition("srio-so/eps-0", "srio-so", eps=0.0),
    Condition("srio-lo", "srio-lo"),
    Condition("mrio", "mrio"),
    Condition("lrio", "lrio"),
    Condition("srio-so/no-gate", "srio-so", gated=False),
    Condition("srio-so/all-convex", "srio-so", "convex"),
    Condition("srio-so/all-tiled", "srio-so", "tiled"),
    Condition("nrio/zero-pad", "nrio", "zero"),
    Condition("cold", None),
)}
FULL_RECIPE = "srio-so"
#: The arms of the key comparisons (the full recipe, its parameter-matched NRIO, the ε = 0 control,
#: the paper's tied NRIO and LiGO-style LRIO): chapter 6 trains them on more seeds than the other
#: arms, so every seed-paired claim compares arms trained on the same seeds.
KEY_CONDITIONS = ("srio-so", "nrio/untied", "srio-so/eps-0", "nrio", "lrio")


def gpt_config(vocab_size: int, n_layers: int, d_model: int, head_dim: int, block_size: int) -> GPTConfig:
    """The chapter's GPT at width ``d_model`` (heads of ``head_dim``; FFN 4·d; tied embeddings)."""
    if d_model % head_dim:
        raise AnatomyKitError(f"width {d_model} is not a multiple of head_dim={head_dim}")
    return GPTConfig(vocab_size=vocab_size, n_layers=n_layers, d_model=d_model, n_heads=d_model // head_dim,
                     max_seq_len=block_size).validate()


def param_count(cfg: GPTConfig) -> int:
    """Parameters of a GPT of ``cfg`` (tied embedding once), counted on the meta device."""
    with torch.device("meta"):
        return GPT(cfg).param_count()


def steps_by_params(total_steps: int, params: list[int]) -> list[int]:
    """Split ``total_steps`` over stages in proportion to their parameter counts (largest remainder, ≥ 1 each)."""
    check_int("total_steps", total_steps, minimum=len(params))
    share = [total_steps * p / sum(params) for p in params]
    steps = [max(1, int(s)) for s in share]
    order = sorted(range(len(params)), key=lambda i: share[i] - int(share[i]), reverse=True)
    i = 0
    while sum(steps) < total_steps:
        steps[order[i % len(order)]] += 1
        i += 1
    while sum(steps) > total_steps:
        j = max(range(len(steps)), key=lambda k: steps[k])
        steps[j] -= 1
    return steps


@dataclass(frozen=True)
class GrowthRecipe:
    """The fixed part of chapter 6's grid (see the module docstring); ``validate`` names bad fields."""

    vocab_size: int
    n_layers: int
    d_small: int
    d_large: int
    head_dim: int
    block_size: int
    batch_size: int
    steps_small: int
    steps_grown: int
    gate_tokens: int
    lr: float
    warmup_steps: int = 0
    weight_decay: float = 0.1
    grad_accum: int = 1
    learn_steps: int = 100
    learn_lr: float = 1e-3
    learn_lr_angle: float = 1e-2
    eval_every: int = 0
    eval_batches: int | None = None
    precision: str = "fp32"
    ms_widths: tuple[int, ...] = ()
    ms_total_steps: int = 0
    ms_operators: tuple[str, ...] = ("srio-so", "nrio", "srio-so/eps-0")  # conditions, closed-form
    conditions: tuple[str, ...] = field(default_factory=lambda: tuple(CONDITIONS))
    key_conditions: tuple[str, ...] = KEY_CONDITIONS   # trained on the key seeds (those among conditions)

    def validate(self) -> "GrowthRecipe":
        for name in ("vocab_size", "n_layers", "head_dim", "block_size", "batch_size", "steps_small", "steps_grown",
                     "gate_tokens", "grad_accum", "learn_steps"):
            check_int(name, getattr(self, name), minimum=1)
        for name in ("lr", "learn_lr", "learn_lr_angle"):
            check_positive(name, getattr(self, name))
        check_int("d_large", self.d_large, minimum=self.d_small + 1)
        check_int("warmup_steps", self.warmup_steps, minimum=0, maximum=min(self.steps_small, self.steps_grown))
        for d in (self.d_small, self.d_large, *self.ms_widths):
            gpt_config(self.vocab_size, self.n_layers, d, self.head_dim, self.block_size)
        for c in self.conditions:
            check_choice("condition", c, CONDITIONS)
        for c in self.key_conditions:
            check_choice("key condition", c, CONDITIONS)
        if FULL_RECIPE not in self.conditions:
            raise AnatomyKitError(f"conditions={list(self.conditions)} must include {FULL_RECIPE!r}, the full recipe "
                                  "every ablation is compared with")
        if self.gate_tokens > (self.steps_grown - 1) * self.tokens_per_step:
            raise AnatomyKitError(f"gate_tokens={self.gate_tokens:,} is more than the grown stage's "
                                  f"{(self.steps_grown - 1) * self.tokens_per_step:,} tokens before its last step; "
                                  "the gate would not reach 1")
        self._validate_multistage()
        return self

    def _validate_multistage(self) -> None:
        if not self.ms_widths:
            return
        if len(self.ms_widths) < 3 or any(b <= a for a, b in zip(self.ms_widths, self.ms_widths[1:])):
            raise AnatomyKitError(f"ms_widths={list(self.ms_widths)} must hold ≥ 3 strictly increasing widths")
        closed_form = [c for c, v in CONDITIONS.items() if v.operator not in (None, "srio-lo", "lrio")]
        for c in self.ms_operators:
            check_choice("multi-stage condition", c, closed_form)
        for j, steps in enumerate(self.multistage_steps()[1:], 1):
            if self.stage_gate_tokens(steps) > (steps - 1) * self.tokens_per_step or steps < 2:
                raise AnatomyKitError(f"multi-stage stage {j} (width {self.ms_widths[j]}) gets {steps} steps, too "
                                      "few for its gate to reach 1; raise ms_total_steps")

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.grad_accum * self.block_size

    @property
    def key_arms(self) -> tuple[str, ...]:
        """The key conditions that this recipe trains (``key_conditions`` among ``conditions``)."""
        return tuple(c for c in self.key_conditions if c in self.conditions)

    def config(self, d_model: int) -> GPTConfig:
        return gpt_config(self.vocab_size, self.n_layers, d_model, self.head_dim, self.block_size)

    def multistage_steps(self) -> list[int]:
        """Steps of each multi-stage stage, in proportion to its parameter count."""
        if not self.ms_widths:
            return []
        return steps_by_params(self.ms_total_steps, [param_count(self.config(d)) for d in self.ms_widths])

    def stage_gate_tokens(self, steps: int) -> int:
        """The gate's warm-up in a multi-stage stage of ``steps`` steps: ``gate_tokens``, at most half the stage."""
        return max(1, min(self.gate_tokens, steps * self.tokens_per_step // 2))

    def with_(self, **changes) -> "GrowthRecipe":
        return replace(self, **changes).validate()


def _chinchilla_steps(cfg: GPTConfig, tokens_per_param: float, tokens_per_step: int) -> int:
    return max(1, round(tokens_per_param * param_count(cfg) / tokens_per_step))


def paper_d256_d384(tokens_per_param: float = 20.0, gate_tokens: int = 40_000_000, **changes) -> GrowthRecipe:
    """The paper's d256 → d384 run as we configure it: 8 layers, 4 → 6 heads of 64, context 256,
    GPT-2 BPE (50,257), 131,072-token steps (the precursor's batch 512 × 256), each stage trained on
    ``tokens_per_param`` × its parameters, the gate over ``gate_tokens``."""
    base = dict(vocab_size=50257, n_layers=8, d_small=256, d_large=384, head_dim=64, block_size=256, batch_size=64,
                grad_accum=8, steps_small=1, steps_grown=1, gate_tokens=gate_tokens, lr=9e-4, warmup_steps=0,
                learn_steps=100, eval_every=250, eval_batches=64, precision="bf16")
    base.update(changes)
    r = GrowthRecipe(**base)
    tps = r.tokens_per_step
    steps_small = _chinchilla_steps(r.config(r.d_small), tokens_per_param, tps)
    steps_grown = _chinchilla_steps(r.config(r.d_large), tokens_per_param, tps)
    return replace(r, steps_small=steps_small, steps_grown=steps_grown, warmup_steps=min(200, steps_grown // 10)
                   ).validate()


def paper_multistage(tokens_per_param: float = 20.0, widths: tuple[int, ...] = (320, 448, 640, 896),
                     **changes) -> GrowthRecipe:
    """The 24M → 120M multi-stage recipe as we configure it (module docstring): ``widths`` at 8
    layers, each stage trained on ``tokens_per_param`` × its parameters."""
    r = paper_d256_d384(tokens_per_param, **changes)
    per_stage = [_chinchilla_steps(r.config(d), tokens_per_param, r.tokens_per_step) for d in widths]
    return replace(r, ms_widths=tuple(widths), ms_total_steps=sum(per_stage)).validate()
