"""Text for the chapters (introduced in chapter 1): corpora, token blocks, tokenizers, token files.

- :mod:`.corpora` – named corpora as :class:`Documents` (the offline one read directly, hub corpora
  streamed through Hugging Face ``datasets``), checked against the manifest;
- :mod:`.blocks` – fixed-length token blocks, split train/eval by document;
- :mod:`.tokenizers` – a small byte-level BPE trained on the train documents only;
- :mod:`.tokenfile` – a corpus tokenised once into flat ``uint16``/``uint32`` files with a manifest,
  read back as memory-mapped ``(N, T+1)`` windows (chapter 5 at full scale).
"""

from .blocks import (HELD_OUT_BUCKETS, TEXT_SPLITS, TokenBlocks, document_bucket, is_eval_document, text_split_of,
                     token_blocks)
from .corpora import Documents, as_documents, corpus_sha256, hub_stream, load_corpus, python_docs_text
from .tokenfile import TokenFile, build_token_file, open_token_file, stream_token_file, write_token_file
from .tokenizers import bpe_tokenizer

__all__ = ["TokenBlocks", "is_eval_document", "token_blocks", "document_bucket", "text_split_of", "TEXT_SPLITS",
           "HELD_OUT_BUCKETS", "Documents", "as_documents", "corpus_sha256", "hub_stream", "load_corpus",
           "python_docs_text", "bpe_tokenizer", "TokenFile", "build_token_file", "open_token_file",
           "stream_token_file", "write_token_file"]
