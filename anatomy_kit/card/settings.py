"""What one report card measures: token budgets, K, the random baseline, the FFN budget (the book page *Your model's report card*).

:class:`CardSettings` is validated once (:meth:`CardSettings.validate`) and is part of the cache key,
so a card computed with other settings is never reused. The defaults fit the targets of
``benchmarks/bench_card.py`` for the embedded SmolLM2-135M on two CPU cores (whole card ≤ 10 min,
``quick`` ≤ 60 s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..data.blocks import TEXT_SPLITS
from ..validate import AnatomyKitError, check_choice, check_int, check_positive
from .errors import PruneDepthTooLarge
from .signals import SIGNAL_DEFINITIONS

__all__ = ["CardSettings", "DTYPES", "MAX_PRUNE_CAP", "default_max_prune", "torch_dtype"]

DTYPES = ("float32", "bfloat16", "float16")


#: the largest default K: each k costs a greedy step on the calibration text (twice more on its halves) and
#: 2 × ``n_random`` random sets, so K = 4 keeps the default card on SmolLM2-135M within 10 minutes on 2 cores
MAX_PRUNE_CAP = 4


def default_max_prune(n_layers: int) -> int:
    """K when none is given: a quarter of the layers (ShortGPT's and PruneMe's range), at most
    :data:`MAX_PRUNE_CAP`, at least 1."""
    return max(1, min(MAX_PRUNE_CAP, n_layers // 4))


def torch_dtype(name: str):
    """``"float32"`` → ``torch.float32`` (one of :data:`DTYPES`)."""
    import torch

    return getattr(torch, check_choice("dtype", name, DTYPES))


@dataclass(frozen=True)
class CardSettings:
    """How a card is measured (the book page *Your model's report card*).

    ``tokens``: evaluation tokens, cut into blocks of ``block_size`` (every perplexity and interval
    of the card is over these blocks); ``batch_size`` blocks go through the model at once (memory
    is set by it, never by ``tokens``). ``calibration_tokens``: separate blocks, from other
    documents, on which greedy removal chooses its layers, so that its measured perplexity is not
    selected on the text it is measured on. ``max_prune`` (K; ``None``: :func:`default_max_prune`):
    pruned sets of k = 1 … K layers. ``n_random``: random k-sets per k ≥ 2 and pool
    (k = 1: every layer of the pool; every k-set when a pool has at most ``n_random``); 19 puts the
    Monte Carlo p floor at 1/20 = 0.05.
    ``geometry_tokens``: tokens in chapter 4's clouds. ``ffn_budget``: the FFN parameter budget of
    the width suggestion as a fraction of today's. ``quick``: cheap signals only (no causal sweep,
    no pruning). ``harm_pct``: the disagreement flag's harm threshold, in % perplexity: a layer whose
    whole skip ΔPPL interval lies above it is harmful to prune (:mod:`.agreement`); +20 % by default,
    a fifth more perplexity from removing one layer, which no reader would call "changes little".
    ``angular_tokens`` (``"all"`` or PruneMe's ``"last"``) and ``update_norm`` (``"ratio_of_sums"`` or
    ``"mean_of_ratios"``): which definition the card ranks and prunes by (:mod:`.signals`); the other
    is recorded beside it. ``text_split``: which documents are evaluation text (``"standard"``: a hash half;
    ``"held-out"``: the held-out documents, the book's confirmatory run; :mod:`.text`).
    """

    tokens: int = 1024
    block_size: int = 128
    batch_size: int = 4
    calibration_tokens: int = 512
    max_prune: int | None = None
    n_random: int = 19
    geometry_tokens: int = 128
    ffn_budget: float = 0.75
    dtype: str = "float32"
    quick: bool = False
    confidence: float = 0.95
    seed: int = 0
    harm_pct: float = 20.0
    angular_tokens: str = "all"
    update_norm: str = "ratio_of_sums"
    text_split: str = "standard"

    def validate(self) -> "CardSettings":
        check_int("block_size", self.block_size, minimum=8)
        check_int("tokens", self.tokens, minimum=2 * self.block_size)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("calibration_tokens", self.calibration_tokens, minimum=self.block_size)
        if self.max_prune is not None:
            check_int("max_prune", self.max_prune, minimum=1)
        check_int("n_random", self.n_random, minimum=1)
        check_int("geometry_tokens", self.geometry_tokens, minimum=8)
        check_int("seed", self.seed, minimum=0)
        check_choice("dtype", self.dtype, DTYPES)
        if not isinstance(self.quick, bool):
            raise AnatomyKitError(f"quick={self.quick!r} must be True or False")
        check_positive("ffn_budget", self.ffn_budget)     # its range depends on the model: widths.check_budget
        check_positive("harm_pct", self.harm_pct)
        for name, allowed in SIGNAL_DEFINITIONS.items():
            check_choice(name, getattr(self, name), allowed)
        check_choice("text_split", self.text_split, TEXT_SPLITS)
        if not 0 < self.confidence < 1:
            raise AnatomyKitError(f"confidence={self.confidence!r} must lie strictly between 0 and 1")
        return self

    @property
    def n_eval_blocks(self) -> int:
        """Evaluation blocks: ``tokens // block_size`` (at least 2, so that an interval exists)."""
        return self.tokens // self.block_size

    @property
    def n_calibration_blocks(self) -> int:
        return self.calibration_tokens // self.block_size

    def resolved(self, n_layers: int) -> "CardSettings":
        """These settings with K filled in for a model of ``n_layers`` layers; K ≥ L is a named error."""
        check_int("n_layers", n_layers, minimum=1)
        k = default_max_prune(n_layers) if self.max_prune is None else self.max_prune
        if n_layers < 2:
            raise PruneDepthTooLarge(f"the model has {n_layers} layer; pruning and neighbour means need at least 2")
        if k >= n_layers:
            raise PruneDepthTooLarge(f"max_prune (K) = {k} is not below the model's {n_layers} layers; "
                                     f"give K in 1..{n_layers - 1}")
        return replace(self, max_prune=k)

    def to_dict(self) -> dict:
        return asdict(self)
