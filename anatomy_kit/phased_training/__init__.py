"""Phased, importance-driven training: paper 1's Growth Transformer training (chapter 3, *Growth
Transformer training*). A model of fixed size is trained in phases, each training some layers and
freezing the rest, with more of the budget for the layers an importance profile ranks higher.

- :mod:`.phases` – phased schedules (six phases named after embryonic development), the importance
  rule, the shuffled-order and edge-inward controls; :mod:`.schedule_errors` – their named
  validation errors; :mod:`.schedule_figure` – the layers × phases picture;
- :mod:`.curriculum` – running a schedule through ``anatomy_kit.lm.train``, one resumable call per
  phase; cloning entering layers, re-initialising anti-layers;
- :mod:`.cost` – trainable-layer-steps, a FLOP model that charges frozen layers their forward and
  pass-through backward, measured step times;
- :mod:`.sources` – importance from a reference model's ablation map or transferred by relative depth.

Growing a trained model's residual *width* (paper 3, chapter 6) is another idea and lives in
:mod:`anatomy_kit.width_growth`.
"""
