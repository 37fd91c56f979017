"""The Q4_1 error estimate against the true error of the reference quantiser (chapter 1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from anatomy_kit.anatomy import quantisation as Q
from anatomy_kit.hf.layers import layer_module
from anatomy_kit.hf.surgery import substituted
from anatomy_kit.validate import AnatomyKitError

from conftest import tiny_llama


def _q4_1(x: np.ndarray) -> np.ndarray:
    """Quantise to Q4_1 and back with the ``gguf`` package (the reference implementation)."""
    import gguf
    from gguf import quants

    t = gguf.GGMLQuantizationType.Q4_1
    return quants.dequantize(quants.quantize(x.astype(np.float32), t), t)


@pytest.mark.parametrize("dist", ["normal", "laplace", "uniform"])
def test_estimate_matches_the_true_rounding_error(dist):
    rng = np.random.default_rng(0)
    x = {"normal": rng.normal(0, 0.2, (96, 256)), "laplace": rng.laplace(0.01, 0.1, (96, 256)),
         "uniform": rng.uniform(-0.3, 0.5, (96, 256))}[dist].astype(np.float32)
    y = _q4_1(x)
    true_rms = float(np.sqrt(((x - y) ** 2).mean()))
    W = torch.from_numpy(y)
    assert Q.on_q4_1_lattice(W) == 1.0
    assert Q.q4_1_rms_error(W) == pytest.approx(true_rms, rel=0.03)
    # the step read off the dequantised block is the quantiser's own d (float16)
    steps = Q.q4_1_steps(W).numpy()
    assert np.allclose(steps * 15, y.reshape(-1, 32).max(1) - y.reshape(-1, 32).min(1))


def test_weights_never_quantised_are_not_on_the_lattice():
    W = torch.randn(64, 128, generator=torch.Generator().manual_seed(1))
    assert Q.on_q4_1_lattice(W) == 0.0
    assert Q.on_q4_1_lattice(torch.zeros(4, 32)) == 1.0          # constant blocks count as quantised
    with pytest.raises(AnatomyKitError, match="multiple of 32"):
        Q.q4_1_blocks(torch.zeros(4, 30))
    with pytest.raises(AnatomyKitError, match="2-D"):
        Q.q4_1_blocks(torch.zeros(32))


def test_model_table_on_a_tiny_quantised_model():
    model = tiny_llama(n_layers=3)
    true = {}
    new = {}
    for layer in range(3):
        for m in ("q", "down"):
            w = layer_module(model, layer, m).weight.detach().numpy()
            y = _q4_1(w)
            true[(layer, m)] = np.sqrt(((w - y) ** 2).mean()) / y.std(ddof=1)
            new[(layer, m)] = torch.from_numpy(y)
    with substituted(model, new):
        table = Q.quantisation_error(model, ["q", "down"])
        with pytest.raises(AnatomyKitError, match="layer 0 gate"):
            Q.quantisation_error(model, ["gate"])               # gate was not quantised
    for m in ("q", "down"):
        np.testing.assert_allclose(table[m], [true[(l, m)] for l in range(3)], rtol=0.05)
