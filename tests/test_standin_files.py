"""The committed SmolLM2 files (``tests/standin_files/smollm2``) are the embedded model's tokenizer and shape."""

from __future__ import annotations

import json

import standins


def test_the_committed_tokenizer_and_config_are_the_embedded_models(tmp_path):
    from transformers import AutoTokenizer

    from anatomy_kit.data import python_docs_text
    from anatomy_kit.hf.models import convert_embedded

    embedded = convert_embedded()
    ours = AutoTokenizer.from_pretrained(standins.smollm2_folder(tmp_path / "smollm2"))
    theirs = AutoTokenizer.from_pretrained(embedded)
    text = "\n".join(python_docs_text()[1][:20])
    assert ours(text)["input_ids"] == theirs(text)["input_ids"] and len(ours) == len(theirs) == 49152
    assert (ours.bos_token, ours.eos_token, ours.pad_token) == (theirs.bos_token, theirs.eos_token, theirs.pad_token)
    committed, real = (json.loads((p / "config.json").read_text()) for p in (tmp_path / "smollm2", embedded))
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "vocab_size", "tie_word_embeddings", "rms_norm_eps"):
        assert committed[key] == real[key], key
