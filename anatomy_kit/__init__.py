"""anatomy_kit: the companion package of the *Transformer Anatomy* book.

Every public function names, in its docstring, the chapter that introduces it.
Modules (each has one job):

- ``validate``   – argument checks that name the bad value and what is accepted
- ``models``     – load a causal LM (hub id, local folder, or the embedded SmolLM2 GGUF)
- ``data``       – corpora through Hugging Face ``datasets``; fixed-length token blocks
- ``layers``     – uniform access to the decoder layers of Hugging Face models; hooks
- ``evaluation`` – perplexity, and the prefix-cached tail forward
- ``anatomy``    – the ablation map (paper 1)
- ``weights``    – weight predictability across depth and the delta series (paper 1)
- ``manipulation`` – weight-manipulation strategies and recovery speed (paper 1)
- ``importance`` – the per-layer importance profile as data, for later chapters
- ``clouds``     – matched token clouds around every FFN, captured with hooks (paper 2)
- ``geometry``   – geometric work of FFN layers: shift, GW, topology; three geometries (paper 2)
- ``width``      – the width solver and width schedules (paper 2, TLM)
- ``lm``, ``training`` – a per-layer-width decoder and its deterministic training loop (paper 2)
- ``report``     – chapter metrics and the reproduction report
- ``runner``     – executes the chapters with papermill (``python -m anatomy_kit``)
"""

import warnings

# tqdm.auto falls back to text bars without ipywidgets; its warning about that is noise in a book.
warnings.filterwarnings("ignore", message="IProgress not found")

__version__ = "0.1.0"
