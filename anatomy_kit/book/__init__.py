"""The book's machinery (every chapter uses it): parameters, stores, claims, report, runner, CLI.

- :mod:`.run` – resolve a chapter's papermill parameters into a :class:`~.run.Run`; save its metrics;
- :mod:`.store` – a resumable JSON store of finished results;
- :mod:`.claims` – claims about the papers (one primary statistic, secondary readings shown, never judged),
  decided by the declared, tested rules of :mod:`.rules`: ``DifferenceSign``, ``IntervalBelow``,
  ``IntervalAbove``, ``IntervalContains``, ``Equivalent`` (:mod:`.equivalence`: equality needs a margin
  declared first), ``Close``, ``Magnitude`` and ``RankAtMost`` (:mod:`.magnitude`), ``SetOverlap`` (chance:
  exchangeable layers or the edge-structured null of :mod:`.nulls`), ``RankCorrelation``, ``BeyondNull``;
  :mod:`.combine` builds rules from rules (``AllOf``, ``Requires``) and holds ``NotComparable`` and
  ``ByConstruction``; :mod:`.decision` holds the verdicts (with "mixed" and "holds by construction"),
  the combination table, the one-line summary and the near-threshold mark;
- :mod:`.report` – every chapter's numbers beside the papers' (``report.json``, ``report.md``);
- :mod:`.tables` – compact claims tables (a verdict badge, one line of why, details folded);
- :mod:`.pages` – parts of the book's own pages computed at build time (a Sphinx extension);
- :mod:`.chapters` – where the checkout is and its list of chapters (``notebooks/chapters.yaml``);
- :mod:`.runner` – execute the chapters with papermill and build the HTML book; one shard of a grid;
- :mod:`.cli` – ``python -m anatomy_kit`` (``fetch-model``, ``reproduce``, ``book``, ``shard``);
- :mod:`.estimates` – time and memory of each chapter at full scale, estimated from FLOP counts.
"""

from .claims import VERDICTS, Claim, claims_table
from .run import DEVICES, SCALES, Run, resolve_run
from .store import Store

__all__ = ["DEVICES", "SCALES", "VERDICTS", "Claim", "claims_table", "Run", "resolve_run", "Store"]
