"""Do the layer signals agree, and which one should you trust? (the book's chapter 7, *Synthesis*).

Modules, one job each:

- :mod:`.signals`: every per-layer signal the report card and chapters 1, 2 and 4 saved for one model,
  in a :class:`SignalTable` (higher = more important), with what each cost;
- :mod:`.agreement`: the rank-correlation matrix with permutation p-values, families of signals, and
  the layers families dispute;
- :mod:`.pruning`: the decisive test, pruning by each signal against random sets and the last k;
- :mod:`.profile` and :mod:`.depth`: the same causal and cheap signal on any of the book's models,
  depth-normalised, and whether the edge layers are the most important;
- :mod:`.decisions`: chapter 3's schedule and chapter 5's widths from each signal, and how far they move;
- :mod:`.verdicts`: the book's whole verdict table, grouped by what would change each verdict.

Nothing here trains; the measuring is in :mod:`anatomy_kit.card` and the chapters, whose saved numbers
these modules read.
"""

from .agreement import (FAMILY_MIN_RHO, SAME_SIGNAL_RHO, Agreement, agreement_matrix, disputed_layers,
                        family_score, percentile_ranks, same_signal_groups, signal_families)
from .decisions import (ScheduleSettings, ch03_settings, phase_overlap, schedule_decision, width_decision,
                        width_distance)
from .depth import edge_contrasts, edge_importance, layer_importance, resample_depth
from .profile import LayerProfile, layer_profile
from .pruning import (PruningTest, card_measurements, decisive_test, interior_layers, one_shot, position_null,
                      random_set_null)
from .signals import KINDS, Signal, SignalTable, card_signals, chapter_signals, collect
from .verdicts import book_claims, verdict_counts, verdict_table

__all__ = ["FAMILY_MIN_RHO", "SAME_SIGNAL_RHO", "same_signal_groups", "layer_importance", "interior_layers",
           "position_null", "Agreement", "agreement_matrix", "disputed_layers", "family_score", "percentile_ranks",
           "signal_families", "ScheduleSettings", "ch03_settings", "phase_overlap", "schedule_decision",
           "width_decision", "width_distance", "edge_importance", "edge_contrasts", "resample_depth", "LayerProfile",
           "layer_profile",
           "PruningTest", "card_measurements", "decisive_test", "one_shot", "random_set_null", "KINDS", "Signal",
           "SignalTable", "card_signals", "chapter_signals", "collect", "book_claims", "verdict_counts",
           "verdict_table"]
