"""The rule for claims about a set of layers (which layers are critical, redundant, …): does our set share
enough members with the paper's, and more than chance gives? (chapter 1; listed with every rule in
:mod:`.rules`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..stats import format_p, overlap_chance
from ..validate import AnatomyKitError, check_choice, check_int
from .decision import Decision, monte_carlo_at_alpha, p_near_alpha, paper_value, shorten, unattainable
from .nulls import EDGE_NULL_TEXT, centres, edge_overlap_chance

__all__ = ["SetOverlap"]


@dataclass(frozen=True)
class SetOverlap:
    """Our set (e.g. critical layers) shares ≥ ``full`` members with the paper's; ≥ ``partly``: partly.

    The overlap must also beat chance (when a null applies): the probability that the null gives a set
    sharing as many must be ≤ ``alpha``; an overlap that chance gives as often is "not established"
    (it equals what a null model gives). ``null`` says which chance (stated in the rule text and reason):

    - ``"exchangeable"`` (default): with ``n_layers``, the hypergeometric probability that a random set
      of our size drawn from ``n_layers`` layers shares as many (layers exchangeable); ``ours`` is the set;
    - ``"edge"``: :mod:`.nulls`' edge-structured null (our map's trend of importance with distance from
      the nearest edge kept, the rest shuffled; ``draws`` seeded Monte Carlo draws with ``seed``);
      ``ours = {"set": [layers], "profile": {layer: importance or interval}}`` (larger = more important,
      the candidate layers; pass the map the set was picked from, so that the set's ranks in it are the
      ranks it was picked at; ``n_layers``, if given, must equal their number);
    - ``"both"``: both of the above on the same map, and the larger p decides (the edge null is
      anti-conservative for a set far from the edges, the exchangeable one for a set at the edges).

    ``ours`` may be that mapping with the exchangeable null too (``n_layers`` then defaults to the map's size).
    """
    full: int = 3
    partly: int = 1
    n_layers: int | None = None
    key: str | None = None
    alpha: float = 0.05
    null: str = "exchangeable"
    draws: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("full", self.full, minimum=check_int("partly", self.partly, minimum=1))
        check_choice("null", self.null, ("exchangeable", "edge", "both"))
        check_int("draws", self.draws, minimum=100)
        check_int("seed", self.seed, minimum=0)

    def describe(self, reference: Mapping) -> str:
        text = (f"Reproduced if ours shares at least {self.full} of the paper's "
                f"{sorted(paper_value(reference, self.key))}; partly reproduced if at least {self.partly}; "
                "otherwise not reproduced.")
        if self.null == "both":
            text += (f" Either counts only if, under both {EDGE_NULL_TEXT} ({self.draws:,} draws, seed {self.seed}) "
                     "and a random set of our size with layers exchangeable (hypergeometric), as many are shared "
                     f"with probability ≤ {self.alpha:g}: the larger p decides; otherwise not established.")
        elif self.null == "edge":
            text += (f" Either counts only if sets drawn by {EDGE_NULL_TEXT} share as many with probability ≤ "
                     f"{self.alpha:g} ({self.draws:,} draws, seed {self.seed}); otherwise not established.")
        elif self.n_layers:
            text += (f" Either counts only if a random set of our size from {self.n_layers} layers (layers "
                     f"exchangeable: hypergeometric) shares as many with probability ≤ {self.alpha:g}; otherwise "
                     "not established.")
        return text

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        ours, profile = self._split(ours)
        n_layers = self.n_layers or (len(profile) if profile else None)
        paper, mine = set(paper_value(reference, self.key)), {int(v) for v in ours}
        if self.full > len(paper):
            raise AnatomyKitError(f"full={self.full} exceeds the paper's {len(paper)} members")
        shared = sorted(mine & paper)
        best = self.smallest_p(len(mine), len(paper), n_layers)
        if best is not None and (no := unattainable(best, self.alpha, f"{self._null_name()} null on {len(mine)} of "
                                                    f"{n_layers} layers")):
            return Decision(no.verdict, f"ours {sorted(mine)} shares {len(shared)} of the paper's {sorted(paper)}; "
                            + no.reason, summary=no.summary, shown="{" + ", ".join(map(str, sorted(mine))) + "}")
        verdict = ("reproduced" if len(shared) >= self.full else
                   "partly reproduced" if len(shared) >= self.partly else "not reproduced")
        reason = f"ours {sorted(mine)} shares {len(shared)} of the paper's {sorted(paper)} {shared}"
        chance, null, edge = None, "", None
        if self.null == "both":
            edge = edge_overlap_chance(profile, mine, paper, draws=self.draws, seed=self.seed).p
            exchangeable = overlap_chance(len(shared), n_layers, len(paper), len(mine))
            chance, null = max(edge, exchangeable), "the larger of two nulls"
            reason += (f"; as many are shared with {format_p(edge)} under {EDGE_NULL_TEXT} ({self.draws:,} draws) "
                       f"and with {format_p(exchangeable)} with layers exchangeable (hypergeometric, {n_layers} "
                       "layers): the larger decides")
        elif self.null == "edge":
            chance = edge = edge_overlap_chance(profile, mine, paper, draws=self.draws, seed=self.seed).p
            null = "edge-structured null"
            reason += f"; under {EDGE_NULL_TEXT}, {self.draws:,} draws, as many are shared with {format_p(chance)}"
        elif n_layers:
            chance = overlap_chance(len(shared), n_layers, len(paper), len(mine))
            null = "layers exchangeable"
            reason += (f"; a random {len(mine)} of {n_layers} layers share as many with {format_p(chance)} "
                       "(hypergeometric: layers exchangeable)")
        near = chance is not None and verdict != "not reproduced" and p_near_alpha(chance, self.alpha)
        if chance is not None and verdict != "not reproduced" and chance > self.alpha:
            verdict, reason = "not established", reason + f" (> {self.alpha:g}: no better than chance)"
        elif (verdict != "not reproduced" and self.null in ("edge", "both") and chance == edge
              and monte_carlo_at_alpha(chance, self.alpha)):
            verdict, reason = "not established", reason + f" (a Monte Carlo p at exactly α = {self.alpha:g} does not decide)"
        summary = f"shares {len(shared)} of the paper's {len(paper)} layers" + (f" {shared}" if shared else "")
        summary += f"; chance {format_p(chance)} ({null})" if chance is not None else ""
        shown = "{" + ", ".join(map(str, sorted(mine))) + "}"
        return Decision(verdict, reason, summary=shorten(summary), near_threshold=near, shown=shown, p=chance)

    def _null_name(self) -> str:
        return "edge-structured" if self.null == "edge" else "exchangeable"

    def smallest_p(self, n_ours: int, n_paper: int, n_layers: int | None) -> float | None:
        """The smallest chance p this rule's null can give (``None``: no null applies): our set holding as many
        of the paper's layers as it can (exchangeable: hypergeometric), or one Monte Carlo draw's floor
        ``1/(1 + draws)`` (edge)."""
        if self.null == "edge":
            return 1 / (1 + self.draws)
        return overlap_chance(min(n_ours, n_paper), n_layers, n_paper, n_ours) if n_layers else None

    def _split(self, ours: Any) -> tuple[Any, dict | None]:
        """``(the set, the importance map or None)``."""
        if isinstance(ours, Mapping):
            if set(ours) != {"set", "profile"}:
                raise AnatomyKitError('SetOverlap needs ours as a set of layers or {"set": [...], "profile": '
                                      f'{{layer: importance}}}}, got keys {sorted(map(str, ours))}')
            profile = centres(ours["profile"])
            if self.n_layers and self.n_layers != len(profile):
                raise AnatomyKitError(f"n_layers={self.n_layers} but the importance map has {len(profile)} layers")
            return ours["set"], profile
        if self.null in ("edge", "both"):
            raise AnatomyKitError(f'SetOverlap(null="{self.null}") needs ours = {{"set": [layers], "profile": {{layer: '
                                  "importance}}: the null is fitted on the map's own edge profile")
        return ours, None
