"""Language models the kit trains (introduced in chapter 5, *The width solver*).

- :mod:`.model` – a Llama-shaped decoder whose FFN width can differ per layer;
- :mod:`.presets` – its shapes and training recipes by name (``smoke``, ``hour``, ``128M``, ``256M``, ``440M``);
- :mod:`.train` – ``train(model, train_blocks, eval_blocks, config, trainable=...)``: one
  resumable loop for fresh, grown, cloned or partly frozen models, deterministic on a CPU;
- :mod:`.step` – one optimiser step: micro-batches to the device, gradient sync once, losses read in batches;
- :mod:`.loss` – the next-token loss of a model's output and evaluation on token blocks;
- :mod:`.speed` – one GPU: TF32, bf16 where native, fused AdamW, activation checkpointing, FLOP/s and MFU;
- :mod:`.distributed` – several processes under ``torchrun``: DDP or FSDP, the same global batch;
- :mod:`.launch` – a ``torchrun`` script that trains from a JSON spec;
- :mod:`.checkpoint` – checkpoints in safetensors + JSON (no pickle);
- :mod:`.pool` – independent runs side by side in worker processes;
- :mod:`.shards` – one machine's share of a grid of runs (``ANATOMY_KIT_SHARD="i/n"``);
- :mod:`.estimates` – the one FLOP and memory model (each chapter's workload on it:
  :mod:`anatomy_kit.book.chapter_costs`);
"""

from .model import LMConfig, PerLayerWidthLM, build_lm, param_count, training_flops
from .pool import train_many
from .presets import PRESETS
from .shards import Shard, current_shard, parse_shard
from .train import TrainConfig, TrainResult, evaluate, load_trained, train

__all__ = ["LMConfig", "PerLayerWidthLM", "build_lm", "param_count", "training_flops", "train_many", "PRESETS",
           "TrainConfig", "TrainResult", "evaluate", "load_trained", "train", "Shard", "current_shard", "parse_shard"]
