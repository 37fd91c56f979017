"""Hugging Face models from the inside (introduced in chapter 1, *The ablation map*).

- :mod:`.models` – load a causal LM by hub id, local folder or the embedded SmolLM2 GGUF;
- :mod:`.layers` – the decoder layers, their FFNs and norms of any supported model; hooks;
- :mod:`.surgery` – change weights for a ``with`` block and restore them exactly; neighbour
  means, noise, layer clones;
- :mod:`.evaluation` – perplexity, and the prefix cache that replays layers ℓ … L−1.

The kit's own models (:mod:`anatomy_kit.lm`, :mod:`anatomy_kit.width_growth`) name their parts so that
:mod:`.layers` and :mod:`.surgery` work on them too.
"""
