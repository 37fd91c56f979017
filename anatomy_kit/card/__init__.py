"""The layer report card of any Hugging Face causal LM (the book page *Your model's report card*).

``python -m anatomy_kit card MODEL`` (``MODEL``: ``embedded``, a local folder or a hub id) measures the
model's layers with the methods of chapters 1, 2 and 4 plus the cheap signals of the layer-pruning
literature, checks whether they agree, measures what its pruning suggestions cost, suggests FFN
widths with chapter 5's solver, and writes ``card.html`` (self-contained), ``card.md``, ``card.json``
(schema ``anatomy_kit/layer-card/v1``) and the exports (drop list, mergekit passthrough YAML, widths).
Layer indices are 0-based everywhere.

From Python::

    from anatomy_kit import card
    c = card.build_card("embedded", corpus="python-docs", settings=card.CardSettings(tokens=512),
                        cache_dir="build/card")          # or a LoadedModel, or (model, tokenizer=...)
    c.layer_table(); c.pruning_table(); c.write("card-embedded")
    card.compare_cards([c, other]); card.save_pruned(model, c.pruned_set(4), "pruned")

Modules, one job each: :mod:`.settings` (what is measured), :mod:`.checks` (every argument checked
before loading), :mod:`.loading` (architecture and memory checks before loading, layer access verified after), :mod:`.text` (evaluation and calibration
blocks), :mod:`.signals` (Block Influence, angular distance, update norm from one pass), :mod:`.work`
(chapter 4's shift and GW), :mod:`.causal` (ΔPPL of four edits with paired intervals),
:mod:`.measure` (the streamed, resumable passes), :mod:`.pruning` and :mod:`.suggest` (measured
pruning against last-k and random baselines), :mod:`.comparisons` (greedy paired against every
proposal, calibration stability), :mod:`.heal` (healing measured), :mod:`.lm_eval_task` (the lm-eval bridge), :mod:`.agreement`, :mod:`.widths`, :mod:`.build`,
:mod:`.document` (the finished card), :mod:`.schema`, :mod:`.cache`, :mod:`.provenance`,
:mod:`.figures`, :mod:`.render`, :mod:`.exports`, :mod:`.compare`, :mod:`.cli`, :mod:`.errors`.

**Cache layout** (what the synthesis chapter reuses)::

    <build>/card/<key>/progress.json   partial results (per batch, per greedy step, work, timings)
    <build>/card/<key>/card.json       the finished card

``key`` hashes the model identity, the token ids, the resolved settings, the device type and the
schema version (:func:`.cache.card_key`). The book page builds its card with
``cache_dir=<build>/card``; a later chapter loads it without recomputing::

    from anatomy_kit.card import cached_cards, load_card
    c = cached_cards("../build/card", model="embedded", corpus="python-docs")[0]   # newest first
    c = load_card("../build/card/<key>/card.json")                                # or by path
"""

from .build import build_card, estimate_only
from .compare import compare_cards, write_comparison
from .document import Card, cached_cards, load_card
from .errors import (CardSchemaError, CorpusTooShort, InsufficientMemory, LayerAccessMismatch, ModelNotFound,
                     OutputFolderConflict,
                     PruneDepthTooLarge, StructureNotRecognised, UnsupportedArchitecture, WidthBudgetInfeasible)
from .exports import save_pruned
from .render import card_html, card_markdown
from .schema import CARD_SCHEMA, SCHEMA, validate_card
from .settings import CardSettings

__all__ = ["build_card", "estimate_only", "compare_cards", "write_comparison", "Card", "cached_cards", "load_card",
           "save_pruned", "card_html", "card_markdown", "CARD_SCHEMA", "SCHEMA", "validate_card", "CardSettings",
           "CardSchemaError", "CorpusTooShort", "InsufficientMemory", "LayerAccessMismatch", "ModelNotFound", "OutputFolderConflict",
           "PruneDepthTooLarge", "StructureNotRecognised", "UnsupportedArchitecture", "WidthBudgetInfeasible"]
