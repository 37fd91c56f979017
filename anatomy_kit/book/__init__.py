"""The book's machinery (every chapter uses it): parameters, stores, report, runner, CLI.

The verdicts themselves (claims, rules, nulls, the registry) are the project's core idea and live in
their own subpackage, :mod:`anatomy_kit.verdicts`; this one runs chapters and assembles the book.

- :mod:`.run` – resolve a chapter's papermill parameters into a :class:`~.run.Run`; save its metrics;
- :mod:`.report` – every chapter's numbers beside the papers' (``report.json``, ``report.md``);
- :mod:`.pages` – parts of the book's own pages computed at build time (a Sphinx extension);
- :mod:`.chapters` – where the checkout is and its list of chapters (``notebooks/chapters.yaml``);
- :mod:`.runner` – execute the chapters with papermill and build the HTML book; one shard of a grid;
- :mod:`.cli` – ``python -m anatomy_kit`` (``fetch-model``, ``reproduce``, ``book``, ``shard``);
- :mod:`.chapter_costs` – each chapter's time and memory at full scale and at its hour preset, counted with
  the one FLOP and memory model of :mod:`anatomy_kit.lm.estimates`.
"""

from .run import DEVICES, SCALES, Run, resolve_run

__all__ = ["DEVICES", "SCALES", "Run", "resolve_run"]
