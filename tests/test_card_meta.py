"""The card's signal hooks and sub-block edits run on a model whose weights are on the ``meta`` device.

A tensor the card creates on the CPU and mixes with the model's (a mixed-device op) fails here at once,
as it would on a GPU. No value is read on ``meta``: the check is that the computation runs and keeps
every result on the model's device with the right shape. The model gets a ready 4-D attention mask,
because ``transformers`` reads the values of a 2-D one while building its causal mask.
"""

import pytest
import torch

from anatomy_kit.card.causal import causal_edit
from anatomy_kit.card.signals import state_hooks

B, T, L, N = 2, 10, 3, 2


def _meta_model(arch):
    import transformers as T_

    if arch == "llama":
        cfg = T_.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=L,
                             num_attention_heads=4, num_key_value_heads=2)
    else:
        cfg = T_.GPT2Config(vocab_size=64, n_embd=16, n_layer=L, n_head=4, bos_token_id=1, eos_token_id=2)
    with torch.device("meta"):
        return T_.AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("edit", [None, "skip", "attention", "mlp"])
def test_signals_run_on_meta_weights(arch, edit):
    model = _meta_model(arch)
    ids = torch.zeros(B, T, dtype=torch.long, device="meta")
    mask = torch.zeros(B, 1, T, T, device="meta")
    weights = torch.ones(B, T, device="meta")
    with torch.no_grad(), state_hooks(model, N, weight_of=lambda: weights) as sums:
        if edit is None:
            model.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False)
        else:
            with causal_edit(model, 1, edit):
                model.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False)
    for name, shape in (("cos", (L,)), ("update", (L,)), ("norm", (L,)), ("angle", (L, N)), ("tokens", ())):
        value = getattr(sums, name)
        assert value.device.type == "meta" and tuple(value.shape) == shape, name
