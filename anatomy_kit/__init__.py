"""anatomy_kit: the companion package of the *Transformer Anatomy* book.

Every public function names, in its docstring, the chapter that introduces it.
Modules (each has one job):

- ``validate``   – argument checks that name the bad value and what is accepted
- ``models``     – load a causal LM (hub id, local folder, or the embedded SmolLM2 GGUF)
- ``data``       – corpora through Hugging Face ``datasets``; fixed-length token blocks
- ``layers``     – uniform access to the decoder layers of Hugging Face models; hooks
- ``evaluation`` – perplexity, and the prefix-cached tail forward
- ``anatomy``    – ablation map and the other diagnostics of paper 1
- ``geometry``   – geometric work of FFN layers (paper 2)
- ``width``      – the width solver and width schedules (paper 2, TLM)
- ``report``     – chapter metrics and the reproduction report
- ``runner``     – executes the chapters with papermill (``python -m anatomy_kit``)
"""

__version__ = "0.1.0"
