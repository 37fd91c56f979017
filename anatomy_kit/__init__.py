"""anatomy_kit: the companion package of the *Transformer Anatomy* book.

Every public function names, in its docstring, the chapter that introduces it. Subpackages, by idea:

- :mod:`anatomy_kit.hf` – Hugging Face models from the inside: loading, layer access and hooks,
  weight surgery that restores exactly, perplexity and the prefix cache (chapter 1);
- :mod:`anatomy_kit.data` – corpora, token blocks, tokenizers (chapter 1);
- :mod:`anatomy_kit.anatomy` – ablation map, importance profile, weight predictability, delta
  series, manipulation, recovery speed (paper 1; chapters 1–2);
- :mod:`anatomy_kit.phased_training` – Growth Transformer training: phased, importance-driven
  training of a model of fixed size (paper 1; chapter 3);
- :mod:`anatomy_kit.width_growth` – growing a trained model's residual width by a closed-form
  rotation, expansion and a warm-up gate (paper 3; chapter 6);
- :mod:`anatomy_kit.geometry` – geometric work of FFN layers: clouds, shift, GW, topology,
  diagnostics, the profiles file (paper 2; chapter 4);
- :mod:`anatomy_kit.allocation` – FFN width allocation: the exact solver, rounding, schedules
  (paper 2, TLM; chapter 5);
- :mod:`anatomy_kit.card` – the layer report card of any causal LM: signals, agreement, measured
  pruning, widths, HTML/Markdown/JSON (``python -m anatomy_kit card``; the page *Your model's report card*);
- :mod:`anatomy_kit.synthesis` – do the layer signals agree? Every signal of one model in a table,
  their rank agreement and families, pruning by each signal against random sets, the same signals
  across the book's models, the decisions each would make, the whole verdict table (chapter 7);
- :mod:`anatomy_kit.lm` – the kit's own decoder, ``train(model, …)``, checkpoints, process pool
  (chapters 3, 5, 6), and the one FLOP and memory model (``estimates``: time and memory at every scale);
- :mod:`anatomy_kit.stats` – paired differences, intervals, rank correlations with exact p-values;
- :mod:`anatomy_kit.verdicts` – the project's core idea: claims decided by declared rules, nulls,
  the combination table, compact claims tables;
- :mod:`anatomy_kit.book` – chapter parameters, report, runner, CLI, chapter costs;
- :mod:`anatomy_kit.exercises` – the self-checks of the chapters' exercises.

Top-level helpers: :mod:`anatomy_kit.validate` (named errors), :mod:`anatomy_kit.manifest`
(``data_manifest/``), :mod:`anatomy_kit.jsonio` (the one JSON reader and atomic writer),
:mod:`anatomy_kit.checksums` (the one file sha256), :mod:`anatomy_kit.store` (a resumable JSON store
of finished results), :mod:`anatomy_kit.environment` (the kernel path,
threads and versions every metrics file records).
"""

import warnings

# tqdm.auto falls back to text bars without ipywidgets; its warning about that is noise in a book.
warnings.filterwarnings("ignore", message="IProgress not found")

__version__ = "0.2.0"
