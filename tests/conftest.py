"""Shared fixtures: tiny models and tokenizers built locally (no downloads, seconds on CPU)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]


def tiny_llama(n_layers: int = 6, seed: int = 0, vocab: int = 512):
    """A random LlamaForCausalLM small enough for exact comparisons on CPU."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=n_layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=True, initializer_range=0.15, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model = LlamaForCausalLM(cfg).eval()
    # Random init leaves RMSNorm gains at 1: give every layer its own gains so that
    # parameter-swapping tests can tell layers apart.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.1 * torch.randn_like(p))
    return model


def tiny_tokenizer(vocab: int = 512):
    """A word-level tokenizer trained on the Python docs text (EOS id 2, like SmolLM2)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from anatomy_kit.data import python_docs_text

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=vocab, special_tokens=["<unk>", "<s>", "<eos>"])
    tok.train_from_iterator(python_docs_text()[1], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="<eos>", pad_token="<eos>")


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from threads, and spinning threads are slow on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture
def model():
    return tiny_llama()


@pytest.fixture(scope="session")
def saved_tiny_model(tmp_path_factory, tokenizer):
    """A tiny random Llama and its tokenizer saved with save_pretrained, as a hub snapshot would be."""
    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_llama().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
