"""Text for the chapters (introduced in chapter 1): corpora, token blocks, tokenizers, token files.

- :mod:`.corpora` – named corpora through Hugging Face ``datasets``, checked against the manifest;
- :mod:`.blocks` – fixed-length token blocks, split train/eval by document;
- :mod:`.tokenizers` – a small byte-level BPE trained on the train documents only.
"""

from .blocks import TokenBlocks, is_eval_document, token_blocks
from .corpora import corpus_sha256, load_corpus, python_docs_text
from .tokenizers import bpe_tokenizer

__all__ = ["TokenBlocks", "is_eval_document", "token_blocks", "corpus_sha256", "load_corpus", "python_docs_text",
           "bpe_tokenizer"]
