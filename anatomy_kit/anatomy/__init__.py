"""The anatomy of a trained model, layer by layer (paper 1, Wietrzykowski 2026; chapters 1 and 2).

- :mod:`.ablation` – the ablation map: ΔPPL when one layer is taken out (chapter 1);
- :mod:`.blockwise` – per-block NLL and the t interval of a ΔPPL, paired over blocks (chapter 1);
- :mod:`.quantisation` – the Q4_1 rounding error of the embedded model's weights (chapter 1);
- :mod:`.importance` – the per-layer importance profile as data, read by chapters 3 and 5;
- :mod:`.ranking` – layer rankings by importance and the one meaning of "interior" layers;
- :mod:`.predictability` – how well layer ℓ's weights follow from ℓ ± 1 (chapter 2);
- :mod:`.residual_basis` – the predictable level: norms tied to the residual basis (chapter 2);
- :mod:`.deltas` – the adjacent weight-delta correlation and its null models (chapter 2);
- :mod:`.manipulation` – five ways to rewrite a layer's weights (chapter 2);
- :mod:`.recovery` – how many fine-tuning steps a noised layer needs to recover, with a no-noise
  control that chooses the learning rate (chapter 2).
"""

from .ablation import ABLATION_STRATEGIES, AblationMap, ablated, ablation_map, skipped

__all__ = ["ABLATION_STRATEGIES", "AblationMap", "ablated", "ablation_map", "skipped"]
