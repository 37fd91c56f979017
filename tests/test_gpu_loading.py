"""Hub and local models load straight onto a GPU (``device_map``), not as a float32 copy in host RAM first.

Chapter 4's 8–9B models would need 32–37 GB of host memory to be materialised on the CPU and then
moved; with ``device_map`` transformers places each tensor on the GPU as it reads it. Checked on a
CPU by recording what ``from_pretrained`` is asked (a GPU is pretended; nothing is loaded there).
"""

from __future__ import annotations

import torch


class _Loaded:
    """What the recorded from_pretrained returns: records where it is moved."""

    def __init__(self):
        self.moved = []

    def to(self, device):
        self.moved.append(torch.device(device).type)
        return self

    def eval(self):
        return self


def test_a_model_is_loaded_onto_the_gpu_directly(saved_tiny_model, monkeypatch):
    import transformers

    from anatomy_kit.hf import models

    asked = []

    def from_pretrained(folder, **kw):
        asked.append(kw)
        return _Loaded()

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    models.load_model(str(saved_tiny_model), device="cuda")
    assert torch.device(asked[-1]["device_map"]).type == "cuda"
    models.load_model(str(saved_tiny_model), device="cpu")
    assert asked[-1].get("device_map") is None                    # on a CPU: as before
