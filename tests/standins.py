"""Stand-ins for the hub: a temporary Hugging Face cache that holds what full scale asks for, offline.

Full scale loads hub models by id (``HuggingFaceTB/SmolLM2-135M``, the seven models of chapter 4,
GPT-2's tokenizer) and streams hub corpora (FineWeb-Edu, OpenWebText, WikiText-103). CI has no
internet, so :func:`build` writes, under one folder,

- ``hf/hub/models--<owner>--<name>/snapshots/<commit>/``: a *tiny, randomly initialised* model of
  the same architecture class as the real one (Llama, Gemma 2, Gemma 3, Mistral, GPT-2), with the
  real model's number of layers, tied or untied embeddings, rope scaling and logit softcapping,
  saved under the real id, with ``refs/main`` pointing at it — the layout ``huggingface_hub``
  leaves after a download. Tokenizers: SmolLM2's real one (:func:`smollm2_folder`: committed under
  ``tests/standin_files/smollm2``, taken from the embedded model's conversion); for the
  others a byte-level BPE of 512 tokens fitted on the Python docs (their real tokenizers cannot
  be built offline);
- ``hf/datasets/<Owner>___<name>/<config>/0.0.0/<hash>/``: the Python documentation topics as a
  prepared ``datasets`` cache in each corpus's own columns (FineWeb-Edu's ``id``, ``text``, ``url``,
  …; OpenWebText's ``text``; WikiText's one line per row) — what an earlier online
  ``load_dataset`` leaves, and what ``load_dataset(..., streaming=True)`` reads with
  ``HF_HUB_OFFLINE=1``.

:func:`environment` gives the variables that point a process (a papermill kernel, a subprocess)
at that cache; the kit runs its normal code paths (``load_model(hub_id)``, ``load_corpus(name)``).
Numbers computed on these models mean nothing: the stand-ins exercise the code, not the science.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

#: SmolLM2-135M's config and tokenizer (tokenizer.json gzipped), from the embedded model's conversion.
SMOLLM2_FILES = Path(__file__).resolve().parent / "standin_files" / "smollm2"

#: hub id -> (architecture, real number of layers, extra config); what full scale loads.
MODELS: dict[str, tuple[str, int, dict]] = {
    "HuggingFaceTB/SmolLM2-135M": ("llama", 30, {"tie_word_embeddings": True, "rope_theta": 100000.0}),
    "HuggingFaceTB/SmolLM2-1.7B": ("llama", 24, {"tie_word_embeddings": True, "rope_theta": 130000.0}),   # hour card
    "meta-llama/Llama-3.2-1B": ("llama", 16, {"tie_word_embeddings": True, "rope_scaling": {
        "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}}),
    "meta-llama/Llama-3.2-3B": ("llama", 28, {"tie_word_embeddings": True}),
    "meta-llama/Llama-3.1-8B": ("llama", 32, {"tie_word_embeddings": False}),
    "google/gemma-2-2b": ("gemma2", 26, {}),
    "google/gemma-2-9b": ("gemma2", 42, {}),
    "google/gemma-3-1b-pt": ("gemma3", 26, {}),
    "mistralai/Mistral-7B-v0.3": ("mistral", 32, {"tie_word_embeddings": False}),
    "gpt2": ("gpt2", 12, {}),
}

#: corpus name -> (hub id, config, split); must agree with data_manifest/corpora.yaml.
CORPORA = {
    "fineweb-edu": ("HuggingFaceFW/fineweb-edu", "sample-10BT"),
    "openwebtext": ("Skylion007/openwebtext", None),
    "wikitext-103": ("Salesforce/wikitext", "wikitext-103-raw-v1"),
}

VERSION = "2"          # bump when the layout changes (2: SmolLM2-1.7B for the hour scale)


def environment(root: Path) -> dict[str, str]:
    """Environment variables that make a process read the stand-in cache under ``root`` and stay offline.

    One OpenMP thread: the stand-ins are tiny, and on a busy machine two threads spinning on
    tiny matmuls made a chapter's full path thirty times slower than one thread.
    """
    hf = Path(root) / "hf"
    return {"HF_HOME": str(hf), "HF_HUB_CACHE": str(hf / "hub"), "HF_DATASETS_CACHE": str(hf / "datasets"),
            "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _commit(name: str) -> str:
    return hashlib.sha1(f"standin:{VERSION}:{name}".encode()).hexdigest()


def _snapshot(hub: Path, repo: str, kind: str = "models") -> Path:
    folder = hub / f"{kind}--{repo.replace('/', '--')}"
    commit = _commit(repo)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    return snap


def _bpe(vocab: int = 512):
    """A byte-level BPE fitted on the Python docs, with Llama-style special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from anatomy_kit.data import python_docs_text

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<eos>", "<bos>", "<pad>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(python_docs_text()[1], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", bos_token="<bos>", pad_token="<pad>")


def smollm2_folder(target: Path) -> Path:
    """Write SmolLM2-135M's ``config.json`` and tokenizer into ``target``, a folder ``from_pretrained`` reads.

    No GGUF and no download: ``benchmarks/gpu_check.py`` builds random-weight models of the real
    shape and the real tokenizer from it on a machine without either.
    """
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer_config.json"):
        shutil.copy(SMOLLM2_FILES / name, target / name)
    with gzip.open(SMOLLM2_FILES / "tokenizer.json.gz") as f:
        (target / "tokenizer.json").write_bytes(f.read())
    return target


def _smollm2_tokenizer(root: Path):
    """SmolLM2's real tokenizer (49,152 tokens), from the committed files (:func:`smollm2_folder`)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_folder(Path(root) / "smollm2"))


def _config(arch: str, n_layers: int, vocab: int, extra: dict, tok):
    import transformers as T

    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=n_layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    if arch == "llama":
        return T.LlamaConfig(**common, **extra)
    if arch == "mistral":
        return T.MistralConfig(**common, sliding_window=None, **extra)
    if arch == "gemma2":
        return T.Gemma2Config(**common, head_dim=16, query_pre_attn_scalar=16, sliding_window=32,
                              final_logit_softcapping=30.0, attn_logit_softcapping=50.0, **extra)
    if arch == "gemma3":
        return T.Gemma3TextConfig(**common, head_dim=16, query_pre_attn_scalar=16, sliding_window=32, **extra)
    if arch == "gpt2":
        return T.GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=64, n_layer=n_layers, n_head=4,
                            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    raise ValueError(arch)


def _save_model(hub: Path, repo: str, tok) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    arch, n_layers, extra = MODELS[repo]
    snap = _snapshot(hub, repo)
    torch.manual_seed(int(_commit(repo)[:8], 16))
    model = AutoModelForCausalLM.from_config(_config(arch, n_layers, len(tok), extra, tok))
    model.save_pretrained(snap)
    tok.save_pretrained(snap)


def _documents():
    from anatomy_kit.data import python_docs_text

    return python_docs_text()


def _rows(name: str) -> dict[str, list]:
    """The Python docs in the columns of corpus ``name`` on the hub."""
    ids, texts = _documents()
    if name == "fineweb-edu":
        return {"text": texts, "id": [f"<urn:uuid:{hashlib.sha1(i.encode()).hexdigest()}>" for i in ids],
                "dump": ["python-docs"] * len(ids), "url": [f"https://docs.python.org/3/#{i}" for i in ids],
                "language": ["en"] * len(ids), "token_count": [len(t.split()) for t in texts]}
    if name == "openwebtext":
        return {"text": texts}
    lines = []                                   # WikiText: one line per row, headings, blank rows
    for i, t in zip(ids, texts):
        lines += ["", f" = {i} = ", ""] + [p for p in t.split("\n\n") if p.strip()]
    return {"text": lines}


def _save_corpus(datasets_cache: Path, scratch: Path, name: str) -> None:
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets.packaged_modules.parquet.parquet import Parquet

    hub_id, config = CORPORA[name]
    owner, repo = hub_id.split("/")
    part = scratch / f"{name}.parquet"
    pq.write_table(pa.table(_rows(name)), part)
    digest = hashlib.sha1(f"{VERSION}:{name}".encode()).hexdigest()[:16]
    builder = Parquet(cache_dir=str(scratch / "prepare"), dataset_name=repo, config_name=config or "default",
                      hash=digest, data_files={"train": str(part)})
    datasets.disable_progress_bars()
    builder.download_and_prepare()
    target = datasets_cache / f"{owner}___{repo}" / (config or "default") / "0.0.0" / digest
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(builder.cache_dir, target)
    info = json.loads((target / "dataset_info.json").read_text())
    assert info["config_name"] == (config or "default"), info["config_name"]


def build(root: Path, corpora: bool = True) -> dict[str, str]:
    """Write the stand-in cache under ``root`` (once; a stamp file marks it complete) and return :func:`environment`.

    ``corpora=False`` writes the models only (no ``datasets`` needed: a machine without it runs
    the chapters on the Python docs).
    """
    root = Path(root)
    stamp = root / f"standins-{VERSION}{'' if corpora else '-models'}.done"
    if not stamp.exists():
        hf = root / "hf"
        shutil.rmtree(hf, ignore_errors=True)
        bpe, smol = _bpe(), _smollm2_tokenizer(root)
        for repo in MODELS:
            _save_model(hf / "hub", repo, smol if repo.startswith("HuggingFaceTB/") else bpe)
        if corpora:
            scratch = root / "scratch"
            scratch.mkdir(parents=True, exist_ok=True)
            for name in CORPORA:
                _save_corpus(hf / "datasets", scratch, name)
            shutil.rmtree(scratch, ignore_errors=True)
        stamp.write_text("ok")
    return environment(root)


def check_all(scratch: Path) -> dict:
    """Load every stand-in by hub id and every corpus by name through the kit; run a forward pass, tokenise.

    Meant to run in a process whose environment is :func:`environment` (the kit's hub code reads it at import).
    """
    import torch

    from anatomy_kit import data
    from anatomy_kit.hf import models

    out: dict = {"models": {}, "corpora": {}}
    for repo in MODELS:
        if "/" in repo:
            loaded = models.load_model(repo, device="cpu")
            model, tok, source = loaded.model, loaded.tokenizer, loaded.source
        else:                        # a legacy id without owner ("gpt2"): chapter 5 asks transformers directly
            from transformers import AutoModelForCausalLM, AutoTokenizer

            model, tok, source = AutoModelForCausalLM.from_pretrained(repo), AutoTokenizer.from_pretrained(repo), "hub"
        ids = tok("def f(x):\n    return x + 1", return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        out["models"][repo] = {"class": type(model).__name__, "n_layers": int(model.config.num_hidden_layers),
                               "source": source, "logits": list(logits.shape), "n_ids": ids.shape[1],
                               "finite": bool(torch.isfinite(logits).all()), "vocab": len(tok)}
    smol = models.load_model("HuggingFaceTB/SmolLM2-135M", device="cpu").tokenizer
    for name in CORPORA:
        docs = data.load_corpus(name, max_documents=40)
        tf = data.stream_token_file(name, smol, scratch / name, max_tokens=3000)
        out["corpora"][name] = {"n_documents": len(docs), "first_text": docs["text"][0][:80],
                                "ids_unique": len(set(docs["id"])) == len(docs),
                                "token_file_train": tf.n_tokens("train"), "token_file_eval": tf.n_tokens("eval")}
    return out


if __name__ == "__main__":          # python tests/standins.py SCRATCH  (with environment(root) set)
    import sys

    print(json.dumps(check_all(Path(sys.argv[1]))))
