"""Residual-width growth: widening a trained decoder's residual stream (paper 3; chapter 6,
*Growing the residual stream*).

- :mod:`.gpt` – the GPT-2-style decoder that is grown, with the warm-up gate inside its LayerNorms
  and the gate's token ramp;
- :mod:`.srio` – the SRIO rotation, NRIO, MRIO, LayerNorm folding, applying a residual operator;
- :mod:`.expansion` – new heads and FFN units: convex, tiled (Net2Net split), zero;
- :mod:`.lrio` – the learned operators, LRIO (LiGO-style) and SRIO-LO;
- :mod:`.hf_grow` – the same operators on a Hugging Face Llama (RMSNorm, GQA, SwiGLU);
- :mod:`.recipe` – the grid's fixed part, its conditions, token budgets from parameter counts;
- :mod:`.starts` – fresh, grown (cached on disk) and trained starting points of the runs;
- :mod:`.experiment` – train small → grow → continue, paired seeds, multi-stage, each run once
  its source has finished;
- :mod:`.results` – reading the grid: final losses, curves around growth, paired orderings;
- :mod:`.diagnostics` – dead singular directions and effective rank of output projections, spikes;
- :mod:`.hf_probe` – perplexity of a grown pretrained Llama across gates and ε.

Phased, importance-driven training of a model of fixed size (paper 1's Growth Transformer
training, chapter 3) is another idea and lives in :mod:`anatomy_kit.phased_training`.
"""
