"""The named errors of the layer report card (``python -m anatomy_kit card``; the book page *Your model's report card*).

Every one is an :class:`~anatomy_kit.validate.AnatomyKitError` (a ``ValueError``) whose message names
the value that was refused and what is accepted, so a script can catch the kit's errors as one class
or each case by name.
"""

from __future__ import annotations

from ..hf.layers import StructureNotRecognised
from ..validate import AnatomyKitError

__all__ = ["ModelNotFound", "UnsupportedArchitecture", "StructureNotRecognised", "LayerAccessMismatch", "InsufficientMemory",
           "CorpusTooShort", "PruneDepthTooLarge", "WidthBudgetInfeasible", "OutputFolderConflict",
           "CardSchemaError"]


class ModelNotFound(AnatomyKitError):
    """The model argument names a folder that does not exist or holds no ``config.json``."""


class UnsupportedArchitecture(AnatomyKitError):
    """The model is not a decoder-only causal LM (encoder-only, encoder–decoder, or unknown to ``transformers``)."""


class LayerAccessMismatch(AnatomyKitError):
    """Verification on load failed: the kit's path does not reproduce the model's own output, or the
    model does not return L + 1 hidden states."""


class InsufficientMemory(AnatomyKitError):
    """The memory estimated from the config (before loading) exceeds what the device has available."""


class CorpusTooShort(AnatomyKitError):
    """The corpus holds fewer tokens than the evaluation and calibration budgets ask for."""


class PruneDepthTooLarge(AnatomyKitError):
    """``max_prune`` (K) is not below the model's number of layers L."""


class WidthBudgetInfeasible(AnatomyKitError):
    """Chapter 5's solver cannot meet the FFN budget within the width bounds."""


class OutputFolderConflict(AnatomyKitError):
    """The output folder already holds the card of another model."""


class CardSchemaError(AnatomyKitError):
    """A card document does not validate against the card's JSON schema (the message names the field)."""
