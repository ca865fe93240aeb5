"""InternLM3 as released (`internlm/internlm3-8b-instruct`): its config.json, written by its remote code, is read
without any "ignoring" report; its two bias switches ask for exactly the tensors its modeling code creates. The
logits are tested with the other families (tests/test_hf_parity.py: fixtures hf_more/internlm3, internlm3_bias)."""
import json
import warnings

import pytest

from petit.models import get_family
from petit.models.families.dense.internlm3 import InternLM3Config

# the keys and values of the released model's config.json (remote code, transformers 4.47)
RELEASED = {
    "architectures": ["InternLM3ForCausalLM"], "attn_implementation": "eager",
    "auto_map": {"AutoConfig": "configuration_internlm3.InternLM3Config",
                 "AutoModel": "modeling_internlm3.InternLM3Model",
                 "AutoModelForCausalLM": "modeling_internlm3.InternLM3ForCausalLM"},
    "bias": False, "bos_token_id": 1, "eos_token_id": 2, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 10240, "max_position_embeddings": 32768, "model_type": "internlm3",
    "num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 2, "pad_token_id": 2,
    "qkv_bias": False, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 6.0, "rope_type": "dynamic"},
    "rope_theta": 50000000, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.47.1",
    "use_cache": True, "vocab_size": 128512}


def test_the_released_config_is_read_without_unknown_keys():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = get_family("internlm3").Config.from_dict(json.loads(json.dumps(RELEASED)))
    assert (cfg.head_dim, cfg.num_key_value_heads, cfg.rms_norm_eps, cfg.rope_theta) == (128, 2, 1e-5, 50000000)
    assert cfg.rope_scaling == {"factor": 6.0, "rope_type": "dynamic"} and cfg.unknown_keys == []
    assert (cfg.qkv_bias, cfg.bias, cfg.tie_word_embeddings) == (False, False, False)


class Names:
    """A tensor source that records the names a builder asks for and hands out zeros."""

    def __init__(self):
        self.asked = []

    def __getattr__(self, kind):
        import numpy as np

        def get(name, shape, *a, **k):
            self.asked.append(name)
            return np.zeros(shape, np.float32)
        return get


@pytest.mark.parametrize("qkv_bias, bias, want", [
    (False, False, set()),
    (True, False, {"q_proj.bias", "k_proj.bias", "v_proj.bias"}),
    (False, True, {"o_proj.bias", "gate_proj.bias", "up_proj.bias", "down_proj.bias"}),
])
def test_each_bias_switch_reads_the_biases_its_modeling_code_creates(qkv_bias, bias, want):
    cfg = InternLM3Config.from_dict(dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2, qkv_bias=qkv_bias, bias=bias))
    from petit.models.families.dense import internlm3
    src = Names()
    internlm3.build(cfg, src)
    asked = {n.split(".", 3)[-1].split(".", 1)[-1] for n in src.asked if n.endswith(".bias")}
    assert asked == want, src.asked


def test_an_unsupported_activation_is_refused_by_name():
    with pytest.raises(ValueError, match="hidden_act"):
        InternLM3Config.from_dict(dict(RELEASED, hidden_act="gelu"))
