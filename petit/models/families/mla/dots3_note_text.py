"""Dots 3 Note Preview's language model (`dots3_note_text`; the released `dots3_note` folders hold it:
petit/models/families/wrappers/dots3_note.py): DeepSeek-V3.2's layer (latent attention, DeepSeek Sparse Attention,
DeepSeek-V3's routed experts; petit/models/families/mla/deepseek_v32.py) with GLM-5's indexer pairing, in
"indexed_attention" layers (the indexer chooses `index_topk` positions), "sliding_attention" ones (`sliding_window`, no
indexer) and "full_attention" ones. What differs from DeepSeek-V3.2:
- A layer type's attention sizes may be its own (`per_layer_config`; the released `swa_*` keys give the sliding
  layers' 64 heads, ranks 1024, nope 192), each layer keeping its softmax scale (nope + rope)^-0.5 and its rows of
  the KV cache (which are the widest layer's wide); RoPE theta per layer type (`rope_theta`, `swa_rope_theta`).
- The normed latents times sqrt(hidden / q_lora_rank) and sqrt(hidden / kv_lora_rank) (folded into their norms,
  which take rms_norm_eps; the indexer reads the scaled query latent), k_pe RMS-normed before RoPE
  (`k_rope_only_layernorm`), each head's output times sigmoid(`g_proj` x) before o_proj.
- The shared experts `shared_experts_intermediate_size` x n_shared_experts wide; `mlp_layer_types`.
The legacy keys (use_dsa, use_sliding_window, sliding_window_size, swa_*, moe_shared_expert_intermediate_size,
first_k_dense_replace, moe_layer_freq) are read as transformers' Dots3NoteTextConfig reads them."""
from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import default_rope, norm
from petit.models.blocks.decoder import Vec
from petit.models.blocks.dsa import dsa_weights
from petit.models.families.mla.dots3_note_text_config import Dots3NoteTextConfig


def build(cfg: Dots3NoteTextConfig, t):
    D, eps = cfg.hidden_size, cfg.rms_norm_eps
    ropes = {kind: default_rope(cfg, dim=s["qk_rope_head_dim"], interleaved=True,
                                base=cfg.swa_rope_theta if kind == "sliding_attention" else cfg.rope_theta)
             for kind, s in cfg.kinds.items()}
    kind = cfg.layer_types.__getitem__

    def dsa(i, a, rope, previous):
        return dsa_weights(t, a, cfg, rope, True, None) if kind(i) == "indexed_attention" else None

    def hook(i, L, a):
        m, (H, dn, dr, _, r, qr) = L.mla, cfg.layer_dims(i)
        m.q_a_norm.w, m.kv_norm.w = Vec(m.q_a_norm.w.a * (D / qr) ** 0.5), Vec(m.kv_norm.w.a * (D / r) ** 0.5)
        m.k_pe_norm = norm(t, a + "k_rope_only_layernorm", dr, "rms", eps)
        m.gate = t.weight(a + "g_proj.weight", (H, D))
        m.scale = (dn + dr) ** -0.5
        L.window = cfg.sliding_window if kind(i) == "sliding_attention" else 0
    return dc.build(cfg, t, scoring="sigmoid", norm_topk=cfg.norm_topk_prob, group_score="top2_sum", sel_bias=True,
                    yarn_mscale=False, n_group=cfg.n_group or 0, topk_group=cfg.topk_group or 0, dsa=dsa,
                    rope_for=lambda i: ropes[kind(i)], layer_hook=hook,
                    shared_inter=cfg.shared_experts_intermediate_size * (cfg.n_shared_experts or 0))


hf_tensors = dc.hf_tensors
Config = Dots3NoteTextConfig
