"""The whole report card on tiny random models of ten architectures, built locally (no downloads).

Each model is a few layers of width 32 with the conftest tokenizer; windowed attention (Mistral, Qwen2,
Gemma 2/3) is narrower than the blocks, so per-layer attention types matter. The card must run to
the end, verify its layer access, and give a document that validates against the schema.
"""

import json

import pytest
import torch

from anatomy_kit.card import CardSettings, build_card, validate_card
from anatomy_kit.card.schema import SCHEMA

from conftest import tiny_tokenizer

COMMON = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256)


def tiny_config(arch: str, vocab: int, n_layers: int = 4):
    """A small config of ``arch`` (tests of the card share it)."""
    import transformers as T

    common = dict(COMMON, vocab_size=vocab, num_hidden_layers=n_layers, bos_token_id=1, eos_token_id=2,
                  pad_token_id=2)
    configs = {
        "llama": lambda: T.LlamaConfig(**common),
        "mistral": lambda: T.MistralConfig(**common, sliding_window=16),
        "qwen2": lambda: T.Qwen2Config(**common, use_sliding_window=True, sliding_window=16,
                                       max_window_layers=n_layers // 2),
        "qwen3": lambda: T.Qwen3Config(**common, head_dim=8),
        "gemma2": lambda: T.Gemma2Config(**common, head_dim=8, query_pre_attn_scalar=8, sliding_window=16,
                                         final_logit_softcapping=30.0, attn_logit_softcapping=50.0),
        "gemma3": lambda: T.Gemma3TextConfig(**common, head_dim=8, query_pre_attn_scalar=8, sliding_window=16,
                                             sliding_window_pattern=2),
        "phi3": lambda: T.Phi3Config(**common),
        "olmo": lambda: T.OlmoConfig(**common),
        "gpt2": lambda: T.GPT2Config(vocab_size=vocab, n_positions=256, n_embd=32, n_layer=n_layers, n_head=4,
                                     bos_token_id=1, eos_token_id=2),
        "gpt_neox": lambda: T.GPTNeoXConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=n_layers, num_attention_heads=4,
                                            max_position_embeddings=256, bos_token_id=1, eos_token_id=2),
    }
    return configs[arch]()


ARCHITECTURES = ["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "olmo", "gpt2", "gpt_neox"]


def tiny_model(arch: str, vocab: int = 512, n_layers: int = 4, seed: int = 0):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(arch, vocab, n_layers)).eval()
    with torch.no_grad():                    # norms away from 1, so that layers differ
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return model


def small_corpus(folder, n_docs: int = 60):
    """The first Python docs topics as a local .txt corpus (documents separated by blank lines)."""
    from anatomy_kit.data import python_docs_text

    path = folder / "docs.txt"
    texts = [" ".join(t.split()) for t in python_docs_text()[1][:n_docs]]
    path.write_text("\n\n".join(texts), encoding="utf-8")
    return str(path)


#: The settings of the tests' cards: blocks of 32 (longer than the windows of 16), K = 2.
TINY = CardSettings(tokens=128, block_size=32, batch_size=2, calibration_tokens=64, max_prune=2, n_random=3,
                    geometry_tokens=24)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return small_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_whole_card_runs_and_validates(arch, tok, corpus, one_torch_thread):
    card = build_card(tiny_model(arch, len(tok)), tokenizer=tok, corpus=corpus, settings=TINY, progress=False)
    doc = json.loads(json.dumps(card.doc))          # through JSON, as a reader gets it
    assert validate_card(doc)["schema"] == SCHEMA
    assert doc["verification"]["n_hidden_states"] == 5 and doc["verification"]["relative_gap"] <= 1e-4
    assert [e["layer"] for e in doc["layers"]] == [0, 1, 2, 3]
    assert all(set(e["causal"]) == {"neighbour-mean", "skip", "attention", "mlp"} for e in doc["layers"])
    assert {s["k"] for s in doc["pruning"]["sets"]} == {1, 2}
    assert sum(doc["widths"]["suggested"]) == pytest.approx(0.75 * sum(doc["widths"]["today"]),
                                                            abs=doc["widths"]["multiple"] / 2)
