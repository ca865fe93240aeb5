"""GGUF files of the recur group of issue 30: llama.cpp's rwkv6 (RWKV-6 Finch, src/models/rwkv6.cpp), its metadata
keys as the rwkv6 family's config, its tensors under `rwkv.blocks.N.<llama.cpp's name>` (the family's GGUF layout,
petit/models/families/recurrent/rwkv6.py GGUF_NAMES). Imported by gguf_archs, whose ARCHS these join.

What the converter (conversion/rwkv.py) did and the file holds: the token-shift LoRA transposed (time_mix_w1 [5E, D],
time_mix_w2 [5, D, E]) and the decay LoRA's (time_mix_decay_w1 [DE, D], time_mix_decay_w2 [D, DE]); the five lerps
w, k, v, r, g stacked in time_mix_lerp_fused [5, 1, 1, D]; time_mix_output and channel_mix_value of layer i already
divided by 2^(i // rescale_every) (so Petit does not scale them again: `rescaled_weights`); the head count 0 (the
heads are embedding_length / wkv.head_size). llama.cpp's group norm eps is 64e-5 whatever the checkpoint said
(head_size_divisor 8).

rwkv7 (RWKV-7 Goose, src/models/rwkv7.cpp): the six lerps stacked in time_mix_lerp_fused [6, 1, 1, D] (r, w, k, v,
a, g), the LoRAs as fla-hub stores them (w1 [R, D], w2 [D, R], w0 [D] the up-projection's bias; a, v, g alike, g
without a bias), k_k, k_a, r_k flattened to [D]; layer 0's v LoRA is a dummy copy of its a LoRA (unused); the group
norm's eps is 64e-5 (llama.cpp's), the tensors under `model.layers.N.<llama.cpp's name>` (the family's GGUF layout,
petit/models/families/recurrent/rwkv7.py GGUF_NAMES). rwkv6qwen2 is read by gguf_ggufx5.py; arwkv7 stays refused."""
from petit.loading.gguf_names import GGUFArch

RWKV6_LAYER = {n: n for n in (
    "attn_norm", "attn_norm_2", "time_mix_w1", "time_mix_w2", "time_mix_lerp_x", "time_mix_lerp_fused",
    "time_mix_first", "time_mix_decay", "time_mix_decay_w1", "time_mix_decay_w2", "time_mix_key", "time_mix_value",
    "time_mix_receptance", "time_mix_gate", "time_mix_ln", "time_mix_output", "channel_mix_lerp_k",
    "channel_mix_lerp_r", "channel_mix_key", "channel_mix_value", "channel_mix_receptance")}
RWKV6_GLOBAL = {"token_embd": "rwkv.embeddings", "token_embd_norm": "rwkv.blocks.0.pre_ln",
                "output_norm": "rwkv.ln_out", "output": "head"}


def _rwkv6(meta, key, cfg, has):
    if not has("blk.0.time_mix_first.weight"):
        raise ValueError("an rwkv6 file without time_mix_first (QRWKV: gated linear attention) is not read by Petit")
    hidden = cfg["hidden_size"]
    for k in ("num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta", "max_position_embeddings"):
        cfg.pop(k, None)
    cfg.update(head_size=int(meta[key("wkv.head_size")]), head_size_divisor=8, attention_hidden_size=hidden,
               layer_norm_epsilon=float(meta.get(key("attention.layer_norm_epsilon"), 1e-5)),
               rescale_every=int(meta.get(key("rescale_every_n_layers"), 0)), rescaled_weights=True,
               time_mix_extra_dim=int(meta[key("time_mix_extra_dim")]),
               time_decay_extra_dim=int(meta[key("time_decay_extra_dim")]))
    if int(meta.get(key("token_shift_count"), 2)) != 2:
        raise ValueError(f"token_shift_count {meta[key('token_shift_count')]} (rwkv6 has 2)")


RWKV7_LAYER = {n: n for n in (
    "attn_norm", "attn_norm_2", "time_mix_lerp_fused", "time_mix_w0", "time_mix_w1", "time_mix_w2", "time_mix_a0",
    "time_mix_a1", "time_mix_a2", "time_mix_v0", "time_mix_v1", "time_mix_v2", "time_mix_g1", "time_mix_g2",
    "time_mix_k_k", "time_mix_k_a", "time_mix_r_k", "time_mix_key", "time_mix_value", "time_mix_receptance",
    "time_mix_ln", "time_mix_output", "channel_mix_lerp_k", "channel_mix_key", "channel_mix_value")}
RWKV7_GLOBAL = {"token_embd": "model.embeddings", "token_embd_norm": "model.layers.0.pre_norm",
                "output_norm": "model.norm", "output": "lm_head"}


def _rwkv7(meta, key, cfg, has):
    hidden = cfg["hidden_size"]
    for k in ("num_attention_heads", "num_key_value_heads", "rope_theta"):
        cfg.pop(k, None)
    cfg.update(head_dim=int(meta[key("wkv.head_size")]), norm_eps=float(meta.get(key("attention.layer_norm_epsilon"),
                                                                                 1e-5)),
               context_length=int(cfg.pop("max_position_embeddings")), group_norm_eps=64e-5, value_dim=hidden,
               decay_low_rank_dim=int(meta[key("attention.decay_lora_rank")]),
               a_low_rank_dim=int(meta[key("attention.iclr_lora_rank")]),
               v_low_rank_dim=int(meta[key("attention.value_residual_mix_lora_rank")]),
               gate_low_rank_dim=int(meta[key("attention.gate_lora_rank")]))
    if not has("blk.0.time_mix_g1.weight"):
        raise ValueError("an rwkv7 file without the gate LoRA (time_mix_g1) is not read by Petit")


RECUR5_ARCHS = {
    "rwkv6": GGUFArch("rwkv6", RWKV6_LAYER, RWKV6_GLOBAL, prefix="rwkv.blocks.{}.", extra=_rwkv6),
    "rwkv7": GGUFArch("rwkv7", RWKV7_LAYER, RWKV7_GLOBAL, extra=_rwkv7),
}
