"""The report card's command-line options: ``add_card_parser`` adds ``card`` to the kit's command line and
checks nothing expensive (:mod:`.cli` carries the command out)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .heal import HEAL_METHODS, HealRecipe
from .settings import DTYPES, MAX_PRUNE_CAP, CardSettings
from .signals import SIGNAL_DEFINITIONS

__all__ = ["add_card_parser", "parse_budget", "EXAMPLES", "DEFAULT_LR"]

#: the healing learning rate when --heal-lr is not given, by method
DEFAULT_LR = {"full": 1e-4, "lora": 2e-4}

EXAMPLES = """examples:
  python -m anatomy_kit card embedded --quick
  python -m anatomy_kit card HuggingFaceTB/SmolLM2-135M --corpus notes.txt --tokens 4096 -K 8 --out card-smollm2
  python -m anatomy_kit card ./my-model --save-pruned 4 ./my-model-pruned
  python -m anatomy_kit card ./my-model --save-pruned 4 ./pruned --heal 40 --save-healed ./pruned-healed
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
    _add_heal_options(p)
    return p


def _add_heal_options(p: argparse.ArgumentParser) -> None:
    """Healing's options, the lm-eval export and where the healed model goes (checked in :func:`.cli.heal_request`)."""
    h = HealRecipe()
    p.add_argument("--heal", type=int, default=None, metavar="STEPS",
                   help="fine-tune each recommended pruned model STEPS AdamW steps on fresh text of the calibration half "
                        "(never evaluation documents), and the intact model the same way as a control, and measure "
                        "how much of the pruning gap healing closes (heal.json)")
    p.add_argument("--heal-method", choices=(*HEAL_METHODS, "auto"), default="auto",
                   help="full: every parameter; lora: LoRA adapters (peft); auto (default): full where it fits the "
                        "device by the kit's memory model, LoRA otherwise")
    p.add_argument("--heal-k", default=None, metavar="K[,K…]",
                   help="which k to heal (default: every recommended k)")
    p.add_argument("--heal-lr", type=float, default=None,
                   help=f"learning rate (default {DEFAULT_LR['full']:g} full, {DEFAULT_LR['lora']:g} LoRA)")
    p.add_argument("--heal-evals", type=int, default=None,
                   help=f"evaluations of the healing curve after step 0, the last step always among them "
                        f"(default {h.evals}; STEPS evaluates after every step)")
    p.add_argument("--lora-rank", type=int, default=None,
                   help=f"LoRA rank (default {h.lora_rank}; not with --heal-method full)")
    p.add_argument("--lora-alpha", type=float, default=None,
                   help=f"LoRA alpha, the adapters scaled by alpha / rank (default {h.lora_alpha:g}; not with "
                        "--heal-method full)")
    p.add_argument("--lora-targets", default=None, metavar="NAMES",
                   help="comma-separated module names LoRA adapts in each kept layer, e.g. q_proj,v_proj "
                        "(default: every linear map; not with --heal-method full)")
    p.add_argument("--save-healed", default=None, metavar="DIR",
                   help="save the healed model of the --save-pruned K, merged (LoRA folded into the weights), as a "
                        "Hugging Face folder with a README of how it was healed and measured (a folder of its own: "
                        "not the model's, the card's or the pruned one's)")
    p.add_argument("--lm-eval", default=None, metavar="TASKS",
                   help="comma-separated lm-eval tasks to run on the intact model and the --save-pruned and "
                        "--save-healed folders (needs the lm_eval command on PATH: pip install \"lm-eval[hf]\"; the "
                        "card's own perplexity task is card_ppl_<key>)")
    p.add_argument("--compare", nargs="+", type=Path, default=None, metavar="CARD.json",
                   help="compare two or more finished cards (no model is loaded)")
