"""Every named error of the report card's "Bad input" list, raised with the value and what is accepted.

Architecture and memory are refused *before* any weight is loaded: those folders hold a config only,
and ``load_model`` is replaced by a function that fails the test if it is called.
"""

import json
from types import SimpleNamespace

import pytest
from torch import nn

from anatomy_kit import card as C
from anatomy_kit.hf import models

from conftest import tiny_llama
from test_card_architectures import TINY, corpus, tok  # noqa: F401 (module fixtures, shared)


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("load_model was called: the check must come before loading")

    monkeypatch.setattr(models, "load_model", refuse)


def _config_folder(path, config):
    path.mkdir()
    config.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("kind", ["bert", "t5"])
def test_encoder_models_are_refused_before_loading(kind, tmp_path, no_loading):
    import transformers as T

    config = T.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64) \
        if kind == "bert" else T.T5Config(d_model=32, num_layers=2, num_heads=2, d_ff=64)
    what = "encoder-only" if kind == "bert" else "encoder–decoder"
    with pytest.raises(C.UnsupportedArchitecture, match=f"model_type='{kind}' is an {what}.*decoder-only"):
        C.build_card(_config_folder(tmp_path / kind, config), progress=False)


def test_an_unknown_model_type_is_refused(tmp_path, no_loading):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(C.UnsupportedArchitecture, match="no-such-architecture"):
        C.build_card(str(tmp_path / "m"), progress=False)


def test_a_model_too_large_for_the_device_is_refused_before_loading(tmp_path, no_loading):
    import transformers as T

    huge = T.LlamaConfig(vocab_size=128_000, hidden_size=8192, intermediate_size=28_672, num_hidden_layers=80,
                         num_attention_heads=64, num_key_value_heads=8)
    folder = _config_folder(tmp_path / "huge", huge)
    with pytest.raises(C.InsufficientMemory, match=r"about \d+\.\d GiB.*parameters.*GiB are free"):
        C.build_card(folder, device="cpu", available_memory=64 * 2**30, progress=False)
    estimate = C.estimate_only(folder)
    assert 68e9 < estimate["n_parameters"] < 72e9           # a 70B model, counted on the meta device


def test_an_unrecognised_structure_lists_its_module_paths(tok):
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = SimpleNamespace(num_hidden_layers=3, _name_or_path="odd")
            self.encoder = nn.Module()
            self.encoder.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    with pytest.raises(C.StructureNotRecognised, match=r"encoder\.blocks: ModuleList\[2\]"):
        C.build_card(Odd(), tokenizer=tok, progress=False)


def test_layer_access_that_does_not_match_the_config_is_refused(tok, corpus):
    model = tiny_llama()
    model.config.num_hidden_layers = 5                      # six layers in the list
    with pytest.raises(C.LayerAccessMismatch, match="6 layers but config.num_hidden_layers = 5"):
        C.build_card(model, tokenizer=tok, corpus=corpus, settings=TINY, progress=False)


def test_a_corpus_shorter_than_the_budget_is_refused(tok, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("\n\n".join(f"document {i} has a few words" for i in range(20)))
    with pytest.raises(C.CorpusTooShort, match="too short: its calibration half.*calibration_tokens=64 asks for 2"):
        C.build_card(tiny_llama(), tokenizer=tok, corpus=str(short), settings=TINY, progress=False)


def test_k_not_below_the_number_of_layers_is_refused(tok, corpus):
    settings = C.CardSettings(**{**TINY.to_dict(), "max_prune": 6})
    with pytest.raises(C.PruneDepthTooLarge, match="K\\) = 6 is not below the model's 6 layers; give K in 1..5"):
        C.build_card(tiny_llama(), tokenizer=tok, corpus=corpus, settings=settings, progress=False)


@pytest.mark.parametrize("budget", [0.01, 3.0])
def test_a_width_budget_the_solver_cannot_meet_is_refused_before_measuring(budget, tok, corpus, monkeypatch):
    from anatomy_kit.card import build

    def refuse(*a, **k):
        raise AssertionError("the card started measuring: the budget must be checked first")

    monkeypatch.setattr(build, "stream_batches", refuse)
    settings = C.CardSettings(**{**TINY.to_dict(), "ffn_budget": budget})
    with pytest.raises(C.WidthBudgetInfeasible, match=f"ffn_budget={budget:g}.*can meet between"):
        C.build_card(tiny_llama(), tokenizer=tok, corpus=corpus, settings=settings, progress=False)


def test_an_output_folder_with_another_models_card_is_refused(tok, corpus, tmp_path, one_torch_thread):
    quick = C.CardSettings(**{**TINY.to_dict(), "quick": True})
    first = C.build_card(tiny_llama(seed=0), tokenizer=tok, corpus=corpus, settings=quick, progress=False)
    first.write(tmp_path / "out")
    first.write(tmp_path / "out")                          # the same model again: fine
    other = C.build_card(tiny_llama(seed=1), tokenizer=tok, corpus=corpus, settings=quick, progress=False)
    with pytest.raises(C.OutputFolderConflict, match="holds the card of model"):
        other.write(tmp_path / "out")


def test_a_document_off_the_schema_names_the_field(tok, corpus):
    doc = C.build_card(tiny_llama(), tokenizer=tok, corpus=corpus,
                       settings=C.CardSettings(**{**TINY.to_dict(), "quick": True}), progress=False).doc
    broken = json.loads(json.dumps(doc))
    del broken["layers"][2]["cheap"]["block_influence"]
    with pytest.raises(C.CardSchemaError, match="at layers/2/cheap: 'block_influence' is a required property"):
        C.validate_card(broken)
    broken = json.loads(json.dumps(doc))
    broken["baseline"]["ppl"] = float("nan")
    with pytest.raises(C.CardSchemaError, match="NaN or infinity"):
        C.validate_card(broken)


def test_settings_name_the_bad_value():
    with pytest.raises(C.PruneDepthTooLarge):
        C.CardSettings(max_prune=1).resolved(1)
    for bad in (dict(tokens=100), dict(dtype="int8"), dict(ffn_budget=-1), dict(quick="yes")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            C.CardSettings(**bad).validate()


def test_a_layer_list_elsewhere_is_found_by_its_size_and_a_missing_ffn_is_named(tok, corpus):
    """OPT keeps its layers at model.decoder.layers (found by the one ModuleList of L blocks) and has no
    MLP submodule (fc1, fc2 sit in the layer): the card stops with the module paths it found."""
    import transformers as T

    from anatomy_kit.hf.layers import decoder_layers, final_norm

    cfg = T.OPTConfig(vocab_size=len(tok), hidden_size=32, ffn_dim=64, num_hidden_layers=4, num_attention_heads=4,
                      word_embed_proj_dim=32, max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
                      pad_token_id=2)
    opt = T.AutoModelForCausalLM.from_config(cfg).eval()
    assert decoder_layers(opt) is opt.model.decoder.layers and final_norm(opt) is opt.model.decoder.final_layer_norm
    with pytest.raises(C.StructureNotRecognised, match=r"FFN of a decoder layer.*fc1: Linear"):
        C.build_card(opt, tokenizer=tok, corpus=corpus, settings=TINY, progress=False)
