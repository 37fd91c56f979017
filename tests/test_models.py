import pytest
import torch

from anatomy_kit.hf import models
from anatomy_kit.validate import AnatomyKitError


def test_local_folder_loads_the_saved_weights_exactly(saved_tiny_model, tokenizer):
    """The loader against the model that was saved and against a plain ``from_pretrained``."""
    from transformers import AutoModelForCausalLM

    from conftest import tiny_llama

    loaded = models.load_model(str(saved_tiny_model), device="cpu")
    assert loaded.source == "local"
    assert loaded.n_layers == 6
    original = tiny_llama()                                 # what saved_tiny_model holds
    plain = AutoModelForCausalLM.from_pretrained(saved_tiny_model).eval()
    ours = loaded.model.state_dict()
    for name, value in original.state_dict().items():     # exact: the saved float32 bytes, read back
        assert torch.equal(ours[name], value), name
        assert torch.equal(plain.state_dict()[name], value), name
    ids = torch.tensor([tokenizer("The assert statement is a convenient way")["input_ids"]])
    with torch.no_grad():
        a, b = loaded.model(ids).logits, original(ids).logits
    assert torch.equal(a, b)        # exact: the same weights, code and input on one machine
    assert loaded.tokenizer.pad_token is not None
    assert not loaded.model.training


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


@pytest.mark.parametrize("tensor, layer, path", [("blk.0.ffn_down.weight", 0, "mlp.down_proj"),
                                                 ("blk.17.ffn_up.weight", 17, "mlp.up_proj"),
                                                 ("blk.29.attn_v.weight", 29, "self_attn.v_proj"),
                                                 ("blk.5.attn_norm.weight", 5, "input_layernorm")])
def test_embedded_weights_equal_the_gguf_dequantised_directly(tensor, layer, path):
    """The loaded weights against the file itself, dequantised by the reference ``gguf`` package
    (not through transformers): a loader that scaled, shifted or mixed up tensors fails here."""
    import gguf
    from gguf import quants

    reader = gguf.GGUFReader(str(models.embedded_gguf_path()))
    entry = next(t for t in reader.tensors if t.name == tensor)
    expected = torch.from_numpy(quants.dequantize(entry.data, entry.tensor_type).astype("float32"))
    loaded = models.load_model("embedded", device="cpu")
    module = loaded.model.model.layers[layer]
    for part in path.split("."):
        module = getattr(module, part)
    assert torch.equal(module.weight.detach(), expected.reshape(module.weight.shape))   # same dequantisation
