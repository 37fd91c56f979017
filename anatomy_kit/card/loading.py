"""Load a model for the card: architecture check and memory estimate *before* loading, layer access verified after.

- :func:`check_architecture` refuses encoder-only and encoder–decoder models and configurations
  ``transformers`` has no causal LM for (:class:`~.errors.UnsupportedArchitecture`);
- :func:`estimate_memory` counts the parameters of the configuration on the ``meta`` device (no
  memory used) and adds what one batch of the card needs; :func:`check_memory` compares it with
  the device's free memory (:class:`~.errors.InsufficientMemory`);
- :func:`verify_layer_access` checks, on the loaded model, that the layer list has L entries, that
  the model returns L + 1 hidden states, and that replaying every layer through the kit's prefix
  cache, final norm and head gives the model's own next-token NLL (computed from its logits)
  (:class:`~.errors.LayerAccessMismatch`);
- :func:`model_identity` names the model for the provenance and the cache key (hub revision,
  folder checksum, the embedded GGUF's sha256, or a checksum of the weights of a model object).

Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from ..checksums import sha256_of
from ..hf.evaluation import Batch, capture_prefix
from ..hf.layers import decoder_layers, module_paths
from ..hf.models import EMBEDDED_ALIASES, check_model_name, convert_embedded, resolve_device
from ..jsonio import read_json
from ..validate import AnatomyKitError
from ..anatomy.blockwise import block_nll_from_layer
from .errors import InsufficientMemory, LayerAccessMismatch, ModelNotFound, UnsupportedArchitecture
from .settings import CardSettings, default_max_prune
from .signals import max_offset

__all__ = ["causal_lm_types", "looks_like_path", "model_source", "model_config",
           "check_architecture", "check_module_names", "MemoryEstimate", "estimate_memory", "available_memory",
           "check_memory", "verify_layer_access", "model_location", "model_identity", "load_tokenizer"]

_WEIGHT_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".txt", ".py", ".tiktoken")


def causal_lm_types() -> list[str]:
    """The ``model_type`` values the card accepts: every decoder-only causal LM ``transformers`` knows, sorted."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                         MODEL_FOR_MASKED_LM_MAPPING_NAMES)

    return sorted(k for k in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES if k not in MODEL_FOR_MASKED_LM_MAPPING_NAMES)


def _accepted() -> str:
    types = causal_lm_types()
    return f"decoder-only causal LMs; the {len(types)} model types accepted are: {', '.join(types)}"


def looks_like_path(name: str) -> bool:
    """True when ``name`` can only be meant as a folder (module docstring)."""
    if name.startswith(("./", "../", "/", "~", ".\\")) or name in (".", ".."):
        return True
    parts = Path(name).parts
    return len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())


def model_source(name) -> str:
    """``"embedded"``, ``"local"`` or ``"hub"`` for a model argument; a missing folder is :class:`ModelNotFound`."""
    if isinstance(name, str) and name and name not in EMBEDDED_ALIASES:
        path = Path(name).expanduser()
        if looks_like_path(name) and not path.is_dir():
            raise ModelNotFound(f"model={name!r} names a folder, but {path.absolute()} does not exist; give a "
                                "folder holding config.json (save_pretrained output), 'embedded', or a hub id "
                                "like 'HuggingFaceTB/SmolLM2-135M'")
        if path.is_dir() and not (path / "config.json").is_file():
            raise ModelNotFound(f"model={name!r}: the folder {path.absolute()} has no config.json; give a folder "
                                "written by save_pretrained")
    return check_model_name(name)


def model_config(name: str):
    """``(config, folder or hub id, source)`` of a model name, without loading weights.

    A folder whose ``config.json`` names a ``model_type`` unknown to ``transformers`` is
    :class:`UnsupportedArchitecture` listing the accepted types (before ``transformers`` fails on it); a missing folder is
    :class:`~.errors.ModelNotFound` (:func:`model_source`).
    """
    from transformers import CONFIG_MAPPING, AutoConfig

    source = model_source(name)
    where = convert_embedded() if source == "embedded" else Path(name).expanduser() if source == "local" else name
    if source == "local":
        kind = read_json(Path(where) / "config.json", what="model configuration").get("model_type")
        if kind not in CONFIG_MAPPING:                   # transformers' own error would not say what is accepted
            check_architecture(SimpleNamespace(model_type=kind, is_encoder_decoder=False))
    try:
        return AutoConfig.from_pretrained(where), where, source
    except (OSError, ValueError) as err:
        also = f"; no local folder {name!r} exists here either" if source == "hub" else ""
        raise UnsupportedArchitecture(f"model={name!r}: its configuration could not be read "
                                      f"({err.__class__.__name__}: {str(err).splitlines()[0]}){also}") from None


def check_architecture(config) -> None:
    """Refuse what is not a decoder-only causal LM, naming the model type and every accepted one."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                         MODEL_FOR_MASKED_LM_MAPPING_NAMES)

    kind = getattr(config, "model_type", None)
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedArchitecture(f"model_type={kind!r} is an encoder–decoder model; the card reads {_accepted()}")
    if kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise UnsupportedArchitecture(f"model_type={kind!r} is an encoder-only (masked-LM) architecture; "
                                      f"the card reads {_accepted()}")
    if kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise UnsupportedArchitecture(f"model_type={kind!r} has no causal-LM class in transformers; "
                                      f"the card reads {_accepted()}")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes the card needs: the weights, one batch's activations (prefix cache, states, head), overhead."""

    n_parameters: int
    weight_bytes: int
    activation_bytes: int
    overhead_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes + self.overhead_bytes

    def to_dict(self) -> dict:
        return asdict(self) | {"total_bytes": self.total_bytes}


def _count_parameters(config) -> int:
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def check_module_names(name: str, targets) -> None:
    """Refuse ``--lora-targets`` that name no linear map of the model's decoder layers, from the configuration
    alone (the model built on the ``meta`` device: no weight is read)."""
    from transformers import AutoModelForCausalLM

    from .heal import lora_target_names

    config, _, _ = model_config(name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    try:
        lora_target_names(model, [0], targets)
    except AnatomyKitError as err:
        raise AnatomyKitError(f"--lora-targets: {err}") from None


def estimate_memory(config, settings: CardSettings, *, device_type: str = "cpu") -> MemoryEstimate:
    """Memory of a card run from the configuration alone (the parameters counted on the ``meta`` device).

    Activations of one batch of ``batch_size × block_size`` tokens (every stage streams its batches,
    greedy removal's calibration batches included): the prefix cache (every layer's input, L ×
    tokens × d at the parameter dtype), the states the cheap signals keep (2(N + 1) float32: each
    state and its unit vector for N + 1 layers, N = :func:`.signals.max_offset` with K = the
    settings' or :func:`.settings.default_max_prune`), the attention scores of one layer (heads ×
    T² per row, float32), the MLP's hidden activations (3 × tokens × FFN width) and the head's
    logits blocks (1024 × 4096 float32, three live); plus what stays on the device for the whole
    run: the ids, mask and labels of every evaluation and calibration block (3 × int64 per
    token). Overhead: 600 MB for the Python process and libraries on a CPU, 300 MB of CUDA context.
    """
    n_params = _count_parameters(config)
    itemsize = torch.empty(0, dtype=getattr(torch, settings.dtype)).element_size()
    d = int(getattr(config, "hidden_size", getattr(config, "n_embd", 0)) or 0)
    n_layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", getattr(config, "n_head", 1)) or 1)
    ffn = int(getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * d)
    tokens, t = settings.batch_size * settings.block_size, settings.block_size
    k = settings.max_prune or default_max_prune(n_layers)
    states = 2 * (max_offset(n_layers, k) + 1)
    ids = 3 * 8 * (settings.n_eval_blocks + settings.n_calibration_blocks) * t
    activations = (n_layers * tokens * d * itemsize + states * tokens * d * 4 + settings.batch_size * heads * t * t * 4
                   + 3 * tokens * ffn * 4 + 3 * 1024 * 4096 * 4 + ids)
    overhead = 600 * 2**20 if device_type == "cpu" else 300 * 2**20
    return MemoryEstimate(int(n_params), int(n_params * itemsize), int(activations), int(overhead))


def available_memory(device: torch.device) -> int | None:
    """Free bytes on ``device``: CUDA's ``mem_get_info``; on a CPU, the available RAM (``psutil``); ``None`` if unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        import psutil
    except ImportError:   # pragma: no cover - psutil comes with ipykernel
        return None
    return int(psutil.virtual_memory().available)


def check_memory(estimate: MemoryEstimate, device: torch.device, available: int | None = None) -> None:
    """Raise :class:`InsufficientMemory` when the estimate exceeds the device's free memory."""
    free = available_memory(device) if available is None else available
    if free is not None and estimate.total_bytes > free:
        gib = 2.0 ** 30
        raise InsufficientMemory(
            f"the card needs about {estimate.total_bytes / gib:.1f} GiB on {device.type} "
            f"({estimate.n_parameters:,} parameters = {estimate.weight_bytes / gib:.1f} GiB of weights, "
            f"{estimate.activation_bytes / gib:.2f} GiB for one batch), but {free / gib:.1f} GiB are free; "
            "use a smaller dtype (--dtype bfloat16), a smaller --batch-size, or a device with more memory")


def verify_layer_access(model: nn.Module, input_ids: torch.Tensor, *, dtype: str = "float32") -> dict:
    """Check the kit reads this model's layers right (module docstring); return what was compared.

    ``input_ids`` (1, T): one block. The tolerance on the NLL comparison is relative, 1e-4 in float32
    (different summation order in the head only) and 2e-2 in 16-bit dtypes.
    """
    layers = decoder_layers(model)
    n_config = getattr(model.config, "num_hidden_layers", None)
    path = next((name for name, m in model.named_modules() if m is layers), "?")
    if isinstance(n_config, int) and n_config != len(layers):
        raise LayerAccessMismatch(f"{path} holds {len(layers)} layers but config.num_hidden_layers = {n_config}; "
                                  f"modules: {'; '.join(module_paths(model))}")
    ids = input_ids.to(next(model.parameters()).device)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
        own = torch.nn.functional.cross_entropy(out.logits[0, :-1].float(), ids[0, 1:], reduction="sum")
        cache = capture_prefix(model, [Batch(ids, mask, ids.clone())])
    kit = float(block_nll_from_layer(model, cache, 0)[0])
    n_states = len(out.hidden_states or ())
    if n_states != len(layers) + 1:
        raise LayerAccessMismatch(f"the model returns {n_states} hidden states; L + 1 = {len(layers) + 1} were expected "
                                  f"for the {len(layers)} layers at {path}")
    rtol = 1e-4 if dtype == "float32" else 2e-2
    rel = abs(kit - float(own)) / max(abs(float(own)), 1e-30)
    if not math.isfinite(kit) or rel > rtol:
        raise LayerAccessMismatch(f"replaying the {len(layers)} layers at {path} through the kit gives a summed NLL "
                                  f"of {kit:.6g}, the model's own logits {float(own):.6g} (relative gap {rel:.2g} > "
                                  f"{rtol:g}); the kit does not read this architecture correctly")
    return {"layers_path": path, "n_layers": len(layers), "n_hidden_states": n_states, "nll_kit": kit,
            "nll_model": float(own), "relative_gap": rel, "tolerance": rtol, "tokens": int(ids.shape[1])}


def _folder_checksum(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in _WEIGHT_SUFFIXES):
        h.update(f"{f.name}\0{sha256_of(f)}\n".encode())
    return h.hexdigest()


def _weights_checksum(model: nn.Module) -> str | None:
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        if tensor.device.type == "meta":
            return None
        h.update(name.encode())
        h.update(tensor.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def model_location(name: str | None, source: str, folder: Path | str | None, revision: str | None) -> str | None:
    """Where another tool loads this model from: the absolute folder (embedded or local), ``id@revision`` for
    a hub model (``id`` when the revision is unknown), ``None`` for a model object."""
    if source in ("embedded", "local") and folder is not None:
        return str(Path(folder).expanduser().resolve())
    if source == "hub" and name:
        return f"{name}@{revision}" if revision else name
    return None


def model_identity(model: nn.Module, name: str | None, source: str, folder: Path | str | None = None) -> dict:
    """What names this model in the provenance and the cache key (module docstring)."""
    cfg = model.config
    out = {"name": name or type(model).__name__, "source": source, "class": type(model).__name__,
           "model_type": getattr(cfg, "model_type", None), "revision": getattr(cfg, "_commit_hash", None),
           "checksum": None, "checksum_of": None}
    out["location"] = model_location(name, source, folder, out["revision"])
    if source == "embedded" and folder is not None:
        meta = read_json(Path(folder) / "anatomy_kit_source.json", what="embedded model record")
        out.update(checksum=meta["sha256"], checksum_of=f"GGUF file {meta['gguf']}")
    elif source == "local" and folder is not None:
        out.update(checksum=_folder_checksum(Path(folder)), checksum_of="files of the model folder (sha256 of each)")
        record = Path(folder) / "anatomy_kit_pruned.json"
        if record.is_file():                      # a --save-pruned folder: where its layers came from
            out["pruned"] = read_json(record, what="pruning record")
    elif source == "object":
        out.update(checksum=_weights_checksum(model), checksum_of="weights (state_dict bytes)")
    return out


def load_tokenizer(name: str):
    """The tokenizer of a model name alone (no weights), so the text is checked before the model loads."""
    from transformers import AutoTokenizer

    _, where, _ = model_config(name)
    try:
        return AutoTokenizer.from_pretrained(where)
    except (OSError, ValueError) as err:
        raise AnatomyKitError(f"model={name!r}: its tokenizer could not be read ({err.__class__.__name__}: "
                              f"{str(err).splitlines()[0]})") from None


def load_for_card(name: str, settings: CardSettings, *, device: str = "auto", available: int | None = None,
                  before_weights=None):
    """``(LoadedModel, identity, memory estimate)``: checked architecture and memory, then loaded in ``settings.dtype``.

    ``before_weights()``, when given, runs after the memory check and before any weight loads (the
    card checks its text there).
    """
    from ..hf.models import load_model

    config, where, source = model_config(name)
    check_architecture(config)
    dev = resolve_device(device)
    estimate = estimate_memory(config, settings, device_type=dev.type)
    check_memory(estimate, dev, available)
    if before_weights is not None:
        before_weights()
    loaded = load_model(name, device=device, dtype=getattr(torch, settings.dtype))
    return loaded, model_identity(loaded.model, name, source, where if source != "hub" else None), estimate
