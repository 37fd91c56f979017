"""Build a layer report card from a model name or a loaded model (the book page *Your model's report card*).

:func:`build_card` runs the stages in order, each kept in the cache as it finishes (:mod:`.cache`):
load (architecture and memory checked before, layer access verified after), text, the streamed pass
(prefix capture with the cheap signals, then the causal sweep), geometric work, widths, agreement,
and, unless ``quick``, the pruning panel. It returns a :class:`~.document.Card` whose document
validates against :data:`~.schema.CARD_SCHEMA`.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
from torch import nn

from ..hf.evaluation import make_batches
from ..hf.layers import decoder_layers
from ..hf.models import LoadedModel
from ..validate import AnatomyKitError
from .agreement import disagreement_flags, flag_rule, rank_agreement, top_k_overlaps
from .checks import check_request
from .cache import CardCache, StageClock, card_key, peak_rss_mb
from .causal import CAUSAL_SIGNALS, causal_summary
from .document import Card
from .loading import estimate_memory, load_for_card, load_tokenizer, model_identity, verify_layer_access
from .measure import measure_work, stream_batches
from .provenance import provenance
from .schema import SCHEMA, validate_card
from .settings import CardSettings
from .signals import SIGNAL_DEFINITIONS, best_blocks, cheap_signals, literature_signals, max_offset
from .suggest import pruning_panel
from .text import card_text
from .widths import check_budget, suggest_widths, today_widths

__all__ = ["build_card"]

NOTES = (
    "Layer indices are 0-based: layer 0 is the first decoder layer.",
    "ΔPPL intervals are Student-t intervals of the mean per-token log-perplexity change, paired over evaluation "
    "blocks; with few blocks they are wide.",
    "Pruned sets are chosen without the evaluation blocks' loss (greedy and skip_calibration on separate "
    "calibration blocks), so their measured perplexities are not selected on the text they are measured on.",
)


_SCOPE = {"all": "all tokens", "last": "last token of each sequence (PruneMe)"}
_SIGNAL_NOTE = {
    (a, u): f"Angular distance over {_SCOPE[a]}; update norm as a {u.replace('_', ' ')} "
            f"(the card's defaults: all tokens, block-size times more samples of the same angle, and a ratio "
            f"of sums, which a near-zero state cannot dominate); the literature's definitions are under "
            f"'literature'."
    for a in SIGNAL_DEFINITIONS["angular_tokens"] for u in SIGNAL_DEFINITIONS["update_norm"]}


def literature_section(totals, block_influence: np.ndarray, settings: CardSettings) -> dict:
    """Every definition of each cheap signal per layer, and the peers' own layer choices on this text:
    PruneMe's block for every length n (last-token angular distance) and ShortGPT's k lowest-BI layers."""
    order = sorted(range(len(block_influence)), key=lambda l: (float(block_influence[l]), l))
    return {"definitions": {k: getattr(settings, k) for k in SIGNAL_DEFINITIONS},
            "signals": {k: [float(x) for x in v] for k, v in literature_signals(totals).items()},
            "prune_me_blocks": best_blocks(totals.angular_matrix("last")),
            "shortgpt_sets": {str(k): sorted(order[:k]) for k in range(1, settings.max_prune + 1)}}


def _resolve_model(model, tokenizer, settings: CardSettings, device: str, available: int | None,
                   before_weights=None):
    """``(model, tokenizer, identity, memory estimate or None, settings)`` for a name, LoadedModel or nn.Module."""
    if isinstance(model, str):
        loaded, identity, estimate = load_for_card(model, settings, device=device, available=available,
                                                   before_weights=before_weights)
        return loaded.model, loaded.tokenizer, identity, estimate.to_dict(), settings
    if isinstance(model, LoadedModel):
        tokenizer, name, source, model = model.tokenizer, model.name, model.source, model.model
        folder = Path(name).expanduser() if source == "local" else None
        if source == "embedded":
            from ..hf.models import convert_embedded
            folder = convert_embedded()
        identity = model_identity(model, name, source, folder)
    elif isinstance(model, nn.Module):
        if tokenizer is None:
            raise AnatomyKitError("a model object needs its tokenizer: build_card(model, tokenizer=...)")
        identity = model_identity(model, getattr(model.config, "_name_or_path", None) or None, "object")
    else:
        raise AnatomyKitError(f"model={model!r} must be a name (embedded, a folder, a hub id), a LoadedModel "
                              "or a transformers causal LM")
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    return model, tokenizer, identity, None, replace(settings, dtype=dtype)


def _per_layer(n_layers: int, cheap: dict, causal: dict | None, flags: list, widths) -> list[dict]:
    return [{"layer": l, "depth": l / (n_layers - 1) if n_layers > 1 else 0.0,
             "cheap": {k: float(v[l]) for k, v in cheap.items()},
             "causal": None if causal is None else {k: causal[k][l] for k in CAUSAL_SIGNALS},
             "flags": flags[l], "ffn_width": widths.today[l], "suggested_width": widths.suggested[l]}
            for l in range(n_layers)]


def _agreement(cheap: dict, causal: dict | None, settings: CardSettings) -> tuple[dict, list]:
    series, k = dict(cheap), settings.max_prune
    if causal is not None:
        series.update({f"{kind} ΔPPL": np.array([c["delta_pct"] for c in causal[kind]]) for kind in CAUSAL_SIGNALS})
    flags = (disagreement_flags(cheap, causal["skip"], k, settings.harm_pct) if causal is not None
             else [[] for _ in next(iter(cheap.values()))])
    return {"signals": list(series), "spearman": rank_agreement(series, seed=settings.seed),
            "top_k": top_k_overlaps(series, k), "flag_rule": flag_rule(settings.harm_pct, settings.confidence),
            "harm_pct": settings.harm_pct}, flags


def _text(tokenizer, corpus: str, settings: CardSettings):
    return card_text(tokenizer, corpus, block_size=settings.block_size, n_eval=settings.n_eval_blocks,
                     n_calibration=settings.n_calibration_blocks, split=settings.text_split)


def build_card(model, *, tokenizer=None, corpus: str = "python-docs", settings: CardSettings | None = None,
               device: str = "auto", cache_dir: str | Path | None = None, progress: bool = True,
               available_memory: int | None = None) -> Card:
    """The layer report card of ``model`` (a name: ``"embedded"``, a folder or a hub id; a
    :class:`~anatomy_kit.hf.models.LoadedModel`; or a causal LM object with its ``tokenizer``).

    ``cache_dir``: where partial results and the finished card are kept (:mod:`.cache`); ``None``
    keeps nothing (a temporary folder). ``available_memory`` (bytes) overrides the free memory the
    check before loading compares with. The book page *Your model's report card* calls it.
    """
    settings = (settings or CardSettings()).validate()
    started = (time.perf_counter(), time.process_time())
    early, check_text = {}, None
    if isinstance(model, str):      # every argument, the memory and the text checked before the weights load
        _, settings = check_request(model, corpus=corpus, settings=settings)
        name = model

        def check_text():
            early["text"] = _text(load_tokenizer(name), corpus, settings)
    model, tokenizer, identity, memory, settings = _resolve_model(model, tokenizer, settings, device, available_memory,
                                                                  check_text)
    model.eval()
    n_layers = len(decoder_layers(model))
    settings = settings.resolved(n_layers)
    check_budget(today_widths(model)[0], settings.ffn_budget)
    dev = next(model.parameters()).device
    text = early.get("text") or _text(tokenizer, corpus, settings)
    verification = verify_layer_access(model, text.eval_blocks[:1], dtype=settings.dtype)
    setup = {"wall_s": round(time.perf_counter() - started[0], 3), "cpu_s": round(time.process_time() - started[1], 3)}
    key = card_key(identity, text.token_sha256, settings.to_dict(), dev.type)
    with tempfile.TemporaryDirectory() if cache_dir is None else nullcontext(cache_dir) as root:
        cache = CardCache(root, key)
        done = cache.finished()
        if done is not None:
            return Card(validate_card(done), folder=cache.folder if cache_dir is not None else None)
        doc = _measure(model, text, settings, identity, verification, memory, key, cache.store, progress, setup)
        card = Card(validate_card(doc), folder=cache.folder if cache_dir is not None else None)
        if cache_dir is not None:
            card.save_json(cache.card_path)
        return card


def _measure(model, text, settings: CardSettings, identity: dict, verification: dict, memory, key: str, store,
             progress: bool, setup: dict) -> dict:
    clock = StageClock(store)
    clock.seconds["load, text and verification"] = setup
    n_layers = len(decoder_layers(model))
    dev = next(model.parameters()).device
    batches = make_batches(text.eval_blocks, settings.batch_size, dev)
    results = stream_batches(model, batches, n_offsets=max_offset(n_layers, settings.max_prune),
                             causal=not settings.quick, store=store, clock=clock, progress=progress)
    work = measure_work(model, text.eval_blocks, n_tokens=settings.geometry_tokens, seed=settings.seed,
                        batch_size=settings.batch_size, store=store, clock=clock)
    cheap = {**cheap_signals(results.totals, settings.angular_tokens, settings.update_norm), **work}
    causal = None if results.causal is None else {
        k: causal_summary(results.base_nll, results.causal[k], results.n_targets, settings.confidence)
        for k in CAUSAL_SIGNALS}
    today, params = today_widths(model)
    widths = suggest_widths(work["work_gw"], today, params, settings.ffn_budget)
    agreement, flags = _agreement(cheap, causal, settings)
    angular = results.totals.angular_matrix(settings.angular_tokens)
    best = best_blocks(angular)
    pruning = None
    if not settings.quick:
        calibration = make_batches(text.calibration_blocks, settings.batch_size, dev)
        pruning = pruning_panel(model, batches, calibration, results, cheap, best, max_k=settings.max_prune,
                                n_random=settings.n_random, seed=settings.seed, confidence=settings.confidence,
                                store=store, clock=clock, progress=progress)
    total = float(results.n_targets.sum())
    cfg = model.config
    model_doc = {**identity, "n_layers": n_layers, "n_parameters": int(sum(p.numel() for p in model.parameters())),
                 "hidden_size": int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "n_embd", 0))}
    return {
        "schema": SCHEMA, "key": key, "layer_index_base": 0, "model": model_doc, "settings": settings.to_dict(),
        "text": text.describe(), "verification": verification, "memory": memory,
        "baseline": {"ppl": float(np.exp(results.base_nll.sum() / total)),
                     "nll_per_token": float(results.base_nll.sum() / total), "scored_tokens": int(total),
                     "n_blocks": int(len(results.base_nll))},
        "layers": _per_layer(n_layers, cheap, causal, flags, widths),
        "literature": literature_section(results.totals, cheap["block_influence"], settings),
        "angular": {"token_scope": _SCOPE[settings.angular_tokens], "offsets": int(angular.shape[1]),
                    "matrix": [[None if np.isnan(x) else float(x) for x in row] for row in angular],
                    "best_blocks": best},
        "agreement": agreement, "pruning": pruning, "widths": widths.to_dict(),
        "provenance": provenance(str(dev), settings.dtype, clock.to_dict(), peak_rss_mb()),
        "notes": [_SIGNAL_NOTE[(settings.angular_tokens, settings.update_norm)],
                  f"Every perplexity of this card is over the same {int(total):,} scored tokens: "
                  f"{len(results.base_nll)} evaluation blocks of {settings.block_size} tokens (context length "
                  f"{settings.block_size}; each block's first token is context, not scored).", *NOTES],
    }


def estimate_only(name: str, settings: CardSettings | None = None) -> dict:
    """The memory estimate of a card for ``name`` without loading it (bytes; see :func:`.loading.estimate_memory`)."""
    from .loading import check_architecture, model_config

    config, _, _ = model_config(name)
    check_architecture(config)
    return estimate_memory(config, (settings or CardSettings()).validate()).to_dict()
