"""The fam36n group of issue 36, written from transformers 5.25's modeling_xlstm.py (its torch-native kernels).

xLSTM (xLSTMForCausalLM): blocks of an RMSNorm (norm_mlstm), the mLSTM layer (MlstmSpec: q, k of int(hidden x
qk_dim_factor), v and the output gate of int(hidden x v_dim_factor), an input and a forget gate a head, soft-capped at
gate_soft_cap; the exponential input gate, the matrix memory and its normalizer; a LayerNorm per head; out_proj),
an RMSNorm (norm_ffn) and a SwiGLU (proj_up_gate, proj_up, proj_down); backbone.out_norm (always: transformers 5.25
does not read add_out_norm), lm_head (never tied: the class declares no tied weights), the logits soft-capped at
output_logit_soft_cap. The file holds the mixer's input rows as one in_proj (q | k | v | o | i | f) and in_proj.bias
(zeros, then the gates' biases)."""
from trainer.reference.families.common import get, rms
from trainer.reference.spec import LayerSpec, MlstmSpec, ModelSpec

FAMILIES = {}


def xlstm(cfg, names):
    D, H, n = cfg["hidden_size"], cfg["num_heads"], cfg["num_hidden_layers"]
    dk, dv = int(D * get(cfg, "qk_dim_factor", 0.5)) // H, int(D * get(cfg, "v_dim_factor", 1.0)) // H
    eps = get(cfg, "norm_eps", 1e-6)
    spec = ModelSpec("xlstm", 1, 1, 2, "backbone.embeddings.weight", "lm_head.weight", rms("backbone.out_norm", eps),
                     logit_softcap=get(cfg, "output_logit_soft_cap", 30.0) or 0.0)
    for i in range(n):
        p = f"backbone.blocks.{i}."
        m, f = p + "mlstm_layer.", p + "ffn."
        L = LayerSpec(q=None, k=None, v=None, o=None, gate=f + "proj_up_gate.weight", up=f + "proj_up.weight",
                      down=f + "proj_down.weight",
                      mlstm=MlstmSpec(m + "in_proj.weight", m + "in_proj.bias", m + "multihead_norm.weight",
                                      m + "out_proj.weight", H, dk, dv, get(cfg, "gate_soft_cap", 15.0) or 0.0,
                                      get(cfg, "eps", 1e-6), eps))
        L.attn_norm, L.mlp_norm = rms(p + "norm_mlstm", eps), rms(p + "norm_ffn", eps)
        spec.layers.append(L)
    return spec


FAMILIES["xlstm"] = xlstm
