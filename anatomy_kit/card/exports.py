"""What a card hands to other tools: the drop list, mergekit passthrough configs, widths, a pruned model folder.

- ``drop_list.json``: for every k, every measured set (method, 0-based layers, perplexity, interval)
  and the recommended one (greedy's);
- ``mergekit/passthrough_k<k>.yaml``: a mergekit ``passthrough`` config that keeps every layer but
  greedy's k-set, as slices of *half-open, 0-based* ``layer_range: [start, end)`` (the convention
  mergekit uses; PruneMe's users tripped over it); ``model:`` is what mergekit can load as written,
  from any directory (:func:`mergekit_model`: an absolute folder or ``id@revision``);
- ``widths.json``: today's FFN widths and the suggestion;
- :func:`save_pruned`: a Hugging Face folder of the model without the given layers, loadable with
  ``from_pretrained``. Every per-layer list of the configuration (``layer_types`` of Gemma 2/3,
  Qwen 2/3's sliding-window pattern, …: any list with one entry per layer) keeps the entries of the
  kept layers, so each kept layer gets the attention type it had.

Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Sequence

import yaml
from torch import nn

from ..hf.layers import decoder_layers
from ..jsonio import write_json
from ..validate import AnatomyKitError

__all__ = ["kept_slices", "mergekit_model", "mergekit_yaml", "pruned_readme", "write_exports", "pruned_config", "save_pruned"]


def kept_slices(n_layers: int, drop: Sequence[int]) -> list[tuple[int, int]]:
    """Half-open ranges ``[start, end)`` of the layers kept when ``drop`` is removed."""
    dropped = set(int(x) for x in drop)
    out, start = [], None
    for layer in range(n_layers + 1):
        keep = layer < n_layers and layer not in dropped
        if keep and start is None:
            start = layer
        elif not keep and start is not None:
            out.append((start, layer))
            start = None
    return out


def mergekit_model(model_doc: dict) -> str | None:
    """What a mergekit config names as ``model:`` for the card's model (``card.json``'s ``"model"``): its
    ``location`` (an absolute folder, or ``id@revision`` for a hub model; :func:`.loading.model_location`);
    for a card written before locations were recorded, the embedded model's converted folder, a local
    folder made absolute, or the hub id with its revision. ``None`` for a model object (no folder)."""
    if model_doc.get("location"):
        return model_doc["location"]
    from .loading import model_location

    folder = None
    if model_doc["source"] == "embedded":
        from ..hf.models import convert_embedded

        folder = convert_embedded()
    elif model_doc["source"] == "local":
        folder = model_doc["name"]
    return model_location(model_doc["name"], model_doc["source"], folder, model_doc.get("revision"))


def mergekit_yaml(model: str, n_layers: int, drop: Sequence[int], dtype: str = "float32",
                  friendly: str | None = None) -> str:
    """A mergekit passthrough config keeping every layer of ``model`` except ``drop`` (0-based).

    ``model`` is written as mergekit loads it (a folder or ``id@revision``); ``friendly`` (the name the
    card was asked for) goes into the comment.
    """
    spans = kept_slices(n_layers, drop)
    slices = [{"sources": [{"model": model, "layer_range": [a, b]}]} for a, b in spans]
    body = yaml.safe_dump({"slices": slices, "merge_method": "passthrough", "dtype": dtype}, sort_keys=False)
    (a, b), drop = spans[0], sorted(int(x) for x in drop)
    return (f"# anatomy_kit layer card: {friendly or model} without layers {drop} (0-based)\n"
            f"# layer_range is half-open and 0-based: the first slice [{a}, {b}] keeps layers "
            f"{a}..{b - 1}\n" + body)


def write_exports(doc: dict, out: Path) -> dict[str, Path]:
    """Write drop_list.json, mergekit/passthrough_k*.yaml (full cards only) and widths.json into ``out``."""
    paths = {"widths": write_json(out / "widths.json", {"layer_index_base": 0, **doc["widths"]})}
    if doc["pruning"] is None:
        return paths
    by_k = {}
    for e in doc["pruning"]["sets"]:
        by_k.setdefault(str(e["k"]), []).append({k: e[k] for k in ("method", "layers", "ppl", "delta_pct", "low",
                                                                   "high", "p_random", "chosen_on")})
    paths["drop_list"] = write_json(out / "drop_list.json", {
        "model": doc["model"]["name"], "layer_index_base": 0, "baseline_ppl": doc["baseline"]["ppl"],
        "recommended": {k: v["layers"] for k, v in doc["pruning"]["recommended"].items()}, "sets": by_k})
    folder = out / "mergekit"
    folder.mkdir(parents=True, exist_ok=True)
    n, name, where = doc["model"]["n_layers"], doc["model"]["name"], mergekit_model(doc["model"])
    if where is None:                       # a model object: no folder or hub id mergekit could load
        (folder / "README.txt").write_text(
            f"No passthrough config: the card measured a model object ({name}) that has no folder or hub id.\n"
            "Save it with save_pretrained and build the card from that folder.\n", encoding="utf-8")
        return paths
    for k, e in doc["pruning"]["recommended"].items():
        path = folder / f"passthrough_k{k}.yaml"
        path.write_text(mergekit_yaml(where, n, e["layers"], doc["provenance"]["dtype"], friendly=name),
                        encoding="utf-8")
        paths[f"mergekit_k{k}"] = path
    return paths


def pruned_readme(doc: dict, entry: dict, reloaded_ppl: float, command: str) -> str:
    """The ``README.md`` model card of a ``--save-pruned`` folder: base model and revision, the dropped
    layers (0-based), the card's measured perplexity with its interval, the reloaded folder's, the text
    it was measured on, and the command that made it."""
    m, t, b = doc["model"], doc["text"], doc["baseline"]
    kept = m["n_layers"] - len(entry["layers"])
    return "\n".join([
        f"# {m['name']} without layers {entry['layers']}",
        "",
        f"A pruned copy of **{m['name']}** (revision {m.get('revision') or 'not recorded'}; weights checksum "
        f"{m.get('checksum') or 'not recorded'}) with {kept} of its {m['n_layers']} decoder layers: layers "
        f"{entry['layers']} (0-based: layer 0 is the first decoder layer) were removed, chosen by "
        f"`{entry['method']}` on {entry['chosen_on']}. No weight was changed or fine-tuned.",
        "",
        "## Measured",
        "",
        f"- Perplexity {entry['ppl']:.6g} on {b['scored_tokens']:,} scored tokens of `{t['corpus']}` "
        f"({t['n_eval_blocks']} blocks of {t['block_size']} tokens, context length {t['block_size']}), against "
        f"{b['ppl']:.6g} for the intact model: ΔPPL {entry['delta_pct']:+.1f} % "
        f"[{entry['low']:+.1f}, {entry['high']:+.1f}] (95 % t interval paired over the blocks).",
        f"- This folder, reloaded with `from_pretrained`, gives perplexity {reloaded_ppl:.6g} on the same tokens.",
        f"- Token ids sha256 {t['token_sha256']}.",
        "",
        "## Made with",
        "",
        f"```\n{command}\n```",
        "",
        f"anatomy_kit layer report card (card key {doc['key']}); `anatomy_kit_pruned.json` lists the dropped "
        "layers for tools.",
        ""])


def pruned_config(config, drop: Sequence[int], n_layers: int):
    """A copy of ``config`` for the model without ``drop``: the layer count and every per-layer list cut."""
    keep = [i for i in range(n_layers) if i not in set(drop)]
    cfg = copy.deepcopy(config)
    for name, value in config.to_dict().items():
        if isinstance(value, list) and len(value) == n_layers and hasattr(cfg, name):
            setattr(cfg, name, [value[i] for i in keep])
    cfg.num_hidden_layers = len(keep)
    return cfg


def _owner(model: nn.Module, child: nn.Module) -> tuple[nn.Module, str]:
    for module in model.modules():
        for name, c in module.named_children():
            if c is child:
                return module, name
    raise AnatomyKitError("the layer list is not a child of any module of the model")   # pragma: no cover


def save_pruned(model: nn.Module, drop: Sequence[int], folder: str | Path, tokenizer=None) -> Path:
    """Save ``model`` without layers ``drop`` (0-based) as a Hugging Face folder (module docstring).

    The model object is left as it was (its layer list and config are swapped back after saving).
    """
    layers = decoder_layers(model)
    n = len(layers)
    drop = sorted({int(x) for x in drop})
    if not drop or drop[0] < 0 or drop[-1] >= n or len(drop) >= n:
        raise AnatomyKitError(f"drop={drop} must name between 1 and {n - 1} distinct layers in 0..{n - 1}")
    owner, attr = _owner(model, layers)
    old_config = model.config
    holders = [m for m in model.modules() if getattr(m, "config", None) is old_config]
    new_config = pruned_config(old_config, drop, n)
    folder = Path(folder)
    try:
        setattr(owner, attr, nn.ModuleList([layers[i] for i in range(n) if i not in drop]))
        for m in holders:
            m.config = new_config
        model.save_pretrained(folder)
    finally:
        setattr(owner, attr, layers)
        for m in holders:
            m.config = old_config
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    write_json(folder / "anatomy_kit_pruned.json", {"dropped_layers": drop, "layer_index_base": 0,
                                                    "source_layers": n})
    return folder
