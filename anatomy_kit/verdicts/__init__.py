"""Verdicts on paper claims, decided by declared rules: the project's core idea, in one room.

- :mod:`.claims` – a :class:`~.claims.Claim` (one primary statistic, secondary readings shown, never judged),
  decided at construction by a rule;
- :mod:`.rules` – the declared, tested rules: ``DifferenceSign``, ``IntervalBelow``, ``IntervalAbove``,
  ``IntervalContains``, ``Close``, ``SetOverlap``, ``RankCorrelation``, ``BeyondNull``; with
  :mod:`.equivalence` (``Equivalent``: equality needs a margin declared first) and :mod:`.magnitude`
  (``Magnitude``, ``RankAtMost``);
- :mod:`.combine` – rules built from rules (``AllOf``, ``Precondition``), ``NotComparable`` and ``ByConstruction``;
- :mod:`.decision` – the verdicts (with "mixed" and "holds by construction"), the combination table, the
  one-line summary and the near-threshold mark;
- :mod:`.sets` – ``SetOverlap``, the rule for claims about a set of layers;
- :mod:`.nulls` – the edge-structured chance null for layer sets and ranks;
- :mod:`.registry` – every claim's rule as data, its fingerprint, and the registry of rules with their
  amendments (``data_manifest/rule_registry.yaml``) each claim is checked against (:mod:`.registry_cli`:
  ``python -m anatomy_kit.verdicts check | show``);
- :mod:`.multiplicity` – Holm's correction within each paper's claims;
- :mod:`.tables` – compact claims tables (a verdict badge, one line of why, details folded).
"""

from .claims import VERDICTS, Claim, claims_table

__all__ = ["VERDICTS", "Claim", "claims_table"]
