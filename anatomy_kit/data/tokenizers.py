"""Tokenizers the kit trains itself (for models trained from scratch on CPU).

Small models cannot afford a 49k or 50k vocabulary (the output layer would dominate); a
1–2k byte-level BPE keeps real English sub-words. Introduced in chapter 5 (*The width solver*).
"""

from __future__ import annotations

from typing import Any

from ..validate import AnatomyKitError, check_int
from .blocks import is_eval_document

__all__ = ["bpe_tokenizer"]


def bpe_tokenizer(corpus: Any, vocab_size: int, *, eval_percent: int = 15, split: str = "standard"):
    """A byte-level BPE tokenizer trained on the *train* documents of ``corpus`` (chapters 3, 5 and 6).

    Small models trained from scratch on CPU cannot afford a 49k or 50k vocabulary (the output
    layer would dominate); a 1–2k BPE vocabulary keeps real English sub-words. ``corpus`` has ``id``
    and ``text`` columns (:class:`~anatomy_kit.data.Documents` from :func:`anatomy_kit.data.load_corpus`,
    or a ``datasets.Dataset``); documents that :func:`anatomy_kit.data.token_blocks` puts in the eval
    split (same hash, same ``eval_percent`` and ``split``) are left out, so the tokenizer never sees eval text. Returns a
    ``PreTrainedTokenizerFast`` whose EOS token is ``<eos>`` (id 0). Deterministic.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    vocab_size = check_int("vocab_size", vocab_size, minimum=257)
    texts = [t for i, t in zip(corpus["id"], corpus["text"]) if not is_eval_document(str(i), eval_percent, split)]
    if not texts:
        raise AnatomyKitError("the corpus has no train documents to fit a tokenizer on")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<eos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<eos>")
