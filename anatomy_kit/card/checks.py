"""Check a card request before any weight is loaded or any layer measured (the book page *Your model's report card*).

A card takes minutes; an argument it cannot honour must fail in the first second, naming the value
and what is accepted. :func:`check_request` runs, in order and without loading weights:

- the settings (:meth:`.settings.CardSettings.validate`) and the ``--save-method`` (one of
  :data:`.suggest.PROPOSAL_METHODS`);
- the model name (:func:`.loading.model_source`): a name that looks like a path (``./m``, ``/m``, ``~/m``,
  ``a/b/c``, or ``a/b`` where a folder ``a`` exists here) but is no folder is
  :class:`~.errors.ModelNotFound` at once, never five hub retries;
- the corpus argument (:func:`.text.corpus_kind`: a missing ``.txt``/``.jsonl`` file);
- the configuration (read without weights): the architecture (:func:`.loading.check_architecture`),
  K < L and ``--save-pruned K`` ≤ K (:meth:`.settings.CardSettings.resolved`), the FFN budget
  (:func:`.widths.check_budget` on the configuration's widths).

The text (a short corpus) is checked next by :func:`anatomy_kit.card.build.build_card`, with the
tokenizer alone, still before the weights load.
"""

from __future__ import annotations


from ..validate import AnatomyKitError, check_choice
from .loading import check_architecture, model_config, model_source
from .settings import MAX_PRUNE_CAP, CardSettings
from .text import corpus_kind

__all__ = ["config_ffn_widths", "check_request"]


def config_ffn_widths(config) -> list[int]:
    """Every layer's FFN width from the configuration alone: ``intermediate_size`` (a number or one per
    layer), GPT-2's ``n_inner``, or 4 × the model width when neither is set."""
    n_layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0) or 0)
    d = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0) or 0)
    width = getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * d
    if isinstance(width, (list, tuple)):
        return [int(w) for w in width]
    return [int(width)] * n_layers


def check_request(name: str, *, corpus: str, settings: CardSettings, save_k: int | None = None,
                  save_method: str | None = None) -> tuple[object, CardSettings]:
    """``(config, settings with K resolved)`` after every check of the module docstring, loading no weights."""
    from .suggest import PROPOSAL_METHODS
    from .widths import check_budget

    settings = settings.validate()
    if save_method is not None:
        check_choice("--save-method", save_method, PROPOSAL_METHODS)
    model_source(name)
    corpus_kind(corpus)
    config, _, _ = model_config(name)
    check_architecture(config)
    widths = config_ffn_widths(config)
    resolved = settings.resolved(len(widths))
    if save_k is not None and save_k > resolved.max_prune:
        given = "-K" if settings.max_prune is not None else f"the default K = L // 4, at most {MAX_PRUNE_CAP},"
        raise AnatomyKitError(f"--save-pruned {save_k}: the card measures pruned sets of 1..{resolved.max_prune} "
                              f"layers ({given} {resolved.max_prune} for {len(widths)} layers); give K ≤ "
                              f"{resolved.max_prune} or -K {save_k}")
    if widths and min(widths) > 0:
        check_budget(widths, settings.ffn_budget)
    return config, resolved
