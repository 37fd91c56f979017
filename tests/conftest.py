"""Shared fixtures: tiny models and tokenizers built locally (no downloads, seconds on CPU)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from anatomy_kit.verdicts.claims import installed_registry as _INSTALLED_REGISTRY  # noqa: E402  (before the patch)
ROOT = Path(__file__).resolve().parents[1]

# Float tolerances derived from the computation compared (tests must hold on every CPU kernel path:
# ATEN_CPU_CAPABILITY=default, avx2, avx512 sum in different orders). u is float32's unit roundoff:
# one rounding changes a value by at most u relative.
F32_U = 2.0 ** -24


def f32_sum_rtol(n_terms: int, sides: int = 2) -> float:
    """Relative gap allowed between float32 sums of the same ``n_terms`` non-negative terms in different orders.

    A float32 sum of n terms, in any order, is within (n − 1)·u of the exact sum, relative (Higham,
    *Accuracy and Stability of Numerical Algorithms*, §4.2); ``sides`` float32 sums (2: two float32
    sides; 1: one side summed in float64) differ by at most ``sides · n · u``.
    """
    return sides * n_terms * F32_U


def f32_forward_rtol(n_layers: int, width: int) -> float:
    """Relative gap of order L·d·u between float32 forward passes of an L-layer, width-d model on two code paths.

    Each layer's matmuls are d-term float32 dot products (≤ d·u relative each, summed in a
    kernel-dependent order) and the residual stream carries every layer's rounding to the end.
    """
    return n_layers * width * F32_U


def ppl_rtol(nll_rtol: float, ppl: float) -> float:
    """Relative gap of two perplexities exp(S/n) whose summed NLLs S differ by ``nll_rtol``, relative.

    δ(log PPL) = δS/n = nll_rtol · S/n = nll_rtol · log PPL, and for small gaps δPPL/PPL = δ(log PPL).
    """
    return nll_rtol * math.log(ppl)


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



@pytest.fixture(scope="session", autouse=True)
def _claims_unchecked_by_default():
    """Unit tests build claims with made-up rules for real claim ids: check them against no registry.

    Chapters, the report and the book test always check against ``data_manifest/rule_registry.yaml``;
    a test that wants the installed registry as the default asks for ``installed_registry_default``
    (tests/test_registry.py), and any test may pass ``Claim(..., registry=...)`` explicitly. Session
    scope, so that module-scoped fixtures that build claims see it too."""
    from anatomy_kit.verdicts import claims

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(claims, "installed_registry", lambda: None)
        yield


@pytest.fixture
def installed_registry_default(monkeypatch):
    """Claims built in this test are checked against the installed rule registry by default, as in a chapter."""
    from anatomy_kit.verdicts import claims

    monkeypatch.setattr(claims, "installed_registry", _INSTALLED_REGISTRY)


def registry_of(rules: dict, roles: dict | None = None, *, frozen: bool = False):
    """A rule registry holding ``{claim id: rule}`` at the smoke scale with an empty design (``roles``: ``{claim id:
    "primary"}``, others secondary; ``frozen``: frozen with the plan's seed offset 1000), for unit tests that need
    roles or a freeze without the installed registry."""
    from anatomy_kit.verdicts import registry as REG

    claims = {}
    for cid, rule in rules.items():
        role = (roles or {}).get(cid, "secondary")
        forms = {"smoke": {"spec": REG.rule_spec(rule), "design": {}}}
        claims[cid] = {"role": role, "history": "written after the exploratory data (test)", "forms": forms,
                       "fingerprint": REG.claim_fingerprint(role, REG._forms(cid, forms)), "amendments": []}
    freeze = ({"frozen": {"date": "2026-12-05", "fingerprints": {c: e["fingerprint"] for c, e in claims.items()}},
               "plan": {"seed_offset": 1000, "text": "held out"}} if frozen else None)
    return REG.RuleRegistry.from_docs([{"chapter": "test", "claims": claims}], freeze)
