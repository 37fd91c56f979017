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

What a user holding only the folders needs: :func:`export_guide` lists every export with the exact
command that uses it (run from the card's folder) and the install lines, for ``card.md`` and
``card.html``; :func:`pruned_readme` and :func:`healed_readme` (the model cards of ``--save-pruned``
and ``--save-healed`` folders) give the same commands from the model's folder. Everything in the
card's folder is relative to it except the mergekit configs' ``model:``, which mergekit resolves
against the directory it runs in: :func:`mergekit_rewrite_command` rewrites it when the model's folder
moved (a hub model's ``id@revision`` never needs it). Checked with mergekit 0.1.5 and lm-eval 0.4.13.

Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import copy
import os
import shlex
from pathlib import Path
from typing import Sequence

import yaml
from torch import nn

from .heal import share_text

from ..hf.layers import decoder_layers
from ..jsonio import write_json
from ..validate import AnatomyKitError

__all__ = ["kept_slices", "mergekit_model", "mergekit_yaml", "pruned_readme", "healed_readme", "write_exports",
           "pruned_config", "save_pruned", "MERGEKIT_INSTALL", "MERGEKIT_CHECKED", "mergekit_command",
           "mergekit_rewrite_command", "export_guide"]

#: how mergekit is installed, and the release the passthrough configs were checked with
MERGEKIT_INSTALL, MERGEKIT_CHECKED = "pip install mergekit", "0.1.5"


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


def mergekit_command(k: int | str, folder: str = "mergekit") -> str:
    """The command that builds the pruned model of k from its passthrough config (run from the card's folder)."""
    return f"mergekit-yaml {folder}/passthrough_k{k}.yaml ./pruned-k{k} --copy-tokenizer"


def mergekit_rewrite_command(doc: dict, folder: str = "mergekit") -> str | None:
    """The command that points every passthrough config at the model's new folder (``NEW_FOLDER``) when the
    model moved (GNU sed; macOS's wants ``sed -i ''``); ``None`` for a hub model, whose ``id@revision``
    holds anywhere."""
    where = mergekit_model(doc["model"])
    if where is None or doc["model"]["source"] == "hub":
        return None
    written = yaml.safe_dump({"model": where}).split(":", 1)[1].strip()
    pattern = "".join("\\" + ch if ch in "\\[]*^$|&" else ch for ch in written)
    return f"sed -i {shlex.quote(f's|model: {pattern}$|model: NEW_FOLDER|')} {folder}/passthrough_k*.yaml"


def export_guide(doc: dict, extras: dict | None = None, out: str | Path | None = None) -> list[dict]:
    """Every export of the card's folder with what it is and the command that uses it (run from the card's
    folder); ``extras``: ``lm_eval`` (:func:`.lm_eval_task.write_lm_eval_task`'s info), ``pruned`` and
    ``heal`` (what the command saved), ``out`` the card's folder (folders outside it are named relative
    to it). Each entry: ``{"file", "what", "commands": [...]}``."""
    from .lm_eval_task import LM_EVAL_CHECKED, LM_EVAL_INSTALL, lm_eval_command

    extras = extras or {}
    rel = (lambda f: os.path.relpath(f, out)) if out is not None else str
    out_list = [{"file": "card.json", "what": "every number of this card (schema card.schema.json)", "commands": []},
                {"file": "widths.json", "what": "today's FFN widths and the suggested ones", "commands": []}]
    if doc["pruning"] is None:
        return out_list
    out_list.append({"file": "drop_list.json", "what": "every measured pruned set per k (0-based layers) and the "
                                                       "recommended one", "commands": []})
    where = mergekit_model(doc["model"])
    if where is not None:
        ks = sorted(doc["pruning"]["recommended"], key=int)
        move = mergekit_rewrite_command(doc)
        out_list.append({
            "file": "mergekit/passthrough_k*.yaml",
            "what": (f"mergekit passthrough configs, one per k ({', '.join(ks)}), that build the model without "
                     f"greedy's k layers from `{where}` (checked with mergekit {MERGEKIT_CHECKED})"
                     + ("" if move is None else "; if that folder moved, point the configs at its new place "
                                                "with the second command (NEW_FOLDER: the model's folder now)")),
            "commands": [MERGEKIT_INSTALL, mergekit_command(ks[-1])] + ([] if move is None else [move])})
    task = extras.get("lm_eval")
    if task:
        intact = where.replace("@", ",revision=", 1) if doc["model"]["source"] == "hub" and where else (where or "DIR")
        cmds = [LM_EVAL_INSTALL, lm_eval_command(doc, intact)]
        if extras.get("pruned"):
            cmds.append(lm_eval_command(doc, rel(extras["pruned"]["folder"])))
        out_list.append({"file": "lm_eval/", "what": (f"an lm-evaluation-harness task, `{task['task']}`, that scores "
                                                      f"a model on this card's {task['blocks']} evaluation blocks "
                                                      f"(its metric token_perplexity is the card's perplexity; "
                                                      f"`--model hf` needs the `[hf]` extra; checked with lm-eval "
                                                      f"{LM_EVAL_CHECKED}); the folder moves freely"),
                         "commands": cmds})
    if extras.get("pruned"):
        p = extras["pruned"]
        out_list.append({"file": rel(p["folder"]), "what": f"the model without layers {p['layers']} (k = {p['k']}), "
                                                          "a Hugging Face folder; its README.md says how it was made "
                                                          "and measured", "commands": []})
    heal = extras.get("heal")
    if heal:
        out_list.append({"file": "heal.json", "what": "healing against its control: the recipe, the curves, every "
                                                      "interval (the Healing section below)", "commands": []})
        if heal.get("healed_folder"):
            h = heal["healed_folder"]
            out_list.append({"file": rel(h["folder"]), "what": f"the healed model of k = {h['k']} "
                                                               f"({heal['recipe']['method']}, merged), a Hugging Face "
                                                               "folder with its README.md",
                             "commands": [lm_eval_command(doc, rel(h["folder"]))] if task else []})
    return out_list


def _card_folder_block(card_folder: str | Path | None, folder: str | Path | None) -> str:
    if card_folder is None:
        return "CARD=path/to/the/card/folder"
    rel = os.path.relpath(Path(card_folder).resolve(), Path(folder).resolve()) if folder is not None else card_folder
    return f"CARD={shlex.quote(str(rel))}      # the card's folder, from this one (set it to wherever it lies now)"


def _check_commands(doc: dict, k: int, ppl: float, card_folder, folder, rebuild: bool) -> list[str]:
    from .lm_eval_task import LM_EVAL_CHECKED, LM_EVAL_INSTALL, task_name

    lines = ["## Check it", "",
             "From this folder, with the card's folder at hand (it holds the lm-eval task and the mergekit configs):",
             "", "```bash", _card_folder_block(card_folder, folder),
             f"{LM_EVAL_INSTALL}      # --model hf needs the [hf] extra; checked with lm-eval {LM_EVAL_CHECKED}",
             f"lm_eval --model hf --model_args pretrained=. --include_path $CARD/lm_eval --tasks {task_name(doc)}"]
    if rebuild:
        lines += [f"{MERGEKIT_INSTALL}      # checked with mergekit {MERGEKIT_CHECKED}",
                  f"mergekit-yaml $CARD/mergekit/passthrough_k{k}.yaml ./rebuilt --copy-tokenizer"]
    lines += ["```", "", f"lm-eval's `token_perplexity` should read {ppl:.6g} (this folder's perplexity on the "
                         "card's tokens)" + ("; mergekit's `./rebuilt` holds the same weights as this folder, bit for "
                                             "bit." if rebuild else "."),
              "If the card's folder moved, set `CARD` to its place; if the base model's folder moved too, the card's "
              "page gives the command that points the mergekit configs at it.", ""]
    return lines


def pruned_readme(doc: dict, entry: dict, reloaded_ppl: float, command: str, *, card_folder: str | Path | None = None,
                  folder: str | Path | None = None) -> str:
    """The ``README.md`` model card of a ``--save-pruned`` folder: base model and revision, the dropped
    layers (0-based), the card's measured perplexity with its interval, the reloaded folder's, the text
    it was measured on, the commands that check it with lm-eval and rebuild it with mergekit (from this
    folder, the card's folder named relative to it), and the command that made it."""
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
        *_check_commands(doc, len(entry["layers"]), reloaded_ppl, card_folder, folder,
                         rebuild=entry["method"] == "greedy"),
        "## Made with",
        "",
        f"```\n{command}\n```",
        "",
        f"anatomy_kit layer report card (card key {doc['key']}); `anatomy_kit_pruned.json` lists the dropped "
        "layers for tools.",
        ""])


def _ci(e: dict) -> str:
    return f"{e['delta_pct']:+.1f} % [{e['low']:+.1f}, {e['high']:+.1f}]"


def healed_readme(doc: dict, heal: dict, k: str, reloaded_ppl: float, *, card_folder: str | Path | None = None,
                  folder: str | Path | None = None) -> str:
    """The ``README.md`` model card of a ``--save-healed`` folder: what was removed, how it was healed (the
    recipe, the text), what the healing measured against the intact model healed the same way (the
    control) and against the untuned one, and how to check it."""
    m, t = doc["model"], doc["text"]
    e, c, r = heal["by_k"][k], heal["control"], heal["recipe"]
    merged = (" The LoRA adapters are merged into the weights: this is a plain model, no adapter files."
              if r["method"] == "lora" else "")
    return "\n".join([
        f"# {m['name']} without layers {e['layers']}, healed",
        "",
        f"A pruned copy of **{m['name']}** (revision {m.get('revision') or 'not recorded'}) with layers {e['layers']} "
        f"(0-based) removed, then fine-tuned ({heal['recipe']['method']}): {heal['terms']}.{merged}",
        "",
        "## How it was healed",
        "",
        f"- Text: {heal['trained_on']} of `{t['corpus']}` (never a document of the evaluation half).",
        f"- Method chosen: {heal['method_choice']['method']} ({heal['method_choice']['why']}).",
        "- The control: the intact model fine-tuned the same way. Shared: " + "; ".join(heal["shared"]) + ".",
        "- Not shared: " + "; ".join(e["differs"]) + ".",
        "",
        "## Measured (on the card's evaluation blocks, 95 % t intervals paired over the blocks)",
        "",
        f"- Perplexity {e['ppl_pruned']:.6g} pruned → {e['ppl_healed']:.6g} healed; the intact model healed alike: "
        f"{c['ppl_before']:.6g} → {e['ppl_control']:.6g}.",
        f"- Healed pruned against the intact model healed alike: ΔPPL {_ci(e['vs_control'])}.",
        f"- Share of the pruning gap (ΔPPL {_ci(e['gap_before'])} before healing) that healing closes: "
        f"{share_text(e['gap_closed'])}.",
        f"- Secondary, against the untuned intact model ({c['ppl_before']:.6g}): ΔPPL {_ci(e['untuned']['vs_intact'])}"
        + (f" — {e['untuned']['reading']}" if e["untuned"]["reading"] else "") + ".",
        f"- This folder, reloaded with `from_pretrained`, gives perplexity {reloaded_ppl:.6g} on the same tokens.",
        "",
        *_check_commands(doc, len(e["layers"]), reloaded_ppl, card_folder, folder, rebuild=False),
        "## Made with",
        "",
        f"```\n{heal['command']}\n```",
        "",
        f"anatomy_kit layer report card (card key {doc['key']}); `heal.json` in the card's folder holds every number.",
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
