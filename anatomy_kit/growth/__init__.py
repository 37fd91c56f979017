"""Growing a trained model: wider residual streams (SRIO, chapter 6) and phased, importance-driven
training (Growth Transformer training, chapter 3).

Growth Transformer training (paper 1; chapter 3):

- :mod:`.phases` – phased schedules (six phases named after embryonic development), their named
  validation errors, the importance rule, the shuffled-order and edge-inward controls; :mod:`.schedule_figure` –
  the layers × phases picture;
- :mod:`.curriculum` – running a schedule through ``anatomy_kit.lm.train``, one resumable call per
  phase; cloning entering layers, re-initialising anti-layers;
- :mod:`.cost` – trainable-layer-steps, a FLOP model that charges frozen layers their forward and
  pass-through backward, measured step times;
- :mod:`.sources` – importance from a reference model's ablation map or transferred by relative depth.

Residual-width growth (paper 3; chapter 6):

- :mod:`.gpt` – the GPT-2-style decoder that is grown, with the warm-up gate inside its LayerNorms
  and the gate's token ramp;
- :mod:`.srio` – the SRIO rotation, NRIO, MRIO, LayerNorm folding, applying a residual operator;
- :mod:`.expansion` – new heads and FFN units: convex, tiled (Net2Net split), zero;
- :mod:`.lrio` – the learned operators, LRIO (LiGO-style) and SRIO-LO;
- :mod:`.hf_grow` – the same operators on a Hugging Face Llama (RMSNorm, GQA, SwiGLU);
- :mod:`.recipe` – the grid's fixed part, its conditions, token budgets from parameter counts;
- :mod:`.starts` – fresh, grown (cached on disk) and trained starting points of the runs;
- :mod:`.experiment` – train small → grow → continue, paired seeds, multi-stage, in waves;
- :mod:`.diagnostics` – dead singular directions and effective rank of output projections, spikes;
- :mod:`.hf_probe` – perplexity of a grown pretrained Llama across gates and ε.
"""
