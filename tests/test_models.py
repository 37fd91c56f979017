import pytest
import torch

from anatomy_kit.hf import models
from anatomy_kit.validate import AnatomyKitError


def test_local_folder_loads_through_from_pretrained(saved_tiny_model, tokenizer):
    loaded = models.load_model(str(saved_tiny_model), device="cpu")
    assert loaded.source == "local"
    assert loaded.n_layers == 6
    ids = torch.tensor([tokenizer("The assert statement is a convenient way")["input_ids"]])
    reference = models.load_model(str(saved_tiny_model), device="cpu").model
    with torch.no_grad():
        a, b = loaded.model(ids).logits, reference(ids).logits
    assert torch.equal(a, b)
    assert loaded.tokenizer.pad_token is not None


@pytest.mark.parametrize("name", ["smollm3", "no such model", "", "a/b/c"])
def test_unknown_model_names_list_what_is_accepted(name):
    with pytest.raises(AnatomyKitError, match="embedded.*local folder.*hub id"):
        models.load_model(name, device="cpu")


def test_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(AnatomyKitError, match="no config.json"):
        models.load_model(str(tmp_path), device="cpu")


def test_hub_id_offline_gives_a_clear_error():
    with pytest.raises(AnatomyKitError, match="could not load model='nobody-here/not-a-model'"):
        models.load_model("nobody-here/not-a-model", device="cpu")


def test_bad_device():
    with pytest.raises(AnatomyKitError, match="device='tpu'"):
        models.resolve_device("tpu")


def test_embedded_model_is_cached_smollm2():
    """The embedded GGUF dequantises to SmolLM2-135M's architecture (cached after the first call)."""
    loaded = models.load_model("embedded", device="cpu")
    cfg = loaded.model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size) == (30, 576, 1536)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.vocab_size) == (9, 3, 49152)
    assert sum(p.numel() for p in loaded.model.parameters()) == 134_515_008
    folder = models.convert_embedded()
    assert folder.name.endswith(models.model_entries()["embedded"]["sha256"][:16])
