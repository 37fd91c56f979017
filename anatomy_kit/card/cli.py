"""``python -m anatomy_kit card MODEL`` and ``card --compare A.json B.json …`` (the book page *Your model's report card*).

:func:`add_card_parser` adds the subcommand to the kit's command line (:mod:`anatomy_kit.book.cli`);
:func:`run_card` carries it out and returns the exit status.
"""

from __future__ import annotations

import re
import shlex
import time

import numpy as np
from pathlib import Path

from ..validate import AnatomyKitError
from .cli_args import DEFAULT_LR, add_card_parser, parse_budget
from .heal import HealRecipe
from .settings import CardSettings

__all__ = ["add_card_parser", "run_card", "parse_budget", "save_pruned_k", "heal_request", "DEFAULT_LR"]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", Path(name).name if Path(name).exists() else name).strip("-") or "model"


def _settings(args) -> CardSettings:
    return CardSettings(tokens=args.tokens, block_size=args.block_size, batch_size=args.batch_size,
                        calibration_tokens=args.calibration_tokens, max_prune=args.max_prune, n_random=args.random,
                        geometry_tokens=args.geometry_tokens, ffn_budget=args.ffn_budget, dtype=args.dtype,
                        quick=args.quick, seed=args.seed, harm_pct=args.harm_pct,
                        angular_tokens=args.angular_tokens, update_norm=args.update_norm).validate()


def save_pruned_k(args) -> int:
    """K of ``--save-pruned K DIR`` (the book page *Your model's report card*): a whole number of layers,
    at least 1 (that it is ≤ the card's K is checked with the model's configuration,
    :func:`.checks.check_request`)."""
    k_text, folder = args.save_pruned
    if not k_text.isdigit() or int(k_text) < 1:
        raise AnatomyKitError(f"--save-pruned {k_text!r} {folder!r}: K must be a whole number of layers, at least 1")
    return int(k_text)


def card_command(args, settings: dict) -> str:
    """The command line that rebuilds this card and pruned folder, every setting written out (resolved K too)."""
    flags = {"--corpus": args.corpus, "--tokens": settings["tokens"], "--block-size": settings["block_size"],
             "--batch-size": settings["batch_size"], "--calibration-tokens": settings["calibration_tokens"],
             "-K": settings["max_prune"], "--random": settings["n_random"],
             "--geometry-tokens": settings["geometry_tokens"], "--ffn-budget": settings["ffn_budget"],
             "--harm-pct": settings.get("harm_pct"), "--angular-tokens": settings.get("angular_tokens"),
             "--update-norm": settings.get("update_norm"), "--dtype": settings["dtype"], "--seed": settings["seed"],
             "--save-method": args.save_method}
    words = ["python", "-m", "anatomy_kit", "card", args.model]
    words += [w for flag, value in flags.items() if value is not None for w in (flag, str(value))]
    if args.save_pruned:
        words += ["--save-pruned", *args.save_pruned]
    return " ".join(shlex.quote(w) for w in words)


def heal_command(args, settings: dict, recipe: HealRecipe, ks: list[int]) -> str:
    """:func:`card_command` with the healing flags of this run written out (method and lr resolved)."""
    words = ["--heal", str(recipe.steps), "--heal-method", recipe.method, "--heal-k", ",".join(map(str, ks)),
             "--heal-lr", f"{recipe.lr:g}", "--heal-evals", str(recipe.evals)]
    if recipe.method == "lora":
        words += ["--lora-rank", str(recipe.lora_rank), "--lora-alpha", f"{recipe.lora_alpha:g}"]
        if recipe.lora_targets is not None:
            words += ["--lora-targets", ",".join(recipe.lora_targets)]
    if args.save_healed:
        words += ["--save-healed", args.save_healed]
    return card_command(args, settings) + " " + " ".join(shlex.quote(w) for w in words)


def _save_pruned(args, card, out_text, out: Path) -> dict:
    from ..hf.evaluation import make_batches, perplexity
    from ..hf.models import load_model
    from .exports import pruned_readme, save_pruned
    from .settings import torch_dtype

    k, folder = save_pruned_k(args), args.save_pruned[1]
    drop = card.pruned_set(k, args.save_method)
    loaded = load_model(args.model, device=args.device, dtype=torch_dtype(args.dtype))
    save_pruned(loaded.model, drop, folder, loaded.tokenizer)
    del loaded
    again = load_model(folder, device=args.device, dtype=torch_dtype(args.dtype))
    s = card.doc["settings"]
    text = settings_text(again.tokenizer, args.corpus, s)
    ppl = perplexity(again.model, make_batches(text.eval_blocks, s["batch_size"], next(again.model.parameters()).device))
    expected = card.pruned_ppl(k, args.save_method)
    entry = next(e for e in card.doc["pruning"]["sets"] if e["k"] == k and e["method"] == args.save_method)
    command = card_command(args, card.doc["settings"])
    info = {"folder": str(folder), "k": k, "layers": drop, "reloaded_ppl": ppl}
    (Path(folder) / "README.md").write_text(pruned_readme(card.doc, entry, ppl, command, card_folder=out,
                                                          folder=folder), encoding="utf-8")
    out_text.append(f"saved {folder} without layers {drop} (0-based); reloaded, it gives perplexity {ppl:.6g} on the "
                    f"card's tokens (the card measured {expected:.6g}; relative gap {abs(ppl - expected) / expected:.1e})")
    return info


def run_card(args) -> int:
    """Carry out ``python -m anatomy_kit card`` (see ``--help``); errors propagate as :class:`AnatomyKitError`."""
    from .compare import compare_cards, write_comparison

    if args.compare:
        if args.model:
            raise AnatomyKitError("give either MODEL or --compare A.json B.json …, not both")
        paths = write_comparison(compare_cards(args.compare), args.out or Path("card-compare"))
        print(f"comparison: {paths['html']}")
        return 0
    if not args.model:
        raise AnatomyKitError("give a MODEL ('embedded', a folder or a hub id) or --compare A.json B.json …")
    if args.save_pruned and args.quick:
        raise AnatomyKitError("--save-pruned needs the measured pruning of a full card; drop --quick")
    if args.lm_eval and args.quick:
        raise AnatomyKitError("--lm-eval runs on a full card's models and task; drop --quick")
    recipe, heal_ks = heal_request(args)                  # every healing option, before any work
    from .build import build_card
    from .cache import check_out_folder
    from .checks import check_request

    settings = _settings(args)
    if args.lm_eval:
        from .lm_eval_task import check_lm_eval

        check_lm_eval()
    _, resolved = check_request(args.model, corpus=args.corpus, settings=settings,   # every argument, before loading
                                save_k=save_pruned_k(args) if args.save_pruned else None,
                                save_method=args.save_method if args.save_pruned else None)
    if recipe is not None:
        heal_ks = _check_heal_ks(heal_ks, resolved.max_prune)
        if args.lora_targets and args.heal_method != "full":
            from .loading import check_module_names

            check_module_names(args.model, recipe.lora_targets)
    out = args.out or Path(f"card-{_slug(args.model)}")
    check_out_folder(out, {"name": args.model})        # before any work; write() checks the checksum too
    card = build_card(args.model, corpus=args.corpus, settings=settings, device=args.device,
                      cache_dir=args.cache or out / "cache")
    task = None if card.quick else _lm_eval_task(args, card, out)
    extras = {"lm_eval": task}
    paths = card.write(out, extras=extras)
    lines = [repr(card), f"card: {paths['html']} (also {paths['markdown'].name}, {paths['json'].name})"]
    if task is not None:
        lines.append(f"lm-eval task ({task['round_trip_blocks']} of {task['blocks']} blocks re-tokenize "
                     f"exactly); from {out}: {task['command']}  (install: {task['install']})")
    if args.save_pruned:
        extras["pruned"] = _save_pruned(args, card, lines, out)
    if recipe is not None:
        extras["heal"] = _heal(args, card, out, lines, recipe, heal_ks)
    if args.lm_eval:
        _run_lm_eval(args, card, out, lines)
    if len(extras) > 1:
        card.write(out, extras=extras)                   # the pages again, now naming the folders and healing
    print("\n".join(lines))
    return 0


def heal_request(args) -> tuple[HealRecipe | None, list[int] | None]:
    """The healing options checked together, before any work: ``(recipe without its method resolved, the k to
    heal or None for every recommended k)``, or ``(None, None)`` without ``--heal``."""
    lora_flags = [flag for flag, value in (("--lora-rank", args.lora_rank), ("--lora-alpha", args.lora_alpha),
                                           ("--lora-targets", args.lora_targets)) if value is not None]
    given = [flag for flag, value in (("--heal-k", args.heal_k), ("--heal-lr", args.heal_lr),
                                      ("--heal-evals", args.heal_evals), ("--save-healed", args.save_healed))
             if value is not None] + lora_flags + (["--heal-method"] if args.heal_method != "auto" else [])
    if args.heal is None:
        if given:
            raise AnatomyKitError(f"{', '.join(given)} need(s) --heal STEPS")
        return None, None
    if args.quick or args.heal < 1:
        raise AnatomyKitError(f"--heal {args.heal}: give a whole number of steps, at least 1, on a full card "
                              "(not --quick)")
    if lora_flags and args.heal_method == "full":
        raise AnatomyKitError(f"{', '.join(lora_flags)} set(s) LoRA, but --heal-method full trains every parameter: "
                              "drop them, or heal with --heal-method lora (or auto)")
    ks = None
    if args.heal_k is not None:
        words = [w.strip() for w in args.heal_k.split(",")]
        if not words or not all(w.isdigit() and int(w) >= 1 for w in words):
            raise AnatomyKitError(f"--heal-k {args.heal_k!r}: give whole numbers of layers, at least 1, "
                                  "separated by commas (e.g. 3 or 2,4)")
        ks = sorted({int(w) for w in words})
    if args.save_healed is not None:
        if not args.save_pruned:
            raise AnatomyKitError("--save-healed DIR saves the healed model of --save-pruned K; give --save-pruned too")
        k = save_pruned_k(args)
        if ks is not None and k not in ks:
            raise AnatomyKitError(f"--save-healed saves k = {k} (from --save-pruned), but --heal-k {args.heal_k} "
                                  f"does not heal it; add {k}")
        if args.save_method != "greedy":
            raise AnatomyKitError("--save-healed heals the recommended (greedy) set; drop --save-method")
        _check_healed_folder(args)
    targets = None
    if args.lora_targets is not None:
        targets = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
    lr = args.heal_lr if args.heal_lr is not None else DEFAULT_LR["full"]
    h = HealRecipe()
    recipe = HealRecipe(method="full", steps=args.heal, lr=lr, evals=_or(args.heal_evals, h.evals),
                        lora_rank=_or(args.lora_rank, h.lora_rank), lora_alpha=_or(args.lora_alpha, h.lora_alpha),
                        lora_targets=targets)
    try:
        recipe.validate()
    except AnatomyKitError as err:
        raise AnatomyKitError(f"healing options: {err}") from None
    return recipe, ks


def _or(value, default):
    return default if value is None else value


def _check_healed_folder(args) -> None:
    """--save-healed names a folder of its own: not the model's, the card's (--out) or the --save-pruned one
    (saving there would overwrite their files)."""
    healed = Path(args.save_healed).resolve()
    others = {"--save-pruned": args.save_pruned[1], "--out": args.out or Path(f"card-{_slug(args.model or '')}"),
              "the model's folder": args.model if args.model and Path(args.model).is_dir() else None}
    for what, folder in others.items():
        if folder is not None and Path(folder).resolve() == healed:
            raise AnatomyKitError(f"--save-healed {args.save_healed!r} is {what} {str(folder)!r}: give the healed "
                                  "model a folder of its own")


def _check_heal_ks(ks: list[int] | None, max_prune: int) -> list[int] | None:
    if ks is not None and ks[-1] > max_prune:
        raise AnatomyKitError(f"--heal-k {ks[-1]}: the card measures pruned sets of 1..{max_prune} layers; give k ≤ "
                              f"{max_prune} or a larger -K")
    return ks


def settings_text(tokenizer, corpus: str, settings: dict):
    """The card's text (:func:`.text.card_text`) again, from the settings recorded in its card.json: the same
    evaluation and calibration blocks, of the same split of the documents."""
    from .text import card_text

    return card_text(tokenizer, corpus, block_size=settings["block_size"],
                     n_eval=settings["tokens"] // settings["block_size"],
                     n_calibration=settings["calibration_tokens"] // settings["block_size"],
                     split=settings.get("text_split", "standard"))


def _lm_eval_task(args, card, out: Path) -> dict:
    from .lm_eval_task import write_lm_eval_task
    from .loading import load_tokenizer

    s = card.doc["settings"]
    text = settings_text(load_tokenizer(args.model), args.corpus, s)
    if text.token_sha256 != card.doc["text"]["token_sha256"]:
        raise AnatomyKitError("the corpus no longer gives the card's tokens; rebuild the card")   # pragma: no cover
    return write_lm_eval_task(out, card.doc, load_tokenizer(args.model), text.eval_blocks)


def _heal(args, card, out: Path, lines: list, recipe: HealRecipe, heal_ks: list[int] | None) -> dict:
    """Heal the recommended sets and the control (:func:`.heal.heal_with_control`); write heal.json (and
    the healed folder of ``--save-healed``); return heal.json's document."""
    from dataclasses import replace

    from ..hf.evaluation import make_batches
    from ..hf.models import load_model
    from ..jsonio import write_json
    from .cost import heal_estimate, model_shape
    from .heal import choose_method, describe_k, heal_blocks, heal_with_control, recipe_terms
    from .loading import available_memory
    from .settings import torch_dtype

    s = card.doc["settings"]
    loaded = load_model(args.model, device=args.device, dtype=torch_dtype(s["dtype"]))
    model = loaded.model
    text = settings_text(loaded.tokenizer, args.corpus, s)
    dev = next(model.parameters()).device
    shape = model_shape(model)
    weight_bytes = next(model.parameters()).element_size()
    choice = choose_method(args.heal_method, shape, block_size=s["block_size"], batch_size=s["batch_size"],
                           weight_bytes=weight_bytes if weight_bytes in (2, 4) else 4,
                           free_bytes=available_memory(dev), on_host=dev.type == "cpu", lora_rank=recipe.lora_rank)
    lr = args.heal_lr if args.heal_lr is not None else DEFAULT_LR[choice["method"]]
    recipe = replace(recipe, method=choice["method"], lr=lr, batch_size=s["batch_size"], seed=s["seed"]).validate()
    recommended = card.doc["pruning"]["recommended"]
    ks = heal_ks or sorted(int(k) for k in recommended)
    drops = {str(k): recommended[str(k)]["layers"] for k in ks}
    cost = heal_estimate(card.doc, shape, recipe, len(drops), device_type=dev.type)
    when = "unknown (no timing recorded)" if cost["seconds"] is None else f"about {cost['seconds'] / 60:.0f} min"
    print(f"healing: {choice['method']} ({choice['why']}); {recipe_terms(recipe)}; the control and k = "
          f"{', '.join(drops)}: {cost['runs']} fine-tunes, {cost['flops']:.2g} FLOPs, {when} at "
          f"{cost['rate_from']}", flush=True)
    train, trained_on = heal_blocks(loaded.tokenizer, text, steps=recipe.steps, batch_size=recipe.batch_size)
    evals = make_batches(text.eval_blocks, s["batch_size"], dev)
    on_healed, healed_info = {}, {}
    if args.save_healed:
        k = str(save_pruned_k(args))
        on_healed[k] = lambda m: healed_info.update(_save_healed_weights(m, drops[k], args.save_healed,
                                                                         loaded.tokenizer))
    start = time.perf_counter()
    result = heal_with_control(model, drops, train, evals, recipe, confidence=s["confidence"], on_healed=on_healed,
                               report=lambda line: print(line, flush=True))
    seconds = time.perf_counter() - start
    doc = {"steps": recipe.steps, "layer_index_base": 0, "recipe": recipe.to_dict(), "terms": recipe_terms(recipe),
           "method_choice": choice, "trained_on": trained_on, "shared": result["shared"],
           "control": result["control"], "by_k": result["by_k"],
           "cost": {"estimate": cost, "seconds": seconds},
           "command": heal_command(args, s, recipe, [int(k) for k in drops])}
    for k, e in result["by_k"].items():
        lines.append(describe_k(k, e))
    lines.append(f"healing shared by the healed models and the control: {'; '.join(result['shared'])}")
    lines.append(f"healing took {seconds / 60:.1f} min (estimated {when})")
    del model, loaded
    if args.save_healed:
        doc["healed_folder"] = _finish_healed(args, card, doc, healed_info, lines, out)
    write_json(out / "heal.json", doc)
    lines.append(f"healing: {out / 'heal.json'}")
    return doc


def _save_healed_weights(model, drop, folder, tokenizer) -> dict:
    from .exports import save_pruned

    save_pruned(model, drop, folder, tokenizer)
    return {"folder": str(folder), "layers": list(drop)}


def _finish_healed(args, card, doc: dict, info: dict, lines: list, out: Path) -> dict:
    """Reload the saved healed folder, measure it on the card's tokens, write its README."""
    from ..anatomy.blockwise import block_targets
    from ..hf.evaluation import make_batches
    from ..hf.models import load_model
    from .exports import healed_readme
    from .heal import block_nll
    from .settings import torch_dtype

    s, k = card.doc["settings"], str(save_pruned_k(args))
    again = load_model(args.save_healed, device=args.device, dtype=torch_dtype(s["dtype"]))
    text = settings_text(again.tokenizer, args.corpus, s)
    batches = make_batches(text.eval_blocks, s["batch_size"], next(again.model.parameters()).device)
    rows = block_nll(again.model, batches)
    ppl = float(np.exp(rows.sum() / block_targets(batches).sum()))
    measured = doc["by_k"][k]["ppl_healed"]
    info = {**info, "k": int(k), "reloaded_ppl": ppl, "relative_gap": abs(ppl - measured) / measured}
    (Path(args.save_healed) / "README.md").write_text(
        healed_readme(card.doc, doc, k, ppl, card_folder=out, folder=args.save_healed), encoding="utf-8")
    lines.append(f"saved the healed k={k} model to {args.save_healed} ({doc['recipe']['method']}"
                 f"{', merged' if doc['recipe']['method'] == 'lora' else ''}); reloaded, it gives perplexity "
                 f"{ppl:.6g} (the healing measured {measured:.6g}; relative gap {info['relative_gap']:.1e})")
    return info


def _run_lm_eval(args, card, out: Path, lines: list) -> None:
    from ..jsonio import write_json
    from .exports import mergekit_model
    from .lm_eval_task import run_lm_eval

    tasks = [t.strip() for t in args.lm_eval.split(",") if t.strip()]
    where = mergekit_model(card.doc["model"])
    models = {"intact": where.replace("@", ",revision=", 1) if card.doc["model"]["source"] == "hub" else where}
    if args.save_pruned:
        models["pruned"] = str(Path(args.save_pruned[1]).resolve())
    if args.save_healed:
        models["healed"] = str(Path(args.save_healed).resolve())
    results = {name: run_lm_eval(m, tasks, include_path=out / "lm_eval", device=args.device
                                 if args.device != "auto" else "cpu") for name, m in models.items()}
    path = write_json(out / "lm_eval_results.json", {"tasks": tasks, "models": models, "results": results})
    lines.append(f"lm-eval results: {path}")
