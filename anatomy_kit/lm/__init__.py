"""Language models the kit trains (introduced in chapter 5, *The width solver*).

- :mod:`.model` – a Llama-shaped decoder whose FFN width can differ per layer;
- :mod:`.presets` – its shapes and training recipes by name (``smoke``, ``128M``, ``256M``, ``440M``);
- :mod:`.train` – ``train(model, train_blocks, eval_blocks, config, trainable=...)``: one
  deterministic, resumable loop for fresh, grown, cloned or partly frozen models;
- :mod:`.checkpoint` – checkpoints in safetensors + JSON (no pickle);
- :mod:`.pool` – independent runs side by side in worker processes;
- :mod:`.compare` – paired comparison of runs seed by seed.
"""

from .model import LMConfig, PerLayerWidthLM, build_lm, param_count, training_flops
from .pool import train_many
from .presets import PRESETS
from .train import TrainConfig, TrainResult, evaluate, load_trained, train

__all__ = ["LMConfig", "PerLayerWidthLM", "build_lm", "param_count", "training_flops", "train_many", "PRESETS",
           "TrainConfig", "TrainResult", "evaluate", "load_trained", "train"]
