"""``python -m anatomy_kit card MODEL`` and ``card --compare A.json B.json …`` (the book page *Your model's report card*).

:func:`add_card_parser` adds the subcommand to the kit's command line (:mod:`anatomy_kit.book.cli`);
:func:`run_card` carries it out and returns the exit status.
"""

from __future__ import annotations

import argparse
import re
import shlex

import numpy as np
from pathlib import Path

from ..validate import AnatomyKitError
from .settings import DTYPES, MAX_PRUNE_CAP, CardSettings
from .signals import SIGNAL_DEFINITIONS

__all__ = ["add_card_parser", "run_card", "parse_budget", "save_pruned_k"]

EXAMPLES = """examples:
  python -m anatomy_kit card embedded --quick
  python -m anatomy_kit card HuggingFaceTB/SmolLM2-135M --corpus notes.txt --tokens 4096 -K 8 --out card-smollm2
  python -m anatomy_kit card ./my-model --save-pruned 4 ./my-model-pruned
  python -m anatomy_kit card --compare card-a/card.json card-b/card.json --out compared
"""


def parse_budget(text: str) -> float:
    """``"0.75"`` or ``"75%"`` → 0.75 (a fraction of today's FFN parameters)."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ffn-budget {text!r}: give a fraction like 0.75 or a percentage like 75%") \
            from None


def add_card_parser(sub) -> argparse.ArgumentParser:
    """Add the ``card`` subcommand to an ``argparse`` subparsers object."""
    d = CardSettings()
    p = sub.add_parser("card", help="the layer report card of a causal LM", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Measure a model's layers (causal and cheap signals, agreement, measured pruning, "
                                   "FFN widths) and write card.html, card.md and card.json.")
    p.add_argument("model", nargs="?", help="'embedded', a folder with config.json, or a hub id")
    p.add_argument("--corpus", default="python-docs",
                   help="a data_manifest corpus, a local .txt/.jsonl file, or a datasets id (default python-docs)")
    p.add_argument("--tokens", type=int, default=d.tokens, help=f"evaluation tokens (default {d.tokens})")
    p.add_argument("--block-size", type=int, default=d.block_size, help=f"tokens per block (default {d.block_size})")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help=f"blocks per pass (default {d.batch_size})")
    p.add_argument("--calibration-tokens", type=int, default=d.calibration_tokens,
                   help=f"tokens greedy removal chooses on (default {d.calibration_tokens})")
    p.add_argument("-K", "--max-prune", type=int, default=None,
                   help=f"prune k = 1..K layers (default L // 4, at most {MAX_PRUNE_CAP})")
    p.add_argument("--random", type=int, default=d.n_random, help=f"random k-sets per k (default {d.n_random})")
    p.add_argument("--geometry-tokens", type=int, default=d.geometry_tokens,
                   help=f"tokens of the geometric-work clouds (default {d.geometry_tokens})")
    p.add_argument("--ffn-budget", type=parse_budget, default=d.ffn_budget,
                   help="FFN parameter budget of the width suggestion: 0.75 or 75%% of today's (default 0.75)")
    p.add_argument("--harm-pct", type=float, default=d.harm_pct,
                   help=f"flag a layer a cheap signal would prune when its whole skip ΔPPL interval lies above "
                        f"this (%%, default {d.harm_pct:g})")
    p.add_argument("--angular-tokens", choices=SIGNAL_DEFINITIONS["angular_tokens"], default=d.angular_tokens,
                   help="angular distance over all tokens (default) or the last token of each sequence (PruneMe)")
    p.add_argument("--update-norm", choices=SIGNAL_DEFINITIONS["update_norm"], default=d.update_norm,
                   help="update norm as a ratio of token sums (default) or a mean of per-token ratios")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--dtype", choices=DTYPES, default=d.dtype)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--quick", action="store_true", help="cheap signals only (no causal sweep, no measured pruning)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default card-<model>)")
    p.add_argument("--cache", type=Path, default=None, help="cache folder (default <out>/cache)")
    p.add_argument("--save-pruned", nargs=2, metavar=("K", "DIR"), default=None,
                   help="save the model without greedy's K-set as a Hugging Face folder")
    p.add_argument("--save-method", default="greedy", help="whose K-set --save-pruned removes (default greedy)")
    p.add_argument("--heal", type=int, default=None, metavar="STEPS",
                   help="fine-tune each recommended pruned model STEPS AdamW steps on fresh text of the calibration half "
                        "(never evaluation documents) and measure how much of its perplexity gap closes (heal.json)")
    p.add_argument("--lm-eval", default=None, metavar="TASKS",
                   help="comma-separated lm-eval tasks to run on the intact model and the --save-pruned folder "
                        "(needs the lm-eval package; the card's own perplexity task is card_ppl_<key>)")
    p.add_argument("--compare", nargs="+", type=Path, default=None, metavar="CARD.json",
                   help="compare two or more finished cards (no model is loaded)")
    return p


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


def _save_pruned(args, card, out_text) -> None:
    from ..hf.evaluation import make_batches, perplexity
    from ..hf.models import load_model
    from .exports import pruned_readme, save_pruned
    from .settings import torch_dtype
    from .text import card_text

    k, folder = save_pruned_k(args), args.save_pruned[1]
    drop = card.pruned_set(k, args.save_method)
    loaded = load_model(args.model, device=args.device, dtype=torch_dtype(args.dtype))
    save_pruned(loaded.model, drop, folder, loaded.tokenizer)
    del loaded
    again = load_model(folder, device=args.device, dtype=torch_dtype(args.dtype))
    s = card.doc["settings"]
    text = card_text(again.tokenizer, args.corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                     n_calibration=s["calibration_tokens"] // s["block_size"])
    ppl = perplexity(again.model, make_batches(text.eval_blocks, s["batch_size"], next(again.model.parameters()).device))
    expected = card.pruned_ppl(k, args.save_method)
    entry = next(e for e in card.doc["pruning"]["sets"] if e["k"] == k and e["method"] == args.save_method)
    command = card_command(args, card.doc["settings"])
    (Path(folder) / "README.md").write_text(pruned_readme(card.doc, entry, ppl, command), encoding="utf-8")
    out_text.append(f"saved {folder} without layers {drop} (0-based); reloaded, it gives perplexity {ppl:.6g} on the "
                    f"card's tokens (the card measured {expected:.6g}; relative gap {abs(ppl - expected) / expected:.1e})")


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
    if args.heal is not None and (args.quick or args.heal < 1):
        raise AnatomyKitError(f"--heal {args.heal}: give a whole number of steps, at least 1, on a full card "
                              "(not --quick)")
    from .build import build_card
    from .cache import check_out_folder
    from .checks import check_request

    settings = _settings(args)
    if args.lm_eval:
        from .lm_eval_task import check_lm_eval

        check_lm_eval()
    check_request(args.model, corpus=args.corpus, settings=settings,     # every argument, before any loading
                  save_k=save_pruned_k(args) if args.save_pruned else None,
                  save_method=args.save_method if args.save_pruned else None)
    out = args.out or Path(f"card-{_slug(args.model)}")
    check_out_folder(out, {"name": args.model})        # before any work; write() checks the checksum too
    card = build_card(args.model, corpus=args.corpus, settings=settings, device=args.device,
                      cache_dir=args.cache or out / "cache")
    paths = card.write(out)
    lines = [repr(card), f"card: {paths['html']} (also {paths['markdown'].name}, {paths['json'].name})"]
    if not card.quick:
        task = _lm_eval_task(args, card, out)
        lines.append(f"lm-eval task ({task['round_trip_blocks']} of {task['blocks']} blocks re-tokenize "
                     f"exactly): {task['command']}")
    if args.save_pruned:
        _save_pruned(args, card, lines)
    if args.heal:
        _heal(args, card, out, lines)
    if args.lm_eval:
        _run_lm_eval(args, card, out, task, lines)
    print("\n".join(lines))
    return 0


def _lm_eval_task(args, card, out: Path) -> dict:
    from .lm_eval_task import write_lm_eval_task
    from .loading import load_tokenizer
    from .text import card_text

    s = card.doc["settings"]
    text = card_text(load_tokenizer(args.model), args.corpus, block_size=s["block_size"],
                     n_eval=s["tokens"] // s["block_size"], n_calibration=s["calibration_tokens"] // s["block_size"])
    if text.token_sha256 != card.doc["text"]["token_sha256"]:
        raise AnatomyKitError("the corpus no longer gives the card's tokens; rebuild the card")   # pragma: no cover
    return write_lm_eval_task(out, card.doc, load_tokenizer(args.model), text.eval_blocks)


def _heal(args, card, out: Path, lines: list) -> None:
    from ..hf.evaluation import make_batches
    from ..hf.models import load_model
    from ..jsonio import write_json
    from .heal import block_nll, heal_blocks, heal_pruned
    from .settings import torch_dtype
    from .text import card_text

    s = card.doc["settings"]
    loaded = load_model(args.model, device=args.device, dtype=torch_dtype(s["dtype"]))
    text = card_text(loaded.tokenizer, args.corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                     n_calibration=s["calibration_tokens"] // s["block_size"])
    train, trained_on = heal_blocks(loaded.tokenizer, text, steps=args.heal, batch_size=s["batch_size"])
    dev = next(loaded.model.parameters()).device
    evals, calib = make_batches(text.eval_blocks, s["batch_size"], dev), make_batches(train, s["batch_size"], dev)
    base = block_nll(loaded.model, evals)                 # the intact model's, on the same blocks
    n = np.concatenate([(b.labels[:, 1:] != -100).sum(dim=1).cpu().numpy() for b in evals]).astype(float)
    results = {}
    for k, e in sorted(card.doc["pruning"]["recommended"].items(), key=lambda kv: int(kv[0])):
        h = heal_pruned(loaded.model, e["layers"], calib, evals, steps=args.heal, base_rows=base, n_targets=n,
                        seed=s["seed"], confidence=s["confidence"], trained_on=trained_on)
        results[k] = h
        g, v = h["gap_closed"], h["vs_intact"]
        lines.append(f"healed k={k} {e['layers']} with {args.heal} steps: PPL {h['ppl_pruned']:.4g} → "
                     f"{h['ppl_healed']:.4g} (intact {card.baseline_ppl:.4g}; healed vs intact {v['delta_pct']:+.1f} % "
                     f"[{v['low']:+.1f}, {v['high']:+.1f}]); gap closed {100 * g['share']:.0f} % "
                     f"[{100 * g['low']:.0f}, {100 * g['high']:.0f}]" + (f"; {h['reading']}" if h["reading"] else ""))
    write_json(out / "heal.json", {"steps": args.heal, "layer_index_base": 0, "by_k": results})


def _run_lm_eval(args, card, out: Path, task: dict, lines: list) -> None:
    from ..jsonio import write_json
    from .exports import mergekit_model
    from .lm_eval_task import run_lm_eval

    tasks = [t.strip() for t in args.lm_eval.split(",") if t.strip()]
    where = mergekit_model(card.doc["model"])
    models = {"intact": where.replace("@", ",revision=", 1) if card.doc["model"]["source"] == "hub" else where}
    if args.save_pruned:
        models["pruned"] = str(Path(args.save_pruned[1]).resolve())
    results = {name: run_lm_eval(m, tasks, include_path=task["include_path"], device=args.device
                                 if args.device != "auto" else "cpu") for name, m in models.items()}
    path = write_json(out / "lm_eval_results.json", {"tasks": tasks, "models": models, "results": results})
    lines.append(f"lm-eval results: {path}")
