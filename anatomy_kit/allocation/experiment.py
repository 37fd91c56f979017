"""Chapter 5's experiment: the same decoder trained under several allocation rules, seed by seed.

:class:`RuleGrid` holds what is fixed (preset shape and recipe, seeds, steps, bounds, exponent
choice); :meth:`RuleGrid.schedules` turns rules into widths from a work-profiles bundle;
:meth:`RuleGrid.train` trains every (rule, seed) pair, resumably (one checkpoint folder per
pair), and returns the results keyed by ``(rule, seed)``. Same seed = same data order and
the same initialisation draw where shapes agree, so rules are compared in pairs.
:meth:`RuleGrid.fit_memory` splits each step's rows into micro-batches (and switches on
activation checkpointing if needed) to fit the GPU's free memory; the split is not part of a
run's identity, so machines with different GPUs share one grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..lm.model import LMConfig, param_count
from ..lm.pool import train_many
from ..lm.speed import training_precision
from ..lm.train import TrainConfig, TrainResult
from ..stats import PairedComparison, paired_difference
from ..validate import AnatomyKitError, check_choice, check_int
from .schedules import allocate, exponents_from_intrinsic_dimension, parse_rule

if TYPE_CHECKING:
    from ..lm.estimates import MemoryPlan

__all__ = ["EXPONENT_CHOICES", "rule_slug", "rule_inputs", "RuleGrid", "paired_losses", "paper_comparisons"]

EXPONENT_CHOICES = ("intrinsic-dimension", "common")


def rule_slug(rule: str) -> str:
    """A file-name-safe form of a rule: ``"geometric:gw/spherical"`` → ``"geometric-gw-spherical"``."""
    parse_rule(rule)
    return rule.replace(":", "-").replace("/", "-")


def rule_inputs(bundle: Any, exponents: str, rate_scale: float) -> tuple[dict[str, np.ndarray] | None, Any]:
    """(profiles by ``"statistic/geometry"``, exponents) from a work-profiles bundle (or ``None``).

    ``exponents="intrinsic-dimension"`` uses ``a_ℓ = ν / d_int,ℓ`` (ν = ``rate_scale``) when the
    bundle has TwoNN dimensions; otherwise every layer gets ``ν``.
    """
    check_choice("exponents", exponents, EXPONENT_CHOICES)
    if bundle is None:
        return None, rate_scale
    profiles = {f"{s}/{g}": p for s, g, p in bundle.profiles.items()}
    if exponents == "intrinsic-dimension" and bundle.intrinsic_dimension is not None:
        return profiles, exponents_from_intrinsic_dimension(bundle.intrinsic_dimension, rate_scale=rate_scale)
    return profiles, rate_scale


@dataclass
class RuleGrid:
    """Rules × seeds on one preset (a dict from :data:`anatomy_kit.lm.PRESETS`)."""

    preset: dict
    seeds: list[int]
    steps: int
    vocab_size: int
    lower_frac: float = 0.25
    upper_frac: float | None = 2.5
    exponents: str = "intrinsic-dimension"
    rate_scale: float = 1.0
    widths: dict[str, dict] = field(default_factory=dict)   # rule -> {"widths": [int], "continuous": [float]}
    memory: "MemoryPlan | None" = None   # set by fit_memory; None: the preset's batch_size × grad_accum

    def __post_init__(self):
        check_int("steps", self.steps, minimum=1)
        check_choice("exponents", self.exponents, EXPONENT_CHOICES)
        if not self.seeds:
            raise AnatomyKitError("seeds is empty; a paired comparison needs at least one seed")

    def schedules(self, rules: list[str], bundle: Any) -> dict[str, dict]:
        """Widths for each rule (integer and before rounding); profile rules need ``bundle``."""
        P = self.preset
        profiles, a = rule_inputs(bundle, self.exponents, self.rate_scale)
        for r in rules:
            kw = dict(multiple=P["multiple"], profiles=profiles, exponent=a, lower_frac=self.lower_frac,
                      upper_frac=self.upper_frac)
            self.widths[r] = {"widths": allocate(r, P["n_layers"], P["mean_width"], **kw),
                              "continuous": allocate(r, P["n_layers"], P["mean_width"], continuous=True, **kw)}
        return {r: self.widths[r] for r in rules}

    def model_config(self, rule: str) -> LMConfig:
        """The decoder of ``rule`` (its widths must have been computed by :meth:`schedules`)."""
        if rule not in self.widths:
            raise AnatomyKitError(f"rule {rule!r} has no widths yet; call schedules([{rule!r}], bundle) first")
        P = self.preset
        return LMConfig(vocab_size=self.vocab_size, n_layers=P["n_layers"], d_model=P["d_model"], n_heads=P["n_heads"],
                        ffn_widths=list(self.widths[rule]["widths"]), max_seq_len=P["block_size"])

    def param_counts(self, rules: list[str]) -> dict[str, int]:
        """Parameters of each rule's model (equal by construction; the chapter checks it)."""
        return {r: param_count(self.model_config(r)) for r in rules}

    def fit_memory(self, device: str) -> "MemoryPlan":
        """Choose micro-batch and activation checkpointing from ``device``'s free memory (chapter 5).

        On CUDA the largest micro-batch whose estimated peak
        (:func:`~anatomy_kit.lm.estimates.training_memory` of the uniform-width model, the
        rules' parameter count) fits the free memory (``torch.cuda.mem_get_info``), without
        checkpointing if one fits; on a CPU the preset's own split. Every run of the grid then
        reads the same rows per step. Returns the plan (its ``str`` says it in one line).
        """
        from ..lm.estimates import choose_micro_batch, lm_shape
        from ..lm.speed import free_memory

        P = self.preset
        shape = lm_shape(LMConfig(vocab_size=self.vocab_size, n_layers=P["n_layers"], d_model=P["d_model"],
                                  n_heads=P["n_heads"], ffn_widths=[P["mean_width"]] * P["n_layers"],
                                  max_seq_len=P["block_size"]))
        self.memory = choose_micro_batch(shape, P["block_size"], P["batch_size"] * P["grad_accum"],
                                         free_memory(device), precision=training_precision(P["precision"], device),
                                         default=P["batch_size"])
        return self.memory

    def train_config(self, rule: str, seed: int, checkpoint_dir: Path, device: str) -> TrainConfig:
        P = self.preset
        micro, accum, ckpt = ((P["batch_size"], P["grad_accum"], False) if self.memory is None else
                              (self.memory.micro_batch, self.memory.grad_accum, self.memory.checkpointing))
        return TrainConfig(steps=self.steps, batch_size=micro, grad_accum=accum, lr=P["lr"],
                           warmup=min(P["warmup"], self.steps // 10), eval_every=max(1, self.steps // 6), seed=seed,
                           device=str(device), precision=training_precision(P["precision"], device),
                           activation_checkpointing=ckpt,
                           checkpoint_dir=str(checkpoint_dir), progress=False, desc=f"{rule} seed {seed}")

    def train(self, rules: list[str], train_blocks, eval_blocks, *, run_dir, device: str = "cpu",
              processes: int = 1, shard: str | None = None,
              seeds: Mapping[str, list[int]] | None = None) -> dict[tuple[str, int], TrainResult | None]:
        """Train every (rule, seed); ``run_dir(rule, seed)`` gives each pair's checkpoint folder.

        ``seeds``: ``{rule: seeds}`` for rules that train on other seeds than the grid's (chapter 5's
        key comparison on more seeds); every other rule trains on :attr:`seeds`.
        With a shard setting (``shard="i/n"`` or ``$ANATOMY_KIT_SHARD``; :mod:`anatomy_kit.lm.shards`)
        only this shard's pairs train and the others map to ``None``; a later unsharded call over
        the same folders collects every pair from its finished checkpoint.
        """
        pairs = [(r, int(s)) for r in rules for s in (seeds or {}).get(r, self.seeds)]
        jobs = [(self.model_config(r), self.train_config(r, s, run_dir(r, s), device)) for r, s in pairs]
        results = train_many(jobs, train_blocks, eval_blocks,
                             processes=processes if not str(device).startswith("cuda") else 1, shard=shard)
        return dict(zip(pairs, results))


def paired_losses(final: Mapping[str, Mapping[Any, float]], rule: str, baseline: str = "uniform") -> PairedComparison:
    """``final[rule] − final[baseline]`` seed by seed: t interval and exact sign-flip p (chapter 5).

    ``final``: ``{rule: {seed: final validation loss (nats/token)}}``.
    """
    for r in (rule, baseline):
        if r not in final:
            raise AnatomyKitError(f"rule {r!r} has no results; trained rules: {sorted(final)}")
    return paired_difference(final[rule], final[baseline], unit="nats/token")


def paper_comparisons(reference: Mapping, final: Mapping[str, Mapping[Any, float]]) -> dict[str, tuple]:
    """The paired differences a paper table of losses by rule speaks to (chapter 5).

    ``reference``: an entry like ``p2.val_loss_440m`` (``value`` by the paper's row names,
    ``rules`` mapping each row to our rule). Every row is compared with the ``uniform`` row, and
    every row whose rule is ``geometric:…`` also with the ``cosine`` row (the paper: the best
    geometric rules beat uniform by more than the taper). Returns ``{"row − base": ((row, base),
    PairedComparison)}``, the pair being the ``paper_keys`` that give the paper's sign; rows whose
    rule was not trained are left out.
    """
    rules = reference.get("rules")
    if not isinstance(rules, Mapping) or "uniform" not in rules:
        raise AnatomyKitError("reference needs a 'rules' mapping from the paper's rows to our rules, with 'uniform'")
    out = {}
    for row, rule in rules.items():
        bases = ["uniform"] + (["cosine"] if rule.startswith("geometric:") and "cosine" in rules else [])
        for base in bases:
            if row != base and rule in final and rules[base] in final:
                out[f"{row} − {base}"] = ((row, base), paired_losses(final, rule, rules[base]))
    return out
