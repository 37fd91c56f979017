"""The book's machinery (every chapter uses it): parameters, stores, claims, report, runner, CLI.

- :mod:`.run` – resolve a chapter's papermill parameters into a :class:`~.run.Run`; save its metrics;
- :mod:`.store` – a resumable JSON store of finished results;
- :mod:`.claims` – claims about the papers, decided by the declared, tested rules of :mod:`.rules`
  (:mod:`.combine` builds rules from rules; :mod:`.decision` holds the verdicts and what rules share);
- :mod:`.report` – every chapter's numbers beside the papers' (``report.json``, ``report.md``);
- :mod:`.runner` – execute the chapters with papermill and build the HTML book; one shard of a grid;
- :mod:`.cli` – ``python -m anatomy_kit`` (``fetch-model``, ``reproduce``, ``book``, ``shard``);
- :mod:`.estimates` – time and memory of each chapter at full scale, estimated from FLOP counts.
"""

from .claims import VERDICTS, Claim, claims_table
from .run import DEVICES, SCALES, Run, resolve_run
from .store import Store

__all__ = ["DEVICES", "SCALES", "VERDICTS", "Claim", "claims_table", "Run", "resolve_run", "Store"]
