"""EXAONE 3 / 3.5 (`exaone`): transformers 5 runs it as LlamaForCausalLM under ExaoneConfig. What differs from Llama
is the spelling, which this family reads both ways:

- its own config keys, aliases of Llama's (`num_layers`, `layer_norm_epsilon`, `activation_function`: what the
  released config.json files write) and its defaults (8 key-value heads, eps 1e-5, 4096 positions, RoPE base 5e5);
- its own tensor names (what the released checkpoints hold, and what save_pretrained of transformers 5 writes back):
  `transformer.wte`, `transformer.h.N.{ln_1, attn.attention.{q,k,v,out}_proj, ln_2, mlp.c_fc_0 (gate), c_fc_1 (up),
  c_proj (down)}`, `transformer.ln_f`, `lm_head`; `hf_tensors` hands them out under Llama's names.
"""
import re
from dataclasses import dataclass

from petit.models.families.dense import llama

ALIASES = {"num_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps", "activation_function": "hidden_act"}
# EXAONE's names -> Llama's, in order (transformers' conversion_mapping for exaone, applied to the stored names)
RENAMES = [(r"^transformer\.wte\.", "model.embed_tokens."), (r"^transformer\.h\.", "model.layers."),
           (r"^transformer\.ln_f\.", "model.norm."), (r"\.attn\.attention\.", ".self_attn."),
           (r"\.self_attn\.out_proj\.", ".self_attn.o_proj."), (r"\.ln_1\.", ".input_layernorm."),
           (r"\.ln_2\.", ".post_attention_layernorm."), (r"\.mlp\.c_fc_0\.", ".mlp.gate_proj."),
           (r"\.mlp\.c_fc_1\.", ".mlp.up_proj."), (r"\.mlp\.c_proj\.", ".mlp.down_proj.")]


@dataclass(kw_only=True)
class ExaoneConfig(llama.LlamaConfig):
    num_key_value_heads: int | None = 8
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 4096
    rope_theta: float = 500000.0
    model_type: str = "exaone"
    _IGNORED = frozenset({"embed_dropout"})

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and any(k in d for k in ALIASES):
            d = dict(d)
            for alias, name in ALIASES.items():
                if alias in d:
                    v = d.pop(alias)
                    if d.get(name, v) != v:
                        raise ValueError(f"config: {alias} {v!r} and {name} {d[name]!r} disagree")
                    d[name] = v
        return super().from_dict(d)

    @classmethod
    def _refuse(cls, d):
        from petit.models.blocks.config import refuse_act
        refuse_act(d, "hidden_act", ("silu", "swish"), "exaone", "silu")


def llama_name(n: str) -> str:
    for pattern, repl in RENAMES:
        n = re.sub(pattern, repl, n)
    return n


def hf_tensors(cfg: ExaoneConfig, ckpt) -> dict:
    """EXAONE's stored names under Llama's (a checkpoint already under Llama's names is read as it is)."""
    out = {}
    for n in ckpt.names():
        new = llama_name(n)
        if new != n:
            out[new] = (ckpt.info(n)[1], lambda n=n: ckpt.f32(n), (n,))
    return out


build = llama.build
Config = ExaoneConfig
